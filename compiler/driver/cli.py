"""The `tdsl` command line.

    tdsl tree  PROG [--schedule NAME] [--format text|yaml|dot|svg] [-o FILE]
    tdsl check PROG [--schedule NAME | --all]
    tdsl run   PROG --interp [--schedule NAME] [--size M=8,N=8] [--seed S]
    tdsl run   PROG --target nvidia [--schedule NAME] [--size M=8,N=8] [--seed S]
    tdsl compile PROG --target nvidia|ascend-950|ascend-910b [--backend triton|tilelang] [--schedule NAME] -o OUT.py|DIR/|-
    tdsl cost  PROG [--schedule NAME] --target T [--json] [--sweep ...] [--fit LOOP] [--backend B] [--plot OUT.png]
    tdsl fuse  PROG [--schedule NAME] [--target T]
    tdsl tune  PROG --target h200 [--trials N] [--log tune.jsonl] [--executor local|ray] [--append]
    tdsl compile PROG --tuned tune.jsonl ...   (the log's fastest schedule instead of a block)

Exit codes: 0 success, 1 an illegal schedule or a result mismatch, 2 a
usage, parse or schedule-misuse error.  User errors never show a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import islpy as isl
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.errors import BackendError, InternalError

# The interpreter executes one Python step per statement instance: refuse sizes that would take minutes.
MAX_INTERPRETED_INSTANCES = 2_000_000


def decimal(text: str) -> int:
    """A whole number written in ASCII decimal digits, with an optional sign; anything else (Python's int()
    also takes '1_000' and other scripts' digits, '１０') is a ValueError."""
    if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):
        raise ValueError(text)
    return int(text)


def parse_sizes(text: Optional[str]) -> dict:
    if not text:
        return {}
    sizes = {}
    for item in text.split(","):
        name, eq, value = item.strip().partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise TdslError(f"--size expects NAME=VALUE pairs separated by commas, got '{item.strip()}'")
        if name in sizes:
            raise TdslError(f"--size gives {name} twice; give each size once")
        try:
            sizes[name] = decimal(value)
        except ValueError:
            raise TdslError(f"--size {name}: '{value}' is not an integer") from None
        if sizes[name] < 1:
            raise TdslError(f"--size {name}: sizes must be positive")
    return sizes


