"""Values passed through memory inside a kernel on the Ascend backends: refused, naming the reason.

A recurrence (a statement that reads its own earlier elements, compiler/model/recurrences.py) and the statements of
a `for` block pass values through global memory inside one kernel: from one iteration of a serial loop to the next
(`SerialLoop.barrier`) or from one statement to a later one (`Barrier`).  On an Ascend AI core the store (MTE3) and
the later load (MTE2) are different pipes, which the printers do not yet order with flags, and the NumPy execution
model does not model that hazard; so neither Ascend backend generates them.
"""

from __future__ import annotations

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
            if isinstance(op, T.Barrier):
                raise BackendError(f"{', '.join(op.tensors)}: read back from global memory in the kernel that stores "
                                   f"it, which the Ascend backends do not synchronise yet; generate it for nvidia "
                                   f"(Triton or TileLang), or compute the reader in a separate kernel")
    return program
