"""What must hold for every schedule the fuzzer builds (docs/testing.md#differential-fuzzing).

* A step either succeeds or raises a typed project error (`TdslError`); a rejected step leaves the schedule
  as it was.
* The trace of an accepted schedule, printed as a `schedule` block, replays to the same tree.
* An accepted schedule is bit-identical to program order in the reference interpreter (within the declared
  policy when a reduction allows reassociation), on inputs from several distributions.
* Every backend's kernel matches the interpreter, or the backend refuses with a `TdslError` that says why:
  Triton under its interpreter (with NaN guard regions around every output), both Ascend dialects through
  the NumPy execution model, TileLang for NVIDIA through `tilelang.lower`.
* No loop of a generated module rebinds the variable of a loop around it (TVMScript and Python would read the
  inner value where the outer one is meant).
* Emission is a pure function of the tile program: emitting one lowered program twice, with other backends
  in between, gives identical text.
* The buffer plan, which the cost model counts, keeps the same fused intermediates in global memory as the
  tile lowering does.
* The cost report of an accepted schedule is made on an NVIDIA and an Ascend target, or refused with a typed
  error.
"""

from __future__ import annotations

import ast
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import LegalityError, ScheduleError
from tdsl.frontend.diagnostics import TdslError

from .cases import Case, FUZZ_SCHEDULE, inputs_for

# Backends the fuzzer can check: name -> (target, backend) for `generate`.
BACKENDS = {
    "triton": ("nvidia", "triton"),
    # the Triton module compiled for sm_90 ahead of time, not run: the interpreter takes code the GPU compiler
    # refuses (an integer mask: GPU fuzz seed 38)
    "triton-sm90": ("nvidia", "triton"),
    "tilelang": ("nvidia", "tilelang"),
    "ascend-950": ("ascend-950", None),
    "ascend-910b": ("ascend-910b", None),
}


@dataclass
class Finding:
    kind: str  # internal-error | rejected-step-changed-state | trace | interp-mismatch | miscompile | emission | plan
    #            | message (a refusal that shows the compiler's objects)
    where: str  # the step, "interpreter", or a backend name
    detail: str

    def key(self) -> tuple:
        """What a shrunk case must still show to count as the same finding."""
        return self.kind, self.where.split(":")[0]

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where}: {self.detail}"


def internal(where: str, err: BaseException) -> Finding:
    lines = traceback.format_exception(type(err), err, err.__traceback__)
    return Finding("internal-error", where, f"{type(err).__name__}: {err}\n" + "".join(lines[-6:]))


# ---------------------------------------------------------------- schedule and trace


def apply_steps(case: Case):
    """The case's program with its steps tried in turn, as the fuzzer tried them: (program, schedule, finding).

    A step rejected with a typed error is skipped (and must have left the schedule as it was); any other
    exception is an internal error.  The finding is None when every step behaved."""
    prog = loads(case.source, case.filename, sizes=case.sizes)
    sched = prog.schedule(kernel=case.kernel)
    for step in case.steps:
        before = state_of(sched)
        try:
            step.apply(sched)
        except TdslError as err:
            if not same_state(before, state_of(sched)):
                return prog, sched, Finding("rejected-step-changed-state", f"step {step}",
                                            str(err).splitlines()[0])
        except Exception as err:  # noqa: BLE001
            return prog, sched, internal(f"step {step}", err)
    return prog, sched, None


def state_of(sched) -> tuple:
    """What a schedule is: its trace, its tree's shape and annotations, its instances' times, its domains, and each
    loop's placement of each statement.  The tree's text leaves out the domain line and the placements, which
    isl words differently for equal sets and functions (one piecewise function printed with other pieces after
    a replay): they are compared as isl objects."""
    from tdsl.compiler.schedule.tree import walk_loops
    from tdsl.compiler.schedule.tree_view import tree_text

    lines = tree_text(sched.model, sched.tree).split("\n")[1:]
    shape = "\n".join(line for line in lines if not _PLACEMENT_LINE.match(line))
    domains = {s.name: s.domain for s in sched.model.stmts}
    placements = [(loop.name, {stmt: list(pas) for stmt, pas in loop.exprs.items()})
                  for loop in walk_loops(sched.tree.body)]
    return str(sched.trace), shape, sched.time_map(), domains, placements


