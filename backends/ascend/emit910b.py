"""Ascend 910B: the tilelang-ascend 0.1.4 API of the chapter's 5.4.5 (`import tilelang.language as T` there).

    with T.Kernel(n_blocks, is_npu=True) as (cid, vid):
        A_L1 = T.alloc_L1((stages, BM, BK), dtype)          # cache_read / staged operands, one slot per stage
        A_L0 = T.alloc_L0A((BM, BK), dtype); B_L0 = T.alloc_L0B(...); C_L0 = T.alloc_L0C((BM, BN), "float32")
        with T.Scope("C"):                                   # cube core: matrix statements
            for ko in T.Pipelined(lo, hi, num_stages=stages):
                T.copy(A[..], A_L1[ko % stages, :, :])       # GM -> L1
                T.copy(A_L1[ko % stages, :, :], A_L0)        # L1 -> L0A (and L0B)
                T.mma(A_L0, B_L0, C_L0, init=(ko == lo))     # into L0C
            T.copy(C_L0, C_ws[..]); T.set_cross_flag("FIX", 0)   # L0C -> GM workspace for the vector core
        with T.Scope("V"):                                   # vector core: elementwise and reductions
            T.wait_cross_flag(0); T.copy(C_ws[..], C_ub); T.tile.silu(...); T.copy(Y_ub, Y[..])

Vector statements become whole-tile `T.tile.*` operations on UB buffers
(three-address code, one UB temporary per operation), reductions
`T.reduce_sum / T.reduce_max`.  This module cannot be run or even imported
here (tilelang-ascend needs CANN); its text is checked with `ast.parse` and
every `T.*` call is bound to the API's signatures (`api910b.py`).

Not expressible, reported as `BackendError`: FP8 (the 910B has no E4M3
type), masked tiles (partial tiles, the causal triangle: they would need
`T.tile.compare/select`), values broadcast along some but not all tile axes,
and `where`/comparisons on values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tdsl.backends.tilelang.emit import BYTES, TL_DTYPES, index_code, shape_code
from tdsl.compiler.tileir import simplify
from tdsl.compiler import tileir as T
from tdsl.compiler.errors import BackendError

from .emit950 import _cube_statements
from .targets import TARGETS, check_capacity


@dataclass
class _Opnd:
    kind: str  # tile | scalar
    code: str  # a UB buffer name (tile) or a scalar PrimExpr


@dataclass
class Ascend910BPrinter:
    program: T.TileProgram
    kernel: T.TileKernel
    buffers: list
    lines: list = field(default_factory=list)
    allocs: list = field(default_factory=list)
    depth: int = 2
    counter: int = 0
    footprint: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)  # stmt -> _Opnd (rounded f32 value)
    accs: dict = field(default_factory=dict)  # stmt -> (buffer, shape)
    loops: list = field(default_factory=list)
    acc_depth: dict = field(default_factory=dict)
    workspaces: list = field(default_factory=list)  # extra GM params: (name, shape)
    flag: int = 0
    ws_flag: dict = field(default_factory=dict)

    def render(self) -> dict:
        k = self.kernel
        for t in k.tensors:
            if t.dtype == "f8e4m3":
                raise BackendError(f"{k.name}: {t.name} is FP8 (E4M3), which the Ascend 910B has no type for; "
                                   f"compile this program for ascend-950")
        self.cube = _cube_statements(k.body)
        self._head()
        self._body(k.body)
        check_capacity(k.name, TARGETS["ascend-910b"], self.footprint)
        params = [f'{t.name}: T.Tensor({shape_code(t.shape)}, "{TL_DTYPES[t.dtype]}")' for t in k.tensors]
        params += [f'{n}: T.Tensor({shape_code(s)}, "float32")' for n, s in self.workspaces]
        return {"name": k.name, "params": params, "head": self.head, "allocs": self.allocs, "lines": self.lines,
                "comment": k.comment, "footprint": dict(self.footprint), "cube": sorted(self.cube),
                "workspaces": [n for n, _ in self.workspaces]}

    # ------------------------------------------------------------ helpers

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}_{self.counter}"

    def alloc(self, name, shape, dtype, scope, note="") -> str:
        shape = list(shape) or [1]
        call = {"L1": "T.alloc_L1", "L0A": "T.alloc_L0A", "L0B": "T.alloc_L0B", "L0C": "T.alloc_L0C", "UB": "T.alloc_ub"}[scope]
        self.allocs.append(f'{name} = {call}({shape_code(shape)}, "{TL_DTYPES[dtype]}")  # {scope}' + (f": {note}" if note else ""))
        self.footprint[scope] = self.footprint.get(scope, 0) + math.prod(shape) * BYTES[dtype]
        return name

    def _head(self) -> None:
        vars_, exts, lowers = [], [], []
        for axis in sorted(self.kernel.grid, key=lambda a: "xyz".index(a.axis)):
            for var, ext, lo in zip(axis.vars, axis.extents, axis.lowers):
                vars_.append(var)
                exts.append(index_code(simplify(ext)))
                lowers.append(simplify(lo))
        total = " * ".join(exts) if exts else "1"
        self.head = [f"with T.Kernel({total}, is_npu=True) as (cid, vid):"]
        for n, var in enumerate(vars_):
            inner = " * ".join(exts[n + 1:])
            q = (f"cid // {inner}" if inner.isdigit() or inner.isidentifier() else f"cid // ({inner})") if inner else "cid"
            start = "" if lowers[n] == T.Const(0) else f"{index_code(lowers[n])} + "
            self.emit(f"{var} = {start}{q} % {exts[n]}" if len(vars_) > 1 else f"{var} = {start}cid")

    @staticmethod
    def _is_cube(op, cube) -> bool:
        if isinstance(op, (T.AccInit, T.AccUpdate)):
            return op.stmt in cube
        if isinstance(op, T.SerialLoop):
            return all(Ascend910BPrinter._is_cube(o, cube) for o in op.body)
        return False

    # ------------------------------------------------------------ sections

    def _body(self, ops) -> None:
        """Consecutive cube ops share one T.Scope("C"), consecutive vector ops one T.Scope("V")."""
        kind, group = None, []
        for op in ops:
            if isinstance(op, T.SerialLoop) and not self._is_cube(op, self.cube):
                self._flush(kind, group)
                kind, group = None, []
                self._serial(op, lambda body: self._body(body))
                continue
            k = "C" if (self._is_cube(op, self.cube) or (isinstance(op, T.AccFinish) and op.stmt in self.cube)) else "V"
            if k != kind:
                self._flush(kind, group)
                kind, group = k, []
            group.append(op)
            if k == "C" and isinstance(op, T.AccFinish) and self._needs_vector(op):
                self._flush(kind, group)
                kind, group = "V", [("from-cube", op)]
        self._flush(kind, group)

    def _flush(self, kind, group) -> None:
        if not group:
            return
        if kind == "V":
            return self._vector_group(group)
        self.emit('with T.Scope("C"):  # cube core (AIC)')
        self.depth += 1
        for op in group:
            if isinstance(op, T.AccFinish):
                self._cube_finish(op)
            else:
                self._cube_op(op)
        self.depth -= 1

    @staticmethod
    def _needs_vector(op: T.AccFinish) -> bool:
        plain = op.tile.mask is None and list(op.lhs) == [a.iter for a in op.tile.axes]
        return not (op.store and not op.keep and op.dtype == "f32" and plain)

    def _vector_group(self, ops) -> None:
        if not ops:
            return
        self.emit('with T.Scope("V"):  # vector core (AIV)')
        self.depth += 1
        self.emit("if vid == 0:  # one of the two vector cores takes the whole tile")
        self.depth += 1
        start = len(self.lines)
        for op in ops:
            self.loads = {}
            if isinstance(op, tuple):
                self._from_cube(op[1])
            else:
                self._vector_op(op)
        if all(l.strip().startswith("#") for l in self.lines[start:]):
            self.emit("T.evaluate(0)  # scalar values only: computed where they are used")
        self.depth -= 2

    def _serial(self, op: T.SerialLoop, inner) -> None:
        lo, hi = index_code(simplify(op.lower)), index_code(simplify(op.upper))
        if op.note:
            self.emit(f"# {op.note}")
        if op.stages:
            self.emit(f"for {op.var} in T.Pipelined({lo}, {hi}, num_stages={op.stages}):")
        else:
            self.emit(f"for {op.var} in T.serial({lo}, {hi}):")
        self.depth += 1
        self.loops.append(op)
        inner(op.body)
        self.loops.pop()
        self.depth -= 1

    # ------------------------------------------------------------ cube

    def _cube_op(self, op) -> None:
        if isinstance(op, T.SerialLoop):
            self._serial(op, lambda body: [self._cube_op(o) for o in body])
        elif isinstance(op, T.AccInit):
            shape = [a.size for a in op.tile.axes]
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            acc = self.alloc(f"{op.stmt}_L0C", shape, "f32", "L0C", "accumulator, cleared by the first T.mma (init)")
            self.accs[op.stmt] = (acc, shape)
            self.acc_depth[op.stmt] = len(self.loops)
        elif isinstance(op, T.AccUpdate):
            self._mma(op)

    def _mma(self, op: T.AccUpdate) -> None:
        from tdsl.backends.tilelang.emit import KernelPrinter

        (i, j, k), operands = KernelPrinter.dot_layout(self, op)
        acc, _ = self.accs[op.stmt]
        loop = self.loops[-1] if self.loops else None
        stages = loop.stages if loop is not None and loop.stages else 1
        l0 = []
        for (load, transposed, shape, dtype), scope in zip(operands, ("L0A", "L0B")):
            if transposed and scope == "L0A":
                raise BackendError(f"{op.stmt}: operand {load.tensor} is stored [K, M]; T.mma takes L0A [M, K] and "
                                   f"this backend emits the transposing L1 -> L0 copy only for L0B")
            planned = next((b for b in self.buffers if b.tensor == load.tensor and b.kind == "read"
                            and loop is not None and b.loop == loop.var), None)
            note = f"cache_read {load.tensor} -> {planned.scope} at {planned.loop}" if planned else "staged for the cube"
            l1 = self.alloc(f"{load.tensor}_L1", [stages] + shape, dtype, "L1", note)
            starts = [self._start(x, op.tile) for x in load.indices]
            slot = f"{loop.var} % {stages}" if stages > 1 else "0"
            self.emit(f"T.copy({load.tensor}[{', '.join(starts)}], {l1}[{slot}, :, :])  # GM -> L1")
            l0_shape = list(reversed(shape)) if transposed else shape
            buf = self.alloc(f"{load.tensor}_{scope}", l0_shape, dtype, scope)
            flip = ", transpose=True" if transposed else ""
            self.emit(f"T.copy({l1}[{slot}, :, :], {buf}{flip})  # L1 -> {scope}")
            l0.append(buf)
        first = [f"{l.var} == {index_code(simplify(l.lower))}" for l in self.loops[self.acc_depth[op.stmt]:]]
        init = "True" if not first else first[0]
        for c in first[1:]:
            init = f"T.And({init}, {c})"
        self.emit(f"T.mma({l0[0]}, {l0[1]}, {acc}, init={init})")

    @staticmethod
    def _start(x, tile) -> str:
        for a in tile.axes:
            if isinstance(x, T.Var) and x.name == a.iter:
                return index_code(simplify(a.offset))
        raise BackendError(f"internal: operand index {x} is not a tile axis")

    def _cube_finish(self, op: T.AccFinish) -> None:
        """The C side of a finished cube reduction: L0C -> GM (stored f32) or -> this block's workspace slot."""
        acc, shape = self.accs[op.stmt]
        if op.tile.mask is not None:
            raise BackendError(f"{op.stmt}: a masked result tile needs T.tile.select on the vector core; not generated "
                               f"for ascend-910b")
        starts = [index_code(simplify(a.offset)) for a in op.tile.axes]
        if not self._needs_vector(op):
            self.emit(f"T.copy({acc}, {op.stmt}[{', '.join(starts)}])  # L0C -> GM")
            return
        ws = f"{op.stmt}_ws"
        blocks = 1
        for axis in self.kernel.grid:
            for e in axis.extents:
                e = simplify(e)
                if not isinstance(e, T.Const):
                    raise BackendError(f"{op.stmt}: the cube -> vector workspace needs a constant number of blocks")
                blocks *= e.value
        self.workspaces.append((ws, [blocks] + shape))  # one tile slot per block
        self.ws_flag[op.stmt] = (ws, self.flag)
        self.emit(f"T.copy({acc}, {ws}[{', '.join(['cid'] + ['0'] * len(shape))}])  # L0C -> this block's GM workspace slot")
        self.emit(f'T.set_cross_flag("FIX", {self.flag})  # tell the vector core')
        self.flag += 1

    def _from_cube(self, op: T.AccFinish) -> None:
        """The V side: wait for the cube, bring the tile into UB, round it, store it if the program stores it."""
        _, shape = self.accs[op.stmt]
        ws, flag = self.ws_flag[op.stmt]
        self.emit(f"T.wait_cross_flag({flag})")
        ub = self.alloc(f"{op.stmt}_ub", shape, "f32", "UB", "cube result")
        self.emit(f"T.copy({ws}[{', '.join(['cid'] + ['0'] * len(shape))}], {ub})  # GM workspace -> UB")
        value = self._round(op.dtype, _Opnd("tile", ub), shape)
        self.values[op.stmt] = value
        if op.store:
            self._store(op.stmt, op.tile, op.lhs, value)

    def _shape_of(self, tensor: str):
        for t in self.program.temps + self.program.outputs:
            if t.name == tensor:
                return t.shape
        from tdsl.compiler.errors import BackendError as E

        raise E(f"internal: no shape for {tensor}")

    # ------------------------------------------------------------ vector

    def _vector_op(self, op) -> None:
        if isinstance(op, T.Compute):
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            self._check_tile(op.stmt, op.tile)
            shape = [a.size for a in op.tile.axes]
            value = self._round(op.dtype, self._value(op.value, op.tile), shape)
            self.values[op.stmt] = value
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, value)
        elif isinstance(op, T.AccInit):
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            shape = [a.size for a in op.tile.axes]
            acc = self.alloc(f"acc_{op.stmt}", shape, "f32", "UB", f"{op.op} accumulator")
            self.accs[op.stmt] = (acc, shape)
            fill = "0.0" if op.op == "sum" else '-T.infinity("float32")'
            self.emit(f"T.tile.fill({acc}, {fill})")
        elif isinstance(op, T.AccUpdate):
            self._check_tile(op.stmt, op.tile)
            self._tile_reduce(op)
        elif isinstance(op, T.AccFinish):
            acc, shape = self.accs[op.stmt]
            value = self._round(op.dtype, _Opnd("tile", acc) if shape else _Opnd("scalar", f"{acc}[0]"), shape)
            self.values[op.stmt] = value
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, value)
        else:
            raise BackendError(f"{type(op).__name__} has no ascend-910b form here")

    def _check_tile(self, stmt, tile) -> None:
        if tile.mask is not None:
            raise BackendError(f"{stmt}: masked tiles (partial tiles, triangles) need T.tile.compare/select, which "
                               f"this backend does not generate for ascend-910b; use tile sizes that divide the "
                               f"domain")

    def _tile_reduce(self, op: T.AccUpdate) -> None:
        acc, acc_shape = self.accs[op.stmt]
        if isinstance(op.partial, T.Dot):
            raise BackendError(f"{op.stmt}: a matrix product of f32 or mixed operands has no cube form on the 910B "
                               f"(the cube takes one 16-bit dtype)")
        body, red = (op.partial.operand, list(op.partial.axes)) if isinstance(op.partial, T.Reduce) else (op.partial, [])
        shape = [a.size for a in op.tile.axes]
        terms = self._value(body, op.tile)
        if terms.kind != "tile":
            terms = self._materialise(terms, shape)
        if red:
            if len(red) != 1 or red[0] != len(shape) - 1:
                raise BackendError(f"{op.stmt}: only a reduction over the last tile axis is generated for ascend-910b")
            part = self.alloc(self.fresh(f"r_{op.stmt}"), acc_shape, "f32", "UB")
            fn = "T.reduce_sum" if op.op == "sum" else "T.reduce_max"
            self.emit(f"{fn}({terms.code}, {part}, dim=-1, clear=True)")
            terms = _Opnd("tile", part)
        fn = "T.tile.add" if op.op == "sum" else "T.tile.max"
        self.emit(f"{fn}({acc}, {acc}, {terms.code})")
        if op.accum != "f32":
            self._round(op.accum, _Opnd("tile", acc), acc_shape, into=acc)

    def _store(self, stmt, tile, lhs, value: _Opnd) -> None:
        arg = next(t for t in self.kernel.tensors if t.name == stmt)
        shape = [a.size for a in tile.axes]
        src = value if value.kind == "tile" else self._materialise(value, shape)
        if arg.dtype != "f32":
            out = self.alloc(self.fresh(f"{stmt}_out"), shape, arg.dtype, "UB", f"{stmt} in {arg.dtype}")
            self.emit(f'T.tile.cast({out}, {src.code}, "CAST_RINT", {math.prod(shape or [1])})')
            src = _Opnd("tile", out)
        names = {it: index_code(simplify(v)) for it, v in tile.scalars.items()}
        names.update({a.iter: index_code(simplify(a.offset)) for a in tile.axes})
        self.emit(f"T.copy({src.code}, {stmt}[{', '.join(names[it] for it in lhs)}])  # UB -> GM")

    # three-address values (f32)

    def _materialise(self, v: _Opnd, shape) -> _Opnd:
        buf = self.alloc(self.fresh("t"), shape, "f32", "UB")
        self.emit(f"T.tile.fill({buf}, {v.code})")
        return _Opnd("tile", buf)

    def _round(self, dtype, v: _Opnd, shape, into=None) -> _Opnd:
        if dtype == "f32":
            return v
        if v.kind == "scalar":
            return _Opnd("scalar", f'T.Cast("float32", T.Cast("{TL_DTYPES[dtype]}", {v.code}))')
        n = math.prod(shape or [1])
        low = self.alloc(self.fresh(f"t_{dtype}"), shape, dtype, "UB")
        out = into or self.alloc(self.fresh("t"), shape, "f32", "UB")
        self.emit(f'T.tile.cast({low}, {v.code}, "CAST_RINT", {n})  # round to {dtype}')
        self.emit(f'T.tile.cast({out}, {low}, "CAST_NONE", {n})')
        return _Opnd("tile", out)

    def _value(self, e, tile: T.Tile) -> _Opnd:
        shape = [a.size for a in tile.axes]
        axes = [a.iter for a in tile.axes]
        v = lambda x: self._value(x, tile)  # noqa: E731
        if isinstance(e, T.Const):
            return _Opnd("scalar", repr(float(e.value)))
        if isinstance(e, T.Reg):
            value = self.values[e.stmt]
            if value.kind == "scalar":
                return value
            if list(e.axes) != list(range(len(axes))):
                raise BackendError(f"reading {e.stmt} broadcast along some tile axes has no whole-tile T.tile form "
                                   f"for ascend-910b")
            return value
        if isinstance(e, T.Load):
            key = repr(e)
            if key in getattr(self, "loads", {}):
                return self.loads[key]
            self.loads = getattr(self, "loads", {})
            self.loads[key] = result = self._load(e, tile, shape, axes)
            return result
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
                return self._binop(e.func, args[0], args[1], shape)
            fn = {"exp": "exp", "log": "ln", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "sigmoid": "sigmoid",
                  "silu": "silu"}.get(e.func)
            if fn is None:
                raise BackendError(f"{e.func} has no T.tile form in tilelang-ascend 0.1.4")
            x = args[0]
            if x.kind == "scalar":
                scal = {"exp": "T.exp({})", "ln": "T.log({})", "sqrt": "T.sqrt({})", "rsqrt": "(1.0 / T.sqrt({}))",
                        "abs": "T.abs({})", "sigmoid": "(1.0 / (1.0 + T.exp(-{})))", "silu": "({0} / (1.0 + T.exp(-{0})))"}
                return _Opnd("scalar", scal[fn].format(x.code))
            out = self.alloc(self.fresh("t"), shape, "f32", "UB")
            self.emit(f"T.tile.{fn}({out}, {x.code})")
            return _Opnd("tile", out)
        if isinstance(e, T.Round):
            return self._round(e.dtype, v(e.operand), shape)
        raise BackendError(f"{type(e).__name__} {getattr(e, 'op', '')} has no T.tile form for ascend-910b "
                           f"(comparisons, where and masks need T.tile.compare/select)")

    def _load(self, e, tile, shape, axes) -> _Opnd:
        used = {x.name for idx in e.indices for x in _vars(idx)}
        if not used & set(axes):
            names = {it: index_code(simplify(x)) for it, x in tile.scalars.items()}
            return _Opnd("scalar", f'T.Cast("float32", {e.tensor}[{", ".join(index_code(simplify(i), names) for i in e.indices)}])')
        plain = [i.name if isinstance(i, T.Var) else None for i in e.indices]
        tail = [p for p in plain if p in axes]
        if tail != axes or e.mask is not None:
            raise BackendError(f"load of {e.tensor} is not a whole tile in the tile's axis order (or is masked); "
                               f"no T.copy form for ascend-910b")
        names = {it: index_code(simplify(x)) for it, x in tile.scalars.items()}
        names.update({a.iter: index_code(simplify(a.offset)) for a in tile.axes})
        arg = next(t for t in self.kernel.tensors if t.name == e.tensor)
        raw = self.alloc(self.fresh(f"{e.tensor}_ub"), shape, arg.dtype, "UB", f"tile of {e.tensor}")
        self.emit(f"T.copy({e.tensor}[{', '.join(index_code(simplify(i), names) for i in e.indices)}], {raw})  # GM -> UB")
        if arg.dtype == "f32":
            return _Opnd("tile", raw)
        wide = self.alloc(self.fresh(f"{e.tensor}_f32"), shape, "f32", "UB")
        self.emit(f'T.tile.cast({wide}, {raw}, "CAST_NONE", {math.prod(shape or [1])})')
        return _Opnd("tile", wide)

    def _binop(self, op: str, a: _Opnd, b: _Opnd, shape) -> _Opnd:
        if a.kind == b.kind == "scalar":
            code = f"T.{op}({a.code}, {b.code})" if op in ("max", "min") else f"({a.code} {op} {b.code})"
            return _Opnd("scalar", code)
        fn = {"+": "add", "-": "sub", "*": "mul", "/": "div", "max": "max", "min": "min"}[op]
        scalar_ok = fn in ("add", "mul", "max", "min")  # these take a scalar second operand
        if a.kind == "scalar" and fn in ("add", "mul", "max", "min"):
            a, b = b, a  # commutative
        if a.kind == "scalar":
            a = self._materialise(a, shape)
        if b.kind == "scalar" and not scalar_ok:
            b = self._materialise(b, shape)
        out = self.alloc(self.fresh("t"), shape, "f32", "UB")
        self.emit(f"T.tile.{fn}({out}, {a.code}, {b.code})")
        return _Opnd("tile", out)


def _vars(e):
    if isinstance(e, T.Var):
        yield e
    elif isinstance(e, T.Bin):
        yield from _vars(e.lhs)
        yield from _vars(e.rhs)
    elif isinstance(e, T.Neg):
        yield from _vars(e.operand)
