"""launch: set how many warps each program (thread block) of a kernel runs with, and the order its programs start in.

``launch(C, warps=8)`` applies to the kernel that holds statement C (the
top-level loop nest around it).  It changes no execution order, only the
launch configuration the backends read (Triton `num_warps`, TileLang
`threads = 32 * warps`).

``launch(C, warps=8, group=8)`` also starts the programs of grid.x x grid.y
in groups of 8 values of grid.x: within a group grid.x varies fastest, then
grid.y sweeps its whole range, then the next group ("grouped ordering", L2
rasterisation).  The programs resident together then load fewer distinct
operand tiles (a GEMM's A row panels and W column panels), which L2 serves
to the others.  Programs of a grid run in no particular order, so this is
legal whenever binding was; it needs a kernel with loops bound to grid.x and
grid.y.  Before / after, programs in start order for a 4 x 3 grid, group=2::

    (0,0) (1,0) (2,0) (3,0) (0,1) ...        (0,0) (1,0) (0,1) (1,1) (0,2) (1,2) (2,0) (3,0) ...

``launch(C, warps=8, group=8, persistent=true)`` launches one program per
multiprocessor (at most one per tile), each walking the tiles of the grid in
that order, a stride of the programs' count apart: the kernel's programs are
the same tiles, run in sequence by fewer programs, so this too is legal
whenever binding was (it needs a loop bound to the grid).  Triton generates
it (`tl.range(..., flatten=True)` over the tiles, on the H200 the faster
GEMM: benchmarks/RESULTS.md); the other backends launch one program per tile
and say so in a comment.
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.primitives.common import State, check_stmt, flag, positive_int
from tdsl.compiler.schedule.primitives.registry import FLAG, INT, STMT, arg, option, primitive


@primitive(arg("stmt", STMT), option("warps", INT, 4), option("group", INT, 1, omit_default=True),
           option("persistent", FLAG, False, text="true", omit_default=True), rank=130)
def launch(state: State, stmt: str, warps: int = 4, group: int = 1, persistent: bool = False) -> None:
    stmt = check_stmt(state, "launch", stmt)
    warps = positive_int("launch", "warps", warps)
    if warps & (warps - 1) or warps > 32:
        raise ScheduleError("launch", f"warps must be a power of two up to 32, got {warps}")
    path = [loop for loop in state.tree.path(stmt) if not loop.host]  # a host loop's body nodes are the kernels
    if not path:
        raise ScheduleError("launch", f"{stmt} is not inside any loop of a kernel; there is no kernel nest to "
                                      f"configure")
    path[0].warps = warps
    group = positive_int("launch", "group", group)
    if group > 1:
        axes = {loop.bind for loop in path if loop.bind}
        if not {"x", "y"} <= axes:
            raise ScheduleError("launch", f"group={group} orders the programs of grid.x x grid.y, but the kernel of "
                                          f"{stmt} binds {', '.join(sorted(f'grid.{a}' for a in axes)) or 'no loop'}; "
                                          f"bind loops to grid.x and grid.y first")
    path[0].group = group if group > 1 else None
    persistent = flag("launch", "persistent", persistent)
    if persistent and not any(loop.bind for loop in path):
        raise ScheduleError("launch", f"persistent=true walks the programs of the kernel's grid, but the kernel of "
                                      f"{stmt} binds no loop to the grid; bind one first")
    path[0].persistent = persistent
