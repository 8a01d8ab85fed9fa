"""The vector cores' statements: whole-tile `T.tile.*` operations on UB buffers, tiles computed row by row,
lane masks (`T.tile.compare` + `T.tile.select`), reductions and the products that run on the vector cores.
"""

from __future__ import annotations

import math

from tdsl.backends.ascend910b import e4m3
from tdsl.backends.ascend910b.common import _and_code, index_code, _Opnd, subexpressions, ROW
from tdsl.backends.tilelang.emit import float_code, region_indices
from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.lane_masks import (
    check_affine,
    MODES,
    NEGATE,
    expr_text as _expr_text,
    atoms,
    conjunction,
    implied_by_bounds,
    lane_test,
    mentions,
    substitute,
)
from tdsl.compiler.lower.passes.ascend910b import BYTES, UB_ROW_BYTES, axes_not_last, expr_vars
from tdsl.compiler.lower.tileir import simplify
from tdsl.compiler.model import reduce_ops
from tdsl.compiler.model.storage import overwritable


class VectorSide:
    """Methods of `Ascend910BPrinter` (emit.py); `self` is the printer."""

    def _vector_op(self, op) -> None:
        if isinstance(op, T.Compute):
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            if self._by_rows(op.value, op.tile):
                return self._compute_rows(op)
            shape = [a.size for a in op.tile.axes]
            value = self._round(op.dtype, self._value(op.value, op.tile), shape)
            if value.kind == "scalar" and self._reads_overwritable(op.value):
                value = self._held_scalar(value, op.stmt)
            self.values[op.stmt] = value
            self.expr_temps.discard(value.code)
            self.shapes[op.stmt] = shape
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, value, op.unclipped)
        elif isinstance(op, T.AccInit):
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            shape = [a.size for a in op.tile.axes]
            acc = self.alloc(self.local(("acc", op.stmt), f"acc_{op.stmt}"), shape, "f32", "UB", f"{op.op} accumulator")
            self.accs[op.stmt] = (acc, shape)
            self.acc_tiles[op.stmt] = op.tile
            if op.follows is not None:  # a rescaled sum (online): the maximum it was last brought to
                self._reference(op)
            if op.start is None:
                self.emit(f"T.tile.fill({acc}, {float_code(reduce_ops.identity(op.op))})")
            else:
                self.emit(f"# {op.stmt} starts from its own value, once per element")
                start = self._value(op.start, op.tile)  # rounded to the accumulator already (tile program)
                if start.kind == "scalar":
                    self.emit(f"T.tile.fill({acc}, {start.code})")
                else:
                    self.emit(f"T.copy({start.code}, {acc})  # UB -> UB")
                    self.done(start)
        elif isinstance(op, T.AccUpdate):
            if op.rescale is not None:
                self._rescale(op)
            product = self._product(op)
            if product is not None:
                self._vector_matmul(op, *product)
            else:
                self._tile_reduce(op)
        elif isinstance(op, T.AccFinish):
            acc, shape = self.accs[op.stmt]
            finished = self._scaled(op, _Opnd("tile", acc) if shape else _Opnd("scalar", f"{acc}[0]"), shape)
            value = self._round(op.dtype, finished, shape)
            self.values[op.stmt] = value
            self.expr_temps.discard(value.code)
            self.shapes[op.stmt] = shape
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, value, op.unclipped)
        else:
            raise BackendError(f"{type(op).__name__} has no ascend-910b form here")

    def _reads_overwritable(self, value) -> bool:
        """Whether a value loads from an array this kernel may store over after reading it (compiler/model/storage.py
        `overwritable`, the rule the lowering's barriers follow).  A scalar value is an expression, and a reader of
        the statement would evaluate it again, after the store (probe JJ: `Y[i] = X[i] * 2` kept in X, then
        `Z[i] = Y[i] + 1` fused with it read 2 * (2 * X[i]) + 1)."""
        arrays = overwritable(self.kernel.tensors)
        return bool(arrays) and any(load.tensor in arrays for load in T.nodes_in(value, T.Load))

    def _held_scalar(self, value: _Opnd, stmt: str) -> _Opnd:
        """A scalar value evaluated now, into a UB buffer of its own, and read from there by later statements."""
        held = self.alloc(self.fresh("held"), [8], "f32", "UB", f"{stmt}'s value, read before a store "
                          f"over what it loads", pooled=False)
        self.emit(f"{held}[0] = {value.code}")
        return _Opnd("scalar", f"{held}[0]")

    # ------------------------------------------------------------ sums that follow a running maximum (online)

    def _reference(self, op: T.AccInit) -> None:
        """The maximum a rescaled sum was last brought to (tileir.Reference): one value per row, -inf at first."""
        shape = self.accs[op.stmt][1]
        if tuple(op.follows.axes) != (0,) or not shape:
            raise BackendError(f"{op.stmt} follows the running maximum {op.follows.stmt}, and the 910B keeps one "
                               f"maximum per row of a tile, but {op.stmt}'s tile "
                               f"{'has no row axis' if not shape else 'follows it along other axes than its rows'}: "
                               f"split the query loop and keep its inner loop in the tile (`qo, qi = split(l.i, 64)`, "
                               f"qi inside the key loop, as the flash_ascend schedule of examples/mha.tdsl), or compile "
                               f"for ascend-950 or nvidia (one query per program, as in decoding, needs one of those)")
        self.emit(f"# {op.stmt} follows the running maximum {op.follows.stmt}: the maximum it was built with")
        ref = self.alloc(self.local(("reference", op.stmt), f"ref_{op.stmt}"), shape[:1], "f32", "UB",
                         f"{op.stmt}: the maximum it was last rescaled to", pooled=False)
        self.refs[op.stmt] = ref
        self.emit(f"T.tile.fill({ref}, {float_code(float('-inf'))})")

    def _rescale(self, op: T.AccUpdate) -> None:
        """Bring the sum from the maximum it was built with to the current one (tileir.Rescaling): per row the
        factor (the program's exponential), 1 where the two maxima are equal (also both -inf, where the exponent is NaN), the
        rows multiplied by it, and the current maximum kept as the new reference."""
        acc, shape = self.accs[op.stmt]
        tile = self.acc_tiles[op.stmt]
        rows = T.Tile(axes=tile.axes[:1], scalars=tile.scalars, mask=None)  # one lane per row
        ref = self.refs[op.stmt]
        self.emit(f"# {op.stmt} follows the running maximum {op.rescale.current.stmt}: rescale it to the current one")
        factor = self._value(op.rescale.factor, rows)
        now = self._value(op.rescale.current, rows)
        if factor.kind != "tile" or now.kind != "tile":
            raise InternalError(f"{op.stmt}: the rescaling of a sum over {shape} is not per row")
        r = self.fresh("r")
        self.emit(f"for {r} in T.serial({shape[0]}):  # 1 where the maximum did not move")
        self.emit(f"    if {ref}[{r}] == {now.code}[{r}]:")
        self.emit(f"        {factor.code}[{r}] = 1.0")
        if len(shape) == 1:
            self.emit(f"T.tile.mul({acc}, {acc}, {factor.code})")
        else:
            self.emit(f"for {r} in T.serial({shape[0]}):")
            self.emit(f"    T.tile.mul({acc}[{r}, :], {acc}[{r}, :], {factor.code}[{r}])")
        if op.accum != "f32":
            self._round(op.accum, _Opnd("tile", acc), shape, into=acc)
        self.emit(f"T.copy({now.code}, {ref})  # UB -> UB: the maximum it follows now")
        self.done(factor, now)

    def _scalar_names(self, tile: T.Tile) -> dict:
        """index_code's names in a tile: its fixed iterators' values, loop variables and sizes."""
        return {**self.vars, **{it: index_code(simplify(v), self.vars) for it, v in tile.scalars.items()}}

    def _region_names(self, tile: T.Tile) -> dict:
        names = self._scalar_names(tile)
        names.update({a.iter: index_code(simplify(a.offset), self.vars) for a in tile.axes})
        return names

    def _row_code(self, axis: T.Axis, var: str) -> str:
        off = simplify(axis.offset)
        return var if off == T.Const(0) else f"({index_code(off, self.vars)} + {var})"

    def _by_rows(self, value, tile: T.Tile) -> bool:
        if len(tile.axes) != 2:
            return False
        row, col = (a.iter for a in tile.axes)

        def broadcast(e) -> bool:
            if isinstance(e, T.Load):
                used = {x.name for idx in e.indices for x in expr_vars(idx)}
                return used & {row, col} == {row}
            if isinstance(e, T.Reg):
                return tuple(e.axes) == (0,) and self.values[e.stmt].kind == "tile"
            if isinstance(e, (T.Running, T.Reference)):  # one value per row (an accumulator's, or its reference)
                return tuple(e.axes) == (0,)
            return any(broadcast(c) for c in subexpressions(e))

        return broadcast(value)

    def _compute_rows(self, op: T.Compute) -> None:
        """`for r: ...` over the rows, each row a 1-D tile in which the row's broadcast values are scalars."""
        row, col = op.tile.axes
        r = self.fresh("r")
        lane_atoms = [a for a in atoms(op.tile.mask) if lane_test(a, col.iter, col.offset) is not None]
        row_atoms = [a for a in atoms(op.tile.mask) if lane_test(a, col.iter, col.offset) is None]
        scalars = dict(op.tile.scalars)
        scalars[row.iter] = simplify(T.Bin("+", row.offset, T.Var(ROW)))
        self.vars[ROW] = r
        sub = T.Tile(axes=[col], scalars=scalars, mask=conjunction(lane_atoms))
        # E4M3 rounds whole 256-byte repeats, more than a row may have: the rows are rounded and stored together
        fp8 = op.dtype == "f8e4m3"
        full = self.alloc(self.fresh(f"{op.stmt}_rows"), [row.size, col.size], "f32", "UB", f"{op.stmt}, row by row") \
            if op.keep or fp8 else None
        self.emit(f"for {r} in T.serial({row.size}):  # row by row: {op.stmt} reads values broadcast along the row")
        depth = self.depth
        self.depth += 1
        if row_atoms:
            self.emit(f"if {self._condition(row_atoms, self._scalar_names(sub))}:  # rows inside the domain")
            self.depth += 1
        self.row = r
        value = self._value(op.value, sub)
        value = value if fp8 else self._round(op.dtype, value, [col.size])
        if value.kind != "tile":
            value = self._materialise(value, [col.size])
        if full is not None:
            self.emit(f"T.copy({value.code}, {full}[{r}, :])  # UB -> UB")
        if op.store and not fp8:
            # a row wholly past the tensor is not clipped to nothing (a copy of valid extent 0 moves the whole row),
            # and the mask may leave the bound to clipping: such a row is not stored (syr2k skewed, fuzz seed 5533)
            inside = self._row_inside_unproven(op.stmt, row, op.lhs)
            if inside:
                self.emit(f"if {self._condition(inside, self._scalar_names(sub))}:  # the row lies in {op.stmt}")
                self.depth += 1
            self._store(op.stmt, sub, op.lhs, value, tuple(a for a in op.unclipped if a in lane_atoms))
        if full is not None:
            self.done(value)  # kept in `full`: the row's buffer is free, once the store above has read it
        self.row = None
        self.depth = depth
        if fp8:
            rounded = self._round(op.dtype, _Opnd("tile", full), [row.size, col.size], into=full)
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, rounded, op.unclipped)
        if full is not None:
            self.values[op.stmt] = _Opnd("tile", full)
            self.shapes[op.stmt] = [row.size, col.size]

    def _row_inside_unproven(self, stmt, row: T.Axis, lhs) -> list:
        """`_row_inside` (stores.py) for the row `row.offset + ROW` of a tile walked row by row, less the comparisons
        the loops' ranges and the row's own (0 .. size - 1) already keep."""
        at = simplify(T.Bin("+", row.offset, T.Var(ROW)))
        return [a for a in self._row_inside(stmt, row.iter, lhs)
                if not self._kept_by_the_loops(substitute(a, row.iter, at), {ROW: (0, row.size - 1)})]

    @staticmethod
    def _condition(parts, names) -> str:
        """A conjunction of comparisons as a scalar condition."""
        return _and_code([f"{index_code(a.lhs, names)} {a.op} {index_code(a.rhs, names)}" for a in parts])

    def _threshold(self, expr, names) -> str:
        e = simplify(expr)
        if isinstance(e, T.Const):
            return repr(float(e.value))
        return f'T.Cast("float32", {index_code(e, names)})'

    def _mask_lanes(self, buf: str, tile: T.Tile, cond, scalar: str | None = None,
                    tensor: str | None = None) -> None:
        """Lanes of `buf` outside `cond` become `scalar` (or the same lanes of the buffer `tensor`)."""
        if not tile.axes:
            raise InternalError("a lane mask on a tile without axes (a masked scalar is _select_scalar's)")
        col, rows = tile.axes[-1], tile.axes[:-1]
        tests, whole = [], []
        for atom in atoms(cond):
            t = lane_test(atom, col.iter, col.offset)
            (tests if t is not None else whole).append(t if t is not None else atom)
        if not tests and not whole:
            return
        names = self._scalar_names(tile)
        lanes, m = self.lane_buffer(col.size) if tests else (None, None)
        if tests:
            self.emit(f"T.tile.createvecindex({lanes}, 0.0)  # lane positions 0, 1, ...")
        depth = self.depth
        dst, alt, alt_row = buf, tensor, tensor
        if rows:  # row by row, along every axis before the last
            at = []
            for row in rows:
                at.append(self.fresh("r"))
                self.emit(f"for {at[-1]} in T.serial({row.size}):")
                self.depth += 1
                names[row.iter] = self._row_code(row, at[-1])
            dst = f"{buf}[{', '.join(at)}, :]"
            if tensor is not None:
                alt = f"{tensor}[{', '.join(at)}, :]"
                if tests:  # T.tile.select takes a whole buffer as its tensor operand (ascend_tile.py:673)
                    alt_row = self.scratch("f32", [col.size], "row")
                    self.emit(f"T.copy({alt}, {alt_row})  # UB -> UB")
        for t in tests:
            self.emit(f'T.tile.compare({m}, {lanes}, {self._threshold(t.threshold, names)}, "{t.mode}")')
            if tensor is not None:
                self.emit(f'T.tile.select({dst}, {m}, {dst}, {alt_row}, "VSEL_TENSOR_TENSOR_MODE")')
            else:
                self.emit(f'T.tile.select({dst}, {m}, {dst}, {scalar}, "VSEL_TENSOR_SCALAR_MODE")')
        for atom in whole:
            self.emit(f"if {index_code(atom.lhs, names)} {NEGATE[atom.op]} {index_code(atom.rhs, names)}:")
            self.emit(f"    T.copy({alt}, {dst})  # UB -> UB" if tensor is not None else f"    T.tile.fill({dst}, {scalar})")
        self.depth = depth

    def _select(self, cond, then: _Opnd, other: T.Expr, tile: T.Tile) -> _Opnd:
        shape = [a.size for a in tile.axes]
        if not isinstance(other, T.Const):
            raise BackendError(f"a masked value with a computed fallback ({_expr_text(other)}) has no ascend-910b "
                               f"form")
        if not tile.axes:
            return self._select_scalar(cond, then, other, tile)
        src = then if then.kind == "tile" else self._materialise(then, shape)
        if src.code in self.expr_temps:  # a subexpression only this select reads: masked in place
            out = src.code
        else:
            out = self.temp("t", shape, note="masked lanes replaced")
            self.emit(f"T.copy({src.code}, {out})  # UB -> UB")
        self._mask_lanes(out, tile, cond, scalar=float_code(other.value))
        return _Opnd("tile", out)

    def _select_scalar(self, cond, then: _Opnd, other: T.Const, tile: T.Tile) -> _Opnd:
        """A masked value of a tile without axes: one scalar, kept in a UB element of its own and replaced by
        `other` when a comparison of the loop variables fails (the comparisons must be affine in them, as for
        lane masks: a comparison of values has no T.tile form)."""
        parts = atoms(cond)
        for atom in parts:
            check_affine(atom)
        held = self.alloc(self.fresh("masked_scalar"), [8], "f32", "UB", "a masked scalar", pooled=False)
        self.emit(f"{held}[0] = {then.code if then.kind == 'scalar' else f'{then.code}[0]'}")
        names = self._scalar_names(tile)
        for atom in parts:
            self.emit(f"if {index_code(atom.lhs, names)} {NEGATE[atom.op]} {index_code(atom.rhs, names)}:")
            self.emit(f"    {held}[0] = {float_code(other.value)}")
        return _Opnd("scalar", f"{held}[0]")

    def _select_values(self, e: T.Select, tile: T.Tile) -> _Opnd:
        """`where(c, a, b)` whose condition compares values (`X[i, j] > 0.0`, `S[j] <= X[i, j] * 2.0`): a over the
        tile, then for each comparison of values its two sides compared lane by lane and b's lanes put in where
        it fails (`_lanes_where`); comparisons of loop variables in the same condition as lane masks
        (`_mask_lanes`).  A comparison with a NaN is false, so such a lane takes b, as in the interpreter."""
        parts = atoms(e.cond)
        by_value = [a for a in parts if compares_values(a)]
        by_lanes = [a for a in parts if not compares_values(a)]
        for atom in by_lanes:
            check_affine(atom)
        if not tile.axes:
            return self._select_values_scalar(e, tile, by_value, by_lanes)
        shape = [a.size for a in tile.axes]
        then = self._value(e.then, tile)
        then = then if then.kind == "tile" else self._materialise(then, shape)
        if then.code in self.expr_temps:  # only this select reads it: b's lanes are put in in place
            out = then.code
        else:
            out = self.temp("t", shape, note="a where on values: a, b's lanes put in")
            self.emit(f"T.copy({then.code}, {out})  # UB -> UB")
        self.expr_temps.discard(out)  # kept while b and the comparisons are computed
        other = self._value(e.other, tile)
        fill = {"scalar": other.code} if other.kind == "scalar" else {"tensor": other.code}
        if by_lanes:
            self._mask_lanes(out, tile, conjunction(by_lanes), **fill)
        for atom in by_value:
            lhs, rhs, op = self._value(atom.lhs, tile), self._value(atom.rhs, tile), atom.op
            if lhs.kind == "scalar" and rhs.kind == "tile":  # T.tile.compare takes a scalar second only
                lhs, rhs, op = rhs, lhs, MIRRORED[op]
            if lhs.kind == "scalar":  # a comparison of two values fixed along the tile (no T.Not: as an integer)
                self.emit(f'if T.Cast("int32", {lhs.code} {op} {rhs.code}) == 0:')
                self.emit(f"    T.tile.fill({out}, {other.code})" if other.kind == "scalar" else
                          f"    T.copy({other.code}, {out})  # UB -> UB")
            else:
                self._lanes_where(out, tile, lhs.code, rhs, op, other)
            self.done(lhs, rhs)
        self.done(other)
        self.expr_temps.add(out)
        return _Opnd("tile", out)

    def _lanes_where(self, out: str, tile: T.Tile, lhs: str, rhs: _Opnd, op: str, other: _Opnd) -> None:
        """out's lanes where `lhs op rhs` fails become other's, one row at a time (every axis before the last):
        the row's sides copied into buffers of whole 256-byte repeats (T.tile.compare's unit; the lanes past the
        row are compared and not used), compared (`T.tile.compare`), and the lanes selected (`T.tile.select`)."""
        col, rows = tile.axes[-1], tile.axes[:-1]
        width = -(-col.size // 64) * 64
        mask = self.mask_buffer(width, "values")
        left = self.scratch("f32", [width], "cmp_lhs")
        right = self.scratch("f32", [width], "cmp_rhs") if rhs.kind == "tile" else None
        alt = self.scratch("f32", [col.size], "row") if other.kind == "tile" else None
        depth, at = self.depth, []
        for row in rows:
            at.append(self.fresh("r"))
            self.emit(f"for {at[-1]} in T.serial({row.size}):  # a where on values, row by row")
            self.depth += 1
        row = (lambda buf: f"{buf}[{', '.join(at)}, :]") if at else (lambda buf: buf)
        self.emit(f"T.copy({row(lhs)}, {left}[0:{col.size}])  # UB -> UB")
        if right is not None:
            self.emit(f"T.copy({row(rhs.code)}, {right}[0:{col.size}])  # UB -> UB")
        self.emit(f'T.tile.compare({mask}, {left}, {right if right is not None else rhs.code}, "{MODES[op]}")')
        if alt is not None:  # T.tile.select takes a whole buffer as its tensor operand (ascend_tile.py:673)
            self.emit(f"T.copy({row(other.code)}, {alt})  # UB -> UB")
            self.emit(f'T.tile.select({row(out)}, {mask}, {row(out)}, {alt}, "VSEL_TENSOR_TENSOR_MODE")')
        else:
            self.emit(f'T.tile.select({row(out)}, {mask}, {row(out)}, {other.code}, "VSEL_TENSOR_SCALAR_MODE")')
        self.depth = depth

    def _select_values_scalar(self, e: T.Select, tile: T.Tile, by_value: list, by_lanes: list) -> _Opnd:
        """`_select_values` for a tile without axes: b in a UB element of its own, replaced by a where every
        comparison holds (a NaN's comparison fails, so b stays)."""
        then, other = self._value(e.then, tile), self._value(e.other, tile)
        scalar = lambda v: v.code if v.kind == "scalar" else f"{v.code}[0]"  # noqa: E731
        held = self.alloc(self.fresh("where_scalar"), [8], "f32", "UB", "a where on values", pooled=False)
        self.emit(f"{held}[0] = {scalar(other)}")
        names = self._scalar_names(tile)
        conds = [f"{index_code(a.lhs, names)} {a.op} {index_code(a.rhs, names)}" for a in by_lanes]
        for atom in by_value:
            lhs, rhs = self._value(atom.lhs, tile), self._value(atom.rhs, tile)
            conds.append(f"{scalar(lhs)} {atom.op} {scalar(rhs)}")
        self.emit(f"if {_and_code(conds)}:")
        self.emit(f"    {held}[0] = {scalar(then)}")
        return _Opnd("scalar", f"{held}[0]")

    def _tile_reduce(self, op: T.AccUpdate) -> None:
        acc, acc_shape = self.accs[op.stmt]
        if isinstance(op.partial, T.Dot):
            raise BackendError(f"{op.stmt}: a matrix product whose tile is not [rows, columns, reduction] has no "
                               f"ascend-910b form")
        body, red = (op.partial.operand, list(op.partial.axes)) if isinstance(op.partial, T.Reduce) else (op.partial, [])
        shape = [a.size for a in op.tile.axes]
        terms = self._value(body, op.tile)
        if terms.kind != "tile":
            terms = self._materialise(terms, shape)
        if red:
            if len(red) != 1 or red[0] != len(shape) - 1:
                raise BackendError(f"{op.stmt}: only a reduction over the last tile axis is generated for ascend-910b")
            if op.op not in ("sum", "max"):
                raise BackendError(f"{op.stmt}: a {op.op} over tile axes; tilelang-ascend reduces tiles with "
                                   f"T.reduce_sum and T.reduce_max only: walk that axis in a serial loop (split it "
                                   f"with factor 1), or generate for ascend-950")
            part = self.alloc(self.fresh(f"r_{op.stmt}"), acc_shape, "f32", "UB")
            fn = "T.reduce_sum" if op.op == "sum" else "T.reduce_max"
            self.emit(f"{fn}({terms.code}, {part}, dim=-1, clear=True)")
            if op.op == "max" and op.zeros:
                self._zero_signs_of_rows(terms.code, shape, part, acc_shape)
            self.done(terms)
            terms = _Opnd("tile", part)
            self.expr_temps.add(part)
        combine = reduce_ops.combine(op.op)
        if combine in ("max", "min"):
            self.extremum(combine, _Opnd("tile", acc), terms, acc_shape, out=acc, zeros=op.zeros)
        else:
            self.emit(f"T.tile.add({acc}, {acc}, {terms.code})")
        self.done(terms)
        if op.accum != "f32":
            self._round(op.accum, _Opnd("tile", acc), acc_shape, into=acc)

    def _zero_signs_of_rows(self, terms: str, shape, part: str, part_shape) -> None:
        """A row maximum of T.reduce_max, IEEE's also where it is a zero: the largest reciprocal of the row's terms
        is +inf where a term is +0 (and the maximum a zero), -inf or negative where every term is -0 or negative;
        made a zero of its sign (`extremum`) and added to the maximum, it changes only a zero maximum.  (A sum of
        zeros would not do: T.reduce_sum starts from +0, so its sum of -0s is +0.)"""
        inverse = self.temp("t", shape)
        self.emit(f"T.tile.fill({inverse}, 1.0)")
        self.emit(f"T.tile.div({inverse}, {inverse}, {terms})  # 1 / +-0 is +-inf")
        row = self.temp("t", part_shape)
        self.emit(f"T.reduce_max({inverse}, {row}, dim=-1, clear=True)")
        self.done(inverse)
        self._zero_sign(row, row, "0.0")
        self.emit(f"T.tile.add({part}, {part}, {row})")
        self.done(row)

    def _product(self, op: T.AccUpdate):
        """(mask, lhs load, rhs load) of sum(k) X * Y over a [rows, columns, k] tile on the vector core, or None."""
        if op.op != "sum" or len(op.tile.axes) != 3:
            return None
        if isinstance(op.partial, T.Dot):  # an operand the vector cores hold is read where it is held
            lhs, rhs = (x.reg if isinstance(x, T.RegOperand) else x for x in (op.partial.lhs, op.partial.rhs))
            return op.tile.mask, lhs, rhs
        if not (isinstance(op.partial, T.Reduce) and tuple(op.partial.axes) == (2,)):
            return None
        body, mask = op.partial.operand, None
        if isinstance(body, T.Select) and body.other == T.Const(0.0):
            body, mask = body.then, body.cond
        if isinstance(body, T.Bin) and body.op == "*" and all(isinstance(x, (T.Load, T.Reg)) for x in (body.lhs, body.rhs)):
            return mask, body.lhs, body.rhs
        return None

    def _vector_matmul(self, op: T.AccUpdate, mask, lhs: T.Load, rhs: T.Load) -> None:
        """acc[r, :] += A[r, k] * B[k, :] for every row r and step k in order: the program's summation order,
        each product rounded to f32 and added (no fused multiply-add), masked (i, j, k) lanes adding nothing."""
        row, col, red = op.tile.axes
        acc, acc_shape = self.accs[op.stmt]
        if acc_shape != [row.size, col.size]:
            raise BackendError(f"{op.stmt}: accumulator tile {acc_shape} differs from the product's rows and columns")

        def order(load):  # the operand's indices along the tile; batch indices (Q[b, h, i, d]) hold one value
            if isinstance(load, T.Reg):  # a tile the vector cores hold: along the product's tile axes
                return [op.tile.axes[p].iter for p in load.axes]
            return [x.name if isinstance(x, T.Var) else None for x in load.indices
                    if not (isinstance(x, T.Var) and x.name in op.tile.scalars)]

        if {row.iter, red.iter} != set(order(lhs)):
            lhs, rhs = rhs, lhs
        if set(order(lhs)) != {row.iter, red.iter} or set(order(rhs)) != {red.iter, col.iter}:
            raise BackendError(f"{op.stmt}: the operands of sum({red.iter}) are not [{row.iter}, {red.iter}] and "
                               f"[{red.iter}, {col.iter}] tiles: the 910B's vector cores multiply tiles indexed by "
                               f"the tile's loop variables alone, and an operand here is read at an offset or a "
                               f"combination of them (after a split or rfactor of the reduction, `A[i, 8 * ko + kk]`; "
                               f"a convolution's `X[i, j + k]`); keep the reduction whole in one tile, or compile "
                               f"for ascend-950 or nvidia")
        self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}: on the vector core, row by row")
        a_rows = order(lhs) == [row.iter, red.iter]
        a = self._operand_f32(lhs, op.tile, [row.size, red.size] if a_rows else [red.size, row.size], by_element=True)
        b_rows = order(rhs) == [red.iter, col.iter]
        b = self._operand_f32(rhs, op.tile, [red.size, col.size] if b_rows else [col.size, red.size],
                              by_element=not b_rows)
        if not b_rows:  # the product needs rows of B along the columns: transpose the tile (scalar loop)
            name = rhs.stmt if isinstance(rhs, T.Reg) else rhs.tensor
            bt = self.alloc(self.fresh(f"{name}_t"), [red.size, col.size], "f32", "UB", f"{name} transposed")
            u, w = self.fresh("c"), self.fresh("k")
            self.emit(f"for {u} in T.serial({col.size}):")
            self.emit(f"    for {w} in T.serial({red.size}):")
            self.emit(f"        {bt}[{w}, {u}] = {b}[{u}, {w}]")
            b = bt
        prod = self.alloc(self.fresh("prod"), [col.size], "f32", "UB", "one row of products")
        # which mask comparisons matter: those on (row, k) skip steps; those on a column select lanes (a column
        # of another iteration, j == jo, adds nothing), except columns past B, whose zero padding adds nothing
        parts = atoms(mask)
        by_row = [p for p in parts if not mentions(p, red.iter) and not mentions(p, col.iter)]
        by_step = [p for p in parts if mentions(p, red.iter) and not mentions(p, col.iter)]
        by_lane = [p for p in parts if mentions(p, col.iter) and (
            mentions(p, red.iter) or isinstance(rhs, T.Reg)
            or not implied_by_bounds(p, list(rhs.indices), self.facts.dims(rhs.tensor)))]
        r, kk = self.fresh("r"), self.fresh("k")
        names = self._scalar_names(op.tile)
        names[row.iter] = self._row_code(row, r)
        names[red.iter] = self._row_code(red, kk)
        lanes, m = self.lane_buffer(col.size) if by_lane else (None, None)
        if by_lane:
            self.emit(f"T.tile.createvecindex({lanes}, 0.0)  # lane positions 0, 1, ...")
        depth = self.depth
        self.emit(f"for {r} in T.serial({row.size}):")
        self.depth += 1
        if by_row:
            self.emit(f"if {self._condition(by_row, names)}:")
            self.depth += 1
        self.emit(f"for {kk} in T.serial({red.size}):")
        self.depth += 1
        if by_step:
            self.emit(f"if {self._condition(by_step, names)}:")
            self.depth += 1
        scal = self.fresh("a")
        self.emit(f"{scal} = {a}[{r}, {kk}]" if a_rows else f"{scal} = {a}[{kk}, {r}]")
        self.emit(f"T.tile.mul({prod}, {b}[{kk}, :], {scal})")
        if by_lane:
            for atom in by_lane:
                t = lane_test(atom, col.iter, col.offset)
                self.emit(f'T.tile.compare({m}, {lanes}, {self._threshold(t.threshold, names)}, "{t.mode}")')
                self.emit(f'T.tile.select({prod}, {m}, {prod}, 0.0, "VSEL_TENSOR_SCALAR_MODE")')
        self.emit(f"T.tile.add({acc}[{r}, :], {acc}[{r}, :], {prod})")
        if op.accum != "f32":
            low = self.alloc(self.fresh(f"t_{op.accum}"), [col.size], op.accum, "UB")
            self.emit(f'T.tile.cast({low}, {acc}[{r}, :], "CAST_RINT", {col.size})  # accumulate in {op.accum}')
            self.emit(f'T.tile.cast({acc}[{r}, :], {low}, "CAST_NONE", {col.size})')
        self.depth = depth

    def _operand_f32(self, load, tile: T.Tile, shape, by_element: bool = False) -> str:
        """An operand tile GM -> UB (clipped, zero-padded), widened to f32, or the f32 tile the vector cores hold
        (a `Reg`).  The product reads it element by element and row by row, so E4M3 bytes may come in a buffer
        of more rows than the tile: their decoding compares whole 256-byte repeats of f16 (128 values).  An
        operand read element by element (`by_element`) comes in rows of whole 32-byte blocks, as a GM -> UB copy
        of several rows needs: a row of one vector core's half of two rows is one f32 (covariance at M = 2,
        fuzz seed 5522); the lanes past the tile are read (clipped at the tensor) and not used."""
        if isinstance(load, T.Reg):
            value = self.values.get(load.stmt)
            if value is None or value.kind != "tile" or list(self.shapes.get(load.stmt, [])) != list(shape):
                raise BackendError(f"{load.stmt} is not held as the {shape} tile the product on the vector cores "
                                   f"reads")
            return value.code
        arg = next(t for t in self.kernel.tensors if t.name == load.tensor)
        names = self._region_names(tile)
        rows, cols = shape
        block = UB_ROW_BYTES // BYTES[arg.dtype]
        if by_element and rows > 1 and cols % block:
            cols = -(-cols // block) * block
            last = load.indices[-1]
            tile = T.Tile(axes=[T.Axis(a.iter, a.offset, cols, a.offset_isl)
                                if isinstance(last, T.Var) and a.iter == last.name else a for a in tile.axes],
                          scalars=tile.scalars, mask=tile.mask)
        shape = [rows, cols]
        held = [max(rows, 128 // cols), cols] if arg.dtype == "f8e4m3" and rows * cols < 128 else shape
        raw = self.alloc(self.fresh(f"{load.tensor}_ub"), held, arg.dtype, "UB", f"tile of {load.tensor}")
        lanes = axes_not_last(load.indices, tile)
        if lanes:  # a fixed index after a tile axis (A[r, q, s] at one q): no one copy moves the two axes
            sub = T.Tile(axes=lanes, scalars=tile.scalars, mask=None)
            self._load_lanes(load, sub, raw, arg.dtype, "its tile axes are not the tensor's last two dimensions")
            return self._widen(raw, arg.dtype, held)
        if len(load.indices) > 2:  # batch indices at their one value, the tile's two axes as slices
            region = ", ".join(region_indices(load, tile, self.vars))
        else:
            region = ", ".join(index_code(simplify(i), names) for i in load.indices)
        into = raw if held == shape else f"{raw}[0:{rows}, :]"
        self.emit(f"T.copy({self.tensor(load.tensor)}[{region}], {into})  # GM -> UB")
        return self._widen(raw, arg.dtype, held)

    def _widen(self, raw: str, dtype: str, shape) -> str:
        if dtype == "f32":
            return raw
        if dtype == "f8e4m3":
            bytes_, raw, dtype = raw, e4m3.decode_e4m3(self, raw, shape), "f16"
            self.expr_temps.update({bytes_, raw})
            self.done(bytes_)
        wide = self.alloc(self.fresh("t_f32"), shape, "f32", "UB")
        self.emit(f'T.tile.cast({wide}, {raw}, "CAST_NONE", {math.prod(shape or [1])})')
        self.expr_temps.add(raw)
        self.done(raw)
        return wide


MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}  # a op b == b MIRRORED[op] a


def compares_values(atom: T.Bin) -> bool:
    """Whether a comparison reads values (a tensor, an earlier statement's register, a running maximum), not
    loop variables and sizes alone."""
    return any(T.nodes_in(side, (T.Load, T.Reg, T.Running, T.Reference)) for side in (atom.lhs, atom.rhs))
