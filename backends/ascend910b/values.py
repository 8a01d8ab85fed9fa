"""Values in UB: loads (GM -> UB, widened to f32), registers of earlier statements, iterator values, rounding
to a dtype (E4M3 through e4m3.py), and three-address arithmetic, one UB temporary per operation.
"""

from __future__ import annotations

import math

from tdsl.backends.ascend910b import e4m3
from tdsl.backends.ascend910b.common import index_code, _Opnd, _exact_reciprocal, TL_DTYPES
from tdsl.backends.common.extrema import needs_zero_order, nonzero_literal
from tdsl.backends.tilelang.emit import float_code
from tdsl.backends.ascend910b.vector import compares_values
from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.lane_masks import atoms, check_affine, mentions, expr_text as _expr_text
from tdsl.compiler.lower.passes.ascend910b import (BYTES, DEEP_REGION, UB_ROW_BYTES, NoCopyForm, deep_axes,
                                                   layout as tile_layout, shift_of, shifted_axis)
from tdsl.compiler.lower.tileir import expr_vars
from tdsl.compiler.lower.tileir import simplify


# what to write instead of a primitive the 910B dialect cannot spell (each rounds differently from the original),
# and the targets that spell it (no Ascend printer spells exp2 or fma: backends/tilelang/emit.py NVIDIA_ONLY)
UNSPELLED_HINTS = {
    "exp2": ("write exp((X - m) * c) for exp2((X - m) * c2) or exp2(fma(X, c2, -(m * c2))) (c = c2 * ln 2)",
             "nvidia"),
    "fma": ("write fma(x, y, z) as x * y + z; in an exponent of a running maximum, exp(fma(X, c, -(m * c))) as "
            "exp(X * c - m * c), which online(m) follows", "nvidia"),
    "tanh": ("write it with exp (tanh(x) = 1 - 2 / (exp(2 * x) + 1))", "ascend-950 or nvidia"),
}


