"""Reductions: accumulators, and whether a step of a reduction is a tile product or a tile reduction.

A reduction keeps an accumulator from just before the outermost serial loop that walks its reduction
iterators to just after it (`_acc_init`, `_acc_finish`; the loop is `_accumulation_loop` in
compiler/lower/loops.py).  Each step adds a partial result (`_partial`): a `sum` of a product of two 2-D
tiles (`placement.matrix_operands`) over a tile with axes (i, j, k), each at least 16 wide (k at least 32
for 8-bit operands), whose operands are read from memory and whose mask separates into (i, k) and (k, j)
conditions (`_separable`), is a `Dot` (`_dot`); anything else a masked tile `Reduce` over the reduction
axes.

`ReductionLowering` is mixed into `_KernelLowering` (compiler/lower/build.py) and reads its fields (`model`,
`produced`, `kernel_of`, `index`), the geometry and the loads.
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.frontend import ast

from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.model.program import Stmt
from tdsl.compiler.lower.geometry import _check_size
from tdsl.compiler.lower.registers import _Produced
from tdsl.compiler.lower.tileir import AccFinish, AccInit, Const, Dot, Expr, Reduce, Select, Tile
from tdsl.compiler.schedule.tree import Loop, pw_affs_to_map


class ReductionLowering:
    """Accumulators and partial results of one kernel's reductions (see the module docstring)."""

    def _acc_init(self, stmt_name: str, context: list[Loop]) -> AccInit:
        stmt = self.model.stmt(stmt_name)
        tile = self._tile(stmt, context, stmt.lhs_iters)
        return AccInit(stmt.name, tile, stmt.reduce_op, stmt.accum_dtype)

    def _acc_finish(self, stmt_name: str, context: list[Loop]) -> AccFinish:
        stmt = self.model.stmt(stmt_name)
        tile = self._tile(stmt, context, stmt.lhs_iters)
        keep, store = self._keep_store(stmt)
        self.produced[stmt.name] = _Produced(stmt, tile, keep, list(context))
        return AccFinish(stmt.name, tile, stmt.dtype, store, keep, tuple(stmt.lhs_iters))

    def _partial(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        dot = self._dot(stmt, tile, context)
        if dot is not None:
            return dot
        _check_size(stmt, tile)
        body = self._value(stmt.value, stmt, tile, context)
        identity = Const(0.0) if stmt.reduce_op == "sum" else Const(float("-inf"))
        if tile.mask is not None:
            body = Select(tile.mask, body, identity)
        red_axes = tuple(k for k, a in enumerate(tile.axes) if a.iter in stmt.red_iters)
        if not red_axes:
            return body
        return Reduce(stmt.reduce_op, body, red_axes)

    def _dot(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Optional[Dot]:
        """A matrix product (`placement.matrix_operands`) over a tile with axes (i, j, k), each at least 16 wide
        (k at least 32 for 8-bit operands) -> a tile `Dot`; which unit runs it is decided per backend later."""
        operands = matrix_operands(stmt)
        if operands is None:
            return None
        names = [a.iter for a in tile.axes]
        if len(names) != 3 or any(a.size < 16 for a in tile.axes):
            return None
        k = stmt.red_iters[0]
        if names[2:] != [k]:  # the tile's axes must be (i, j, k), k the reduction's only iterator
            return None
        i, j = names[:2]
        lhs, rhs = operands
        batch = set(tile.scalars)  # other iterators (batch, head) must hold one value per tile
        if not (_plain(lhs, {i, k}, batch) and _plain(rhs, {k, j}, batch)):
            lhs, rhs = rhs, lhs
            if not (_plain(lhs, {i, k}, batch) and _plain(rhs, {k, j}, batch)):
                return None
        if tile.mask is not None and not self._separable(stmt, context, i, j, k):
            return None
        if any(self.kernel_of.get(x.tensor) == self.index for x in (lhs, rhs)):
            return None  # an operand computed in this kernel lives in registers: a tile product reads it there
        dtypes = (self.model.tensors[lhs.tensor].dtype, self.model.tensors[rhs.tensor].dtype)
        if "f8e4m3" in dtypes and tile.axes[2].size < 32:
            return None  # 8-bit matrix instructions (sm_90 wgmma) take k in steps of 32
        a = self._operand_load(stmt, context, [i, k], lhs, i)
        b = self._operand_load(stmt, context, [k, j], rhs, j)
        return Dot(a, b, *dtypes)

    def _separable(self, stmt: Stmt, context, i, j, k) -> bool:
        """The reduction range of every (i, j) is what the operand masks allow: (i,k) and (k,j) constraints only."""
        full = self._instances(stmt, context, [i, j, k])
        ik = self._instances(stmt, context, [i, k])
        kj = self._instances(stmt, context, [k, j])
        ij = self._instances(stmt, context, [i, j])
        n_loop = full.dim(isl.dim_type.set) - 3
        rebuilt = (ij.insert_dims(isl.dim_type.set, n_loop + 2, 1)
                   .intersect(ik.insert_dims(isl.dim_type.set, n_loop + 1, 1))
                   .intersect(kj.insert_dims(isl.dim_type.set, n_loop, 1)))
        return rebuilt.is_subset(full)

    def _instances(self, stmt: Stmt, context, iters) -> isl.Set:
        dims = [pa for loop in context for pa in loop.exprs[stmt.name]]
        rel = pw_affs_to_map(dims, stmt.domain).reverse() if dims else isl.Map.from_range(stmt.domain)
        keep = [stmt.iters.index(x) for x in iters]
        for p in reversed(range(len(stmt.iters))):
            if p not in keep:
                rel = rel.project_out(isl.dim_type.out, p, 1)
        order = sorted(keep)
        flat = rel.wrap().flatten()
        n_loop = len(dims)
        # reorder the kept iterators into the order asked for
        if [stmt.iters[p] for p in order] != iters:
            perm = [order.index(stmt.iters.index(x)) for x in iters]
            text = ", ".join(f"x{p}" for p in range(n_loop + len(iters)))
            target = ", ".join([f"x{p}" for p in range(n_loop)] + [f"x{n_loop + p}" for p in perm])
            m = isl.Map.read_from_str(flat.get_ctx(), f"{{ [{text}] -> [{target}] }}")
            flat = flat.apply(m.align_params(flat.get_space()))
        return flat


def _plain(e: ast.Expr, iters: set, batch: set) -> bool:
    """A read indexed by distinct plain iterators: both of `iters` (the tile's axes), the others in `batch`
    (iterators with one value in the tile)."""
    if not (isinstance(e, ast.Access) and all(isinstance(x, ast.Name) for x in e.indices)):
        return False
    names = [x.name for x in e.indices]
    return len(set(names)) == len(names) and iters <= set(names) and set(names) - iters <= batch
