"""split: divide one loop into an outer (tile) loop and an inner (point) loop.

Before::                         After ``io, ii = split(C.i, 64)``::

    for i in 0..M:                   for io in 0..ceil(M/64):      # io = floor(i/64)
      C(i, ...)                        for ii in 0..64:            # ii = i mod 64
                                         C(i, ...)                 # when i < M

Each enclosed statement's instance keeps its iterators; only its time
coordinates change: i -> (floor(i/64), i mod 64).  For integers the
lexicographic order of (floor(i/f), i mod f) is the order of i, so no two
instances change order: split is legal by construction and skips the
dependence check.
A factor that does not divide the extent leaves a partial last tile.
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.tree import Loop
from tdsl.compiler.schedule.primitives.common import LoopLike, State, check_new_names, find_loop, positive_int
from tdsl.compiler.schedule.primitives.registry import INT, LOOP, arg, primitive


@primitive(arg("loop", LOOP), arg("factor", INT, text="FACTOR", keyword=True), new_loops=True, rank=10)
def split(state: State, loop: LoopLike, factor: int, names=None) -> tuple[str, str]:
    return split_loop(state, loop, factor, names, "split")


def split_loop(state: State, loop: LoopLike, factor: int, names, step: str) -> tuple[str, str]:
    """The rewrite of `split`, its errors named after `step` (`tile` splits through it)."""
    node, _ = find_loop(state, step, loop)
    factor = positive_int(step, "the factor", factor)
    if node.n_dims != 1:
        raise ScheduleError(step, f"loop {node.name} is a fused loop of {node.n_dims} dimensions; split it before fusing")
    if names is not None and len(names) != 2:
        raise ScheduleError(step, f"split makes two loops (outer, inner); name two, not {len(names)}")
    outer_name, inner_name = names or (f"{node.name}o", f"{node.name}{node.name}")  # i -> io, ii (the chapter's names)
    check_new_names(state, step, [node], [outer_name, inner_name], defaults=names is None)
    outer, inner = split_exprs(node.exprs, factor)
    inner_loop = Loop(inner_name, inner, node.body, "point")
    # The node object becomes the outer loop, so buffers and annotations placed at it stay outermost.
    node.name, node.exprs, node.body, node.kind = outer_name, outer, [inner_loop], "tile"
    return outer_name, inner_name


def split_exprs(exprs: dict, factor: int) -> tuple[dict, dict]:
    outer, inner = {}, {}
    for stmt, (e,) in exprs.items():
        val = isl.Val.int_from_si(e.get_ctx(), factor)
        outer[stmt] = [e.scale_down_val(val).floor()]
        inner[stmt] = [e.mod_val(val)]
    return outer, inner