class Values:
    """Methods of `Ascend910BPrinter` (emit.py); `self` is the printer."""

    def _materialise(self, v: _Opnd, shape) -> _Opnd:
        buf = self.temp("t", shape)
        self.emit(f"T.tile.fill({buf}, {v.code})")
        return _Opnd("tile", buf)

    def _round(self, dtype, v: _Opnd, shape, into=None) -> _Opnd:
        if dtype == "f32":
            return v
        if dtype == "f8e4m3":
            if v.kind == "scalar":
                return self._round_scalar_e4m3(v)
            y = e4m3.round_e4m3(self, v.code, shape)
            self.done(v)
            self.expr_temps.add(y)
            if into is not None:
                self.emit(f"T.copy({y}, {into})  # UB -> UB")
                return _Opnd("tile", into)
            return _Opnd("tile", y)
        if v.kind == "scalar":
            return _Opnd("scalar", f'T.Cast("float32", T.Cast("{TL_DTYPES[dtype]}", {v.code}))')
        n = math.prod(shape or [1])
        low = self.temp(f"t_{dtype}", shape, dtype)
        self.emit(f'T.tile.cast({low}, {v.code}, "CAST_RINT", {n})  # round to {dtype}')
        self.done(v)
        out = into or self.temp("t", shape)  # may be v's buffer: rounded in place
        self.emit(f'T.tile.cast({out}, {low}, "CAST_NONE", {n})')
        self.done(low)
        return _Opnd("tile", out)

    def _scaled(self, op: T.AccFinish, v: _Opnd, shape) -> _Opnd:
        """A finished sum multiplied by its terms' constant factor (tileir.AccFinish.scale), if it has one."""
        if op.scale == 1.0:
            return v
        self.emit("# every term's constant factor, applied to the sum")
        return self._binop("*", v, _Opnd("scalar", float_code(op.scale)), shape)

    def _round_scalar_e4m3(self, v: _Opnd) -> _Opnd:
        """A scalar rounded to E4M3: the conversion compares whole 256-byte repeats, so the scalar fills 64 lanes
        of f32, is rounded there, and is read back from a buffer of its own (a value read later must not sit in
        a temporary that another statement reuses)."""
        lanes = self.temp("t", [64])
        self.emit(f"T.tile.fill({lanes}, {v.code})")
        y = e4m3.round_e4m3(self, lanes, [64])
        self.done(lanes)
        held = self.alloc(self.fresh("e4m3_scalar"), [8], "f32", "UB", "a scalar rounded to E4M3", pooled=False)
        self.emit(f"{held}[0] = {y}[0]")
        self.expr_temps.add(y)
        self.done(y)
        return _Opnd("scalar", f"{held}[0]")

    def _value(self, e, tile: T.Tile) -> _Opnd:
        shape = [a.size for a in tile.axes]
        axes = [a.iter for a in tile.axes]
        v = lambda x: self._value(x, tile)
        if isinstance(e, T.Const):
            return _Opnd("scalar", float_code(e.value))
        if isinstance(e, T.Reg):
            return self._reg(e, axes, shape)
        if isinstance(e, T.Running):  # a running maximum: its accumulator now, rounded as a store would
            acc, held = self.accs[e.stmt]
            return self._round(e.dtype, self._held(e.stmt, _Opnd("tile", acc), held, e.axes, axes, shape), shape)
        if isinstance(e, T.NegInfAsZero):
            return self._neg_inf_as_zero(e.operand, tile)
        if isinstance(e, T.Reference):  # the maximum a rescaled sum was last brought to
            ref = self.refs[e.stmt]
            return self._held(e.stmt, _Opnd("tile", ref), self.accs[e.stmt][1][:1], e.axes, axes, shape)
        if isinstance(e, T.Load):
            key = repr(e)
            if key in getattr(self, "loads", {}):
                return self.loads[key]
            self.loads = getattr(self, "loads", {})
            self.loads[key] = result = self._load(e, tile, shape, axes)
            if result.kind == "tile" and getattr(self, "load_uses", {}).get(key) == 1:
                self.expr_temps.add(result.code)  # read once: its parent may overwrite it
            elif result.kind == "tile":
                self.expr_temps.discard(result.code)  # read again: nobody may overwrite it
            return result
        if isinstance(e, T.Select):
            if any(compares_values(a) for a in atoms(e.cond)):
                return self._select_values(e, tile)
            if not isinstance(e.other, T.Const):
                return self._select_computed(e, tile)
            return self._select(e.cond, v(e.then), e.other, tile)
        if isinstance(e, T.Neg):
            x = v(e.operand)
            if x.kind == "scalar":
                return _Opnd("scalar", f"(-{x.code})")
            return self._binop("*", x, _Opnd("scalar", "-1.0"), shape)
        if isinstance(e, T.Bin) and e.op in ("+", "-", "*", "/", "max", "min"):
            return self._binop(e.op, v(e.lhs), v(e.rhs), shape)
        if isinstance(e, T.Call):
            args = [v(a) for a in e.args]
            if e.func in ("max", "min"):
                return self._binop(e.func, args[0], args[1], shape, e.zeros)
            if e.func == "fast_inverse":  # the IEEE division, which the declared approximation allows
                return self._binop("/", _Opnd("scalar", "1.0"), args[0], shape)
            # The primitives of compiler/model/functions.py (rsqrt, sigmoid, silu arrive expanded into them, so the
            # 910B computes the interpreter's steps, not its own T.tile.silu).
            fn = {"exp": "exp", "log": "ln", "sqrt": "sqrt", "abs": "abs"}.get(e.func)
            if fn is None:
                hint, targets = UNSPELLED_HINTS.get(e.func, ("write the program without it for this target",
                                                             "ascend-950 or nvidia"))
                raise BackendError(f"{e.func}() has no T.tile form in tilelang-ascend 0.1.4; {hint}, or compile "
                                   f"for {targets}")
            x = args[0]
            if x.kind == "scalar":
                scal = {"exp": "T.exp({})", "ln": "T.log({})", "sqrt": "T.sqrt({})", "abs": "T.abs({})"}
                return _Opnd("scalar", scal[fn].format(x.code))
            self.done(x)
            out = self.temp("t", shape)  # may be x's buffer: in place
            self.emit(f"T.tile.{fn}({out}, {x.code})")
            return _Opnd("tile", out)
        if isinstance(e, T.Round):
            return self._round(e.dtype, v(e.operand), shape)
        if isinstance(e, T.Var):
            return self._iterator_value(e.name, tile)
        raise BackendError(f"{_expr_text(e)}: comparisons and where on values have no T.tile form for ascend-910b")

    def _neg_inf_as_zero(self, operand: T.Expr, tile: T.Tile) -> _Opnd:
        """A maximum read by its exponential, 0 where it is -inf (tileir.NegInfAsZero).  The vector unit of
        tilelang-ascend 0.1.4 has no select of values, so the scalar unit puts the 0s in: into a row's own
        value (row by row), into a copy of the running maximum's elements before they are broadcast (one per
        row), or else into a copy of the value as read."""
        shape = [a.size for a in tile.axes]
        if isinstance(operand, T.Running) and self.row is None:
            acc, held = self.accs[operand.stmt]
            copy = self.temp("t", list(held), note=f"{operand.stmt}, 0 where -inf")
            self.emit(f"T.copy({acc}, {copy})  # UB -> UB")
            self._zero_where_neg_inf(copy, list(held))
            self.expr_temps.discard(copy)  # read through the broadcast below, maybe in place
            held_value = self._held(operand.stmt, _Opnd("tile", copy), held, operand.axes,
                                    [a.iter for a in tile.axes], shape)
            return self._round(operand.dtype, held_value, shape)
        x = self._value(operand, tile)
        if x.kind == "scalar":
            out = self.alloc(self.fresh("finite_scalar"), [8], "f32", "UB", "a maximum, 0 where -inf", pooled=False)
            self.emit(f"{out}[0] = {x.code}")
            self._zero_where_neg_inf(out, [])
            return _Opnd("scalar", f"{out}[0]")
        out = self.temp("t", shape, note="a maximum, 0 where -inf")
        self.emit(f"T.copy({x.code}, {out})  # UB -> UB")
        self.done(x)
        self._zero_where_neg_inf(out, shape)
        return _Opnd("tile", out)

    def _zero_where_neg_inf(self, buffer: str, shape) -> None:
        """Each element of `buffer` (its first, for shape []) that is -inf set to 0, by the scalar unit."""
        depth, lanes = self.depth, ["0"] if not shape else []
        for extent in shape:
            lanes.append(self.fresh("c"))
            self.emit(f"for {lanes[-1]} in T.serial({extent}):")
            self.depth += 1
        element = f"{buffer}[{', '.join(lanes)}]"
        self.emit(f"if {element} == {float_code(-math.inf)}:")
        self.emit(f"    {element} = 0.0")
        self.depth = depth

    def _select_computed(self, e: T.Select, tile: T.Tile) -> _Opnd:
        """`where(c, a, b)` with a computed b and a condition on loop variables only (the first step of a time
        loop or a recurrence): each branch is computed only where it is taken, under `if c: ... else: ...`, so
        that neither reads outside its guard (`An[t - 1, i]` at t = 0)."""
        parts = atoms(e.cond)
        for atom in parts:
            check_affine(atom)  # a comparison of values (floyd_warshall's shortest path) is refused here
        if any(mentions(a, ax.iter) for a in parts for ax in tile.axes):
            return self._select_lanes(e, tile)
        shape = [a.size for a in tile.axes]
        out = (self.temp("t", shape, note="one branch of a where") if shape else
               self.alloc(self.fresh("branch_scalar"), [8], "f32", "UB", "one branch of a where", pooled=False))
        self.emit(f"if {self._condition(parts, self._scalar_names(tile))}:")
        self._branch(e.then, tile, out, shape)
        self.emit("else:")
        self._branch(e.other, tile, out, shape)
        return _Opnd("tile", out) if shape else _Opnd("scalar", f"{out}[0]")

    def _select_lanes(self, e: T.Select, tile: T.Tile) -> _Opnd:
        """`where(c, a, b)` with a computed b and a condition on the tile's lanes (a stencil's boundary): both
        branches over the whole tile, then b's lanes where c fails (T.tile.compare, T.tile.select: bits picked,
        nothing rounded).  A branch's loads keep every lane inside its tensor (compiler/lower/loads.py), so the
        lanes that do not take it read nothing outside; their values are dropped."""
        shape = [a.size for a in tile.axes]
        then = self._value(e.then, tile)
        then = then if then.kind == "tile" else self._materialise(then, shape)
        if then.code in self.expr_temps:  # only this select reads it: its lanes are replaced in place
            out = then.code
        else:
            out = self.temp("t", shape, note="one branch of a where, the other's lanes put in")
            self.emit(f"T.copy({then.code}, {out})  # UB -> UB")
        self.expr_temps.discard(out)  # kept while the other branch is computed
        other = self._value(e.other, tile)
        other = other if other.kind == "tile" else self._materialise(other, shape)
        self._mask_lanes(out, tile, e.cond, tensor=other.code)
        self.done(other)
        self.expr_temps.add(out)
        return _Opnd("tile", out)

    def _branch(self, value: T.Expr, tile: T.Tile, out: str, shape) -> None:
        """One branch of `_select_computed`, one level deeper: its value into `out`.  Loads stay inside it (a
        load computed in one branch is not there in the other)."""
        loads = dict(getattr(self, "loads", {}))
        self.depth += 1
        v = self._value(value, tile)
        if not shape:
            self.emit(f"{out}[0] = {v.code if v.kind == 'scalar' else f'{v.code}[0]'}")
        elif v.kind == "scalar":
            self.emit(f"T.tile.fill({out}, {v.code})")
        else:
            self.emit(f"T.copy({v.code}, {out})  # UB -> UB")
        self.done(v)
        self.depth -= 1
        self.loads = loads

    def _iterator_value(self, name: str, tile: T.Tile) -> _Opnd:
        """An iterator used as a value: a fixed one is a scalar; along a tile axis, the lane positions plus the
        axis's start (T.tile.createvecindex), broadcast over the other axis of a 2-D tile."""
        axes = [a.iter for a in tile.axes]
        if name not in axes:
            return _Opnd("scalar", f'T.Cast("float32", {index_code(simplify(tile.scalars[name]), self.vars)})')
        axis = tile.axes[axes.index(name)]
        lanes = self.temp("t", [axis.size])
        self.emit(f'T.tile.createvecindex({lanes}, T.Cast("float32", {index_code(simplify(axis.offset), self.vars)}))'
                  f"  # {name}")
        if len(axes) == 1:
            return _Opnd("tile", lanes)
        if len(axes) != 2:
            raise BackendError(f"the iterator {name} as a value of a {len(axes)}-D tile has no ascend-910b form")
        out = self._arrange(lanes, [axes.index(name)], [a.size for a in tile.axes])
        self.done(lanes)
        return out

    def _reg(self, e: T.Reg, axes, shape) -> _Opnd:
        """A value computed earlier in this kernel."""
        value = self.values[e.stmt]
        if value.kind == "scalar":
            return value
        return self._held(e.stmt, value, self.shapes.get(e.stmt, []), e.axes, axes, shape)

    def _held(self, stmt: str, value: _Opnd, held, read_axes, axes, shape) -> _Opnd:
        """A UB tile of shape `held` read along the tile axes `read_axes` of a tile with `axes` and `shape`;
        row by row, a row of it or its element for the row."""
        if self.row is not None:
            rank = len(held)
            if tuple(read_axes) == (0, 1) and rank == 2:
                return _Opnd("tile", f"{value.code}[{self.row}, :]")
            if tuple(read_axes) == (1,) and rank == 1:
                return self._fitted(value, held, shape[-1:])  # the row's lanes
            if tuple(read_axes) == (0,) and rank == 1:
                return _Opnd("scalar", f"{value.code}[{self.row}]")
            raise BackendError(f"reading {stmt} (axes {read_axes}) row by row has no ascend-910b form")
        if list(read_axes) != list(range(len(axes))):
            if (len(axes) == 2 and [shape[p] for p in read_axes] == list(held)
                    and list(read_axes) in ([1, 0], [1], [0])):
                return self._arrange(value.code, list(read_axes), shape)
            raise BackendError(f"reading {stmt} broadcast along some tile axes (it varies along axes "
                               f"{list(read_axes)} of this {len(axes)}-axis tile) has no whole-tile T.tile form for "
                               f"ascend-910b: its vector core broadcasts a row or a column of a 2-D tile only; give "
                               f"the reading statement tiles in which {stmt} is such a row or column (for instance "
                               f"compute {stmt} at a loop inside the reader's tile loops), or compile for "
                               f"ascend-950 or nvidia")
        return self._fitted(value, held, shape)

    def _fitted(self, value: _Opnd, held, shape) -> _Opnd:
        """A held tile as the reading tile's shape: the same buffer where they agree; where an axis was widened
        for one of them and not the other (a 1-D tile of 4 lanes read along a row widened to 8: cholesky at
        N = 4, fuzz seed 5524), its elements copied into a buffer of the reader's shape by the scalar unit, the
        lanes past them 0 (lanes outside the reader's mask)."""
        if list(held) == list(shape) or len(held) != len(shape):
            return value
        out = self.temp("t", shape, note="a held tile in the reader's shape")
        self.emit(f"T.tile.fill({out}, 0.0)")
        depth, lanes = self.depth, []
        for extent in map(min, held, shape):
            lanes.append(self.fresh("c"))
            why = f"  # {value.code} into the reader's shape" if len(lanes) == 1 else ""
            self.emit(f"for {lanes[-1]} in T.serial({extent}):{why}")
            self.depth += 1
        self.emit(f"{out}[{', '.join(lanes)}] = {value.code}[{', '.join(lanes)}]")
        self.depth = depth
        return _Opnd("tile", out)

    def _load(self, e, tile, shape, axes) -> _Opnd:
        used = {x.name for idx in e.indices for x in expr_vars(idx)}
        arg = next(t for t in self.kernel.tensors if t.name == e.tensor)
        names = self._region_names(tile)
        if not used & set(axes):
            if arg.dtype == "f8e4m3":
                raise BackendError(f"a scalar read of the FP8 tensor {e.tensor} has no ascend-910b form")
            read = f'T.Cast("float32", {self.gm_element(e.tensor, [index_code(simplify(i), names) for i in e.indices])})'
            return _Opnd("scalar", read) if e.mask is None else self._guarded_scalar(read, e, names)
        order = [i.name for i in e.indices if isinstance(i, T.Var) and i.name in axes]
        plain = all(isinstance(i, T.Var) for i in e.indices if used & set(axes) & {v.name for v in expr_vars(i)})
        if order != list(axes) and plain and len(set(order)) == len(order) and len(axes) == 2:
            return self._load_arranged(e, tile, order)
        layout, lanes_why = None, None  # lanes_why: why the scalar unit reads the tile lane by lane
        if self.facts.planes(e.tensor):  # fold_storage: a region could cross the planes' wrap-around
            lanes_why = "its storage is folded"
        elif len(deep_axes(e.indices, tile)) > 2:
            lanes_why = DEEP_REGION
        else:
            try:
                layout = tile_layout(e.tensor, e.indices, axes, "load")
            except NoCopyForm:  # reversed (`X[N - 1 - j]`), transposed in 3-D, strided: no one copy moves it
                lanes_why = "no T.copy moves its region"
        raw = self.alloc(self.fresh(f"{e.tensor}_ub"), shape, arg.dtype, "UB", f"tile of {e.tensor}")
        region = ", ".join(index_code(simplify(i), names) for i in e.indices)
        depth, guard = self.depth, self._load_guard(e, tile)
        if guard:
            self.emit(f"if {guard}:  # some lane of the tile reads {e.tensor}")
            self.depth += 1
        starts = self._starts_maybe_before(e, tile) if lanes_why is None else None
        if lanes_why is None and starts is None:  # a copy clips only the region's end
            lanes_why = "its region starts before it"
        if lanes_why is not None:
            self._load_lanes(e, tile, raw, arg.dtype, lanes_why)
        else:
            if starts:
                self.emit(f"if {self._condition([T.Bin('>=', s, T.Const(0)) for s in starts], names)}:  # the "
                          f"region starts inside {e.tensor}")
                self.depth += 1
            if layout == "column":
                self._load_column(e.tensor, region, raw, shape[0], arg.dtype)
            else:
                clipped = " (clipped to the tensor, zero-padded)" if e.mask is not None else ""
                self.emit(f"T.copy({self.tensor(e.tensor)}[{region}], {raw})  # GM -> UB{clipped}")
            if starts:
                self.depth -= 1
                self.emit(f"else:  # the region starts before {e.tensor} (a copy clips only its end)")
                self.depth += 1
                self._load_lanes(e, tile, raw, arg.dtype, "its region starts before it")
                self.depth -= 1
        value = self._widen(raw, arg.dtype, shape)
        if guard:
            self.depth = depth
            self.emit("else:  # every lane takes the masked value")
            self.emit(f"    T.tile.fill({value}, {float_code(e.other)})")
        return _Opnd("tile", value)

    @staticmethod
    def _starts_maybe_before(e: T.Load, tile: T.Tile) -> list | None:
        """The starts of a masked load's region (over loop variables and sizes), along the tensor's dimensions
        that a tile axis walks shifted back (`X[i, j - 1]`: `j0 - 1`), that may lie before the tensor; None when
        one surely does (`j - 1` with j's tile at 0).  An unmasked load reads inside its tensor everywhere, and
        an axis shifted forward by a constant starts at or after the axis's start."""
        if e.mask is None:
            return []
        offsets = {a.iter: a.offset for a in tile.axes}
        out = []
        for index in e.indices:
            axis = shifted_axis(index, list(offsets))
            shift = shift_of(index, axis) if axis is not None else None
            if shift is None or (isinstance(shift, T.Const) and shift.value >= 0):
                continue
            start = simplify(T.Bin("+", offsets[axis], shift))
            if isinstance(start, T.Const) and start.value < 0:
                return None
            if not isinstance(start, T.Const):
                out.append(start)
        return out

    def _load_lanes(self, e: T.Load, tile: T.Tile, raw: str, dtype: str, why: str) -> None:
        """A tile of `e` element by element (the scalar unit), where no copy reads it: a region that starts
        before the tensor (a copy clips only its end), or one that is not a block of the tensor in the tile's
        axis order (`X[N - 1 - j]`, `A[k, i]` along a 3-D tile).  Each lane that the load's mask keeps and that
        lies inside the tensor reads its element, the others take the masked value, as a clipped, padded copy
        leaves them.  (The mask may leave the tensor's bounds to the copy's clipping: a tile widened to whole
        32-byte rows has lanes past them, jacobi-2d at N = 3, fuzz seed 5523.)  Slow, one scalar read a lane."""
        if dtype == "f8e4m3" and e.other != 0.0:
            raise BackendError(f"a load of the FP8 tensor {e.tensor} read lane by lane ({why}), masked to "
                               f"{e.other}, has no ascend-910b form")
        names = self._region_names(tile)
        lanes = []
        for n, a in enumerate(tile.axes):
            lane = self.fresh("l")
            note = f"  # {e.tensor} lane by lane: {why}" if n == 0 else ""
            self.emit(f"for {lane} in T.serial({a.size}):{note}")
            self.depth += 1
            names[a.iter] = f"({names[a.iter]} + {lane})"
            lanes.append(lane)
        element = self.gm_element(e.tensor, [index_code(simplify(i), names) for i in e.indices])
        inside = self._inside(e.tensor, [simplify(i) for i in e.indices])
        self.emit(f"if {self._condition(atoms(e.mask) + inside, names)}:")
        self.emit(f"    {raw}[{', '.join(lanes)}] = {element}")
        self.emit("else:")
        masked = 0 if dtype == "f8e4m3" else float_code(e.other)  # E4M3 is bytes here: 0 is +0.0
        self.emit(f'    {raw}[{", ".join(lanes)}] = T.Cast("{TL_DTYPES[dtype]}", {masked})')
        self.depth -= len(tile.axes)

    def gm_element(self, tensor: str, parts: list) -> str:
        """A GM tensor's element at the index texts `parts`; a dimension the schedule folds (fold_storage) at its
        plane, `(t) % planes` (compiler/model/storage.py)."""
        planes = self.facts.planes(tensor)
        idx = [(f"({p}) % {planes[k]}" if planes[k] > 1 else "0") if k in planes else p for k, p in enumerate(parts)]
        return f"{self.tensor(tensor)}[{', '.join(idx)}]"

    def _inside(self, tensor: str, indices: list, dims=None) -> list:
        """The comparisons that keep an element's indices inside its tensor (a mask may leave them to a copy's
        clipping), along `dims` (default: all); a folded dimension's index is its plane's, any index at or
        above 0."""
        planes = self.facts.planes(tensor)
        return [T.Bin(op, i, bound) for k, (i, extent) in enumerate(zip(indices, self._extents(tensor)))
                if dims is None or k in dims
                for op, bound in ((">=", T.Const(0)), ("<", extent)) if not (k in planes and op == "<")]

    def _extents(self, tensor: str) -> list:
        """A tensor's extents as expressions: bound sizes as numbers, run-time sizes by name."""
        shape = next(t for t in self.kernel.tensors if t.name == tensor).shape
        out = []
        for dim, extent in zip(self.facts.dims(tensor), shape):
            if dim is None and not str(extent).isidentifier():
                raise InternalError(f"{tensor}: the extent {extent} is neither a number nor a size")
            out.append(T.Const(dim) if dim is not None else T.Var(str(extent)))
        return out

    def _load_guard(self, e: T.Load, tile: T.Tile) -> str | None:
        """The condition under which some lane of a masked load's tile reads the tensor, where the statement's own
        guard does not already ensure it: a tile may read its tensor past the end for some iterations of the loops
        around it (`where(i < M - 1, X[i + 1, j], 0.0)` at the last i), and a copy whose GM region lies wholly
        outside the tensor is not clipped to nothing."""
        if e.mask is None:
            return None
        parts = [a for a in self._some_lane_atoms(tile, e.mask) if a not in self.proven]
        return self._condition(parts, self._scalar_names(tile)) if parts else None

    def _guarded_scalar(self, read: str, e: T.Load, names: dict) -> _Opnd:
        """A scalar read under its load's mask (the tensor's bounds, where a `where` branch is not taken): `other`
        in a UB element of its own, the element read only where the mask holds, so that no address outside the
        tensor is formed (an affine conjunction of the loop variables, as lane masks are)."""
        parts = atoms(e.mask)
        for atom in parts:
            check_affine(atom)
        held = self.alloc(self.fresh("guarded_scalar"), [8], "f32", "UB", "a scalar read inside the tensor only",
                          pooled=False)
        self.emit(f"{held}[0] = {float_code(e.other)}")
        self.emit(f"if {self._condition(parts, names)}:")
        self.emit(f"    {held}[0] = {read}")
        return _Opnd("scalar", f"{held}[0]")

    def _load_arranged(self, e: T.Load, tile: T.Tile, order: list) -> _Opnd:
        """A load of a 2-D tile whose axes the tensor holds transposed ([j, i] for a tile [i, j]) or only in part
        (a row broadcast down the tile, or a column across it): the tensor's own tile comes into UB in its
        order, then is arranged into the tile's (`_arrange`)."""
        by_name = {a.iter: a for a in tile.axes}
        sub = [by_name[n] for n in order]
        arg = next(t for t in self.kernel.tensors if t.name == e.tensor)
        if len(sub) == 2:  # the GM rows run along the tile's first axis: whole 32-byte blocks of them
            last = sub[-1]
            sub[-1] = T.Axis(last.iter, last.offset, max(last.size, UB_ROW_BYTES // BYTES[arg.dtype]))
        part = T.Tile(axes=sub, scalars=tile.scalars, mask=e.mask)
        vals = self._load(e, part, [a.size for a in sub], order)
        positions = [[a.iter for a in tile.axes].index(n) for n in order]
        out = self._arrange(vals.code, positions, [a.size for a in tile.axes])
        self.expr_temps.add(vals.code)
        self.done(vals)
        return out

    def _arrange(self, src: str, positions: list, shape: list) -> _Opnd:
        """A 2-D tile from the UB buffer `src` whose dimension n is the tile's axis positions[n]: transposed by
        the scalar unit, or broadcast row by row (a row copied into every row, an element filling its row)."""
        out = self.temp("t", shape)
        rows, cols = shape
        u, w = self.fresh("r"), self.fresh("c")
        if positions == [1, 0]:
            self.emit(f"for {u} in T.serial({rows}):  # transposed, element by element")
            self.emit(f"    for {w} in T.serial({cols}):")
            self.emit(f"        {out}[{u}, {w}] = {src}[{w}, {u}]")
        elif positions == [1]:
            self.emit(f"for {u} in T.serial({rows}):  # the same row in every row")
            self.emit(f"    T.copy({src}, {out}[{u}, :])  # UB -> UB")
        elif positions == [0]:
            self.emit(f"for {u} in T.serial({rows}):  # each row filled with its element")
            self.emit(f"    T.tile.fill({out}[{u}, :], {src}[{u}])")
        else:
            raise InternalError(f"arranging axes {positions} into a 2-D tile")
        return _Opnd("tile", out)

    def _column_rows(self, tensor: str, n: int, dtype: str) -> str:
        """A UB buffer of n rows of one 32-byte block: a GM <-> UB copy starts every UB row on a block, so the
        element of a tile that lies in row r of a GM column is at [r, 0] (DataCopyPad, common.h:199-236)."""
        return self.temp(f"{tensor}_rows", [n, UB_ROW_BYTES // BYTES[dtype]], dtype,
                         f"{tensor}: one element per 32-byte row")

    def _load_column(self, tensor: str, region: str, raw: str, n: int, dtype: str) -> None:
        """A 1-D tile down a GM column: one copy of the n rows (clipped and padded at the tensor's end; the
        block's other lanes are the row's next elements, or padding), then the first lane of each row."""
        rows = self._column_rows(tensor, n, dtype)
        self.emit(f"T.copy({self.tensor(tensor)}[{region}], {rows})  # GM -> UB: row r of the column at [r, 0] "
                  f"(clipped to the tensor)")
        r = self.fresh("r")
        self.emit(f"for {r} in T.serial({n}):  # the column's elements, side by side")
        self.emit(f"    {raw}[{r}] = {rows}[{r}, 0]")
        self.done(rows)

    def _binop(self, op: str, a: _Opnd, b: _Opnd, shape, zeros: bool = True) -> _Opnd:
        """a op b into a UB temporary; the temporary may be an operand's own buffer (a subexpression its parent
        consumes): the T.tile.* operations work element by element, so dst may be src0 or src1.  `zeros`: a max /
        min whose zero a use can tell (T.Call.zeros) is IEEE's, else the plain comparison."""
        if a.kind == b.kind == "scalar":
            code = _scalar_extremum(op, a.code, b.code, zeros) if op in ("max", "min") else f"({a.code} {op} {b.code})"
            return _Opnd("scalar", code)
        if op == "-" and b.kind == "scalar":  # x - s == x + (-s) exactly: Adds takes a scalar
            op, b = "+", _Opnd("scalar", f"(-{b.code})")
        if op == "-" and a.kind == "scalar":  # s - x == (-x) + s exactly (T.tile.sub takes no scalar)
            return self._binop("+", self._binop("*", b, _Opnd("scalar", "-1.0"), shape), a, shape)
        if op == "/" and b.kind == "scalar" and _exact_reciprocal(b.code) is not None:
            op, b = "*", _Opnd("scalar", _exact_reciprocal(b.code))  # x / 2^k == x * 2^-k exactly
        if op in ("+", "*", "max", "min") and a.kind == "scalar":
            a, b = b, a  # commutative
        if op == "/" and "scalar" in (a.kind, b.kind):
            return self._divide_by_rows(a, b, shape)
        if op in ("max", "min"):
            return _Opnd("tile", self.extremum(op, a, b, shape, zeros=zeros))
        fn = {"+": "add", "-": "sub", "*": "mul", "/": "div"}[op]
        self.done(a, b)
        out = self.temp("t", shape)
        self.emit(f"T.tile.{fn}({out}, {a.code}, {b.code})")
        return _Opnd("tile", out)

    # IEEE 754-2019's maximum and minimum order -0.0 below +0.0 (docs/interpreter.md); T.tile.max / T.tile.min and
    # T.max / T.min compare, so of two equal zeros the result's sign would follow the operands' order.  A zero
    # with an operand's sign, clamp(x, -1, 1) * 0 (-0 for -0.0, a negative number or -inf), is added to the result:
    # it changes only a zero maximum, to +0 unless both operands were -0 or negative (+0 + -0 is +0).  A minimum
    # is the negated maximum of the negated operands, so it adds the zeros of the opposite signs (* -0.0) to -out.

    def extremum(self, op: str, a: _Opnd, b: _Opnd, shape, out: str = None, zeros: bool = True) -> str:
        """max / min(a, b) (a a tile, b a tile or a scalar) into `out` (a new temporary if None, which may be a's or
        b's buffer), IEEE's also for zeros of opposite signs where a use can tell them (`zeros`); returns the
        buffer."""
        if not zeros or (b.kind == "scalar" and nonzero_literal(b.code)):  # the plain T.tile op will do
            if out is None:
                self.done(a, b)
                out = self.temp("t", shape)
            self.emit(f"T.tile.{op}({out}, {a.code}, {b.code})")
            return out
        sign = "0.0" if op == "max" else "-0.0"
        zeros = self.temp("t", shape)  # the operands' zero signs, taken before `out` may overwrite an operand
        self._zero_sign(zeros, a.code, sign)
        if b.kind == "scalar":
            self.emit(f"T.tile.add({zeros}, {zeros}, {_scalar_zero_sign(b.code, sign)})")
        else:
            other = self.temp("t", shape)
            self._zero_sign(other, b.code, sign)
            self.emit(f"T.tile.add({zeros}, {zeros}, {other})")
            self.done(other)
        if out is None:
            self.done(a, b)
            out = self.temp("t", shape)
        self.emit(f"T.tile.{op}({out}, {a.code}, {b.code})")
        self.emit(f"# IEEE {op}imum of two zeros: add the operands' zero signs (T.tile.{op} returns either zero)")
        if op == "max":
            self.emit(f"T.tile.add({out}, {out}, {zeros})")
        else:
            self.emit(f"T.tile.mul({out}, {out}, -1.0)")
            self.emit(f"T.tile.add({out}, {out}, {zeros})")
            self.emit(f"T.tile.mul({out}, {out}, -1.0)")
        self.done(zeros)
        return out

    def _zero_sign(self, dst: str, src: str, sign: str) -> None:
        self.emit(f"T.tile.min({dst}, {src}, 1.0)")
        self.emit(f"T.tile.max({dst}, {dst}, -1.0)")
        self.emit(f"T.tile.mul({dst}, {dst}, {sign})")

    def _divide_by_rows(self, a: _Opnd, b: _Opnd, shape) -> _Opnd:
        """A division with a scalar side: T.tile.div takes a scalar only as the divisor, and multiplies by its
        reciprocal there (codegen_ascend.cc:1721-1765), which rounds twice.  The scalar fills one row of the
        tile instead, and the tile is divided row by row: one row of UB, not a tile of it."""
        scalar, tile = (a, b) if a.kind == "scalar" else (b, a)
        # a free tile costs nothing, and in a tile of two rows one row saves little (later statements reuse a tile)
        whole = math.prod(shape[:-1]) <= 2 or self._pooled(shape)
        num = self.temp("t", shape if whole else shape[-1:])  # the scalar, in a tile or in one row
        self.emit(f"T.tile.fill({num}, {scalar.code})")
        self.done(tile)
        out = self.temp("t", shape)
        lead = [] if whole else [self.fresh("r") for _ in shape[:-1]]
        depth = self.depth
        for r, n in zip(lead, shape):
            self.emit(f"for {r} in T.serial({n}):")
            self.depth += 1
        row = f"[{', '.join(lead + [':'])}]" if lead else ""
        x, y = (num, f"{tile.code}{row}") if a.kind == "scalar" else (f"{tile.code}{row}", num)
        self.emit(f"T.tile.div({out}{row}, {x}, {y})")
        self.depth = depth
        self.done(num)
        return _Opnd("tile", out)


def _scalar_zero_sign(x: str, sign: str) -> str:
    """A zero with the sign of the scalar x (times `sign`): see `extremum`."""
    return f"(T.max(T.min({x}, 1.0), -1.0) * {sign})"


def _scalar_extremum(op: str, a: str, b: str, zeros: bool = True) -> str:
    """max / min of two scalars, IEEE's also for zeros of opposite signs (see `extremum`), where a use can tell
    them (`zeros`) and backends/common/extrema.py says the form is printed."""
    if not zeros or not needs_zero_order([a, b]):
        return f"T.{op}({a}, {b})"
    if op == "max":
        return f"(T.max({a}, {b}) + ({_scalar_zero_sign(a, '0.0')} + {_scalar_zero_sign(b, '0.0')}))"
    return f"(-((-T.min({a}, {b})) + ({_scalar_zero_sign(a, '-0.0')} + {_scalar_zero_sign(b, '-0.0')})))"
