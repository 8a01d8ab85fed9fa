"""`tdsl tune`: search by the model, measure the best candidates, log them, name the winner.

    result = tune(tdsl.load("examples/gemm_silu.tdsl"), target="h200", trials=64, log_path="tune.jsonl")
    print(result.block)            # `schedule tuned_h200 { ... }`, ready to paste or append

The candidates measured are the model's best ones not already in the log for this workload, and first the
program's own schedule blocks for the kernel that pass the same screen (unless `blocks=False`): a schedule the
user already has is a candidate like any other (MetaSchedule's warm start from a database), so the result is
never one the measurements found slower than it.  With a GPU the winner is the fastest candidate that matched
the interpreter; without one, nothing is timed and the winner is the model's choice, and the result says so
(`measured` is False).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.tune import log as tuning_log
from tdsl.compiler.tune import residual
from tdsl.compiler.tune.measure import Job
from tdsl.compiler.tune.screen import Verdict
from tdsl.compiler.tune.search import SearchResult, neighbours, orders, search

DEFAULT_TRIALS = 64
POLISHED_TILINGS = 2  # the fastest tilings whose launch orders are all measured


@dataclass
class TuneResult:
    search: SearchResult
    workload: tuning_log.Workload
    name: str
    measured: list = field(default_factory=list)  # records of this run, in the order they finished
    logged: list = field(default_factory=list)  # records of this workload in the log, this run's included
    winner_steps: Optional[str] = None  # None: no winner; "" is one, program order (a block of no steps)
    winner_us: Optional[float] = None  # None: not timed (no GPU), the model's choice
    winner_block: Optional[str] = None  # the program's own schedule block the winner is, if it is one
    winner_estimate: Optional[float] = None  # the model's time of an untimed winner, seconds
    blocks: list = field(default_factory=list)  # the program's schedule blocks screened in as candidates
    blocks_left_out: list = field(default_factory=list)  # (block name, why) of the others
    log_left_out: list = field(default_factory=list)  # (record, why): the log's records the screen refuses
    executor: str = ""
    kernel: Optional[str] = None  # named in the block (`schedule NAME for KERNEL`) when the program has several

    @property
    def timed(self) -> bool:
        return self.winner_us is not None

    @property
    def block(self) -> str:
        body = "\n".join(f"  {line}" for line in (self.winner_steps or "").splitlines())
        head = f"schedule {self.name} for {self.kernel}" if self.kernel else f"schedule {self.name}"
        return f"{head} {{\n{body}\n}}\n"


def default_block_name(device: str) -> str:
    """The name the winner's block gets without `--name`."""
    return f"tuned_{device.replace('-', '_')}"


def tune(prog, kernel: Optional[str] = None, sizes: Optional[dict] = None, target: str = "h200",
         backend: Optional[str] = None, trials: Optional[int] = None, samples: int = 256, seed: int = 0,
         runner=None, log_path: Optional[Path] = None, name: Optional[str] = None, progress: bool = False,
         blocks: bool = True) -> TuneResult:
    """Search, then measure up to `trials` candidates on `runner` (an executor: compiler/tune/executors.py),
    the program's own schedule blocks first (`blocks`).  `trials` defaults to 64 with a GPU and 0 without one
    (the model alone ranks; nothing is checked)."""
    from tdsl import __version__
    from tdsl.compiler.driver.generate import resolve_target

    kind, backend, device = resolve_target(target, backend)
    bar = _bar(progress, "screening")
    found = search(prog, kernel, sizes, device, backend, samples=samples, seed=seed,
                   progress=bar.update if bar else None)
    if bar:
        bar.close()
    model = found.screen.base.model
    workload = tuning_log.Workload.of(tuning_log.kernels_text(prog), model.name, _numbers(model.sizes), device,
                                        backend)
    result = TuneResult(found, workload, name or default_block_name(device),
                        kernel=model.name if len(prog.kernels) > 1 else None)
    if blocks:
        result.blocks, result.blocks_left_out = program_blocks(prog, kernel, sizes, found)
    if not found.ranked and not result.blocks:
        return result
    logged = tuning_log.of_workload(tuning_log.read(log_path), workload) if log_path else []
    records, result.log_left_out = screened_records(prog, kernel, sizes, found, result.blocks, logged)
    gpus = getattr(runner, "gpus", 0) if runner else 0
    budget = max(0, ((DEFAULT_TRIALS if gpus else 0) if trials is None else trials) - len(records))
    if budget and runner is not None and backend == "tilelang" and not gpus:
        raise TdslError("TileLang kernels run only on an NVIDIA GPU, and the executor has none: leave --trials out "
                        "(or give 0) to rank by the model alone, or tune --backend triton, whose candidates are "
                        "checked under Triton's interpreter on the CPU")
    if budget and runner is not None:
        result.executor = runner.describe()
        bar = _bar(progress, "measuring", budget)

        def measure(verdicts) -> list:
            jobs = [Job(prog.ast.source, prog.filename, kernel, dict(prog.sizes, **(sizes or {})), v.text, device,
                        backend, v.choice, v.t_estimate, seed, time_it=bool(gpus), block=v.block) for v in verdicts]
            lines = []
            for record in runner.run(jobs):
                lines.append(tuning_log.append(log_path, workload, record, __version__) if log_path else record)
                if bar:
                    bar.update(1)
            result.measured += lines
            return lines

        _measure_in_rounds(found, records, budget, measure, batch=max(8, 4 * max(gpus, 1)), seeds=result.blocks)
        if bar:
            bar.close()
    result.logged = records + result.measured
    _name_winner(result, found)
    return result


