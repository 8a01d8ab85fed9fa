"""Values passed through memory inside a kernel on the Ascend backends: refused where they are not ordered.

A recurrence (a statement that reads its own earlier elements, compiler/model/recurrences.py) and the statements of
a `for` block pass values through global memory inside one kernel: from one iteration of a serial loop to the next
(`SerialLoop.barrier`) or from one statement to a later one (`Barrier`).  On an Ascend AI core the store (MTE3, or
the vector core's scalar and SIMT stores) and the later load (MTE2) are different pipes.  The printers order them
on the vector cores with a barrier of every pipe (910B: `T.barrier_all()`; 950: `T.ascend_pipe_barrier("PIPE_ALL")`,
AscendC's `asc_sync()`), and the NumPy execution model checks that a core reads back what it changed only after
one.  Values that would pass between the cube and the vector cores that way are refused
(`refuse_cube_recurrences`): the barrier orders one core's pipes, not the cube's stores with the vector cores'
loads.
"""

from __future__ import annotations

from tdsl.compiler.analysis.placement import matrix_statements
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T


def passes_through_memory(kernel: T.TileKernel) -> bool:
    """Whether a kernel stores values that it loads again (a `Barrier`, or a loop with `barrier`)."""
    return any(isinstance(op, T.Barrier) or (isinstance(op, T.SerialLoop) and op.barrier)
               for op in T.walk_ops(kernel.body))


def refuse_cube_recurrences(program: T.TileProgram) -> T.TileProgram:
    """Values through memory inside a kernel with products on the cube are refused (the barrier orders one core's
    pipes, not the cube's stores with the vector cores' loads)."""
    for k in program.kernels:
        cube = matrix_statements(k)
        if cube and passes_through_memory(k):
            raise BackendError(f"{', '.join(sorted(cube))}: a kernel that passes values through global memory (a "
                               f"recurrence, a `for` block or a value read back) computes products on the cube, "
                               f"and the Ascend backends order those stores and loads on the vector cores only; "
                               f"generate it for nvidia (Triton or TileLang), or move the products to a kernel of "
                               f"their own")
    return program
