"""`tdsl tune` and `tdsl compile --tuned`: the command-line face of compiler/tune.

    tdsl tune PROG --target h200 [--kernel K] [--size M=..] [--trials N] [--samples N] [--workers N]
              [--executor local|ray] [--ray-address ADDR] [--log tune.jsonl] [--name NAME] [--append] [--seed S]
              [--no-blocks]
    tdsl compile PROG --tuned tune.jsonl --target h200 -o OUT.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

from tdsl.frontend.diagnostics import TdslError
from tdsl.frontend.parser import name_problem

TUNE_TARGETS = ("nvidia", "h100", "h200", "rtx-pro-6000")  # the targets whose kernels the tuner can measure


def add_parser(sub, common) -> None:
    from tdsl.compiler.driver.cli import SEED, int_in

    p = sub.add_parser("tune", help="search schedules by the cost model, measure the best on the GPU, print the winner")
    common(p, schedule=False)
    p.add_argument("--target", choices=TUNE_TARGETS, default="nvidia", metavar="T",
                   help="the GPU to tune for: h100, h200, rtx-pro-6000 (nvidia: the default NVIDIA device, h100)")
    p.add_argument("--backend", choices=("triton", "tilelang"), default=None, help="code generator (default: triton)")
    p.add_argument("--trials", type=int_in(0, what="a count of candidates"), metavar="N",
                   help="candidates to measure, the log's earlier ones included (default: 64 with a GPU; 0 "
                        "without, when the model alone ranks -- give N to check N candidates in the interpreter)")
    p.add_argument("--samples", type=int_in(1, what="a count of candidates"), default=256, metavar="N",
                   help="candidates drawn from the space before the model's local search (default 256)")
    p.add_argument("--workers", type=int_in(1, what="a count of processes"), metavar="N",
                   help="measuring processes (default: one per local GPU, else 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where measurements run: local processes, or a Ray cluster (pip install 'tdsl[ray]')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="the Ray cluster to join ('auto', 'ray://host:10001'; default: a local Ray instance)")
    p.add_argument("--log", metavar="FILE", help="the tuning log (JSON lines): measured candidates are appended; "
                   "a rerun skips those already there")
    p.add_argument("--name", metavar="NAME", help="the winner's schedule name (default: tuned_<target>)")
    p.add_argument("--append", action="store_true", help="append the winner's schedule block to PROG")
    p.add_argument("--seed", type=SEED, default=0, help="random seed of the sampling and of the inputs")
    p.add_argument("--no-blocks", action="store_true", help="do not measure PROG's own schedule blocks (by default "
                   "those that pass the checks are measured first, so the winner is never one measured slower)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args) -> int:
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.cli import parse_sizes
    from tdsl.compiler.tune import log as tuning_log
    from tdsl.compiler.tune.executors import executor
    from tdsl.compiler.tune.tuner import tune

    problem = args.name is not None and name_problem(args.name)
    if args.name == "none":
        problem = "'none' means program order (`--schedule none`): it cannot name a schedule"
    if problem:
        raise TdslError(f"--name {problem}")
    prog = load(args.program, sizes=parse_sizes(args.size))
    if args.append:
        _check_free_name(prog, args)
    if args.log:
        tuning_log.read(Path(args.log))  # a file that is no tuning log is refused before the GPUs are looked for
    runner = executor(args.executor, args.workers, args.ray_address)
    try:
        result = tune(prog, kernel=args.kernel, target=args.target, backend=args.backend, trials=args.trials,
                      samples=args.samples, seed=args.seed, runner=runner, log_path=args.log and Path(args.log),
                      name=args.name or _free_name(prog, args), progress=not args.quiet and sys.stderr.isatty(),
                      blocks=not args.no_blocks)
    except KeyboardInterrupt:  # what was measured is in the log already, a record per line
        kept = f"; the log {args.log} keeps what was measured: rerun to resume" if args.log else ""
        print(f"tune: interrupted{kept}", file=sys.stderr)
        return 130
    finally:
        if hasattr(runner, "close"):
            runner.close()
    print(result.search.summary())
    if args.log:
        print(_log_line(args.log, result))
    for name, why in result.blocks_left_out:
        print(f"the program's schedule {name} left out: {why}")
    for record, why in result.log_left_out:
        print(f"a record of {args.log} left out ({_which(record)}): {why}")
    blocks = [r["block"] for r in result.measured if r.get("block")]
    if blocks:
        print(f"measured first, the program's own schedule blocks: {', '.join(blocks)}")
    _print_ranking(result)
    if result.measured:
        print(f"measured {len(result.measured)} on {result.executor}:")
        _print_measured(result.measured)
        _print_correction(result.logged)
    if result.winner_steps is None:
        if not result.search.ranked:
            print("no candidate passed the checks: the rejections above say why")
        else:
            print("no measured candidate matched the interpreter: see the details above")
        return 1
    if result.timed:
        which = f" (the program's own schedule '{result.winner_block}')" if result.winner_block else ""
        print(f"winner: {result.winner_us:.1f} us measured{which}{_versus_blocks(result)}")
    else:
        which = f", the program's own schedule '{result.winner_block}'" if result.winner_block else ""
        estimate = f", {result.winner_estimate * 1e6:.4g} us predicted" if result.winner_estimate is not None else ""
        print(f"winner: the model's choice{which}{estimate} (no GPU here: nothing was timed; run on a GPU to "
              f"measure)")
    print(result.block, end="")
    if args.append:
        block = _block_for_every_size(prog, result, args.target, args.backend, args.log)
        ending = "\r\n" if b"\r\n" in Path(args.program).read_bytes() else "\n"  # the file's own line endings
        with open(args.program, "a", encoding="utf-8", newline=ending) as f:
            f.write(f"\n{block}")
        print(f"appended schedule {result.name} to {args.program}")
    return 0


def _default_name(args) -> str:
    """The winner's block name without `--name`: tuned_DEVICE."""
    from tdsl.compiler.driver.generate import resolve_target
    from tdsl.compiler.tune.tuner import default_block_name

    return default_block_name(resolve_target(args.target, args.backend)[2])


