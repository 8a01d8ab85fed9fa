"""pipeline: software-pipeline a serial loop over `stages` buffers.

``pipeline(C.ko, stages=3)`` lets the copies of iteration ko+1 and ko+2
(its `cache_read` buffers) overlap the compute of iteration ko; each such
buffer is allocated `stages` times.  Execution order of statement
instances does not change, so no dependence can break; the loop must stay
serial (not bound to a grid axis).

``pipeline(l.ko, stages=2, warp_specialize=true)`` asks for FlashAttention-3's
arrangement of the loop (TileLang): a producer warp group copies the loop's
product operands through TMA into a ring of `stages` slots, and the
consumers issue the loop's first matrix product of iteration ko+1 before the
last statement group of iteration ko (the accumulating product and its
rescaling) and wait for it after.  Before / after, per iteration::

    S(ko) m(ko) P(ko) l(ko) U(ko)        S(ko+1) issued, U(ko), S(ko+1) waited, m(ko+1) P(ko+1) l(ko+1) ...

That moves statement instances, so it is legal only when no dependence
relates the last group at iteration ko with the first group at ko+1 (rule
pipeline-overlap, compiler/legality/overlap.py, checked after this and every
later step).  The other backends run the loop as a plain pipelined loop.
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.overlap import overlap_groups
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop, flag, positive_int
from tdsl.compiler.schedule.primitives.registry import FLAG, INT, LOOP, arg, option, primitive


@primitive(arg("loop", LOOP), option("stages", INT, 2),
           option("warp_specialize", FLAG, False, text="true", omit_default=True), rank=110)
def pipeline(state: State, loop: LoopLike, stages: int = 2, warp_specialize: bool = False) -> None:
    node, _ = find_loop(state, "pipeline", loop)
    stages = positive_int("pipeline", "stages", stages)
    if node.bind:
        raise ScheduleError("pipeline", f"loop {node.name} is bound to grid.{node.bind}; only a serial loop can be pipelined")
    node.pipeline = stages
    node.warp_specialize = flag("pipeline", "warp_specialize", warp_specialize)
    if node.warp_specialize:
        overlap_groups(node)  # its form; the rule itself runs in check_invariants, after this step and every later one
