"""Tile factors of a schedule block: rewriting its split/tile factors, and `fit`, the largest that fits.

`fit` searches the factor of one split/tile loop (grow by doubling, then bisect) for which the buffer plan
has no capacity violation on the target.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.targets import get_target


def with_factors(block: ast.ScheduleBlock, factors: dict) -> ast.ScheduleBlock:
    """A copy of a schedule block whose split/tile steps producing the named loops use the given factors."""
    used = set()
    steps = []
    for step in block.steps:
        results = [r.name for r in step.results]
        args = list(step.args)
        if step.primitive == "split" and results and results[0] in factors:
            for n, a in enumerate(args):
                if a.keyword == "factor" or (a.keyword is None and n == 1):
                    args[n] = replace(a, value=factors[results[0]])
            used.add(results[0])
        elif step.primitive == "tile" and results:
            positional = [n for n, a in enumerate(args) if a.keyword is None]
            half = len(positional) // 2
            for k, name in enumerate(results[:half]):
                if name in factors and half + k < len(positional):
                    args[positional[half + k]] = replace(args[positional[half + k]], value=factors[name])
                    used.add(name)
        steps.append(replace(step, args=args))
    missing = set(factors) - used
    if missing:
        raise TdslError(f"schedule {block.name} has no split or tile producing loop(s) {', '.join(sorted(missing))}")
    return replace(block, steps=steps)


def current_factor(block: ast.ScheduleBlock, loop: str) -> int:
    for step in block.steps:
        results = [r.name for r in step.results]
        if step.primitive == "split" and results and results[0] == loop:
            for n, a in enumerate(step.args):
                if a.keyword == "factor" or (a.keyword is None and n == 1):
                    return int(a.value)
        if step.primitive == "tile" and loop in results:
            positional = [a for a in step.args if a.keyword is None]
            half = len(positional) // 2
            k = results.index(loop)
            if k < half:
                return int(positional[half + k].value)
    raise TdslError(f"schedule {block.name} has no split or tile producing loop {loop}")


def build_block(prog, block: ast.ScheduleBlock, kernel=None) -> Schedule:
    """The schedule a (rewritten) block describes, applied to the program's model of its kernel."""
    from tdsl.compiler.schedule.schedule import apply_block

    sched = Schedule(prog.model(block.kernel or kernel), block.name)
    return apply_block(sched, block, prog.ast.source, prog.ast.filename)


def fit(prog, schedule: str, target, loop: str, factors: Optional[dict] = None, kernel=None,
        limit: int = 1 << 20) -> Optional[int]:
    """The largest factor of `loop` (a split/tile result) for which the schedule fits the target's capacities."""
    tgt = get_target(target)
    base = with_factors(prog.block(schedule), dict(factors or {}))

    def fits(v: int) -> tuple[bool, int]:
        try:
            sched = build_block(prog, with_factors(base, {loop: v}), kernel)
            kernels = plan_kernels(sched, tgt)
        except TdslError:
            return False, -1
        return not any(k.violations for k in kernels), sum(sum(k.working_set.values()) for k in kernels)

    lo = None
    v = max(1, current_factor(base, loop))
    ok, size = fits(v)
    while ok:  # grow until it stops fitting, or until the tile stops growing (it covers the whole extent)
        lo = v
        if v >= limit:
            return v
        ok2, size2 = fits(2 * v)
        if ok2 and size2 == size:
            return v  # as large as it gets
        v, ok, size = 2 * v, ok2, size2
    hi = v  # does not fit
    if lo is None:
        lo = 0
        while hi > 1:  # shrink until it fits
            half = hi // 2
            if fits(half)[0]:
                lo = half
                break
            hi = half
        if lo == 0:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo
