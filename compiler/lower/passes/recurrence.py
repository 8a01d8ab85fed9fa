"""Recurrences on the Ascend backends: refused, naming the reason.

A recurrence (a statement that reads its own earlier elements, compiler/model/recurrences.py) passes them through
global memory from one iteration of a serial loop to the next (`SerialLoop.barrier`).  On an Ascend AI core the
store (MTE3) and the next iteration's load (MTE2) are different pipes, which the printers do not yet order with
flags, and the NumPy execution model does not model that hazard; so neither Ascend backend generates them.
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
                raise BackendError(f"{', '.join(stmts)}: {loop} passes elements of a recurrence from one "
                                   f"iteration to the next through global memory, which the Ascend backends do not "
                                   f"synchronise yet; generate it for nvidia (Triton or TileLang)")
    return program
