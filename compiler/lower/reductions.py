"""Reductions: accumulators, and whether a step of a reduction is a tile product or a tile reduction.

A reduction keeps an accumulator from just before the outermost serial loop that walks its reduction
iterators to just after it (`_acc_init`, `_acc_finish`; the loop is `_accumulation_loop` in
compiler/lower/loops.py).  Each step adds a partial result (`_partial`): a `sum` of a product of two 2-D
tiles (`placement.product_form`) over a tile with axes (i, j, k), each at least 16 wide (k at least 32
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

from tdsl.compiler.analysis.placement import makes_dot, product_form
from tdsl.compiler.model.program import Stmt
from tdsl.compiler.lower.geometry import _check_size, loop_condition
from tdsl.compiler.lower.registers import _lanes, _Produced
from tdsl.compiler.errors import BackendError
from tdsl.compiler.model.dependences import imprecise_products
from tdsl.compiler.model.functions import PRIMITIVES
from tdsl.compiler.model.online import MAX, REF
from tdsl.compiler.lower.loads import fold_constants
from tdsl.compiler.lower.tileir import (AccFinish, AccInit, Bin, Call, Const, Dot, Expr, Neg, Reduce, Reference, Reg,
                                        RegOperand, Rescaling, Round, Running, Select, Tile)
from tdsl.compiler.schedule.tree import Loop, pw_affs_to_map
from tdsl.compiler.model import reduce_ops


class ReductionLowering:
    """Accumulators and partial results of one kernel's reductions (see the module docstring)."""

    def _acc_init(self, stmt_name: str, context: list[Loop]) -> AccInit:
        stmt = self.model.stmt(stmt_name)
        tile = self._tile(stmt, context, stmt.lhs_iters)
        self.accumulating[stmt.name] = (tile, list(context))
        follows = None
        if self._follows_running(stmt, context):
            follows = self._follows(stmt)
            self.rescaled.add(stmt.name)
        start = self._start(stmt, tile, context)
        return AccInit(stmt.name, tile, stmt.reduce_op, stmt.accum_dtype, follows, start=start)

    def _start(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Optional[Expr]:
        """The value a sum starts from, rounded to its accumulator here (a constant is rounded now, in f32
        semantics: no printer applies a rounding helper to a plain number)."""
        if stmt.init is None:
            return None
        value = self._value(stmt.init, stmt, tile, context)
        return value if stmt.accum_dtype in (None, "f32") else fold_constants(Round(stmt.accum_dtype, value))

    # ------------------------------------------------------------ sums that follow a running maximum (online)

    def _follows_running(self, stmt: Stmt, context: list[Loop]) -> bool:
        """Does the sum starting here (`context`: the loops around its accumulator) follow a maximum that runs
        beside it, its accumulator already started at this level or outside?  A maximum that is not (computed by
        an earlier kernel, or in full inside one iteration of the loop that walks the sum: `online(m)` after
        `compute_at(m, l.ko)`) is complete before the sum's first term, so the sum is never rescaled (nor is it by
        the interpreter: the maximum it was built with is always the current one) and is lowered as a plain sum."""
        if stmt.rescale is None:
            return False
        running = self.accumulating.get(stmt.rescale.stat)
        return running is not None and running[1] == context[: len(running[1])]

    def _follows(self, stmt: Stmt) -> Running:
        """The running maximum a rescaled sum follows, as positions in the sum's accumulator tile (where its
        Reference lives: one value per row of the maximum)."""
        tile, _ = self.accumulating[stmt.name]
        names = [a.iter for a in tile.axes]
        index = stmt.rescale.index
        if not all(isinstance(x, ast.Name) and x.name in stmt.lhs_iters for x in index):
            raise BackendError(f"{stmt.name} follows the running maximum {stmt.rescale.stat} at an index that is "
                               f"not its own iterators; a kernel keeps one maximum per row of the accumulator")
        positions = tuple(names.index(x.name) for x in index if x.name in names)
        return Running(stmt.rescale.stat, positions, self.model.stmt(stmt.rescale.stat).dtype)

    def _current_maximum(self, stmt: Stmt, context: list[Loop]):
        """The maximum now, broadcast to the sum's accumulator tile: its running accumulator, or its register
        tile when it is already complete here (a loop over the terms with a single iteration)."""
        stat = stmt.rescale.stat
        tile, _ = self.accumulating[stmt.name]
        done = self.produced.get(stat)
        if done is not None and done.loops == context[: len(done.loops)]:
            positions = _lanes(stmt.rescale.index, stmt, tile, done.stmt, done.tile)
            if positions is not None:
                return Reg(stat, tuple(positions))
        current = self._running(stat, stmt.rescale.index, stmt, tile, context) if stat in self.accumulating else None
        if current is None:
            raise BackendError(f"{stmt.name} follows the running maximum {stat}, but {stat}'s accumulator does not "
                               f"cover {stmt.name}'s rows element for element in this kernel; place {stat} in the "
                               f"loop that walks {stmt.name}'s terms, with the same row tile")
        return current

    def _rescaling(self, stmt: Stmt, context: list[Loop]) -> Rescaling:
        """The factor that brings the accumulator from its reference maximum to the current one."""
        current = self._current_maximum(stmt, context)
        reference = Reference(stmt.name, current.axes)

        def convert(e):
            if isinstance(e, ast.Name) and e.name == REF:
                return reference
            if isinstance(e, ast.Name) and e.name == MAX:
                return current
            if isinstance(e, ast.BinOp):
                return Bin(e.op, convert(e.lhs), convert(e.rhs))
            if isinstance(e, ast.Neg):
                return Neg(convert(e.operand))
            if isinstance(e, ast.Call) and e.func in PRIMITIVES:  # the exponential itself, an fma in its argument
                return Call(e.func, tuple(convert(a) for a in e.args))
            return self._value(e, stmt, self.accumulating[stmt.name][0], context)  # a constant factor

        return Rescaling(current, convert(stmt.rescale.factor))

    def _acc_finish(self, stmt_name: str, context: list[Loop]) -> AccFinish:
        stmt = self.model.stmt(stmt_name)
        tile = self._tile(stmt, context, stmt.lhs_iters)
        keep, store = self._keep_store(stmt)
        self.produced[stmt.name] = _Produced(stmt, tile, keep, list(context))
        form = self._form(stmt)
        scale = 1.0 if form is None else form.scale
        return AccFinish(stmt.name, tile, stmt.dtype, store, keep, tuple(stmt.lhs_iters), scale=scale)

    def _partial(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        dot = self._dot(stmt, tile, context)
        if dot is not None:
            return dot
        _check_size(stmt, tile)
        body = self._value(self._term(stmt), stmt, tile, context)
        identity = Const(reduce_ops.identity(stmt.reduce_op))
        if tile.mask is not None:
            body = Select(tile.mask, body, identity)
        red_axes = tuple(k for k, a in enumerate(tile.axes) if a.iter in stmt.red_iters)
        if not red_axes:
            return body
        return Reduce(stmt.reduce_op, body, red_axes, self.zero_signs.reduction(stmt.name))

    def _term(self, stmt: Stmt) -> ast.Expr:
        """The expression each step sums: the body, or of a matrix product with constant factors the product of
        its two reads alone (`placement.product_form`: the finish multiplies the sum by the factors, as a
        `Dot` does, so that every step of the statement sums the same terms)."""
        form = self._form(stmt)
        return stmt.value if form is None or form.scale == 1.0 else ast.BinOp("*", form.lhs, form.rhs)

    def _form(self, stmt: Stmt):
        """`placement.product_form` of a statement, found once per kernel (every step and the finish ask)."""
        if stmt.name not in self.forms:
            self.forms[stmt.name] = product_form(stmt, self.model.sizes)
        return self.forms[stmt.name]

    def _dot(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Optional[Dot]:
        """A matrix product (`placement.product_form`) over a tile with axes (i, j, k) large enough
        (`placement.makes_dot`) -> a tile `Dot` (its constant factors applied by `AccFinish`); which unit
        runs it is decided per backend later."""
        form = self._form(stmt)
        if form is None:
            return None
        operands = form.lhs, form.rhs
        names = [a.iter for a in tile.axes]
        if len(names) != 3:
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
        dtypes = (self.model.tensors[lhs.tensor].dtype, self.model.tensors[rhs.tensor].dtype)
        if not makes_dot(dtypes, *(a.size for a in tile.axes)):
            return None
        # a masked tile: its instances projected onto (i, j), (i, k) and (k, j), each over all of (i, j, k)
        pairs = self._projections(stmt, context, i, j, k) if tile.mask is not None else None
        if pairs is not None and not self._separable(stmt, context, i, j, k, pairs):
            return None
        a = self._operand(stmt, tile, context, [i, k], lhs, i)
        b = self._operand(stmt, tile, context, [k, j], rhs, j)
        if a is None or b is None:
            return None
        absent, where, met = False, None, (False, False)
        if pairs is not None:
            accumulated = self._accumulated(stmt, context, i, j, k, pairs[0])
            absent, where, met = self._absent_terms(context, (accumulated, *pairs[1:]))
        return Dot(a, b, *dtypes, imprecise=imprecise_products(stmt), absent_terms=absent, absent_where=where,
                   absent_met=met)

    def _operand(self, stmt: Stmt, tile: Tile, context, iters, node: ast.Access, outer: str):
        """A product operand: loaded from memory, or the register tile of a statement of this kernel (zero on the
        lanes outside the reduction), taken element for element in the operand's (row, column) order; None when
        a register operand is not such a tile."""
        if self.kernel_of.get(node.tensor) != self.index:
            return self._operand_load(stmt, context, iters, node, outer)
        if stmt.rescale is None:
            return None  # so far only the sums of an online softmax (P·V) take an operand from registers
        producer = self.produced.get(node.tensor)
        reg = self._register(node, stmt, tile, producer, context) if producer is not None and producer.keep else None
        names = [a.iter for a in tile.axes]
        if reg is None or list(reg.axes) != [names.index(x) for x in iters]:
            return None
        return RegOperand(reg, self._mask(self._geometry(stmt, context, iters)))

    def _projections(self, stmt: Stmt, context, i, j, k) -> tuple:
        """The instances projected onto (i, j), (i, k) and (k, j), each lifted back over (loop values, i, j, k)."""
        return tuple(self._lifted(stmt, context, pair, [i, j, k]) for pair in ([i, j], [i, k], [k, j]))

    def _accumulated(self, stmt: Stmt, context, i, j, k, here: isl.Set) -> isl.Set:
        """The (i, j) of the accumulator's elements that hold a sum: the instances projected onto (i, j) over
        the loops around the accumulator (`accumulating`), lifted over (loop values, i, j, k) of `context`.  A
        product in a loop inside those (a serial loop over the rows, `pipeline(C.ii)`) adds to the whole
        accumulator tile in each iteration, also to elements this iteration has no instance of, whose sums the
        other iterations make: a masked 0 times an infinite element there is NaN in a stored sum.  `here`: this
        iteration's, which it is where the accumulator's loops are not those around the product."""
        outer = self.accumulating[stmt.name][1]
        if outer != list(context[: len(outer)]):
            return here
        held = self._lifted(stmt, outer, [i, j], [i, j, k])
        n_outer = sum(loop.n_dims for loop in outer)
        n_inner = sum(loop.n_dims for loop in context) - n_outer
        return held.insert_dims(isl.dim_type.set, n_outer, n_inner) if n_inner else held

    def _separable(self, stmt: Stmt, context, i, j, k, pairs: tuple) -> bool:
        """The reduction range of every (i, j) is what the operand masks allow: (i,k) and (k,j) constraints only."""
        ij, ik, kj = pairs
        return ij.intersect(ik).intersect(kj).is_subset(self._instances(stmt, context, [i, j, k]))

    def _absent_terms(self, context, pairs: tuple) -> tuple[bool, Optional[Expr], tuple]:
        """Whether the product tile multiplies an operand element the program reads by one it does not: a lane
        (i, j, k) of an accumulated (i, j) (`_accumulated`) where exactly one of (i, k) and (k, j) holds an
        instance in this iteration (the causal condition `j <= i` of P in P·V masks P's lanes, not V's).  The
        masked operand is 0 there, and 0 times an infinite or NaN element of the other is NaN where the program
        has no term: a backend computes such a product so that those lanes add nothing (`Dot.absent_terms`).  Also the iterations of the context's
        loops that hold such lanes, as a condition on the loop variables beyond what the loops guarantee (None:
        every iteration the code runs; the causal diagonal block of a loop that is not split, `ko == qo`).
        And which operands' elements meet the other's masked zeros there (`Dot.absent_met`: V's, in P·V).
        `pairs`: `_projections`."""
        ij, ik, kj = pairs
        lhs_met, rhs_met = ij.intersect(ik.subtract(kj)), ij.intersect(kj.subtract(ik))
        met = (not lhs_met.is_empty(), not rhs_met.is_empty())
        lanes = lhs_met.union(rhs_met)
        if lanes.is_empty():
            return False, None, met
        n_loop = lanes.dim(isl.dim_type.set) - 3
        if n_loop == 0:
            return True, None, met
        where = lanes.project_out(isl.dim_type.set, n_loop, 3)
        for pos, name in enumerate(self._var(loop, d) for loop in context for d in range(loop.n_dims)):
            where = where.set_dim_name(isl.dim_type.set, pos, name)
        return True, loop_condition(where, self._emitted_bounds(context)), met

    def _lifted(self, stmt: Stmt, context, iters: list[str], onto: list[str]) -> isl.Set:
        """`_instances` over `iters` (some of `onto`), as a set over (loop values, `onto`) that leaves the other
        iterators free."""
        part = self._instances(stmt, context, iters)
        n_loop = part.dim(isl.dim_type.set) - len(iters)
        loops = [f"x{p}" for p in range(n_loop)]
        whole = loops + [f"y{p}" for p in range(len(onto))]
        picked = loops + [f"y{onto.index(it)}" for it in iters]
        pick = isl.Map.read_from_str(part.get_ctx(), f"{{ [{', '.join(whole)}] -> [{', '.join(picked)}] }}")
        return part.apply(pick.align_params(part.get_space()).reverse())

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