# a band's placement of one statement in tree_text: `│   S: i = floor(i/32)   j = j`
_PLACEMENT_LINE = re.compile(r"^[\s│]*│   [^\s:]+: \S+ = ")


def same_state(a: tuple, b: tuple) -> bool:
    """Equal as schedules: isl objects compared as sets, not by how isl happens to print them."""
    return (a[:2] == b[:2] and a[2].is_equal(b[2]) and a[3].keys() == b[3].keys()
            and all(a[3][k].is_equal(b[3][k]) for k in a[3]) and _same_placements(a[4], b[4]))


def _same_placements(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        name_a == name_b and exprs_a.keys() == exprs_b.keys()
        and all(len(exprs_a[s]) == len(exprs_b[s]) and all(x.is_equal(y) for x, y in zip(exprs_a[s], exprs_b[s]))
                for s in exprs_a)
        for (name_a, exprs_a), (name_b, exprs_b) in zip(a, b))


def check_trace(case: Case, sched) -> Optional[Finding]:
    """The printed trace replays to the same tree (what `tdsl compile` of that text would build)."""
    text = case.with_schedule(str(sched.trace))
    try:
        replayed = loads(text, case.filename, sizes=case.sizes).schedule(FUZZ_SCHEDULE, kernel=case.kernel)
    except TdslError as err:
        return Finding("trace", "replay", f"the printed trace does not replay: {err}")
    except Exception as err:  # noqa: BLE001
        return internal("trace replay", err)
    if not same_state(state_of(replayed), state_of(sched)):
        return Finding("trace", "replay", "the replayed trace builds a different schedule")
    return None


# ---------------------------------------------------------------- interpreter


def relaxed(model) -> bool:
    """Some reduction allows another order or grouping than program order (`fast_accum` was missed here, so a
    legal reordering of it was a finding: probe LL)."""
    from tdsl.compiler.model.dependences import reorders

    return any(map(reorders, model.stmts))


def check_interpreter(case: Case, original, sched, references: dict) -> Optional[Finding]:
    from tdsl.compiler.reference.interpreter import interpret
    from tdsl.compiler.verify import compare, online_bound, reordered_terms, tolerance_dtype

    for dist, ref in references.items():
        want = ref.outputs
        try:
            got = interpret(sched.model, sched.time_map(), ref.inputs)
        except Exception as err:  # noqa: BLE001
            return internal("interpreter", err)
        for t in original.model.outputs():
            a, b = _one_nan(want[t.name]), _one_nan(got[t.name])
            if np.array_equal(a.view(np.uint8), b.view(np.uint8)):
                continue
            if relaxed(original.model):
                # A declared reassociation may change the result by any rounding error of another summation
                # order; with cancelling terms (the wide inputs) that is unbounded relative to the result, so
                # it is compared on standard-normal inputs only, at the coarsest dtype the sum passes through,
                # allowing a unit for every term the reordered reduction rounds in that dtype (both of the program
                # as written: a schedule may inline a rounding statement, or split the terms with rfactor).
                if dist != "normal" or compare(a.astype(np.float32), b.astype(np.float32),
                                               tolerance_dtype(original.model, t.name),
                                               reordered_terms(original.model, t.name)).ok:
                    continue
            # `online` moves roundings, within its documented bound (compiler/verify/compare.py): the tolerance of
            # the dtypes the output passes through in the program as written (a compute_inline'd statement's
            # rounding is no statement of the scheduled model), as `tdsl run --interp` and assert_legal hold it
            if sched.tree.online and online_bound(original.model, t.name, a, b).ok:
                continue
            bad = int(np.sum(~((a == b) | (np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))))))
            return Finding("interp-mismatch", "interpreter",
                           f"{t.name} differs from program order in {bad} of {a.size} elements ({dist} inputs)")
    return None


class Reference:
    """One input distribution's inputs and program-order result.  The results with other allowed roundings (the
    sums' terms in other orders, the GPU's exp), which tell an ill-conditioned output from a wrong one
    (compiler/verify/compare.py VARIANTS), are computed the first time a comparison fails."""

    def __init__(self, original, inputs: dict, start: dict, outputs: dict):
        # `start`: the program-order run's inputs (an output the schedule stores in an input starts from it)
        self.original, self.inputs, self.start, self.outputs = original, inputs, start, outputs
        self._variants = None
        self.widened: set = set()  # the backends whose outputs passed only with the conditioning allowance

    @property
    def variants(self) -> list[dict]:
        from tdsl.compiler.reference.interpreter import rounding_variants

        if self._variants is None:
            self._variants = rounding_variants(self.original.model, self.original.time_map(), self.start,
                                               self.outputs)
        return self._variants


