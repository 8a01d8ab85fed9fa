"""bind: map a loop to a grid axis (one program / thread block per iteration).

Before::                           After ``bind(C.io, grid.x)``::

    for io in 0..16:                   io = program_id(x)     # 16 programs run concurrently
      for jo: ...                      for jo: ...

The iterations of a bound loop run concurrently and in no particular
order, so the loop may carry no dependence (rule parallel-dependence);
binding a reduction loop splits the reduction into independent partial
results (rule parallel-reduction).  A loop is bound once, and each grid axis to one loop of a kernel;
both are checked here, when the step is applied.
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_parallel
from tdsl.compiler.schedule.tree import walk_loops
from tdsl.compiler.schedule.primitives.common import GRID_AXES, LoopLike, State, find_loop
from tdsl.compiler.schedule.primitives.registry import AXIS, LOOP, arg, primitive


@primitive(arg("loop", LOOP), arg("axis", AXIS, keyword=True), rank=120)
def bind(state: State, loop: LoopLike, axis) -> None:
    node, _ = find_loop(state, "bind", loop)
    axis = _axis(axis)
    if node.bind:  # a second bind would silently replace the first: the schedule says two different things
        raise ScheduleError("bind", f"loop {node.name} is already bound to grid.{node.bind}; a loop runs on one "
                                    f"grid axis, bind it once")
    if node.pipeline:
        raise ScheduleError("bind", f"loop {node.name} is pipelined; a grid axis cannot be pipelined")
    if node.host:
        raise ScheduleError("bind", f"loop {node.name} runs on the host; a loop runs either on the grid or on the host")
    # Each top-level loop nest is its own kernel launch, with its own grid (inside a host loop: each node of its body)
    nest = ([l for l in state.tree.enclosing_loops(node) if not l.host] or [node])[0]
    for other in [nest, *walk_loops(nest.body)]:
        if other.bind == axis and other is not node:
            raise ScheduleError("bind", f"grid.{axis} is already bound to loop {other.name}")
    check_parallel(state.model, state.deps, state.tree, node, "bind")
    node.bind = axis


def _axis(axis) -> str:
    if not isinstance(axis, str):
        raise ScheduleError("bind", f"expected a grid axis (grid.x, grid.y or grid.z), got {axis!r}")
    text = axis
    for prefix in ("grid.", "blockIdx."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if text not in GRID_AXES:
        raise ScheduleError("bind", f"unknown grid axis '{text}'; use grid.x, grid.y or grid.z")
    return text
