"""cache_read / cache_write: stage a tensor in on-chip memory for one iteration of a loop.

``cache_read(A, shared, at=C.ko)``: at the start of each iteration of ko,
the region of A that the statements under ko read in that iteration is
copied into a `shared` buffer, and they read the copy::

    for ko:                              for ko:
      for ii, jj, kk: C(.. A[i, k] ..)     A_shared = A[io*64 : +64, ko*32 : +32]   # the tile's box
                                           for ii, jj, kk: C(.. A_shared[..] ..)

``cache_write(C, register, at=C.jo)``: C accumulates into a `register`
buffer for one iteration of jo and the buffer is written back (rounded to
C's dtype) at its end.  Both only annotate the tree; the memory planner
sizes the buffers from the access relations restricted to one iteration.

Legality (rule cache-conflict): a cached input must not be written while
its copy lives, and every update of an element written through a cache
must happen in one iteration of `at` (otherwise a partial value would be
written back).

``dtype=`` gives the copy its own element type.  By default (no dtype) a
copy keeps the program's roundings: a register copy of a bf16 reduction
holds the f32 accumulator and is rounded to bf16 before anything reads it.
A copy whose dtype would skip a rounding (an f32 copy of C read by SiLU
inside the loop) is rule rounding-removed; one that would round values the
program keeps exact (an f8e4m3 copy of bf16 A, a bf16 accumulator) is
rule rounding-added.
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_cache_read, check_cache_write
from tdsl.compiler.legality.rounding import check_buffer_rounding
from tdsl.compiler.schedule.tree import Buffer, statements_under
from tdsl.compiler.schedule.primitives.common import SCOPES, LoopLike, State, find_loop
from tdsl.compiler.schedule.primitives.registry import DTYPE, LOOP, SCOPE, TENSOR, arg, option, primitive

# `at=` always prints (a buffer must say where it lives); `dtype=` only when given.
_CACHE = (arg("tensor", TENSOR), arg("scope", SCOPE, keyword=True),
          option("at", LOOP, None, role="the loop whose every iteration gets its own copy"),
          option("dtype", DTYPE, None, omit_default=True))


@primitive(*_CACHE, rank=90)
def cache_read(state: State, tensor: str, scope: str, at: LoopLike, dtype=None) -> None:
    loop = _checked(state, "cache_read", tensor, scope, at)
    dtype = _dtype("cache_read", dtype)
    readers = [s for s in statements_under(loop) if any(r.tensor == tensor for r in state.model.stmt(s).reads)]
    if not readers:
        raise ScheduleError("cache_read", f"no statement under loop {loop.name} reads {tensor}")
    buf = Buffer(tensor, scope, loop, "read", readers, dtype)
    state.tree.buffers.append(buf)  # placed before the checks, so a rejected step shows what it would compute
    check_cache_read(state.model, state.tree, buf, "cache_read")
    check_buffer_rounding(state.model, state.tree, buf, "cache_read")


@primitive(*_CACHE, rank=100)
def cache_write(state: State, tensor: str, scope: str, at: LoopLike, dtype=None) -> None:
    loop = _checked(state, "cache_write", tensor, scope, at)
    dtype = _dtype("cache_write", dtype)
    writers = [s for s in statements_under(loop) if state.model.stmt(s).write.tensor == tensor]
    if not writers:
        raise ScheduleError("cache_write", f"{tensor} is not computed under loop {loop.name}")
    buf = Buffer(tensor, scope, loop, "write", writers, dtype)
    state.tree.buffers.append(buf)
    check_cache_write(state.model, state.tree, buf, "cache_write")
    check_buffer_rounding(state.model, state.tree, buf, "cache_write")


def _dtype(primitive: str, dtype):
    from tdsl.frontend.ast import DTYPES

    if dtype is None:
        return None
    if dtype not in DTYPES:
        raise ScheduleError(primitive, f"unknown dtype '{dtype}' (dtypes: {', '.join(DTYPES)})")
    return dtype


def _checked(state: State, primitive: str, tensor: str, scope: str, at: LoopLike):
    if tensor not in state.model.tensors:
        raise ScheduleError(primitive, f"unknown tensor '{tensor}' (tensors: {', '.join(state.model.tensors)})")
    if scope not in SCOPES:
        raise ScheduleError(primitive, f"unknown memory scope '{scope}' (scopes: {', '.join(SCOPES)})")
    if at is None:
        raise ScheduleError(primitive, "say where the buffer lives: at=STATEMENT.LOOP")
    loop, _ = find_loop(state, primitive, at)
    if loop.host:
        raise ScheduleError(primitive, f"loop {loop.name} runs on the host, and a buffer lives inside one kernel: "
                                       f"place it at a loop inside")
    for buf in state.tree.buffers:
        if buf.tensor == tensor and buf.at is loop and buf.kind == primitive.split("_")[1]:
            raise ScheduleError(primitive, f"{tensor} is already cached at loop {loop.name}")
    return loop
