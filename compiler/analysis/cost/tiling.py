"""Tile factors of a schedule block: rewriting its split/tile factors, the factors a schedule really runs with,
and `fit`, the largest factor that fits.

`fit` searches the factor of one split/tile loop (grow by doubling, then bisect) for which the buffer plan
has no capacity violation on the target and, given a backend, the backend can use the tiles
(compiler/analysis/cost/backend_rules.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import islpy as isl

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.analysis.cost.backend_rules import refusal
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import walk_loops
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


def inner_loop(block: ast.ScheduleBlock, loop: str) -> Optional[str]:
    """The point loop made together with `loop` by its split or tile (`ii` of `io, ii = split(C.i, 64)`)."""
    for step in block.steps:
        results = [r.name for r in step.results]
        if step.primitive == "split" and results[:1] == [loop] and len(results) == 2:
            return results[1]
        if step.primitive == "tile" and loop in results[: len(results) // 2]:
            return results[len(results) // 2 + results.index(loop)]
    return None


def effective_factors(block: ast.ScheduleBlock, sched: Schedule, factors: dict) -> dict:
    """The factors the schedule really runs with: a factor past the extent of the loop it splits gives one tile
    of the whole loop (io = floor(i/8192) over 4096 values is io = floor(i/4096)), so it counts as that extent:
    the number of values the split's point loop takes (never more than the factor: a later skew may widen it)."""
    return {name: min(factor, _point_values(sched, inner_loop(block, name)) or factor)
            for name, factor in factors.items()}


def _point_values(sched: Schedule, name: Optional[str]) -> Optional[int]:
    """How many values the loop `name` takes (the most over its statements); None if it is gone or unbounded."""
    loop = next((l for l in walk_loops(sched.tree.body) if l.name == name), None)
    if loop is None or loop.n_dims != 1:
        return None
    most = 0
    for stmt, (pa,) in loop.exprs.items():
        values = isl.Map.from_pw_aff(pa).intersect_domain(sched.model.stmt(stmt).domain).range()
        lo, hi = values.dim_min_val(0), values.dim_max_val(0)
        if not (lo.is_int() and hi.is_int()):
            return None
        most = max(most, hi.to_python() - lo.to_python() + 1)
    return most or None


def build_block(prog, block: ast.ScheduleBlock, kernel=None) -> Schedule:
    """The schedule a (rewritten) block describes, applied to the program's model of its kernel."""
    from tdsl.compiler.schedule.schedule import apply_block

    sched = Schedule(prog.model(prog.block_kernel(block, kernel)), block.name)
    return apply_block(sched, block, prog.ast.source, prog.ast.filename)


def fit(prog, schedule: str, target, loop: str, factors: Optional[dict] = None, kernel=None,
        limit: int = 1 << 20, backend: Optional[str] = None) -> Optional[int]:
    """The largest factor of `loop` (a split/tile result) for which the schedule fits the target's capacities
    and, with `backend` (a key of compiler/lower/pipeline.BACKENDS), for which that backend can use the tiles.
    A factor past the loop's extent is the extent (`effective_factors`), as `sweep` and `tdsl cost --fit` say."""
    base = with_factors(prog.block(schedule), dict(factors or {}))
    found = _largest_fitting(prog, base, get_target(target), loop, kernel, limit, backend)
    if found is None:
        return None
    block = with_factors(base, {loop: found})
    return effective_factors(block, build_block(prog, block, kernel), {loop: found})[loop]


def _largest_fitting(prog, base: ast.ScheduleBlock, tgt, loop: str, kernel, limit: int,
                     backend: Optional[str]) -> Optional[int]:
    """The search of `fit`: double while it fits and the tiles still grow, then bisect."""

    def fits(v: int) -> tuple[bool, int]:
        try:
            sched = build_block(prog, with_factors(base, {loop: v}), kernel)
            kernels = plan_kernels(sched, tgt)
        except TdslError:
            return False, -1
        ok = not any(k.violations for k in kernels)
        if ok and backend is not None:
            ok = refusal(sched, tgt, backend, kernels) is None
        return ok, sum(sum(k.working_set.values()) for k in kernels)

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