def _name_winner(result: TuneResult, found: SearchResult) -> None:
    """The fastest correct timed record; with nothing timed, the model's best candidate -- of the search or the
    program's own blocks -- that no check has failed (checked or not: a check without timing orders nothing)."""
    timed = [r for r in result.logged if r.get("ok") and r.get("us") is not None]
    if timed:
        best = tuning_log.best(timed)
        result.winner_steps, result.winner_us, result.winner_block = best["steps"], best["us"], best.get("block")
        return
    failed = {r["steps"] for r in result.logged if not r.get("ok")}
    # the model's ranking decides between equal estimates: a block wins only where the model prefers it
    candidates = [v for v in [*found.ranked, *result.blocks] if v.text not in failed]
    if candidates:
        best = min(candidates, key=lambda v: v.t_estimate)
        result.winner_steps, result.winner_estimate = best.text, best.t_estimate
        result.winner_block = next((b.block for b in result.blocks if b.text == best.text), None)


def screened_records(prog, kernel: Optional[str], sizes: Optional[dict], found: SearchResult, blocks: list,
                     records: list) -> tuple[list, list]:
    """(the log's records of this workload that this run's screen passes, [(record, why) of the others]).  A
    log is a file: a record may come from another version of tdsl, or be edited by hand (steps of another
    kernel, an illegal schedule, a launch the backend refuses); such a record must not win (probe CC of the 30th
    session).  A record of a candidate this search or a block already screened is taken as it is; a failed one
    wins nothing and is kept, so that it is not measured again."""
    screened = {v.text for v in [*found.ranked, *blocks]}
    judged: dict = {}  # steps text -> (canonical steps, None) or (None, why): a log repeats a schedule's records
    kept, left = [], []
    for record in records:
        if not record.get("ok") or record["steps"] in screened:
            kept.append(record)
            continue
        if record["steps"] not in judged:
            judged[record["steps"]] = _screen_record(prog, kernel, sizes, found, record["steps"])
        text, why = judged[record["steps"]]
        if text is not None:  # its steps as the schedule prints them (a record edited by hand may hold comments)
            kept.append({**record, "steps": text})
        else:
            left.append((record, why))
    return kept, left


def _screen_record(prog, kernel: Optional[str], sizes: Optional[dict], found: SearchResult,
                   steps_text: str) -> tuple[Optional[str], Optional[str]]:
    """(the steps as the schedule prints them, None) for a log record's steps the screen passes, else (None, why)."""
    from tdsl.compiler.tune.measure import with_steps

    try:
        steps = list(with_steps(prog, steps_text, kernel, sizes)[2].trace.steps)
    except TdslError as err:
        return None, first_line(err)
    verdict = found.screen.judge({}, steps, counted=False)
    return (verdict.text, None) if verdict.accepted else (None, _refusal(verdict))


def program_blocks(prog, kernel: Optional[str], sizes: Optional[dict],
                   found: SearchResult) -> tuple[list[Verdict], list[tuple[str, str]]]:
    """(the program's own schedule blocks for the tuned kernel, replayed at the tuned sizes, that pass the
    screen, [(name, why) of those left out: a block that is illegal on purpose, a counterexample, or one these
    sizes or the target refuse]."""
    name = prog.kernel_name(kernel)
    out, left = [], []
    for block in prog.ast.schedules:
        if block.kernel not in (None, name):
            continue
        try:
            steps = list(prog.schedule(block.name, name, sizes).trace.steps)
        except TdslError as err:
            left.append((block.name, first_line(err)))
            continue
        verdict = found.screen.judge({}, steps, counted=False)
        if not verdict.accepted:
            left.append((block.name, _refusal(verdict)))
        else:
            same = next((v for v in found.ranked if v.text == verdict.text), None)
            verdict.choice = dict(same.choice) if same else {}  # a point of the space keeps its knob values
            verdict.block = block.name
            out.append(verdict)
    return out, left


def first_line(err: TdslError) -> str:
    """The message of a located error without its `file:line:col: error:` head and its source lines."""
    return str(err).splitlines()[0].split(" error: ", 1)[-1]