def references(case: Case, original, sched) -> dict:
    """dist -> `Reference` for every input distribution, as a kernel of the schedule `sched` is held to it."""
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs

    out = {}
    for dist in case.distributions:
        inputs = inputs_for(original.model, case.seed, dist)
        start = program_order_inputs(sched.model, inputs)
        out[dist] = Reference(original, inputs, start, interpret(original.model, original.time_map(), start))
    return out


# ---------------------------------------------------------------- backends


def generate_text(case: Case, backend: str):
    """(module text, None) or (None, refusal message); other exceptions propagate."""
    from tdsl.compiler.driver.generate import generate

    target, which = BACKENDS[backend]
    prog = loads(case.with_schedule(case.trace_text), case.filename, sizes=generation_sizes(case))
    try:
        return generate(prog, FUZZ_SCHEDULE, target=target, backend=which, kernel=case.kernel), None
    except TdslError as err:
        return None, str(err).splitlines()[0]


def generation_sizes(case: Case) -> dict:
    """The sizes the kernel is generated for: a symbolic case leaves its `param` sizes to run time (the launcher
    reads them from the tensors' shapes), so the kernels are compiled for every size and run at the case's."""
    if not case.symbolic:
        return case.sizes
    return loads(case.source, case.filename, sizes=case.sizes).at_run_time(case.kernel).sizes


# A refusal speaks of the program's tensors and loops; these are the tile IR's classes, as `repr` prints them.
COMPILER_OBJECTS = re.compile(r"\b(Load|Var|Const|Bin|Neg|Select|Reg|Call|Round|Reduce|Dot|Tile|Axis)\(")


def _one_nan(x: np.ndarray) -> np.ndarray:
    """`x` with every NaN the same NaN: which NaN a sum of several NaN terms gives (its sign, its payload)
    depends on the order it adds them in, and IEEE leaves it open; a program's order does not fix it (fuzz seed
    5497: quant_gemm_fast_accum's sum reversed gave -NaN for NaN).  Signed zeros stay apart."""
    nan = np.isnan(x.astype(np.float32))
    if not nan.any():
        return x
    out = x.copy()
    out[nan] = np.nan
    return out


def check_backend(case: Case, backend: str, original, refs: dict, workdir: Path,
                  outcome: dict) -> Optional[Finding]:
    try:
        text, refusal = generate_text(case, backend)
    except Exception as err:  # noqa: BLE001
        return internal(f"{backend} generate", err)
    if text is None:
        outcome[backend] = "refused: " + refusal
        if COMPILER_OBJECTS.search(refusal):
            return Finding("message", backend, f"the refusal shows the compiler's own objects: {refusal}")
        return None
    try:
        again, _ = generate_text(case, backend)
    except Exception as err:  # noqa: BLE001
        return internal(f"{backend} generate (second time)", err)
    if again != text:
        return Finding("emission", backend, "generating the same schedule twice gives different text")
    rebound = rebound_loop_variables(text)
    if rebound:
        return Finding("emission", backend, f"a loop rebinds the variable of a loop around it: {rebound}")
    runner = {"triton": _run_triton, "triton-sm90": _compile_sm90, "tilelang": _run_tilelang,
              "ascend-950": _run_ascend, "ascend-910b": _run_ascend}[backend]
    finding = runner(case, backend, text, original, refs, workdir)
    ill_conditioned = any(backend in ref.widened for ref in refs.values())
    outcome[backend] = "finding" if finding else "checked (ill-conditioned)" if ill_conditioned else "checked"
    return finding


def rebound_loop_variables(text: str) -> list[str]:
    """`for` loops of a module that bind a name a `for` around them already binds, as 'name (line n)'."""
    found: list[str] = []

    def walk(node, bound: frozenset) -> None:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            names = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            found.extend(f"{n} (line {node.lineno})" for n in sorted(names & bound))
            bound = bound | names
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            bound = frozenset()  # a new scope
        for child in ast.iter_child_nodes(node):
            walk(child, bound)

    walk(ast.parse(text), frozenset())
    return found


