"""launch: set how many warps each program (thread block) of a kernel runs with.

``launch(C, warps=8)`` applies to the kernel that holds statement C (the
top-level loop nest around it).  It changes no execution order, only the
launch configuration the backends read (Triton `num_warps`, TileLang
`threads = 32 * warps`).
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.primitives.common import State, check_stmt, positive_int
from tdsl.compiler.schedule.primitives.registry import INT, STMT, arg, option, primitive


@primitive(arg("stmt", STMT), option("warps", INT, 4), rank=130)
def launch(state: State, stmt: str, warps: int = 4) -> None:
    stmt = check_stmt(state, "launch", stmt)
    warps = positive_int("launch", "warps", warps)
    if warps & (warps - 1) or warps > 32:
        raise ScheduleError("launch", f"warps must be a power of two up to 32, got {warps}")
    path = [loop for loop in state.tree.path(stmt) if not loop.host]  # a host loop's body nodes are the kernels
    if not path:
        raise ScheduleError("launch", f"{stmt} is not inside any loop of a kernel; there is no kernel nest to "
                                      f"configure")
    path[0].warps = warps
