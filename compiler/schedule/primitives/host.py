"""host: run a loop on the host, launching the kernels of its body once per iteration.

Before (one kernel: every program would run all the steps)::

    for t in 0..T:                      # serial, in the kernel
      for i in 0..N:  Bn[t, i] = ...
      for i in 0..N:  An[t, i] = ...

After ``host(Ap.t)``, then ``bind(Bn.i, grid.x)`` and ``bind(An.i, grid.x)``::

    for t in 0..T:                      # the launcher's Python loop
      launch kernel 0 (t):  i = program_id(x): Bn[t, i] = ...
      launch kernel 1 (t):  i = program_id(x): An[t, i] = ...

Each node of the loop's body becomes its own kernel, launched once per iteration with the loop's value; the end
of a launch orders everything its programs stored before the next launch reads it, so the loops inside may be
bound to the grid although the steps depend on each other (a time loop whose sweeps are parallel).  Execution
order does not change, so no dependence can break.  Misuses are refused here: a bound or pipelined loop, a loop
inside one the kernel runs (host loops are the outermost loops), a loop that walks a reduction under it (a
launch cannot hold an accumulator for the next one), a loop with cache buffers of its own.
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.tree import statements_under, walks_reduction
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop
from tdsl.compiler.schedule.primitives.registry import LOOP, arg, primitive


@primitive(arg("loop", LOOP), rank=135)
def host(state: State, loop: LoopLike) -> None:
    node, _ = find_loop(state, "host", loop)
    if node.host:
        raise ScheduleError("host", f"loop {node.name} already runs on the host")
    if node.bind:
        raise ScheduleError("host", f"loop {node.name} is bound to grid.{node.bind}; a loop runs either on the grid "
                                    f"or on the host")
    if node.pipeline:
        raise ScheduleError("host", f"loop {node.name} is pipelined; the launcher's loop has no copies to overlap")
    if node.n_dims != 1:
        raise ScheduleError("host", f"loop {node.name} is a fused loop of {node.n_dims} dims; run one loop on the host")
    inside = [outer.name for outer in state.tree.enclosing_loops(node) if not outer.host]
    if inside:
        raise ScheduleError("host", f"loop {node.name} is inside loop {inside[-1]}, which a kernel runs; host loops "
                                    f"are the outermost loops (run {inside[0]} on the host first)")
    for stmt_name in statements_under(node):
        stmt = state.model.stmt(stmt_name)
        if stmt.is_reduction and any(walks_reduction(stmt, pa) for pa in node.exprs[stmt_name]):
            raise ScheduleError("host", f"loop {node.name} walks the reduction of {stmt_name}: its accumulator would "
                                        f"have to live from one launch to the next; run a loop around it on the host")
    if any(buf.at is node for buf in state.tree.buffers):
        raise ScheduleError("host", f"loop {node.name} holds cache buffers; a buffer lives inside one kernel: place "
                                    f"them at a loop inside")
    node.host = True
