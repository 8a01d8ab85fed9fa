"""Buffer plan: the on-chip footprint of every buffer a schedule creates, from isl access relations.

A `cache_read(A, shared, at=C.ko)` buffer holds the region of A that the
statements under `ko` read in one iteration of `ko`: the access relation
restricted to one iteration (loop values -> tensor elements), boxed per
dimension.  A `cache_write(C, register, at=C.jo)` buffer holds the region C
writes in one iteration of `jo`, in the accumulator's dtype for a reduction
(the chapter's 64x64 FP32 accumulator: 16 KiB).  A buffer at a pipelined
loop is allocated once per stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from .errors import BackendError
from .schedule import Schedule
from .tree import Buffer, pw_affs_to_map

DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f8e4m3": 1}


@dataclass
class PlannedBuffer:
    tensor: str
    scope: str
    kind: str  # read | write
    loop: str  # allocated for one iteration of this loop
    shape: list[int]
    dtype: str
    stages: int
    stmts: list[str]

    @property
    def bytes_per_copy(self) -> int:
        n = DTYPE_BYTES[self.dtype]
        for d in self.shape:
            n *= d
        return n

    @property
    def bytes(self) -> int:
        return self.bytes_per_copy * self.stages


def plan(schedule: Schedule) -> list[PlannedBuffer]:
    return [_plan_buffer(schedule, buf) for buf in schedule.tree.buffers]


def _plan_buffer(schedule: Schedule, buf: Buffer) -> PlannedBuffer:
    model, tree = schedule.model, schedule.tree
    region = None
    for stmt_name in buf.stmts:
        stmt = model.stmt(stmt_name)
        loops = tree.path(stmt_name)
        upto = loops[: loops.index(buf.at) + 1]
        prefix = pw_affs_to_map([d for l in upto for d in l.exprs[stmt_name]], stmt.domain)
        accesses = [a.relation for a in stmt.reads if a.tensor == buf.tensor] if buf.kind == "read" else [stmt.write.relation]
        for rel in accesses:
            touched = prefix.reverse().apply_range(rel)  # loop values -> elements touched in that iteration
            region = touched if region is None else region.union(touched)
    shape = []
    for d in range(region.dim(isl.dim_type.out)):
        span = region.dim_max(d).sub(region.dim_min(d)).coalesce().max_val()
        if not span.is_int():
            raise BackendError(f"buffer of {buf.tensor} at loop {buf.at.name} has no fixed size along dimension {d}")
        shape.append(span.to_python() + 1)
    dtype = model.tensors[buf.tensor].dtype
    if buf.kind == "write":
        writer = model.stmt(buf.stmts[0])
        dtype = writer.accum_dtype if writer.is_reduction else writer.dtype
    stages = buf.at.pipeline or 1
    return PlannedBuffer(buf.tensor, buf.scope, buf.kind, buf.at.name, shape, dtype, stages, list(buf.stmts))


def shared_bytes(buffers: list[PlannedBuffer], kernel_stmts: set) -> int:
    """Shared-memory bytes of the buffers used by one kernel's statements."""
    return sum(b.bytes for b in buffers if b.scope == "shared" and set(b.stmts) & kernel_stmts)
