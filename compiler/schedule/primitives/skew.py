"""skew: shift an inner loop by a multiple of an enclosing loop.

Before::                               After ``w = skew(An.j, An.i, 2)``::

    for i in 0..N:                         for i in 0..N:
      for j in 0..N:                         for w in 2*i..2*i+N:       # time coordinate j + 2*i
        An(i, j)                               An(i, w - 2*i)

Each enclosed statement keeps its iterators; only the loop's time coordinate changes, from j to j + f*i; the loop
keeps its name unless the step names it.
Instances with the same i keep their order (the same shift for all of them) and instances with different i
are ordered by i, which comes first: skew never reorders two instances, so it is legal by construction and
skips the dependence check.

What it is for: a dependence of distance (1, -1) in (i, j) becomes (1, f - 1), so after a skew the loops can
be tiled or interchanged where before they could not, and the points of one anti-diagonal (a wavefront) become
the iterations of one loop.  A Gauss-Seidel sweep, which reads its neighbours (i-1, j-1..j+1) and (i, j-1) as
already updated, runs its wavefronts w = 2i + j one after another, each in parallel::

    w = skew(An.j, An.i, 2)  # j -> w = j + 2i: every dependence now has a positive distance in w
    reorder(An, w, i)        # w outside, i inside: the wavefront loop carries every dependence
    host(An.w)               # one launch per wavefront ...
    bind(An.i, grid.x)       # ... over its points in parallel

Refused: `by` not enclosing `loop` (skew an inner loop by an outer one; reorder afterwards to make a
wavefront), fused loops of several dimensions, a loop skewed by one that walks a reduction it does not walk
itself (the output loop would start walking the reduction), a host loop skewed (the launcher's loop keeps its
range).
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.tree import statements_under, walks_reduction
from tdsl.compiler.schedule.primitives.common import (LoopLike, State, check_new_names, find_loop, positive_int,
                                                      single_name)
from tdsl.compiler.schedule.primitives.registry import INT, LOOP, arg, primitive


@primitive(arg("loop", LOOP), arg("by", LOOP, keyword=True, text="STMT.OUTER"),
           arg("factor", INT, text="FACTOR", keyword=True), new_loops=True, rank=45)
def skew(state: State, loop: LoopLike, by: LoopLike, factor: int, names=None) -> str:
    node, stmt = find_loop(state, "skew", loop)
    outer, _ = find_loop(state, "skew", by)
    factor = positive_int("skew", "the factor", factor)
    for named in (node, outer):
        if named.n_dims != 1:
            raise ScheduleError("skew", f"loop {named.name} is a fused loop of {named.n_dims} dimensions; skew "
                                        f"before fusing")
    if node is outer or not any(l is outer for l in state.tree.enclosing_loops(node)):
        raise ScheduleError("skew", f"loop {outer.name} does not enclose loop {node.name}; skew an inner loop by an "
                                    f"outer one (reorder afterwards to bring the skewed loop outside)")
    if node.host:
        raise ScheduleError("skew", f"loop {node.name} runs on the host; skew before host(...)")
    for name in statements_under(node):
        s = state.model.stmt(name)
        if s.is_reduction and walks_reduction(s, outer.exprs[name][0]) and not walks_reduction(s, node.exprs[name][0]):
            raise ScheduleError("skew", f"loop {outer.name} walks the reduction of {name} and loop {node.name} does "
                                        f"not: skewed by it, {node.name} would walk the reduction too; skew by a loop "
                                        f"over the output, or skew a loop of the reduction")
    new_name = single_name("skew", names) or node.name  # the loop keeps its name unless the step names it
    if new_name != node.name:
        check_new_names(state, "skew", [node], [new_name])
    val = isl.Val.int_from_si(node.exprs[stmt][0].get_ctx(), factor)
    node.exprs = {s: [dims[0].add(outer.exprs[s][0].scale_val(val))] for s, dims in node.exprs.items()}
    node.name = new_name
    return new_name

