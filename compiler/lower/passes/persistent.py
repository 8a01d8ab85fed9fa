"""Triton: a persistent kernel (`launch(persistent=true)`) must fit in shared memory with its stored tiles.

The schedule's buffers were checked against the device's shared memory when the program was lowered
(compiler/analysis/buffer_plan.py).  A persistent kernel needs more: while one program stores a tile, the operands
of its next tile are already being copied in (the walk is flattened so that they are), so the tile Triton passes
through shared memory on its way out cannot reuse the operands' buffers as it does in a kernel that stores once
(`tma.persistent_bytes`, measured on the H200).  A kernel for which that does not fit is refused, naming what to
change, instead of failing in Triton's compiler.  At fixed sizes the judgement shared by every generated kernel
(compiler/analysis/cost/backend_rules.py `generated_overflow`, in pipeline.with_stages) refuses such a kernel
first; this pass decides for kernels whose sizes come at run time, which that judgement cannot plan.

    program = refuse_persistent_overflow(program)
"""

from __future__ import annotations

from dataclasses import dataclass

from tdsl.compiler.analysis.buffer_records import CapacityError, Violation
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.tma import (SHARED_DEVICE, SHARED_PER_BLOCK, barrier_bytes, persistent_bytes,
                                            planned_shared, shared_need)


@dataclass
class PersistentOverflow(Violation):
    """Shared memory a persistent kernel needs beyond its planned buffers (a capacity violation like theirs)."""

    reason: str = ""

    def text(self) -> str:
        return f"kernel {self.kernel}: {self.reason}"


def refuse_persistent_overflow(program: T.TileProgram) -> T.TileProgram:
    """CapacityError (rule capacity, scope shared) for a persistent kernel whose stored tiles do not fit."""
    for k in program.kernels:
        if not k.persistent:
            continue
        need = shared_need(k)
        if need > SHARED_PER_BLOCK:
            planned, tiles, barriers = planned_shared(k), persistent_bytes(k), barrier_bytes(k)
            reason = (f"launched persistently (launch persistent=true), each program keeps the tile it stores in "
                      f"shared memory ({tiles:,} B) beside the next tile's operand buffers ({planned:,} B"
                      f"{f' and {barriers} B of barriers' if barriers else ''}): {need:,} B, more than the "
                      f"{SHARED_PER_BLOCK:,} B a block may have; use fewer pipeline stages or smaller tiles, or "
                      f"launch it without persistent=true")
            violation = PersistentOverflow(k.name, "shared", need, SHARED_PER_BLOCK, [], reason=reason)
            raise CapacityError(SHARED_DEVICE, [violation])  # the pipeline names the device compiled for
    return program
