"""Triton: which product operand loads and which tile stores go through TMA tensor descriptors.

On Hopper a tile can be copied between global and shared memory by the tensor memory accelerator (TMA) instead
of by every thread's pointer loads: Triton's `desc.load([offsets])` / `desc.store([offsets], value)` on a
`TensorDescriptor` the launcher makes (a tensor's base, shape, strides and the box one copy moves).  The copy
clips at the tensor's edges and fills what lies outside with zeros, so it can stand for a load or store exactly
when its mask is the tensor's bounds and nothing else.  On the H200 the generated GEMM of
benchmarks/programs/gemm_bf16.tdsl gains 1.4-2.9 % (benchmarks/RESULTS.md, "TMA tensor descriptors for the
GEMM"); descriptors made in the kernel instead (`tl.make_tensor_descriptor`) lost 2-8 % there.

    program = mark_descriptors(program)   # Load.box, Compute.store_box / AccFinish.store_box

A load gets a box when it is a product operand (a `Load` of a `Dot`; hoisted operands stay pointer loads),
reads a 2-D tile of a 2-D input whose indices are the tile's two iterators (in either order: a transposed
operand is read as stored and transposed in registers), its mask is only the tensor's bounds
(`Load.mask_is_bounds`) with zero outside, and the tensor is one TMA can describe (`_describable`).  A store
gets one when it writes a 2-D tile of an output at the tile's two iterators, its mask excludes no element
inside the tensor (`unclipped == ()`, compiler/lower/passes/store_masks.py), the kernel does not also read
that output (a TMA store is not ordered with the same program's pointer loads), and the output is describable.

What is describable (the TMA's rules, checked here on constant sizes; a run-time size keeps pointers): a
storage dtype of 2 or 4 bytes (bf16, f16, f32; E4M3 keeps its software paths under the interpreter), the
tensor's own layout (not folded, not stored in another array), the innermost dimension contiguous and every
other stride a multiple of 16 bytes, every box dimension at most 256 elements and the box's innermost
dimension at least 16 bytes.  The launcher makes each descriptor per call, from the tensor it passes anyway
(an input whose address is not 16-byte aligned is copied first; an unaligned output is refused there).

Every other backend, and the interpreter, ignore the fields: they only mean something to the Triton printer.
"""

from __future__ import annotations

import dataclasses
import math

from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.store_masks import tensor_dims
from tdsl.compiler.model.dtypes import BYTES
from tdsl.compiler.targets import get_target

BOX_MAX = 256  # elements per box dimension (cuTensorMapEncodeTiled's boxDim)
BARRIER_BYTES = 8  # one mbarrier per pipeline stage: the stage's TMA copies signal it (Triton's pipeliner)
ALIGN = 16  # bytes: global strides, the box's innermost extent
DTYPES = ("bf16", "f16", "f32")


def mark_descriptors(program: T.TileProgram) -> T.TileProgram:
    """Every product operand load and tile store a TMA descriptor can make, with its box; then, per kernel, the
    descriptor loads dropped again where their barriers would not fit in shared memory (`_within_shared`)."""
    kernels = []
    held = {t.stored_in for t in program.outputs if t.stored_in}  # inputs an output is written into
    for kernel in program.kernels:
        args = {t.name: t for t in kernel.tensors}
        dims = {t.name: tensor_dims(program, t) for t in kernel.tensors}
        read = {e.tensor for op in T.walk_ops(kernel.body) for e in _loads(op)}

        def describable(name: str) -> bool:
            t = args[name]
            return (t.dtype in DTYPES and not t.fold and t.stored_in is None and name not in held
                    and len(dims[name]) >= 2 and all(isinstance(d, int) and d > 0 for d in dims[name])
                    and all(math.prod(dims[name][d + 1:]) * BYTES[t.dtype] % ALIGN == 0  # row-major strides
                            for d in range(len(dims[name]) - 1)))

        def mark(op):
            if _dot_operands(op):
                i, j, k = (a.iter for a in op.tile.axes)
                sizes = {a.iter: a.size for a in op.tile.axes}
                dot = op.partial
                lhs = _operand(dot.lhs, (i, k), sizes, args, describable)
                rhs = _operand(dot.rhs, (k, j), sizes, args, describable)
                return dataclasses.replace(op, partial=dataclasses.replace(dot, lhs=lhs, rhs=rhs))
            if isinstance(op, (T.Compute, T.AccFinish)) and op.store:
                box = _store_box(op, args, describable, read)
                return dataclasses.replace(op, store_box=box) if box else op
            return op

        kernels.append(_within_shared(dataclasses.replace(kernel, body=T.map_ops(kernel.body, mark))))
    return dataclasses.replace(program, kernels=kernels)


SHARED_DEVICE = "h100"  # the Triton backend's device (pipeline.DEVICE); the H200 has its per-SM limits
SHARED_PER_BLOCK = get_target(SHARED_DEVICE).scope("shared").per_block


