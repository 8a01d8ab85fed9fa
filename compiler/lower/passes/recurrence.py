"""Values passed through memory inside a kernel on the Ascend backends: refused where they are not ordered.

A recurrence (a statement that reads its own earlier elements, compiler/model/recurrences.py) and the statements of
a `for` block pass values through global memory inside one kernel: from one iteration of a serial loop to the next
(`SerialLoop.barrier`) or from one statement to a later one (`Barrier`).  On an Ascend AI core the store (MTE3) and
the later load (MTE2) are different pipes.  The 910B printer orders them on the vector cores with
`T.barrier_all()`, and its NumPy execution model checks that a core reads back what it stored only after one;
values that would pass between the cube and the vector cores that way are refused (`refuse_cube_recurrences`).
The 950 printer does not order them (`refuse_recurrences`).
"""

from __future__ import annotations

from tdsl.compiler.analysis.placement import matrix_statements
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T


def refuse_recurrences(program: T.TileProgram) -> T.TileProgram:
    for k in program.kernels:
        for op in T.walk_ops(k.body):
            if isinstance(op, T.SerialLoop) and op.barrier:
                stmts = sorted({o.stmt for o in T.walk_ops(op.body) if hasattr(o, "stmt")})
                loop = op.note.split(":")[0] if op.note.startswith("loop ") else f"loop {op.var}"  # the schedule's name
                raise BackendError(f"{', '.join(stmts)}: {loop} passes values from one iteration to the next "
                                   f"through global memory (a recurrence, or a `for` block), which the Ascend "
                                   f"backends do not synchronise yet; generate it for nvidia (Triton or TileLang)")
            if isinstance(op, T.Barrier) and op.overwrites:
                raise BackendError(f"{', '.join(op.overwrites)}: overwritten in place by the kernel that reads it, "
                                   f"after other statements read it, which the Ascend backends do not synchronise "
                                   f"yet; generate it for nvidia (Triton or TileLang), or store the output in an "
                                   f"array of its own (leave out store_in / fold_storage)")
            if isinstance(op, T.Barrier):
                raise BackendError(f"{', '.join(op.tensors)}: read back from global memory in the kernel that stores "
                                   f"it, which the Ascend backends do not synchronise yet; generate it for nvidia "
                                   f"(Triton or TileLang), or compute the reader in a separate kernel")
    return program


def passes_through_memory(kernel: T.TileKernel) -> bool:
    """Whether a kernel stores values that it loads again (a `Barrier`, or a loop with `barrier`)."""
    return any(isinstance(op, T.Barrier) or (isinstance(op, T.SerialLoop) and op.barrier)
               for op in T.walk_ops(kernel.body))


def refuse_cube_recurrences(program: T.TileProgram) -> T.TileProgram:
    """The 910B: values through memory inside a kernel with products on the cube are refused (the barrier orders
    one core's pipes, not the cube's stores with the vector cores' loads)."""
    for k in program.kernels:
        cube = matrix_statements(k)
        if cube and passes_through_memory(k):
            raise BackendError(f"{', '.join(sorted(cube))}: a kernel that passes values through global memory (a "
                               f"recurrence, a `for` block or a value read back) computes products on the cube, "
                               f"and ascend-910b orders those stores and loads on the vector cores only; generate "
                               f"it for nvidia (Triton or TileLang), or move the products to a kernel of their own")
    return program
