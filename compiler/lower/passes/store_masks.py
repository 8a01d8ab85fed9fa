"""Which comparisons of a store's mask a copy clipped at the tensor's edges does not enforce.

A tile's mask keeps the lanes where the statement has an instance.  Some of its comparisons only keep lanes
inside the stored tensor (`j < N` for a tensor of N columns): a copy that clips at the tensor's edges (a TMA or
Ascend DMA store, T.copy) already leaves those lanes unwritten.  The others exclude lanes *inside* the tensor
(a causal triangle's `j <= i`, a tile's ragged end inside a larger tensor): a store that writes whole regions
must keep those lanes as they are (read-modify-write, row by row, or one element at a time).

    program = mark_unclipped(program)   # every storing op's `unclipped`: the comparisons of the second kind

Run for every backend after the operands are placed (compiler/lower/pipeline.py), so that a target pass and a
printer read the fact instead of deciding it; a pass that changes a store's mask (the 910B's
`widen_narrow_tiles`) marks the op again with `unclipped_atoms`.  The test is syntactic
(`lane_masks.implied_by_bounds`): a comparison counts as clipped only when it bounds one index expression of the
tensor by the tensor's constant extent.
"""

from __future__ import annotations

import dataclasses

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.lane_masks import MODES, conjuncts, implied_by_bounds


def mark_unclipped(program: T.TileProgram) -> T.TileProgram:
    """Every storing Compute / AccFinish with its `unclipped` comparisons (an empty tuple when clipping is all
    its mask does)."""
    kernels = []
    for kernel in program.kernels:
        dims = {t.name: tensor_dims(program, t) for t in kernel.tensors}
        body = T.map_ops(kernel.body, lambda op: mark_op(op, dims))
        kernels.append(dataclasses.replace(kernel, body=body))
    return dataclasses.replace(program, kernels=kernels)


def mark_op(op, dims: dict):
    """`op` with its `unclipped` comparisons, if it stores a tile (`dims`: the kernel's tensors' extents)."""
    if not isinstance(op, (T.Compute, T.AccFinish)) or not op.store:
        return op
    return dataclasses.replace(op, unclipped=unclipped_atoms(op.tile, op.lhs, dims[op.stmt]))


def unclipped_atoms(tile: T.Tile, lhs, dims: list) -> tuple:
    """The parts of `tile`'s mask (a conjunction) that do not hold at every element inside the tensor written
    at [lhs] (its extents `dims`; a run-time extent bounds nothing here)."""
    indices = [tile.scalars[it] if it in tile.scalars else T.Var(it) for it in lhs]
    return tuple(part for part in conjuncts(tile.mask) if not _clipped(part, indices, dims))


def _clipped(part: T.Expr, indices: list, dims: list) -> bool:
    """An affine comparison that a clipped copy enforces; any other part (a disjunction, a comparison of values or
    of a division of indices) is not known to be, and counts as unclipped."""
    if not (isinstance(part, T.Bin) and part.op in MODES):
        return False
    try:
        return implied_by_bounds(part, indices, dims)
    except BackendError:  # not affine
        return False


def tensor_dims(program: T.TileProgram, tensor) -> list:
    """A kernel tensor's extents: constants, the program's bound sizes, or None for a run-time size."""
    return [d if isinstance(d, int) else program.sizes.get(d) for d in tensor.shape]
