"""`tdsl fuse PROG`: try every producer -> consumer fusion of a program and say which are legal, and why not.

For each pair of statements where one reads what the other writes (a flow dependence), every way tdsl has
to fuse them is applied to the base schedule (program order, or `--schedule NAME`) and checked exactly:

* ``compute_inline(P)``                       substitute the producer into the consumer;
* ``reverse_compute_at(C, P.L)``              the consumer inside each loop L of the producer, outermost first;
* ``compute_at(P, C.L)``                      the producer inside each loop L of the consumer;
* ``fuse(P.L, C.L)``                          sibling loop fusion, one level deeper at a time.

Each attempt is reported as ``fused`` (the legality checks passed), ``rejected`` (a legality rule, with its
counterexample) or ``n/a`` (the primitive does not apply, with the reason).  Unlike a heuristic "why no fuse"
log, nothing is guessed: a rejection is a proof that the fusion changes the result, and its counterexample names
the two statement instances whose order it breaks.

Evidence: every attempt is also replayed at small sizes (each integer size at most 8) and run in the reference
interpreter on random inputs: a fused schedule must give bit-identical outputs (unless a reduction declares
`combine reassoc` / `deterministic`), a rejected one is executed as it would run, to show the change.  With
``--target T`` each legal fusion is also handed to T's code generator (at the small sizes, so untiled loops
fit in one tile) to say whether the backend can generate it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.errors import LegalityError, ScheduleError
from tdsl.compiler.schedule.schedule import Schedule

SMALL = 8  # integer sizes are capped at this for the interpreter evidence and the code generation check


@dataclass
class Attempt:
    call: str  # `reverse_compute_at(Y, C.j)`
    verdict: str  # fused | rejected | n/a
    note: str = ""  # rule + detail, or the reason it does not apply
    lines: list[str] = field(default_factory=list)  # counterexample, evidence, backend
    after: str = ""  # steps applied first (progressive sibling fusion)
    depth: int = 0  # loops shared by producer and consumer when fused
    error: Optional[LegalityError] = None


@dataclass
class Edge:
    producer: str
    consumer: str
    tensor: str
    attempts: list[Attempt] = field(default_factory=list)


def report(prog, kernel: Optional[str] = None, schedule: Optional[str] = None, target: Optional[str] = None,
           sizes: Optional[dict] = None, evidence: bool = True, seed: int = 0) -> str:
    if target is not None:
        from tdsl.compiler.targets import device_name

        device_name(target)  # an unknown target is refused before any work
    base = prog.schedule(schedule, kernel=kernel, sizes=sizes)
    small = _Small(prog, base, kernel, schedule, sizes) if evidence or target else None
    edges = _edges(base)
    lines = [
        f"fusion report: {prog.filename}, kernel {base.model.name}, from "
        f"{'schedule ' + schedule if schedule else 'program order'}",
    ]
    if small is not None and small.error is None:
        what = "interpreter" if evidence else ""
        if target:
            what = f"{what} and {target} code generation" if what else f"{target} code generation"
        lines.append(f"evidence: {what} at {small.size_text} (seed {seed})")
    elif small is not None:
        lines.append(f"evidence: none ({small.error})")
    lines.append(f"{len(edges)} producer -> consumer edge{'s' * (len(edges) != 1)}")
    explanations: dict[tuple[str, str], None] = {}
    for edge in edges:
        _try_all(base, edge)
        if small is not None and small.error is None:
            for attempt in edge.attempts:
                small.evidence(attempt, evidence, target, seed)
        lines.append("")
        lines.extend(_edge_text(base, edge))
        for a in edge.attempts:
            if a.error is not None:
                explanations[(a.error.rule, a.error.explanation)] = None
    if explanations:
        lines.append("")
        lines.append("rules:")
        for rule, why in explanations:
            lines.append(f"  {rule}: {why}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the attempts


def _edges(base: Schedule) -> list[Edge]:
    order = {s.name: n for n, s in enumerate(base.model.stmts)}
    seen = {}
    for dep in base.deps:
        if dep.kind == "flow" and dep.src != dep.dst and (dep.src, dep.dst) not in seen:
            seen[(dep.src, dep.dst)] = Edge(dep.src, dep.dst, dep.tensor)
    return sorted(seen.values(), key=lambda e: (order[e.producer], order[e.consumer]))


def _try_all(base: Schedule, edge: Edge) -> None:
    p, c = edge.producer, edge.consumer
    tree = base.tree
    _attempt(base, edge, f"compute_inline({p})", lambda s: s.compute_inline(p), depth=99)
    for depth, loop in enumerate(tree.path(p), start=1):
        _attempt(base, edge, f"reverse_compute_at({c}, {p}.{loop.name})",
                 lambda s, l=loop.name: s.reverse_compute_at(c, f"{p}.{l}"), depth=depth)
    for depth, loop in enumerate(tree.path(c), start=1):
        _attempt(base, edge, f"compute_at({p}, {c}.{loop.name})",
                 lambda s, l=loop.name: s.compute_at(p, f"{c}.{l}"), depth=depth)
    # Sibling fusion, one level deeper at a time, while it stays legal.
    done: list[tuple[str, str]] = []
    for depth in range(1, min(len(tree.path(p)), len(tree.path(c))) + 1):
        trial = base.copy()
        try:
            for a, b in done:
                trial.fuse(a, b)
            pa, ca = trial.tree.path(p), trial.tree.path(c)
            first, second = f"{p}.{pa[depth - 1].name}", f"{c}.{ca[depth - 1].name}"
        except (ScheduleError, LegalityError, IndexError):
            break
        if pa[depth - 1] is ca[depth - 1]:
            continue  # one loop already (the base schedule shares it): try one level deeper
        if pa[depth - 1].name != ca[depth - 1].name:
            break  # loops over different dimensions: fusing them by position is not a producer-consumer fusion
        after = ", ".join(f"fuse({a}, {b})" for a, b in done)
        attempt = _attempt(base, edge, f"fuse({first}, {second})",
                           lambda s, f=first, g=second, prev=list(done): [s.fuse(a, b) for a, b in prev + [(f, g)]],
                           depth=depth, after=after)
        if attempt.verdict != "fused":
            break
        done.append((first, second))


def _attempt(base: Schedule, edge: Edge, call: str, apply, depth: int = 0, after: str = "") -> Attempt:
    trial = base.copy()
    try:
        apply(trial)
        attempt = Attempt(call, "fused", depth=depth, after=after)
        attempt.schedule = trial
    except LegalityError as err:
        attempt = Attempt(call, "rejected", f"[{err.rule}] {err.detail}", after=after, error=err)
        attempt.lines.append(f"counterexample: {err.counterexample}")
    except ScheduleError as err:
        attempt = Attempt(call, "n/a", err.message, after=after)
    except TdslError as err:  # any other refusal of the step: it does not apply here
        attempt = Attempt(call, "n/a", str(err).splitlines()[0], after=after)
    attempt.apply = apply
    edge.attempts.append(attempt)
    return attempt


# ---------------------------------------------------------------- evidence at small sizes


class _Small:
    """The program again with every integer size capped at SMALL, and the base schedule replayed on it."""

    def __init__(self, prog, base: Schedule, kernel, schedule, sizes):
        from tdsl.compiler.driver.api import load

        self.error = None
        model = base.model
        capped = {k: min(v, SMALL) for k, v in model.sizes.items()
                  if isinstance(v, int) and not isinstance(v, bool)}
        capped.update({k: SMALL for k in model.params})
        self.size_text = ", ".join(f"{k}={v}" for k, v in capped.items()) or "the program's sizes"
        try:
            self.prog = load(prog.filename, sizes=capped)
            self.kernel = kernel
            self.base = self.prog.schedule(schedule, kernel=kernel)
            self.original = self.prog.schedule(None, kernel=kernel)
            from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, random_inputs

            self._interpret, self._random, self._start = interpret, random_inputs, program_order_inputs
        except (TdslError, OSError, ValueError) as err:
            self.error = f"the program does not load at {getattr(self, 'size_text', 'small sizes')}: {err}"
        # Every attempt is compared with the same program-order run, and several attempts often build the
        # same schedule (compute_at, reverse_compute_at and fuse of one edge): run each of them only once.
        self._references: dict = {}  # (seed, scale) -> (inputs, program-order outputs)
        self._runs: dict = {}  # (model id, time map text, seed, scale) -> (model, outputs)

    def evidence(self, attempt: Attempt, run: bool, target: Optional[str], seed: int) -> None:
        if attempt.verdict == "n/a":
            return
        trial = self.base.copy()
        try:
            attempt.apply(trial)
            state, verdict = trial.state, "fused"
        except LegalityError as err:
            state, verdict = err.rejected, "rejected"
        except TdslError as err:  # a ScheduleError, or another refusal at the small sizes
            attempt.lines.append(f"at {self.size_text}: {err}")
            return
        if verdict != attempt.verdict:
            attempt.lines.append(f"at {self.size_text} the step is {verdict} (sizes matter here)")
        if run and state is not None:
            attempt.lines.append("interpreter: " + self._compare(state, seed, verdict))
        if target and verdict == "fused":
            attempt.lines.append(f"{target}: " + self._generate(trial, target))

    def _reference(self, seed: int, scale: float, scheduled) -> tuple[dict, dict]:
        """Random inputs and the program-order outputs on them that a run of the `scheduled` model is compared
        with (its outputs stored in inputs start from their values), computed once per (seed, scale, storage)."""
        stored = tuple(sorted((t.name, t.stored_in) for t in scheduled.tensors.values() if t.stored_in))
        key = (seed, scale, stored)
        if key not in self._references:
            model = self.original.model
            inputs = self._random(model, seed, scale)
            start = self._start(scheduled, inputs)
            self._references[key] = inputs, self._interpret(model, self.original.time_map(), start)
        return self._references[key]

    def _run(self, state, seed: int, scale: float, inputs: dict) -> dict:
        """The outputs of `state` on the inputs of (seed, scale); equal schedules of one model run once."""
        time_map = state.tree.union_map(state.model)
        key = (id(state.model), time_map.to_str(), seed, scale)
        if key not in self._runs:  # the model is kept in the value, so its id is not reused meanwhile
            self._runs[key] = state.model, self._interpret(state.model, time_map, inputs)
        return self._runs[key][1]

    def _diffs(self, state, seed: int, scale: float) -> list[str]:
        inputs, want = self._reference(seed, scale, state.model)
        got = self._run(state, seed, scale, inputs)
        diffs = []
        for t in self.original.model.outputs():
            a, b = want[t.name], got[t.name]
            if not np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)):
                fa, fb = a.astype(np.float32), b.astype(np.float32)
                bad = int(np.sum(~((fa == fb) | (np.isnan(fa) & np.isnan(fb)))))
                diffs.append(f"{t.name} differs in {bad} of {a.size} elements")
        return diffs

    def _compare(self, state, seed: int, verdict: str) -> str:
        from tdsl.compiler.model.dependences import reorders

        tries = [(seed, 1.0)] if verdict == "fused" else [(seed, 1.0), (seed + 1, 1.0), (seed, 30.0), (seed + 1, 30.0), (seed, 100.0)]
        try:
            for n, (s, scale) in enumerate(tries):
                diffs = self._diffs(state, s, scale)
                if diffs:
                    break
        except (ValueError, IndexError) as err:
            return f"cannot run it ({err})"
        if diffs and n:
            diffs[-1] += f" (seed {s}, inputs x{scale:g})"
        if not diffs:
            if verdict == "rejected":
                return (f"same outputs on {len(tries)} random inputs: the broken order shows only on other values "
                        f"(or is hidden by a later step)")
            return "bit-identical to program order"
        declared = [s.combine for s in state.model.stmts if reorders(s)]
        if verdict == "fused" and declared:
            return "; ".join(diffs) + f" (allowed: a reduction declares {declared[0]})"
        return "; ".join(diffs) + (" -- the rejected step changes the result" if verdict == "rejected" else
                                   " -- MISMATCH: a legal step changed the result")

    def _generate(self, trial: Schedule, target: str) -> str:
        from tdsl.compiler.driver import generate as codegen

        try:
            codegen.generate_schedule(self.prog, trial, target=target)
        except TdslError as err:
            return f"cannot be generated: {getattr(err, 'reason', None) or err}"
        except Exception as err:  # noqa: BLE001 - a backend crash is reported, not hidden
            return f"code generation failed: {type(err).__name__}: {err}"
        return "generated"


# ---------------------------------------------------------------- text


def _edge_text(base: Schedule, edge: Edge) -> list[str]:
    p = base.model.stmt(edge.producer)
    what = f"{p.reduce_op} over {', '.join(p.red_iters)}, accum {p.accum_dtype}, store {p.dtype}" if p.is_reduction \
        else f"elementwise, store {p.dtype}"
    if p.is_reduction and p.combine:
        what += f", combine {p.combine}"
    out = [f"{edge.producer} -> {edge.consumer}: {edge.consumer} reads {edge.tensor} ({edge.producer}: {what})"]
    width = max(len(a.call) for a in edge.attempts) + 2
    for a in edge.attempts:
        note = a.note
        if a.after:
            note = (note + "  " if note else "") + f"(after {a.after})"
        lines = list(a.lines)
        if not note and lines:  # a legal fusion: its evidence fits on the same line
            note = lines.pop(0)
        out.append(f"  {a.verdict:<9}{a.call:<{width}}{note}".rstrip())
        for line in lines:
            out.append(f"  {'':<9}  {line}")
    out.append("  => " + _summary(edge))
    return out


def _summary(edge: Edge) -> str:
    fused = [a for a in edge.attempts if a.verdict == "fused"]
    if not fused:
        return "not fusable: every attempt is rejected or does not apply"
    generated = [a for a in fused if not any(": cannot be generated" in l or "generation failed" in l
                                             for l in a.lines)]
    pick = max(generated or fused, key=lambda a: a.depth)
    if pick.call.startswith("compute_inline"):
        return f"deepest fusion: {pick.call} ({edge.producer} is computed inside {edge.consumer}, no buffer)"
    return f"deepest fusion: {pick.call} (shares {pick.depth} loop{'s' * (pick.depth != 1)})"
