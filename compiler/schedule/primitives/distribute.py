"""distribute: split one loop around several nodes into one loop per node (loop fission).

Before::                              After ``distribute(Ap.ii)``::

    for tt in 0..4:                       for tt in 0..4:
      for ii in 0..8:                       for ii in 0..8: Ap(tt, ii)
        Ap(tt, ii)                          for ii in 0..8: Bn(tt, ii)
        Bn(tt, ii)

Every new loop keeps the name, the range and the kind of the old one, over the statements of its node (loops
named alike are told apart by their statement: `Ap.ii`, `Bn.ii`).  All instances of the first node now run
before any of the second within one iteration of the loops around, so the step is legal only where no
dependence runs from a later node back to an earlier one across iterations: Bn(ii) may read Ap(ii + 1) after
the fission, but Ap(ii) may not read Bn(ii - 1) (rule dependence, with the two instances).

What it is for: the point loops of a tile fused across statements (`fuse`, then `tile`) are one loop around
several statements, which the backends run serially; distributed, each statement's point loop becomes the lanes
of one tile, the statements run one after another inside the program.  Refused: a loop around a single node, a
loop bound to the grid, run on the host or pipelined, a loop that holds cache buffers (distribute before
caching).
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.schedule.tree import Loop, statements_under
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop
from tdsl.compiler.schedule.primitives.registry import LOOP, arg, primitive


@primitive(arg("loop", LOOP), rank=42)
def distribute(state: State, loop: LoopLike) -> None:
    node, _ = find_loop(state, "distribute", loop)
    if len(node.body) < 2:
        raise ScheduleError("distribute", f"loop {node.name} encloses a single node; there is nothing to distribute")
    for flag, what in ((node.bind, f"bound to grid.{node.bind}"), (node.host, "run on the host"),
                       (node.pipeline, "pipelined")):
        if flag:
            raise ScheduleError("distribute", f"loop {node.name} is {what}; distribute it first")
    if any(buf.at is node for buf in state.tree.buffers):
        raise ScheduleError("distribute", f"loop {node.name} holds cache buffers; distribute before caching")
    parts = [_part(node, child) for child in node.body]
    # the launch configuration stays with the first kernel's loop
    parts[0].warps, parts[0].group, parts[0].persistent = node.warps, node.group, node.persistent
    parent = state.tree.parent_body(node)
    at = parent.index(node)
    parent[at:at + 1] = parts
    check_dependences(state.model, state.deps, state.tree, "distribute")


def _part(node: Loop, child) -> Loop:
    under = statements_under(child)
    return Loop(node.name, {s: list(node.exprs[s]) for s in under}, [child], node.kind)