def _free_name(prog, args) -> str:
    """The default name of the winner's block, made unique in the program (`tuned_h100_2`): the block printed
    for pasting must not clash with one the file has (`--append` refuses a taken name before the search)."""
    base = name = _default_name(args)
    n = 1
    while name in prog.schedule_names:
        n += 1
        name = f"{base}_{n}"
    return name


def _check_free_name(prog, args) -> None:
    """`--append` names a block the program does not have yet: said before the search, not after it."""
    if args.name is not None:
        if args.name in prog.schedule_names:
            raise TdslError(f"{prog.filename} already has a schedule '{args.name}'; choose another --name")
        return
    name = _default_name(args)
    if name in prog.schedule_names:
        raise TdslError(f"{prog.filename} already has a schedule '{name}' (the name --append gives); give --name")


def _versus_blocks(result) -> str:
    """How the winner compares with the fastest of the program's own blocks the log holds (when it is not one)."""
    timed = [r for r in result.logged if r.get("block") and r.get("ok") and r.get("us")]
    if result.winner_block or not timed or not result.winner_us:
        return ""
    best = min(timed, key=lambda r: r["us"])
    return f", {best['us'] / result.winner_us:.2f}x the program's fastest schedule '{best['block']}' ({best['us']:.1f} us)"


def _print_ranking(result, top: int = 5) -> None:
    print(f"model's top {min(top, len(result.search.ranked))} (predicted time):")
    for v in result.search.ranked[:top]:
        knobs = " ".join(f"{k}={val}" for k, val in v.choice.items())
        print(f"  {v.t_estimate * 1e6:10.4g} us  {knobs}")


def _print_correction(records: list) -> None:
    """What the measurements taught the model (compiler/tune/residual.py): the knob values it moved most."""
    from tdsl.compiler.tune import residual

    fit = residual.fit(records)
    if fit is not None:
        moved = ", ".join(f"{knob} x{factor:.2f}" for knob, factor in fit.strongest(3))
        print(f"measured / model, by knob value (the largest corrections): {moved}")


