"""pipeline: software-pipeline a serial loop over `stages` buffers.

``pipeline(C.ko, stages=3)`` lets the copies of iteration ko+1 and ko+2
(its `cache_read` buffers) overlap the compute of iteration ko; each such
buffer is allocated `stages` times.  Execution order of statement
instances does not change, so no dependence can break; the loop must stay
serial (not bound to a grid axis).
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop, positive_int
from tdsl.compiler.schedule.primitives.registry import INT, LOOP, arg, option, primitive


@primitive(arg("loop", LOOP), option("stages", INT, 2), rank=110)
def pipeline(state: State, loop: LoopLike, stages: int = 2) -> None:
    node, _ = find_loop(state, "pipeline", loop)
    stages = positive_int("pipeline", "stages", stages)
    if node.bind:
        raise ScheduleError("pipeline", f"loop {node.name} is bound to grid.{node.bind}; only a serial loop can be pipelined")
    node.pipeline = stages