def _refusal(verdict: Verdict) -> str:
    return f"{verdict.rule}: {verdict.message.splitlines()[0]}"


def _measure_in_rounds(found: SearchResult, records: list, budget: int, measure, batch: int,
                       seeds: tuple = ()) -> None:
    """Spend the budget in rounds: first the `seeds` (the program's own schedule blocks) and the model's best,
    spread over the space (no two alike in all but one knob while others are left).  Then, each round, the
    estimate corrected by what this workload's measurements taught it (compiler/tune/residual.py) ranks what is
    left: the two fastest tilings get their launch-order variants measured (every combination of the
    order-only knobs, once per tiling, at most half a round at a time), up to half the round goes to the
    neighbours of the fastest measured candidates (judged by the screen first), the rest to the corrected
    ranking's best -- so a model that is wrong about a region is corrected by the measurements instead of
    trusted for the whole budget."""
    measured = {r["steps"]: r for r in records}
    seeds = list(dict((v.text, v) for v in seeds if v.text not in measured).values())
    seeded = {v.text for v in seeds}
    fresh = [v for v in found.ranked if v.text not in measured and v.text not in seeded]
    first = (seeds + _spread(fresh, batch))[: min(budget, max(batch, len(seeds)))]
    polished: set = set()  # tilings whose launch orders were queued
    pending: list = []  # their variants not measured yet
    while budget > 0 and first:
        for line in measure(first):
            measured[line["steps"]] = line
        budget -= len(first)
        correction = residual.fit(list(measured.values()))
        score = (lambda v: correction.predicted(v.t_estimate, v.choice)) if correction else (lambda v: v.t_estimate)
        # a seed has no knob values, so no neighbours or launch orders: the knob-space records steer the search
        knobbed = [r for r in measured.values() if r.get("ok") and r.get("choice")]
        fastest = sorted((r for r in knobbed if r.get("us") is not None), key=lambda r: r["us"])[:3] or sorted(
            knobbed, key=lambda r: r.get("t_estimate", 0.0))[:3]
        # the fastest one's neighbours first, in knob order: where the measurements contradict the model, the
        # model's order of the neighbours would walk away from the measured optimum
        near = [v for r in fastest for v in neighbours(found, r["choice"]) if v.text not in measured]
        near = list(dict((v.text, v) for v in near).values())
        rest = sorted((v for v in found.ranked if v.text not in measured), key=score)
        # the launch orders of the fastest tilings, all combinations, once each: their effects combine (grouped
        # order with a persistent launch) in ways the one-knob neighbours and the fitted correction's sum do not
        # show, and the best tiling at one launch order need not be the best at another
        for r in _fastest_tilings(found, measured, POLISHED_TILINGS):
            tiling = _tiling(found, r["choice"])
            if tiling not in polished:
                polished.add(tiling)
                pending += orders(found, r["choice"])
        pending = [v for v in pending if v.text not in measured]
        polish, pending = pending[: batch // 2], pending[batch // 2:]  # at most half a round: the rest waits
        taken = list(dict((v.text, v) for v in polish + near[: batch // 2]).values())
        chosen = {v.text for v in taken}
        first = (taken + _spread([v for v in rest if v.text not in chosen], batch))[: min(budget, batch)]


def _tiling(found: SearchResult, choice: dict) -> str:
    """A choice without its launch-order knobs (what each program computes)."""
    order = {p.name for p in found.sketch.params if p.order_only}
    return ",".join(f"{k}={v}" for k, v in choice.items() if k not in order)


def _fastest_tilings(found: SearchResult, measured: dict, count: int) -> list:
    """The fastest timed record of each of the `count` fastest distinct tilings."""
    out, seen = [], set()
    timed = (r for r in measured.values() if r.get("ok") and r.get("us") is not None and r.get("choice"))
    for r in sorted(timed, key=lambda r: r["us"]):
        tiling = _tiling(found, r["choice"])
        if tiling not in seen:
            seen.add(tiling)
            out.append(r)
        if len(out) == count:
            break
    return out


def _spread(ranked: list, count: int) -> list:
    """The first `count` of the model's ranking, skipping a candidate that differs in one knob only from one
    already taken, as long as others remain (then the skipped ones, in order)."""
    taken, skipped = [], []
    for v in ranked:
        if len(taken) == count:
            break
        close = any(sum(v.choice.get(k) != t.choice.get(k) for k in set(v.choice) | set(t.choice)) <= 1
                    for t in taken)
        (skipped if close else taken).append(v)
    return (taken + skipped)[:count]


def _numbers(sizes: dict) -> dict:
    return {k: v for k, v in sizes.items() if isinstance(v, (int, float))}


def _bar(enabled: bool, what: str, total: Optional[int] = None):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=" candidates", leave=False)