def _which(record: dict) -> str:
    """Which candidate a record is: the program's block by name, else its knobs (as the model's ranking prints)."""
    if record.get("block"):
        return f"schedule {record['block']}"
    return " ".join(f"{k}={v}" for k, v in (record.get("choice") or {}).items()) or "no knobs"


def _print_measured(records: list, top: int = 10) -> None:
    ok = sorted((r for r in records if r.get("ok")), key=lambda r: (r.get("us") is None, r.get("us") or 0.0))
    for r in ok[:top]:
        us = f"{r['us']:10.2f} us" if r.get("us") is not None else "  not timed"
        print(f"  {us}  (model {r['t_estimate'] * 1e6:.4g} us)  {_which(r)}  {r.get('timing', '')}".rstrip())
    failed = [r for r in records if not r.get("ok")]
    for r in failed[:5]:
        print(f"  FAILED: {r.get('detail', '')[:300]}")
    if len(failed) > 5:
        print(f"  ... and {len(failed) - 5} more failed")


def _log_line(log: str, result) -> str:
    """What this run did with the tuning log: the records of this workload it reused and the ones it added, or
    why it added none (without a GPU, --trials defaults to 0 and nothing is logged: the file was silently not
    written, and `compile --tuned` then found no log: probe NN)."""
    earlier = len(result.logged) - len(result.measured)
    if result.measured:
        return (f"log {log}: {len(result.measured)} record(s) added"
                + (f", {earlier} earlier one(s) of this workload reused" if earlier else ""))
    if earlier:
        return f"log {log}: {earlier} earlier record(s) of this workload reused, none added"
    return (f"log {log}: not written: nothing was measured or checked (without a GPU --trials is 0 unless given; "
            f"--trials N checks N candidates in the interpreter and logs them)")


def _block_for_every_size(prog, result, target: str, backend: Optional[str], log: Optional[str]) -> str:
    """The block `--append` writes is part of the program at every size it runs at, and the search checked its
    candidates at the tuned ones only: a split with one iteration there was legal to bind (probe of the 24th
    session), and a whole row was a tile of fixed size (probe of the 25th).  The winner's block if it is legal
    and compiles with the run-time sizes unbound; else the fastest candidate that does, said so; else refused
    with the winner's reason (the log keeps the winner for `compile --tuned LOG --size ...`)."""
    from dataclasses import replace

    reason = _every_size_problem(prog, result, target, backend)
    if reason is None:
        return result.block
    for steps in _runners_up(result):
        other = replace(result, winner_steps=steps)
        if _every_size_problem(prog, other, target, backend) is None:
            print(f"the winner is right at the tuned sizes only ({reason}); appended instead the fastest "
                  f"candidate that holds at every size:")
            print(other.block, end="")
            return other.block
    use = ("`tdsl compile --tuned LOG --size ...` uses it at those sizes" if log else
           "tune with --log FILE, and `tdsl compile --tuned FILE --size ...` uses it at those sizes")
    raise TdslError(f"not appended: the winner holds at the tuned sizes but not at every size the program runs at "
                    f"({reason}), and no other candidate does; {use}")


def _every_size_problem(prog, result, target: str, backend: Optional[str]) -> Optional[str]:
    """Why `result.block` appended to the program (its run-time sizes unbound) is illegal or does not compile
    for the tuned backend, or None."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.tune.tuner import first_line

    try:
        program = loads(f"{prog.ast.source.rstrip()}\n\n{result.block}", prog.filename)
        generate(program, result.name, target=target, backend=backend, kernel=result.kernel)
    except TdslError as err:
        return first_line(err)
    return None


def _value_text(value) -> str:
    """A size of a log record as the record has it: `20`, but `"20"` for a string (which matches no size)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else json.dumps(value)