def _compare_outputs(backend: str, original, ref: Reference, got: dict, dist: str) -> Optional[Finding]:
    """Every output against the program-order reference as any generated kernel is held to it
    (compiler/verify/compare.py `compare_outputs`: a relaxed reduction's terms, and where an output fails, the
    reference's variants, which tell an ill-conditioned output from a wrong one)."""
    from tdsl.compiler.verify import compare_outputs

    for t in original.model.outputs():
        if t.name not in got:
            return Finding("miscompile", backend, f"output {t.name} was not produced")

    def others() -> list[dict]:  # asked for once an output fails
        ref.widened.add(backend)
        return ref.variants

    results = compare_outputs(original.model, ref.outputs, got, variants=others)
    for name, result in results.items():
        if not result.ok:
            return Finding("miscompile", backend, f"{name}: {result.summary()} ({dist} inputs)")
    return None


def _compile_sm90(case, backend, text, original, refs, workdir) -> Optional[Finding]:
    """The Triton module compiled for sm_90 as the GPU's JIT would (backends/triton/aot.py, in a process without
    TRITON_INTERPRET); a kernel Triton does not compile is a finding."""
    from tdsl.backends.triton.aot import compile_in_subprocess
    from tdsl.compiler.lower.pipeline import lower_for

    prog = loads(case.with_schedule(case.trace_text), case.filename, sizes=generation_sizes(case))
    program = lower_for(prog.schedule(FUZZ_SCHEDULE, kernel=case.kernel), "triton")
    path = workdir / f"fz_{case.ident()}_sm90.py"
    path.write_text(text)
    try:
        compile_in_subprocess(path, program.kernels, program=program)
    except RuntimeError as err:
        errors = [line.strip() for line in str(err).splitlines() if re.match(r"\s*[\w.]+(Error|Exception):", line)]
        return Finding("gpu-compile", backend, "Triton does not compile the module for sm_90: "
                       + " / ".join(dict.fromkeys(errors[-3:])))
    return None


def _run_triton(case, backend, text, original, refs, workdir) -> Optional[Finding]:
    from tdsl.compiler.driver.generate import load_module, run_generated

    try:
        module = load_module(text, workdir / f"fz_{case.ident()}_triton.py")
    except Exception as err:  # noqa: BLE001
        return internal("triton import", err)
    for dist, ref in refs.items():
        try:
            got = run_generated(module, original.model, ref.inputs, guard=13)
        except AssertionError as err:  # a write into the NaN guard around an output
            return Finding("miscompile", backend, str(err))
        except Exception as err:  # noqa: BLE001
            from tdsl.backends.triton.interpreter_bounds import out_of_bounds

            if out_of_bounds(err) is not None:
                return Finding("miscompile", backend, str(out_of_bounds(err)))
            return internal("triton run", err)
        finding = _compare_outputs(backend, original, ref, got, dist)
        if finding:
            return finding
    return None


def _run_ascend(case, backend, text, original, refs, workdir) -> Optional[Finding]:
    from tdsl.compiler.verify.ascend_sim import SimulationError, Unsupported, output_arrays, simulate

    for dist, ref in refs.items():
        try:
            sim = simulate(text, ref.inputs, backend)
        except Unsupported:
            return None
        except SimulationError as err:
            return Finding("miscompile", backend, f"the NumPy execution model rejects the kernel: {err}")
        except Exception as err:  # noqa: BLE001
            return internal(f"{backend} simulate", err)
        finding = _compare_outputs(backend, original, ref, output_arrays(sim, original.model), dist)
        if finding:
            return finding
    return None


def _run_tilelang(case, backend, text, original, refs, workdir) -> Optional[Finding]:
    from tdsl.backends.tilelang.lowering import lower_module
    from tdsl.compiler.driver.generate import load_module

    try:
        module = load_module(text, workdir / f"fz_{case.ident()}_tilelang.py")
        lower_module(module, "sm_90a")
    except Exception as err:  # noqa: BLE001
        return internal("tilelang lower", err)
    return None


# ---------------------------------------------------------------- purity of emission