def int_in(low: int, high: Optional[int] = None, what: str = "a whole number"):
    """An argparse type: an integer from `low` to `high` (inclusive; no bound above when None); anything else
    is a usage error (exit 2) that says the range."""
    span = f"from {low} to {high}" if high is not None else f"{low} or more"

    def convert(text: str) -> int:
        try:
            value = decimal(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number: give {what} {span}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is out of range: give {what} {span}")
        return value

    return convert


SEED = int_in(0, what="a seed")


def _program(args):
    from tdsl.compiler.driver.api import load

    return load(args.program, sizes=parse_sizes(getattr(args, "size", None)))


def _default_schedule(prog, args) -> Optional[str]:
    """The schedule a command works on: the one named, else its kernel's first (None: program order).  Sets
    `args.kernel` to the kernel that schedule is for, so that every later step works on the same kernel."""
    args.kernel, name = prog.select(args.kernel, args.schedule)
    return name


def _all_schedules(prog, args) -> list[str]:
    """`--all`: every schedule block of the kernel named with --kernel, or of every kernel."""
    if args.schedule is not None:
        raise TdslError("choose --all or --schedule, not both")
    if args.kernel is None:
        return prog.schedule_names
    return prog.schedules_of(prog.kernel_name(args.kernel))


# ---------------------------------------------------------------- commands


def cmd_tree(args) -> int:
    out = _tree_output(args)  # refused before any work
    prog = _program(args)
    name = _default_schedule(prog, args)
    views = [("before: program order", prog.schedule(None, kernel=args.kernel))]
    if name is not None:  # errors before any output
        views.append((f"after: schedule {name}", prog.schedule(name, kernel=args.kernel)))
    if args.format in ("dot", "svg"):
        from tdsl.compiler.schedule.tree_dot import dot_source, svg_text

        text = dot_source(views, title=f"{prog.filename}: kernel {views[0][1].model.name}")
        text = svg_text(text) if args.format == "svg" else text
    else:
        text = _tree_text(views, args.format)
    if out is None:
        _write_stdout(text)
        return 0
    write_module(out, text)
    print(f"wrote {out}: {len(views)} tree(s), format {args.format}")
    return 0


TREE_SUFFIXES = {".svg": "svg", ".dot": "dot", ".gv": "dot", ".yaml": "yaml", ".yml": "yaml", ".txt": "text"}


def _tree_output(args) -> Optional[Path]:
    """Where `tree -o` writes: None for stdout; never the program itself.  Sets `args.format` from the file's
    suffix where --format is not given, and refuses a suffix that names another format (text went into x.svg)."""
    named = TREE_SUFFIXES.get(Path(args.output).suffix.lower()) if args.output != STDOUT else None
    if args.format is None:
        args.format = named or "text"
    elif named is not None and named != args.format:
        kinds = {"svg": "an SVG", "dot": "a DOT", "yaml": "a YAML", "text": "a text"}
        raise TdslError(f"-o {args.output} names {kinds[named]} file, but --format is {args.format}: give --format "
                        f"{named}, or a file name that fits {args.format}")
    if args.output == STDOUT:
        return None
    _refuse_overwriting_program(f"-o {args.output}", Path(args.output), args.program, "its tree")
    return Path(args.output)


def _tree_text(views: list, form: str) -> str:
    """The text or YAML trees; YAML: one document each, so that a YAML reader (or isl) sees two trees, not one
    merged mapping."""
    from tdsl.compiler.schedule.tree_view import tree_text, yaml_text

    show = yaml_text if form == "yaml" else tree_text
    parts = []
    for n, (caption, sched) in enumerate(views):
        heading = f"--- # {caption}" if form == "yaml" else ("\n" if n else "") + f"# {caption}"
        parts += [heading, show(sched.model, sched.tree)]
    return "\n".join(parts) + "\n"


def _replay(prog, name: str, args):
    """(the schedule block replayed, None); with --all a refused block gives (None, its error) instead of raising."""
    try:
        return prog.schedule(name, kernel=args.kernel), None
    except TdslError as err:
        if not args.all:
            raise
        return None, err


def _verdict(err) -> str:
    return "illegal" if err.exit_code == 1 else "error"


def cmd_check(args) -> int:
    if args.target:  # a target or backend that does not exist is a usage error (2), before any verdict
        from tdsl.compiler.driver.generate import resolve_target

        resolve_target(args.target, args.backend)
    prog = _program(args)
    if not args.all and args.schedule == "none":  # program order: legal by definition, its dependences listed
        deps = len(prog.schedule(None, kernel=args.kernel).deps)
        print(f"program order: legal (0 steps, {deps} dependence{'s' * (deps != 1)})")
        return _check_generation(prog, None, args) if args.target else 0
    names = _all_schedules(prog, args) if args.all else [_default_schedule(prog, args)]
    names = [n for n in names if n is not None]
    if not names:
        prog.kernel_name(args.kernel)  # a file without a kernel says so first
        raise TdslError(f"{prog.filename} has no schedule to check: it has no `schedule NAME {{ ... }}` block "
                        f"(check --schedule none checks program order)")
    status = 0
    for name in names:
        sched, err = _replay(prog, name, args)
        if err is not None:
            print(f"schedule {name}: {_verdict(err)}\n{err}")
            status = 2 if 2 in (status, err.exit_code) else 1
            continue
        steps, deps = len(sched.trace), len(sched.deps)
        print(f"schedule {name}: legal ({steps} step{'s' * (steps != 1)}, "
              f"{deps} dependence{'s' * (deps != 1)} checked)")
        if args.target:
            status = max(status, _check_generation(prog, name, args))
    return status


def _check_generation(prog, name: str, args) -> int:
    """With --target: can the target's code generator take the schedule (its tile rules, capacities, index
    range)?  1 with the backend's reason when it cannot, as for an illegal schedule."""
    from tdsl.compiler.driver.generate import generate

    label = f"schedule {name}" if name is not None else "program order"
    try:
        generate(prog, name, target=args.target, backend=args.backend, kernel=args.kernel)
    except TdslError as err:
        if not _is_refusal(err):
            raise
        print(f"{label}: not generated for {args.target}\n{err}")
        return 1
    print(f"{label}: generated for {args.target}")
    return 0


def _is_refusal(err) -> bool:
    from tdsl.compiler.analysis.buffer_plan import CapacityError

    return isinstance(err, (BackendError, CapacityError))


def cmd_compile(args) -> int:
    from tdsl.compiler.driver.generate import generate

    out = output_path(args.output, args.program)  # refused before the (slow) compilation
    if out is not None and args.tuned:
        _refuse_overwriting_program(f"-o {args.output}", out, args.tuned, "the generated module", "the tuning log")
    prog = _program(args)
    name = _default_schedule(prog, args)
    if args.tuned:
        from tdsl.compiler.driver.tune_command import tuned_program

        if args.schedule is not None:
            raise TdslError("choose --schedule or --tuned, not both")
        prog, name, text = tuned_program(prog, args.tuned, args.target, args.backend, args.kernel)
    else:
        text = generate(prog, name, target=args.target, backend=args.backend, kernel=args.kernel)
    n = text.count("\n    # statements ")  # one comment line opens each kernel
    summary = f"{n} kernel launch(es), schedule {name or 'program order'}, target {args.target}"
    if out is None:
        _write_stdout(text)
        print(f"wrote the module to stdout: {summary}", file=sys.stderr)  # stdout holds the module alone
        return 0
    write_module(out, text)
    print(f"wrote {out}: {summary}")
    return 0


STDOUT = "-"


def output_path(output: str, program: str) -> Optional[Path]:
    """Where `compile -o OUTPUT` writes: None for '-' (stdout); for a folder (an existing one, or any path
    ending in '/') the file <folder>/<PROG's stem>.py.  Never PROG itself, whatever the spelling or link."""
    if output == STDOUT:
        return None
    if not output.strip():
        raise TdslError("-o is empty: give a file, a folder (FOLDER/ writes FOLDER/<PROG's stem>.py) or - for stdout")
    out = Path(output)
    into_folder = _names_a_folder(output)
    if into_folder:
        out = out / f"{Path(program).stem}.py"
    named = f"{output} (that is {out})" if into_folder else output
    _refuse_overwriting_program(f"-o {named}", out, program, "the generated module")
    return out


def _names_a_folder(output: str) -> bool:
    """An existing folder, or any path written with a trailing separator."""
    return os.path.isdir(output) or output.endswith(("/", os.sep))


def _refuse_overwriting_program(shown: str, out: Path, program: str, what: str, role: str = "the program") -> None:
    """An output option (`shown`, as the user wrote it) that names an input (PROG itself, the --tuned log) is a
    user error."""
    if _same_file(out, Path(program)):
        raise TdslError(f"{shown} is the same file as the input {program}; refusing to overwrite {role} "
                        f"with {what}")


def _same_file(a: Path, b: Path) -> bool:
    """True when both exist and are one file (through symbolic links, hard links, './' and '..' spellings)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one does not exist (ValueError: a NUL in a name from the API)
        return False


def write_module(out: Path, text: str) -> None:
    """Write a generated module (UTF-8, as Python reads it), creating its folder; a user error if impossible."""
    blocker = _nearest_existing_parent(out)
    if blocker is not None and not os.path.isdir(blocker):
        raise TdslError(f"cannot write {out}: {blocker} is not a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TdslError(f"cannot create the folder {out.parent} for {out}: {err.strerror or err}") from None
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as err:
        raise TdslError(f"cannot write {out}: {err.strerror or err}") from None


def _nearest_existing_parent(out: Path) -> Optional[Path]:
    for parent in out.parents:
        if os.path.lexists(parent):  # os.path never raises: an unreadable folder is left to mkdir to report
            return parent
    return None


def _write_stdout(text: str) -> None:
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text stream without bytes underneath (tests, a StringIO)
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    buffer.write(text.encode("utf-8"))  # a generated module is UTF-8 source, whatever the terminal's encoding
    buffer.flush()


def instance_count(model) -> int:
    """Exact number of statement instances, or the bounding-box count when that already exceeds the limit
    (isl's exact count enumerates large domains, which takes seconds at the chapter's sizes)."""
    box = 0
    for stmt in model.stmts:
        if stmt.domain.is_empty():  # a statement with no instance at these sizes (trisolv's updates at N = 1)
            continue
        n = 1
        for d in range(stmt.domain.dim(isl.dim_type.set)):
            n *= stmt.domain.dim_max_val(d).to_python() - stmt.domain.dim_min_val(d).to_python() + 1
        box += n
    if box > MAX_INTERPRETED_INSTANCES:
        return box
    return sum(stmt.domain.count_val().to_python() for stmt in model.stmts)


def _interpreter_reference(original, args):
    """(inputs, the program-order result, its instance count) for the program-order schedule `original`."""
    from tdsl.compiler.reference.interpreter import interpret, random_inputs

    model = original.model
    if model.params:
        raise TdslError(f"give a value to every param with --size: {', '.join(model.params)}")
    count = instance_count(model)
    if count > MAX_INTERPRETED_INSTANCES:
        small = ",".join(f"{k}=8" for k in model.sizes if isinstance(model.sizes[k], int))
        raise TdslError(
            f"the interpreter would execute {count:,} statement instances; choose smaller sizes with --size (e.g. --size {small})"
        )
    inputs = random_inputs(model, args.seed)
    return inputs, interpret(model, original.time_map(), inputs), count


def cmd_run_target(args) -> int:
    from tdsl.compiler.driver.generate import code_generator, generate, resolve_target
    from tdsl.compiler.reference.interpreter import rounding_variants
    from tdsl.compiler.verify import compare_outputs

    prog = _program(args)
    name = _default_schedule(prog, args)
    original = prog.schedule(None, kernel=args.kernel)
    model = original.model
    kind, backend, device_name = resolve_target(args.target, args.backend)
    inputs, reference, count = _interpreter_reference(original, args)
    start, reference = _reference_for(prog.schedule(name, kernel=args.kernel), original, inputs, reference)
    at_run_time = _sizes_at_run_time(prog, args.kernel, code_generator(args.target, args.backend)[1], args.fixed_sizes)
    try:
        text = generate(prog.at_run_time(args.kernel) if at_run_time else prog, name, target=args.target,
                        backend=args.backend, kernel=args.kernel)
    except TdslError as err:
        if at_run_time:  # the schedule is judged and generated for every value of these sizes, not --size's
            note = (f"the kernel was built with {', '.join(at_run_time)} given at run time, as `tdsl compile` "
                    f"without --size builds it; --fixed-sizes builds it for the sizes --size gives")
            err.__notes__ = [*getattr(err, "__notes__", ()), note]  # BaseException.add_note, which 3.10 lacks
        raise
    if kind == "nvidia":
        outputs, where = _run_on_nvidia(text, model, inputs, backend)
    else:
        outputs, where = _run_in_ascend_model(text, model, inputs, device_name), f"NumPy model of the {device_name}"
    sizes = f"; {', '.join(at_run_time)} given at run time" if at_run_time else ""
    print(f"kernel {model.name}, schedule {name or 'program order'}: {where} vs reference interpreter, seed "
          f"{args.seed}{sizes}")
    status = 0
    results = compare_outputs(model, reference, outputs, variants=lambda: rounding_variants(
        model, original.time_map(), start, reference))
    for t in model.outputs():
        result = results[t.name]
        print(f"  {t.name} {list(outputs[t.name].shape)} {t.dtype}: {'ok' if result.ok else 'MISMATCH'} ({result.summary()})")
        status = status or (0 if result.ok else 1)
    return status


def _sizes_at_run_time(prog, kernel: str, generator: str, fixed: bool) -> list[str]:
    """The run-time sizes (`param`) a kernel run by `run --target` reads off its inputs: all of them where the
    code generator takes sizes at run time, as `compile` without --size builds the kernel (the values --size
    gives them are the inputs' shapes only); none with --fixed-sizes or a generator compiled for fixed sizes."""
    from tdsl.compiler.lower.pipeline import takes_run_time_sizes

    if fixed or not takes_run_time_sizes(generator):
        return []
    return prog.run_time_sizes(kernel)


def _run_on_nvidia(text: str, model, inputs: dict, backend: str) -> tuple[dict, str]:
    """The module's outputs (NaN guard regions checked) on the GPU, or for Triton without one in its
    interpreter; and where they ran."""
    import tempfile

    from tdsl.compiler.driver.generate import kernel_device, load_module, run_generated

    if backend == "tilelang":
        import torch

        if not torch.cuda.is_available():
            raise TdslError("TileLang kernels run only on an NVIDIA GPU, and there is none here: run --backend triton "
                            "(Triton's interpreter runs on the CPU), or write the module with tdsl compile --backend "
                            "tilelang and run it on a GPU")
    device = kernel_device()
    with tempfile.TemporaryDirectory() as tmp:
        module = load_module(text, Path(tmp) / f"{model.name}_kernel.py")
        outputs = run_generated(module, model, inputs, device=device, guard=64)
    return outputs, ("GPU" if device == "cuda" else "Triton interpreter") + (" (TileLang)" if backend == "tilelang" else "")


def _run_in_ascend_model(text: str, model, inputs: dict, device_name: str) -> dict:
    """The outputs of an Ascend module executed by compiler/verify/ascend_sim (the memories, copies and units of
    the target, their capacities checked), as float32 arrays."""
    import numpy as np

    from tdsl.compiler.verify.ascend_sim import output_arrays, simulate
    from tdsl.compiler.verify.ascend_sim.buffers import SimulationError, Unsupported

    try:
        sim = simulate(text, inputs, device_name)
    except Unsupported as err:  # a construct the model cannot execute faithfully: no verdict, not a wrong one
        raise TdslError(f"the NumPy model of the {device_name} cannot run this module: {err}; check it with "
                        f"tdsl compile --target {device_name} and a device") from err
    except SimulationError as err:  # the generated module did something its target cannot: a tdsl bug
        raise InternalError(f"the NumPy model of the {device_name} rejected the generated module: {err}") from err
    return {name: np.asarray(array).astype(np.float32) for name, array in output_arrays(sim, model).items()}


def cmd_run(args) -> int:
    if args.target:
        if args.interp:
            raise TdslError("choose --interp or --target, not both")
        if args.all:
            raise TdslError("--all runs the schedules in the interpreter: use it with --interp")
        return cmd_run_target(args)
    if not args.interp:
        raise TdslError("tdsl run needs --interp (reference interpreter) or --target nvidia (generated kernel)")
    if args.fixed_sizes:
        raise TdslError("--fixed-sizes chooses how a generated kernel takes its sizes: use it with --target")
    if args.backend:
        raise TdslError("--backend chooses the code generator of --target: use it with --target (--interp runs the "
                        "reference interpreter)")
    prog = _program(args)
    if not args.all:
        name = _default_schedule(prog, args)
        return _run_in_interpreter(prog, args.kernel, [name], args)
    kernels: dict = {}  # each kernel's blocks (check --all takes a file of several kernels; run --all refused it)
    for name in _all_schedules(prog, args):
        kernels.setdefault(prog.block_kernel(prog.block(name), args.kernel), []).append(name)
    status = 0
    for kernel, names in (kernels or {prog.kernel_name(args.kernel): []}).items():
        status = max(status, _run_in_interpreter(prog, kernel, names, args))
    return status


def _run_in_interpreter(prog, kernel: Optional[str], names: list, args) -> int:
    """`run --interp`: program order of `kernel` and each schedule of `names` (None: program order only) in the
    interpreter on the same random inputs; 1 where a schedule's result differs, 2 where one is misused."""
    import numpy as np

    from tdsl.compiler.model.dtypes import describe_difference
    from tdsl.compiler.reference.interpreter import interpret, random_inputs
    from tdsl.compiler.verify import online_bound, reordering_bound

    args.kernel = kernel
    original = prog.schedule(None, kernel=kernel)
    model = original.model
    if model.params:
        raise TdslError(f"give a value to every param with --size: {', '.join(model.params)}")
    count = instance_count(model)
    if count > MAX_INTERPRETED_INSTANCES:
        raise TdslError(
            f"the interpreter would execute {count:,} statement instances; "
            f"choose smaller sizes with --size (e.g. --size {','.join(f'{k}=8' for k in model.sizes if isinstance(model.sizes[k], int))})"
        )
    inputs = random_inputs(model, args.seed)
    reference = interpret(model, original.time_map(), inputs)
    print(f"kernel {model.name}: {count:,} instances, seed {args.seed}")
    if names == [None]:
        _print_outputs(model, reference)
        return 0
    status = 0
    for name in names:
        sched, err = _replay(prog, name, args)
        if err is not None:
            print(f"  schedule {name}: {_verdict(err)}, not run\n{err}")
            status = 2 if 2 in (status, err.exit_code) else 1  # as check --all: a misuse outranks a verdict
            continue
        result = interpret(sched.model, sched.time_map(), inputs)
        _, want = _reference_for(sched, original, inputs, reference)
        for tensor in model.outputs():
            a, b = want[tensor.name], result[tensor.name]
            same = np.array_equal(a.view(np.uint8), b.view(np.uint8))
            bound, allowance = None, ""
            if not same and sched.tree.online:
                bound, allowance = online_bound(model, tensor.name, a, b), "the online-softmax bound"
            elif not same:  # a reduction declared `combine reassoc` / `deterministic` may sum in another order
                bound, allowance = reordering_bound(model, tensor.name, a, b), "the reordering bound"
            verdict = "bit-identical" if same else "DIFFERENT"
            nans = int((np.isnan(a) & np.isnan(b)).sum())
            if nans:  # (a bound's summary says it too)
                verdict += f" ({nans} of {a.size} elements NaN in both)"
            if bound is not None and bound.ok:
                verdict = f"within {allowance} ({bound.summary()})"
            print(f"  {tensor.name} {list(a.shape)} {tensor.dtype}: schedule {name} vs program order: {verdict}")
            if not same and not (bound is not None and bound.ok):
                print("    " + describe_difference(a, b))
                status = max(status, 1)
    return status


def _reference_for(sched, original, inputs: dict, reference: dict) -> tuple[dict, dict]:
    """(the interpreter's inputs, the program-order result) a run of `sched` is compared with: `reference`, or
    where the schedule stores an output in an input, program order with the output starting from the input's
    values (interpreter.py `program_order_inputs`: what the kernel leaves where the program writes no element)."""
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs

    start = program_order_inputs(sched.model, inputs)
    if start.keys() == inputs.keys():
        return inputs, reference
    return start, interpret(original.model, original.time_map(), start)


def _print_outputs(model, outputs) -> None:
    import numpy as np

    for tensor in model.outputs():
        values = outputs[tensor.name].astype(np.float32)
        print(f"  {tensor.name} {list(values.shape)} {tensor.dtype}: mean {values.mean():.6g}, max |x| {np.abs(values).max():.6g}")


def cmd_fuse(args) -> int:
    """Every producer -> consumer fusion of the program: fused, rejected (rule, counterexample) or not applicable."""
    from tdsl.compiler.legality.fusion_report import report

    if args.no_run and "seed" in getattr(args, "_given_options", ()):
        raise TdslError("--seed draws the inputs of the interpreter evidence, which --no-run skips: give one of them")
    prog = _program(args)
    name = None if args.schedule in (None, "none") else args.schedule
    print(report(prog, kernel=args.kernel, schedule=name, target=args.target, evidence=not args.no_run,
                 seed=args.seed))
    return 0


def cmd_cost(args) -> int:
    """Buffers, working set, residency, traffic per level, FLOPs, intensity and roofline of a schedule."""
    from tdsl.compiler.analysis.buffer_plan import plan_kernels
    from tdsl.compiler.analysis.cost import analyze, plot_kernels
    from tdsl.compiler.schedule.empty_statements import without_empty_statements
    from tdsl.compiler.targets import get_target

    if args.plot:
        _check_plot_output(args.plot, args.program)
    target = get_target(args.target)
    if args.regs is not None and target.vendor != "nvidia":
        raise TdslError(f"--regs is the registers a GPU thread holds, for the occupancy; {args.target} has none "
                        f"(its buffers are sized in its on-chip memories)")
    generator = _cost_backend(args)[1]  # None for --backend none; a backend the target lacks: exit 2, before a verdict
    prog = _program(args)
    name = _default_schedule(prog, args)
    if args.sweep or args.fit:
        return _cost_sweep(prog, name, target, args)
    sched = without_empty_statements(prog.schedule(name, kernel=args.kernel))  # the schedule analyze plans
    try:
        plans = plan_kernels(sched, target)
        _check_regs(args.regs, plans, target)
        cost = analyze(sched, target, regs=args.regs, plans=plans, backend=generator or "none")
    except BackendError as err:  # a scope the target lacks: at the block, as compile says it
        from tdsl.compiler.driver.generate import locate

        locate(err, prog, name, args.kernel)
        raise
    if not cost.violations:
        overflow = _as_generated_overflow(sched, plans, target, generator)
        for k in cost.kernels if overflow is not None else []:
            if k.name == overflow.kernel:  # in the report and its JSON, as the plan's own violations are
                k.violations = [*k.violations, overflow]  # a new list: the plan's own is shared with the cost
    print(cost.to_json() if args.json else cost.text())
    if args.plot:
        plot_kernels(cost, args.plot, title=f"{prog.filename}: schedule {name or 'program order'}")
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    if cost.violations:
        from tdsl.compiler.analysis.buffer_plan import CapacityError

        print(f"tdsl: error: {CapacityError(target.name, cost.violations, name)}", file=sys.stderr)
        return 1
    return 0


def _as_generated_overflow(sched, plans, target, generator: Optional[str]):
    """The report counts the schedule's buffers exactly (the chapter's footprints); `tdsl compile` also refuses
    a kernel that does not fit as its code generator makes it (tiles padded to their lanes, operand copies:
    compiler/analysis/cost/backend_rules.py `generated_overflow`; `--backend`, by default the target's first).
    `cost` says so too, rather than report a kernel that cannot launch as fitting (probe CC of the 30th
    session); `--backend none` (no `generator`) leaves the check out."""
    from tdsl.compiler.analysis.cost.backend_rules import generated_overflow

    if generator is None:
        return None
    return generated_overflow(sched.model, plans, target, generator)


def _check_regs(regs: Optional[int], plans, target) -> None:
    """`cost --regs N` asks what a kernel compiled to N registers a thread would do: refused where a block of
    the kernel's threads may not have N each (255 on 32 warps gave 0 resident blocks beside a time: probe NN)."""
    from tdsl.compiler.analysis.cost.timing import thread_register_limit

    if regs is None:
        return
    for kp in plans:
        limit = thread_register_limit(kp, target)
        if limit and regs > limit:
            raise TdslError(f"--regs {regs}: kernel {kp.name} has {kp.warps * target.warp_size} threads a block, and a "
                            f"block may have {target.max_registers_per_block:,} registers, so at most {limit} a thread")


def _check_plot_output(output: str, program: str) -> None:
    """`cost --plot OUTPUT` names a picture file: not a folder, not PROG itself, with a suffix that picks the
    format (checked before the costing, so a mistake costs nothing)."""
    from tdsl.compiler.analysis.cost.plot import plot_format

    if _names_a_folder(output):
        raise TdslError(f"--plot {output} is a folder: give the picture's file name (e.g. {Path(output) / 'roofline.png'})")
    _refuse_overwriting_program(f"--plot {output}", Path(output), program, "the picture")
    plot_format(output)
    try:  # as tree -o and compile -o: a folder that does not exist yet is made (it failed after the report)
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TdslError(f"--plot {output}: cannot make its folder: {err.strerror or err}") from None


def _cost_sweep(prog, name: Optional[str], target, args) -> int:
    """`cost --sweep / --fit`: a row per distinct candidate, judged by the target and the backend's tile rules."""
    from tdsl.compiler.analysis.cost import plot_sweep, sweep, sweep_table

    if name is None:
        raise TdslError("--sweep and --fit need a schedule block whose split/tile factors they change")
    generator, backend = _cost_backend(args)
    axes = [_sweep_axis(text) for text in args.sweep or []]
    named = [loop for loops, _ in axes for loop in loops]
    twice = sorted({loop for loop in named if named.count(loop) > 1})
    if twice:
        raise TdslError(f"--sweep names {', '.join(twice)} more than once; give each loop's values in one --sweep")
    rows = sweep(prog, name, target, axes, fit_loop=args.fit, kernel=args.kernel, regs=args.regs, backend=backend)
    if args.json:
        import json

        print(json.dumps([{"factors": r.factors, "asked": r.asked, "fits": r.fits, "reason": r.reason,
                           "error": r.error, "cost": r.cost.to_dict() if r.cost else None} for r in rows], indent=2))
    else:
        rules = f", tile rules of {generator}" if generator else ""
        print(f"schedule {name} of {prog.filename} on {target.name}{rules}: {len(rows)} candidate(s)")
        print(sweep_table(rows, target))
    if args.plot:
        plot_sweep(rows, args.plot, title=f"{prog.filename}: schedule {name}")
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _cost_backend(args) -> tuple[Optional[str], Optional[str]]:
    """(code generator, its lowering key) whose tile rules the candidates must meet; (None, None) for `none`."""
    from tdsl.compiler.driver.generate import code_generator

    if args.backend == "none":
        return None, None
    return code_generator(args.target, args.backend)


def _sweep_axis(text: str):
    loops, eq, values = text.partition("=")
    names = [n.strip() for n in loops.split(",") if n.strip()]
    try:
        numbers = [decimal(v) for v in values.split(",") if v.strip()]
    except ValueError:
        numbers = []
    if not eq or not names or not numbers or any(v < 1 for v in numbers):
        raise TdslError(f"--sweep expects LOOP[,LOOP...]=V1,V2,... with positive integers (e.g. io,jo=32,64,128), got '{text}'")
    from tdsl.frontend.limits import MAX_INT

    if max(numbers) > MAX_INT:  # as a factor written in a schedule block
        raise TdslError(f"--sweep: a factor must be at most {MAX_INT} (2^31 - 1), got {max(numbers)}")
    return names, numbers


# ---------------------------------------------------------------- argument parsing


TARGET_NAMES = ("nvidia", "h100", "h200", "rtx-pro-6000", "ascend-950", "ascend-910b")  # compiler/targets


class _Once(argparse._StoreAction):
    """An option that takes a value and may be given once: argparse kept the last of two `--size` (the first's
    sizes silently dropped: `--size M=8 --size N=4` ran at the file's M), `--schedule` or `-o` (probe NN)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_options", set())
        if self.dest in given:
            hint = " with every size in it (--size M=8,N=4)" if self.dest == "size" else ""
            parser.error(f"{option_string} is given twice: give it once{hint}")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """tdsl's parsers: an option is spelt out (no abbreviation: `--schedul` was taken for `--schedule`), and an
    option with a value is given once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tdsl",
        description="tdsl: a polyhedral scheduling compiler for tensor kernels.",
        epilog=("Exit codes: 0 ok; 1 a verdict against the schedule (illegal, over capacity, not generated for "
                "the target by check --target, a different result from run, no passing candidate from tune); 2 "
                "usage, parse or schedule-misuse error, or a code generator's refusal in compile or run --target; "
                "3 an internal error (a bug in tdsl). docs/legality.md, 'Exit codes and errors', has the table."),
    )
    from tdsl import __version__

    parser.add_argument("--version", action="version", version=f"tdsl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p, schedule=True):
        p.add_argument("program", metavar="PROG", help="a .tdsl file")
        p.add_argument("--kernel", help="the kernel to use when the file holds several")
        p.add_argument("--size", metavar="M=8,N=8", help="override const sizes / bind params")
        if schedule:
            p.add_argument("--schedule", metavar="NAME", help="a schedule block of PROG (default: the first; 'none': program order)")

    p = sub.add_parser("tree", help="print the schedule tree before and after scheduling (text, isl's YAML, or a "
                       "Graphviz drawing: DOT or SVG)")
    common(p)
    p.add_argument("--format", choices=("text", "yaml", "dot", "svg"), default=None,
                   help="text: the readable tree; yaml: isl's YAML; dot: Graphviz DOT source, one cluster per tree; "
                        "svg: that drawing (needs Graphviz's dot program); default: the -o file's suffix (.svg, "
                        ".dot, .gv, .yaml, .yml), else text")
    p.add_argument("-o", "--output", default=STDOUT, metavar="FILE",
                   help="where to write the trees (never PROG itself; default '-': stdout)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("check", help="check a schedule's legality (exit 0 legal, 1 illegal)")
    common(p)
    p.add_argument("--all", action="store_true", help="check every schedule block of PROG")
    p.add_argument("--target", choices=TARGET_NAMES, metavar="T",
                   help="also check that the target's code generator takes each legal schedule (tile rules, "
                        "capacities); exit 1 with its reason when it does not")
    p.add_argument("--backend", choices=("triton", "tilelang", "tilelang-ascend"), default=None,
                   help="code generator for --target (default: the target's first)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("run", help="run a program on random inputs and compare the schedule with program order")
    common(p)
    p.add_argument("--interp", action="store_true", help="compare the schedule with program order in the reference interpreter")
    p.add_argument("--target", choices=TARGET_NAMES, metavar="T",
                   help="compile the kernel for T and run it against the reference interpreter: on NVIDIA targets "
                        f"({', '.join(n for n in TARGET_NAMES if not n.startswith('ascend'))}) on the GPU if there is "
                        "one, else in Triton's interpreter; on ascend-950 and ascend-910b in the NumPy model of the "
                        "device (compiler/verify/ascend_sim)")
    p.add_argument("--backend", choices=("triton", "tilelang", "tilelang-ascend"), default=None,
                   help="code generator for --target (default: the target's first; TileLang on NVIDIA needs a GPU)")
    p.add_argument("--seed", type=SEED, default=0, help="random seed for the inputs")
    p.add_argument("--fixed-sizes", action="store_true",
                   help="with --target: compile the kernel for the sizes --size gives its params (as compile --size "
                        "does); by default a Triton kernel takes them at run time, as compile without --size builds it")
    p.add_argument("--all", action="store_true", help="with --interp: every schedule block of PROG (an illegal one "
                   "is reported, not run)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compile", help="compile a program and schedule to a kernel module")
    common(p)
    p.add_argument("--target", choices=TARGET_NAMES, default="nvidia", metavar="T",
                   help=f"the hardware: {', '.join(TARGET_NAMES[1:])}; nvidia (default) is the default NVIDIA device, h100")
    p.add_argument("--backend", choices=("triton", "tilelang", "tilelang-ascend"), default=None,
                   help="code generator (default: triton for nvidia, tilelang for ascend-950, tilelang-ascend for ascend-910b)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.py",
                   help="where to write the generated module: a file (never PROG itself), a folder (gets "
                        "FOLDER/<PROG's stem>.py; an existing one, or a path ending in '/'), or '-' for stdout")
    p.add_argument("--tuned", metavar="LOG", help="compile the fastest correct schedule a tuning log (tdsl tune "
                   "--log) holds for this program, kernel, sizes and target")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("fuse", help="try every producer -> consumer fusion and report each as fused or rejected")
    p.add_argument("program", metavar="PROG", help="a .tdsl file")
    p.add_argument("--kernel", help="the kernel to use when the file holds several")
    p.add_argument("--size", metavar="M=8,N=8", help="override const sizes / bind params")
    p.add_argument("--schedule", metavar="NAME", help="start from this schedule block (default: program order)")
    p.add_argument("--target", metavar="T", help="also check that each legal fusion can be generated for target T "
                   "(the names compile takes)")
    p.add_argument("--no-run", action="store_true", help="skip the interpreter evidence at small sizes")
    p.add_argument("--seed", type=SEED, default=0, help="random seed for the interpreter evidence")
    p.set_defaults(func=cmd_fuse)

    p = sub.add_parser("cost", help="buffers, occupancy, traffic, FLOPs and roofline of a schedule on a target")
    common(p)
    p.add_argument("--target", default="h100", metavar="T",
                   help="h100 (default; also named nvidia), h200, rtx-pro-6000, ascend-910b or ascend-950")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("--regs", type=int_in(1, 255, "registers per thread"), metavar="N",
                   help="registers per thread for the occupancy, 1 to 255 (default: estimated)")
    p.add_argument("--sweep", action="append", metavar="LOOPS=V1,V2", help="cost every factor of the split/tile "
                   "loops named (io,jo=32,64,128 sets both together); repeat for a product; factors that make the "
                   "same schedule are one row")
    p.add_argument("--fit", metavar="LOOP", help="give LOOP the largest factor that fits the target and the "
                   "backend's tile rules")
    p.add_argument("--backend", choices=("triton", "tilelang", "tilelang-ascend", "none"), default=None,
                   help="the code generator whose tile rules the schedule (with --sweep/--fit: a candidate) must "
                        "meet (tiles padded to powers of two, its operand copies, its lowering's limits; default: the "
                        "target's first); none: the target's capacities alone")
    p.add_argument("--plot", metavar="OUT.png", help="draw the roofline: a point per kernel, or with --sweep a point per "
                   "candidate and its traffic against local memory (needs matplotlib)")
    p.set_defaults(func=cmd_cost)

    from tdsl.compiler.driver.tune_command import add_parser as add_tune

    add_tune(sub, common)
    return parser


def _printable(text: str) -> str:
    """A message with the control characters a user's argument may carry (`--schedule $'\\x1b[31mX'`) escaped, so
    that none reaches the terminal as a command; line breaks and tabs stay."""
    return "".join(c if c in "\n\t" or c.isprintable() else ascii(c)[1:-1] for c in text)


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except TdslError as err:
        text = str(err)
        if ": error: " not in text.split("\n")[0]:
            text = f"tdsl: error: {text}"
        text += "".join(f"\nnote: {note}" for note in getattr(err, "__notes__", ()))
        print(_printable(text), file=sys.stderr)
        return err.exit_code
    except InternalError as err:
        print(f"tdsl: internal error: {err}\n(a bug in tdsl, not in the program: please report it with the program "
              f"and the command)", file=sys.stderr)
        return 3
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