def _runners_up(result) -> list:
    """The steps of the other candidates, fastest first: timed ones by their time, else by the model's estimate."""
    ok = [r for r in result.logged if r.get("ok") and r["steps"] != result.winner_steps]
    if result.timed:
        ok = sorted((r for r in ok if r.get("us") is not None), key=lambda r: (r["us"], r["steps"]))
        return [r["steps"] for r in ok]
    return [v.text for v in result.search.ranked if v.text != result.winner_steps]


def _unheld(sched, device: str) -> Optional[str]:
    """The tuner screen's register rule (compiler/analysis/cost/timing.py `unheld_accumulator`) on a schedule."""
    from tdsl.compiler.analysis.buffer_plan import plan_kernels
    from tdsl.compiler.analysis.cost.timing import unheld_accumulator
    from tdsl.compiler.schedule.empty_statements import without_empty_statements
    from tdsl.compiler.targets import get_target

    sched, tgt = without_empty_statements(sched), get_target(device)
    return unheld_accumulator(sched.model, plan_kernels(sched, tgt), tgt)


def tuned_program(prog, log_file: str, target: str, backend: Optional[str], kernel: Optional[str]):
    """(program with the log's best schedule appended as block `tuned`, that name, the module generated from it)
    for `compile --tuned`: the fastest correct record that applies and generates."""
    from tdsl.compiler.driver.generate import generate, resolve_target
    from tdsl.compiler.tune import log as tuning_log
    from tdsl.compiler.tune.measure import with_steps
    from tdsl.compiler.tune.tuner import first_line

    kind, backend, device = resolve_target(target, backend)
    if not Path(log_file).exists():
        raise TdslError(f"--tuned {log_file}: no such tuning log")
    model = prog.schedule(None, kernel=kernel).model
    sizes = {k: v for k, v in model.sizes.items() if isinstance(v, (int, float))}
    workload = tuning_log.Workload.of(tuning_log.kernels_text(prog), model.name, sizes, device, backend)
    records = tuning_log.read(Path(log_file))
    matching = tuning_log.of_workload(records, workload)
    if tuning_log.best(matching) is None:
        seen = sorted({f"{r.get('kernel')} on {r.get('target')}/{r.get('backend')} at "
                       f"{','.join(f'{k}={_value_text(v)}' for k, v in r.get('sizes', {}).items())}"
                       for r in records})
        listed = "; ".join(seen[:5]) or "nothing"
        unbound = [k for k, v in model.sizes.items() if v is None]
        if unbound:  # a log's entry is for the sizes it was tuned at: those must be given
            raise TdslError(f"--tuned picks a schedule tuned at given sizes: give --size for {', '.join(unbound)} "
                            f"(the run-time sizes of {model.name}; {log_file} holds: {listed})")
        raise TdslError(f"{log_file} has no correct measured schedule of kernel {model.name} for {device}/{backend} "
                        f"at these sizes and this source (it holds: {listed}); run tdsl tune with --log {log_file}")
    skipped = []
    for record in tuning_log.fastest_first(matching):
        try:  # the steps come from the log: an error in them is the log's, not at a line of the program
            tuned, name, sched = with_steps(prog, record["steps"], kernel)
            text = generate(tuned, name, target=target, backend=backend, kernel=kernel)
        except TdslError as err:
            skipped.append(f"{'; '.join(record['steps'].splitlines())} ({first_line(err)})")
            continue
        unheld = _unheld(sched, device)
        if unheld:  # never a winner of tune (its screen's capacity:registers): not one of compile --tuned either
            skipped.append(f"{'; '.join(record['steps'].splitlines())} (capacity:registers: {unheld})")
            continue
        for what in skipped:  # the log may hold a record of another version, or one edited by hand
            print(f"{log_file}: skipped a faster record that does not apply to {prog.filename}: {what}",
                  file=sys.stderr)
        return tuned, name, text
    raise TdslError(f"{log_file}: no correct record of kernel {model.name} applies to {prog.filename} "
                    f"({len(skipped)} tried); the fastest: {skipped[0]}")