def check_pure_emission(sched, backends) -> Optional[Finding]:
    """Emit one lowered program with every backend, twice, in two orders: every text must be the same."""
    from .emission import emit_all

    try:
        first = emit_all(sched, backends)
        second = emit_all(sched, list(reversed(backends)), program=first.program)
    except TdslError:
        return None
    except Exception as err:  # noqa: BLE001
        return internal("emission", err)
    for name in first.texts:
        if name in second.texts and first.texts[name] != second.texts[name]:
            return Finding("emission", name, "emitting one tile program again changes the text "
                                             "(an emitter mutates the shared tile program)")
    return None


def check_plan_matches_lowering(sched) -> Optional[Finding]:
    """The buffer plan (what the cost model counts) and the tile lowering (what the kernels do) read back from
    global memory the same tensors of each kernel: those a reader takes with another tile than its producer
    wrote, or in a later iteration (a time loop's last step), temporaries and global tensors alike."""
    from tdsl.compiler.analysis.buffer_plan import plan_kernels
    from tdsl.compiler.lower.build import lower
    from tdsl.compiler.model.recurrences import self_reads
    from tdsl.compiler.schedule.empty_statements import without_empty_statements

    model = sched.model
    try:
        program = lower(sched)
        plans = plan_kernels(sched)
    except TdslError:
        return None
    except Exception as err:  # noqa: BLE001
        return internal("plan", err)
    recurrences = {s.write.tensor for s in model.stmts if self_reads(s)}
    # as the lowering and the plan see the schedule: without the statements that have no instance at these sizes
    # (a temporary only such a statement reads is then never read, and stored like one; CPU fuzz seed 5565)
    seen = without_empty_statements(sched)
    lowered = [sorted(read_back_by(seen, program, kernel) - recurrences) for kernel in program.kernels]
    planned = [sorted(set(kp.read_back) - recurrences) for kp in plans]
    if lowered != planned:
        return Finding("plan", "read back", f"the kernels read back {lowered} from global memory, the buffer plan "
                                            f"{planned}")
    return None


def check_cost_report(sched) -> Optional[Finding]:
    """The cost report of an accepted schedule -- buffers, traffic, occupancy, estimate, on an NVIDIA and an
    Ascend target -- is made, or refused with a TdslError (a size it needs, a scope the target lacks); never an
    internal error (probe FF of the 31st session: a skew under a tile made the longest program's span a rational
    isl function, and `tdsl cost` crashed)."""
    from tdsl.compiler.analysis.cost import analyze

    for target in ("h100", "ascend-910b"):
        try:
            analyze(sched, target)
        except TdslError:
            continue
        except Exception as err:  # noqa: BLE001
            return internal(f"cost ({target})", err)
    return None


def read_back_by(sched, program, kernel) -> set:
    """The tensors a kernel of the tile program produces and reads back from global memory: the temporaries it
    stores for itself (a read never taken at these sizes loads nothing, but the tensor is stored all the same),
    and the global tensors it loads where one of its statements takes a read of them (a load under a branch never
    taken moves nothing)."""
    from tdsl.compiler.lower import tileir as T
    from tdsl.compiler.schedule.tree import global_tensors

    model = sched.model
    produced, loaded, stmts = set(), set(), set()
    for op in T.walk_ops(kernel.body):
        stmts.add(getattr(op, "stmt", None))
        if isinstance(op, (T.Compute, T.AccFinish)):
            produced.add(model.stmt(op.stmt).write.tensor)
        if isinstance(op, T.Staged):
            loaded.add(op.tensor)
        loaded |= {load.tensor for e in T.values_read(op) for load in T.nodes_in(e, T.Load)}
    taken = {a.tensor for s in stmts - {None} for a in model.stmt(s).reads
             if a.tensor != model.stmt(s).write.tensor and not a.relation.is_empty()}
    shared = set(global_tensors(model, sched.tree))
    temps = {t.name for t in program.temps} - shared
    return produced & (temps | (loaded & shared & taken))


def is_typed(err: BaseException) -> bool:
    return isinstance(err, TdslError)


__all__ = ["Finding", "BACKENDS", "apply_steps", "check_trace", "check_interpreter", "check_backend",
           "check_pure_emission", "check_plan_matches_lowering", "check_cost_report", "Reference", "references", "is_typed", "LegalityError", "ScheduleError"]