def planned_shared(kernel: T.TileKernel) -> int:
    """The shared memory of the kernel's planned buffers, stages included (what its schedule was checked for)."""
    return sum(math.prod(b.shape) * BYTES[b.dtype] * b.stages for b in T.kernel_buffers(kernel) if b.scope == "shared")


def persistent_bytes(kernel: T.TileKernel) -> int:
    """What a persistent kernel adds to shared memory: each stored tile, which Triton passes through shared memory
    (a descriptor store's staging, or a pointer store's layout conversion) while the next tile's operands are
    already in flight there; without the walk it reuses the operands' buffers (measured on the H200: a 256 x 128
    bf16 tile of 2 stages asked the plan's 196,608 B + 65,536 B + 16 B of barriers, with either store)."""
    if not kernel.persistent:
        return 0
    return sum(math.prod(a.size for a in op.tile.axes) * BYTES[op.dtype] for op in T.walk_ops(kernel.body)
               if isinstance(op, (T.Compute, T.AccFinish)) and op.store)


def shared_need(kernel: T.TileKernel) -> int:
    """Shared memory the kernel asks Triton for: its planned buffers, a persistent kernel's stored tiles and the
    barriers of its descriptor loads."""
    return planned_shared(kernel) + persistent_bytes(kernel) + barrier_bytes(kernel)


def _within_shared(kernel: T.TileKernel) -> T.TileKernel:
    """The kernel with pointer loads instead of descriptors where the barriers of descriptor loads
    (`barrier_bytes`) would not fit beside its planned buffers (and a persistent kernel's stored tiles)."""
    if shared_need(kernel) > SHARED_PER_BLOCK:
        return dataclasses.replace(kernel, body=T.map_ops(kernel.body, _pointer_loads))
    return kernel


def _pointer_loads(op):
    if not _dot_operands(op):
        return op
    lhs, rhs = (dataclasses.replace(e, box=()) if isinstance(e, T.Load) else e for e in _dot_operands(op))
    return dataclasses.replace(op, partial=dataclasses.replace(op.partial, lhs=lhs, rhs=rhs))


def _dot_operands(op) -> tuple:
    """A tile product's two operands (lhs, rhs), or () for any other op."""
    if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot):
        return op.partial.lhs, op.partial.rhs
    return ()


def barrier_bytes(kernel: T.TileKernel) -> int:
    """The shared memory a kernel's TMA operand copies add to its planned buffers: one mbarrier per stage.  The
    buffer plan (compiler/analysis/buffer_plan.py) does not count them: a schedule within 8 bytes a stage of the
    shared memory would pass its check and fail Triton's (measured: tests/backends/triton/test_triton_backend.py)."""
    loads = any(isinstance(e, T.Load) and e.box for op in T.walk_ops(kernel.body) for e in _dot_operands(op))
    return BARRIER_BYTES * kernel.num_stages if loads else 0


def _operand(load, axes: tuple, sizes: dict, args: dict, describable) -> T.Expr:
    """The operand, a Load with its box where a descriptor can read it."""
    if not (isinstance(load, T.Load) and load.tensor in args and args[load.tensor].role == "input"):
        return load
    if load.mask is not None and not (load.mask_is_bounds and load.other == 0.0):
        return load
    iters = [ix.name if isinstance(ix, T.Var) else None for ix in load.indices]
    if len(iters) != 2 or sorted(iters, key=str) != sorted(axes) or not describable(load.tensor):
        return load
    box = tuple(sizes[it] for it in iters)
    return dataclasses.replace(load, box=box) if _box_fits(box, args[load.tensor].dtype) else load


def _store_box(op, args: dict, describable, read: set) -> tuple:
    """The box of a tile store a descriptor can make, or ()."""
    t = args.get(op.stmt)
    if t is None or t.role != "output" or op.stmt in read or op.unclipped != () or op.dtype != t.dtype:
        return ()
    sizes = {a.iter: a.size for a in op.tile.axes}
    if len(op.lhs) != 2 or len(sizes) != 2 or sorted(op.lhs) != sorted(sizes) or not describable(op.stmt):
        return ()
    box = tuple(sizes[it] for it in op.lhs)
    return box if _box_fits(box, t.dtype) else ()


def _box_fits(box: tuple, dtype: str) -> bool:
    return all(b <= BOX_MAX for b in box) and box[-1] * BYTES[dtype] >= ALIGN


def _loads(op) -> list:
    """The Loads an op reads through (a product's operands, values, preloads)."""
    return [load for e in T.op_expressions(op) for load in T.nodes_in(e, T.Load)]


def descriptors(kernel: T.TileKernel) -> list[tuple]:
    """The TMA descriptors a kernel takes after its scalars, (tensor, box) in program order: one per tensor and
    box of its loads and stores that go through one (Load.box, store_box)."""
    found = []
    for op in T.walk_ops(kernel.body):
        found += [(e.tensor, e.box) for e in _dot_operands(op) if isinstance(e, T.Load) and e.box]
        if isinstance(op, (T.Compute, T.AccFinish)) and op.store and op.store_box:
            found.append((op.stmt, op.store_box))
    return list(dict.fromkeys(found))
