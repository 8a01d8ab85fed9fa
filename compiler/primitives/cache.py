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
"""

from __future__ import annotations

from ..errors import ScheduleError
from ..legality import check_cache_read, check_cache_write
from ..tree import Buffer, statements_under
from .common import SCOPES, LoopLike, State, find_loop


def cache_read(state: State, tensor: str, scope: str, at: LoopLike) -> None:
    loop = _checked(state, "cache_read", tensor, scope, at)
    readers = [s for s in statements_under(loop) if any(r.tensor == tensor for r in state.model.stmt(s).reads)]
    if not readers:
        raise ScheduleError("cache_read", f"no statement under loop {loop.name} reads {tensor}")
    buf = Buffer(tensor, scope, loop, "read", readers)
    check_cache_read(state.model, state.tree, buf, "cache_read")
    state.tree.buffers.append(buf)


def cache_write(state: State, tensor: str, scope: str, at: LoopLike) -> None:
    loop = _checked(state, "cache_write", tensor, scope, at)
    writers = [s for s in statements_under(loop) if state.model.stmt(s).write.tensor == tensor]
    if not writers:
        raise ScheduleError("cache_write", f"{tensor} is not computed under loop {loop.name}")
    buf = Buffer(tensor, scope, loop, "write", writers)
    check_cache_write(state.model, state.tree, buf, "cache_write")
    state.tree.buffers.append(buf)


def _checked(state: State, primitive: str, tensor: str, scope: str, at: LoopLike):
    if tensor not in state.model.tensors:
        raise ScheduleError(primitive, f"unknown tensor '{tensor}' (tensors: {', '.join(state.model.tensors)})")
    if scope not in SCOPES:
        raise ScheduleError(primitive, f"unknown memory scope '{scope}' (scopes: {', '.join(SCOPES)})")
    if at is None:
        raise ScheduleError(primitive, "say where the buffer lives: at=STATEMENT.LOOP")
    loop, _ = find_loop(state, primitive, at)
    for buf in state.tree.buffers:
        if buf.tensor == tensor and buf.at is loop and buf.kind == primitive.split("_")[1]:
            raise ScheduleError(primitive, f"{tensor} is already cached at loop {loop.name}")
    return loop
