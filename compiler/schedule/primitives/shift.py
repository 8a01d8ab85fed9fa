"""shift: move a loop's iterations by a constant, for the statements under it.

Before::                               After ``shift(Bn.i, 1)``::

    for t in 0..T:                         for t in 0..T:
      for i in 0..N: Ap(t, i)                for i in 0..N:     Ap(t, i)
      for i in 0..N: Bn(t, i)                for i in 1..N+1:   Bn(t, i - 1)     # time coordinate i + 1

Each statement keeps its iterators; the loop's time coordinate becomes i + offset for every statement under it.
Alone this changes no order (the loop's iterations keep their order among themselves, and the loop keeps its
place among its siblings), so shift is legal by construction and skips the dependence check.  What it is for
is the step after it: fusing sibling loops whose producer must run ahead of its consumer.  Above, Bn(t, i)
reads Ap(t, i + 1); fused without the shift, Ap(t, i + 1) would run one iteration after its reader and `fuse`
is refused (rule dependence); shifted, Bn(t, i) runs in iteration i + 1, after it, and the fusion is legal::

    shift(Bn.i, 1)
    fuse(Ap.i, Bn.i)           # for i: Ap(t, i); Bn(t, i - 1)

A shifted, fused loop can then be skewed and tiled across time steps (docs/polybench.md).  Refused: an offset
of 0, a loop on the host (the launcher's loop keeps its range), a loop bound to the grid or fused of several
dimensions (shift first).
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.errors import ScheduleError
from tdsl.frontend.limits import MAX_INT
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop
from tdsl.compiler.schedule.primitives.registry import LOOP, OFFSET, arg, primitive


@primitive(arg("loop", LOOP), arg("offset", OFFSET, text="OFFSET", keyword=True), rank=47)
def shift(state: State, loop: LoopLike, offset: int) -> None:
    node, stmt = find_loop(state, "shift", loop)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset == 0 or abs(offset) > MAX_INT:
        raise ScheduleError("shift", f"the offset must be a nonzero integer between -{MAX_INT} and {MAX_INT}, "
                                     f"got {offset!r}")
    if node.n_dims != 1:
        raise ScheduleError("shift", f"loop {node.name} is a fused loop of {node.n_dims} dimensions; shift before "
                                     f"fusing")
    if node.host:
        raise ScheduleError("shift", f"loop {node.name} runs on the host; shift before host(...)")
    if node.bind:
        raise ScheduleError("shift", f"loop {node.name} is bound to grid.{node.bind}; shift before bind(...)")
    node.exprs = {s: [dims[0].add_constant_val(isl.Val.int_from_si(dims[0].get_ctx(), offset))]
                  for s, dims in node.exprs.items()}
