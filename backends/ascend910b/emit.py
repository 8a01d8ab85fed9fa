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
        with T.Scope("V"):                                   # vector cores: elementwise and reductions
            T.wait_cross_flag(0)                             # both vector cores (mode 2)
            T.copy(C_ws[cid, vid * BM // 2, 0], C_ub)        # each vector core takes half of the rows
            T.tile.silu(...); T.copy(Y_ub, Y[r0 + vid * BM // 2, c0])

The two vector cores of an AI core (`vid`, each with its own UB) split the
rows of 2-D vector tiles; kernels whose vector tiles are 1-D (a row per block)
run them on vector core 0 (`if vid == 0`).  Both take part in every
cross-core flag (mode 2).  Vector statements become whole-tile `T.tile.*` operations on UB buffers
(three-address code, one UB temporary per operation), reductions
`T.reduce_sum / T.reduce_max`.  This module cannot be run or even imported
here (tilelang-ascend needs CANN); its text is checked with `ast.parse` and
every `T.*` call is bound to the API's signatures (`api910b.py`), and it is
executed in NumPy by `compiler/verify/ascend_sim/`.

Masked tiles (ragged sizes, the causal triangle): T.copy clips GM regions to
the tensor (loads pad, stores write the valid part), so masks that only state
tensor bounds cost nothing; other lanes are excluded with `T.tile.compare` on
lane indices and `T.tile.select` (lanes910b.py): before a reduction (the
identity), in a matrix product on the vector core (zero), and at a store
(the GM tile is read first and kept where the mask is false).  A 2-D tile that
reads a value broadcast along its rows (`m[i]` in `S[i, j] - m[i]`) is computed
row by row.

Matrix products: one 16-bit operand dtype with operands that are whole tiles or
clipped at the tensor's bounds (zero-filled in L1) go to the cube; FP8 operands
are decoded to f16 by the vector core into a GM workspace that the cube reads
(e4m3_910b.py: the 910B has no FP8 type; E4M3 tensors are bytes); other products
(f32 or mixed operands, tiles under 16 wide) run on the vector core, one row
times one operand element at a time, in the program's summation order.

Not expressible, reported as `BackendError`: values broadcast along columns of a
tile that is not 2-D, non-affine masks, `where`/comparisons on values.

Size: still more than a printer -- it allocates UB slots and cross-core flags while printing (the open
items of docs/architecture.md); the tile rewrites are passes (compiler/lower/passes/ascend910b.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from tdsl.backends.tilelang.emit import TileLangDialect, axis_start
from tdsl.backends.tilelang.emit import index_code as _tilelang_index_code, shape_code
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.errors import BackendError, InternalError
from tdsl.backends.common.dtypes import ASCEND_910B
from tdsl.compiler.lower.passes.ascend910b import BYTES, UB_ROW_BYTES, VID, Kernel910B, expr_vars, layout as tile_layout
from tdsl.compiler.analysis.placement import operand_layout
from tdsl.compiler.lower.tileir import simplify

from tdsl.backends.ascend910b import e4m3
from tdsl.compiler.lower.lane_masks import (
    check_affine,
    NEGATE,
    expr_text as _expr_text,
    atoms,
    conjunction,
    implied_by_bounds,
    always_holds,
    lane_test,
    mentions,
    substitute,
    upper_bound_on,
)
from tdsl.backends.common.names import ModuleNames
from tdsl.backends.common.ascend_capacity import TARGETS, check_capacity

TL_DTYPES = ASCEND_910B  # no FP8 type: E4M3 tensors are bytes (backends/common/dtypes.py)

# Variables this printer adds to the tile program's expressions ('__' names: no program name starts so).
ROW = "__row"  # the row of a tile computed row by row



def index_code(e: T.Expr, names: dict) -> str:
    """TileLang's index code, `a or b` spelt T.if_then_else(a, True, b): tilelang-ascend 0.1.4 has T.And but no
    T.Or (api910b.py)."""
    return _tilelang_index_code(e, names, disjunction="T.if_then_else({}, True, {})")


@dataclass
class _Opnd:
    kind: str  # tile | scalar
    code: str  # a UB buffer name (tile) or a scalar PrimExpr


@dataclass
class Ascend910BPrinter(TileLangDialect):
    program: T.TileProgram
    kernel: T.TileKernel
    names: ModuleNames | None = None  # the module's identifiers (backends/common/names.py); the program's own if None
    lines: list = field(default_factory=list)
    allocs: list = field(default_factory=list)
    depth: int = 2
    counter: int = 0
    footprint: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)  # stmt -> _Opnd (rounded f32 value)
    accs: dict = field(default_factory=dict)  # stmt -> (buffer, shape)
    loops: list = field(default_factory=list)
    acc_depth: dict = field(default_factory=dict)
    workspaces: list = field(default_factory=list)  # extra GM params: (name, shape, dtype)
    ws_flag: dict = field(default_factory=dict)  # stmt -> (workspace, flag) of a cube result
    shapes: dict = field(default_factory=dict)  # stmt -> shape of its value buffer
    reused: dict = field(default_factory=dict)  # (kind, dtype, shape, tag) -> scratch buffer
    row: str | None = None  # the row loop variable while a 2-D tile is computed row by row
    flags_before: list = field(default_factory=list)  # flag lines of the vector scope being emitted, before its work
    flags_after: list = field(default_factory=list)  # ... and after it
    free: list = field(default_factory=list)  # UB temporaries of finished statements: (name, shape, dtype)
    tracking: list | None = None  # UB buffers allocated by the vector statement being emitted
    info: dict = field(default_factory=dict)  # UB buffer -> (shape, dtype)
    expr_temps: set = field(default_factory=set)  # buffers holding one subexpression, read once by its parent

    def __post_init__(self):
        if self.names is None:
            self.names = ModuleNames(self.program)
        self.locals = self.names.function()
        self.cid = self.local(("core",), "cid")  # the block: one AI core
        self.vid = self.local(("vector core",), "vid")
        # index_code's names outside a tile: loop variables, run-time sizes, this printer's own variables
        self.vars = {**self.names.variables, VID: self.vid}

    def tensor(self, name: str) -> str:
        return self.names.tensor(name)

    def temp(self, stem, shape, dtype="f32", note="") -> str:
        """A UB buffer for one subexpression's value: free again once its parent has read it (`done`)."""
        name = self.alloc(self.fresh(stem), shape, dtype, "UB", note)
        self.expr_temps.add(name)
        return name

    def done(self, *values) -> None:
        """The parent has read these values: subexpression buffers among them can hold the next ones."""
        for v in values:
            code = v.code if isinstance(v, _Opnd) else v
            if code in self.expr_temps:
                self.expr_temps.discard(code)
                shape, dtype = self.info[code]
                self.free.append((code, shape, dtype))

    def render(self) -> dict:
        k = self.kernel
        # what runs where (compiler/lower/passes/ascend910b.py, compiler/analysis/placement.py); the tiles are already widened
        # and their rows split between the vector cores (k.vector_rows) by the 910B passes
        self.facts = Kernel910B(self.program, k)
        self.cube = self.facts.cube
        self.fp8_dots = self.facts.fp8_dots
        self.cross_core = {(c.stmt, c.kind): c for c in k.cross_core}  # workspaces and flags (assign_cross_core)
        self.half = k.vector_rows
        self.loop_lowers = _loop_lowers(k)
        self._head()
        self._body(k.body)
        check_capacity(k.name, TARGETS["ascend-910b"], self.footprint)
        params = [f'{self.tensor(t.name)}: T.Tensor({self.names.shape(t.shape)}, "{TL_DTYPES[t.dtype]}")'
                  for t in k.tensors]
        params += [f'{n}: T.Tensor({self.names.shape(s)}, "{TL_DTYPES[d]}")' for n, s, d in self.workspaces]
        return {"name": self.names.kernel(k.name), "key": k.name, "params": params, "head": self.head,
                "allocs": self.allocs, "lines": self.lines, "comment": k.comment, "footprint": dict(self.footprint),
                "cube": sorted(self.cube), "workspaces": [n for n, _, _ in self.workspaces],
                "e4m3": [self.tensor(t.name) for t in k.tensors if t.dtype == "f8e4m3"]}

    # ------------------------------------------------------------ helpers

    def alloc(self, name, shape, dtype, scope, note="", pooled=True) -> str:
        """A buffer in `scope`; a UB buffer may be a freed temporary of the same shape and dtype (`pooled`)."""
        shape = list(shape) or [1]
        if scope == "UB" and pooled:
            for n, (free, fshape, fdtype) in enumerate(self.free):
                if fshape == shape and fdtype == dtype:  # a temporary nothing reads any more: reuse it
                    del self.free[n]
                    if self.tracking is not None:
                        self.tracking.append((free, shape, dtype))
                    return free
            if self.tracking is not None:
                self.tracking.append((name, shape, dtype))
            self.info[name] = (shape, dtype)
        call = {"L1": "T.alloc_L1", "L0A": "T.alloc_L0A", "L0B": "T.alloc_L0B", "L0C": "T.alloc_L0C", "UB": "T.alloc_ub"}[scope]
        self.allocs.append(f'{name} = {call}({shape_code(shape)}, "{TL_DTYPES[dtype]}")  # {scope}' + (f": {note}" if note else ""))
        self.footprint[scope] = self.footprint.get(scope, 0) + math.prod(shape) * BYTES[dtype]
        return name

    def _pooled(self, shape, dtype="f32") -> bool:
        """Whether a freed UB temporary of this shape and dtype is there to be reused."""
        return any(fshape == list(shape) and fdtype == dtype for _, fshape, fdtype in self.free)

    def scratch(self, dtype, shape, tag="t") -> str:
        """A UB buffer reused by every emitted sequence that needs a temporary of this dtype, shape and role."""
        key = ("scratch", dtype, tuple(shape), tag)
        if key not in self.reused:
            self.reused[key] = self.alloc(self.fresh(f"s_{tag}"), shape, dtype, "UB", "scratch", pooled=False)
        return self.reused[key]

    def mask_buffer(self, n: int, tag="cmp") -> str:
        """A bit mask of n lanes for T.tile.compare / T.tile.select (uint8, whole 32-byte UB blocks)."""
        key = ("mask", n, tag)
        if key not in self.reused:
            size = -(-n // 8)
            self.reused[key] = self.alloc(self.fresh(f"mask_{tag}"), [-(-size // 32) * 32], "u8", "UB",
                                          f"bit mask of {n} lanes", pooled=False)
        return self.reused[key]

    def lane_buffer(self, n: int) -> tuple[str, str]:
        """(lane positions 0, 1, ... as f32, a bit mask for them) for masks over n lanes (filled where used).

        T.tile.compare needs a multiple of 256 bytes (codegen_ascend.cc): 64 f32 lanes at least; the bits of
        lanes past n are computed and not used."""
        lanes = -(-n // 64) * 64
        key = ("lanes", lanes)
        if key not in self.reused:
            self.reused[key] = self.alloc(self.fresh("lanes"), [lanes], "f32", "UB", "lane positions", pooled=False)
        return self.reused[key], self.mask_buffer(lanes)

    # ------------------------------------------------------------ both vector cores

    def _first_rows_test(self, tile: T.Tile, mask) -> list:
        """The comparisons of `mask` on the tile's rows alone (the first axis and loop variables) that bound the
        rows from above: if the first row fails one, every later row does (a lower bound, `i >= j`, may fail
        for the first rows and hold for the others)."""
        first, others = tile.axes[0], {a.iter for a in tile.axes[1:]}
        return [a for a in atoms(mask) if upper_bound_on(a, first.iter) and not any(mentions(a, o) for o in others)]

    def _guard_first_row(self, tile: T.Tile, mask) -> bool:
        """`if <the first row of this vector core's half is inside mask>:` (entered; False if no row test) --
        its half of a ragged tile may lie past the tensor, and a copy whose GM region lies wholly outside is
        not clipped to nothing."""
        cond = self._first_row_condition(tile, mask)
        if cond:
            self.emit(f"if {cond}:  # this vector core's rows start inside the domain")
            self.depth += 1
        return bool(cond)

    def _first_row_condition(self, tile: T.Tile, mask) -> str | None:
        first = tile.axes[0]
        parts = [a for a in self._first_rows_test(tile, mask)
                 if not always_holds(substitute(a, first.iter, first.offset), self.loop_lowers)]
        if not parts:
            return None
        names = self._scalar_names(tile)
        names[tile.axes[0].iter] = index_code(simplify(tile.axes[0].offset), self.vars)
        return self._condition(parts, names)

    def _whole_tile_condition(self, tile: T.Tile) -> str | None:
        """The comparisons of the tile's mask that involve none of its axes (loop variables and sizes only: a
        fused loop runs past the statement's range), as one condition on the whole statement -- a tile without
        axes has no lanes to mask, and its scalar reads and stores must not happen outside the domain."""
        axes = [a.iter for a in tile.axes]
        parts = [a for a in atoms(tile.mask) if not any(mentions(a, it) for it in axes)]
        return self._condition(parts, self._scalar_names(tile)) if parts else None

    def _head(self) -> None:
        vars_, exts, lowers = [], [], []
        for axis in sorted(self.kernel.grid, key=lambda a: "xyz".index(a.axis)):
            for var, ext, lo in zip(axis.vars, axis.extents, axis.lowers):
                vars_.append(self.vars[var])
                exts.append(index_code(simplify(ext), self.vars))
                lowers.append(simplify(lo))
        total = " * ".join(exts) if exts else "1"
        cid = self.cid
        self.head = [f"with T.Kernel({total}, is_npu=True) as ({cid}, {self.vid}):"]
        for n, var in enumerate(vars_):
            inner = " * ".join(exts[n + 1:])
            q = (f"{cid} // {inner}" if inner.isdigit() or inner.isidentifier() else f"{cid} // ({inner})") if inner else cid
            start = "" if lowers[n] == T.Const(0) else f"{index_code(lowers[n], self.vars)} + "
            self.emit(f"{var} = {start}{q} % {exts[n]}" if len(vars_) > 1 else f"{var} = {start}{cid}")

    # ------------------------------------------------------------ sections

    def _body(self, ops) -> None:
        """Consecutive cube ops share one T.Scope("C"), consecutive vector ops one T.Scope("V")."""
        kind, group = None, []
        for op in ops:
            if isinstance(op, T.SerialLoop) and not self._is_cube(op):
                self._flush(kind, group)
                kind, group = None, []
                self.serial(op, lambda body: self._body(body))
                continue
            if isinstance(op, T.AccUpdate) and op.stmt in self.fp8_dots:
                # the vector core decodes this step's FP8 operand tiles, then the cube multiplies them
                self._flush(kind, group)
                kind, group = None, []
                self._vector_group([("decode", op)])
                self._flush("C", [op])
                continue
            k = "C" if (self._is_cube(op) or (isinstance(op, T.AccFinish) and op.stmt in self.cube)) else "V"
            if k != kind:
                self._flush(kind, group)
                kind, group = k, []
            group.append(op)
            if k == "C" and isinstance(op, T.AccFinish) and self.facts.needs_vector(op):
                self._flush(kind, group)
                kind, group = "V", [("from-cube", op)]
        self._flush(kind, group)

    def _is_cube(self, op) -> bool:
        if isinstance(op, (T.AccInit, T.AccUpdate)):
            return op.stmt in self.cube and not (isinstance(op, T.AccUpdate) and op.stmt in self.fp8_dots)
        if isinstance(op, T.SerialLoop):
            return all(self._is_cube(o) for o in op.body)
        return False

    def _flush(self, kind, group) -> None:
        if not group:
            return
        if kind == "V":
            return self._vector_group(group)
        self.emit('with T.Scope("C"):  # cube core (AIC)')
        start = len(self.lines)
        self.depth += 1
        for op in group:
            if isinstance(op, T.AccFinish):
                self._cube_finish(op)
            else:
                self._cube_op(op)
        self.depth -= 1
        if all(line.strip().startswith("#") for line in self.lines[start:]):  # only allocations: no code
            self.lines[start - 1:] = [line[4:] for line in self.lines[start:]]

    def _vector_group(self, ops) -> None:
        """Both vector cores run the scope: vector core 0 does the work, and both wait for and set the cross-core
        flags (mode 2: a flag the cube sets reaches both, and the cube waits until both have set one)."""
        if not ops:
            return
        split = bool(self.half) if not (isinstance(ops[0], tuple) and ops[0][0] == "decode") else \
            self._decode_split(ops[0][1])
        self.emit('with T.Scope("V"):  # vector cores (AIV)' + ("; each takes half of the tile's rows (vid)" if split else ""))
        self.depth += 1
        head = len(self.lines)
        self.flags_after = []
        if not split:
            self.emit(f"if {self.vid} == 0:  # one of the two vector cores takes the whole tile")
            self.depth += 1
        start = len(self.lines)
        for op in ops:
            self.loads = {}
            self.load_uses = _load_uses(op[1] if isinstance(op, tuple) else op)
            self.tracking = [] if not self.loops else None
            depth, guard = self.depth, len(self.lines)
            if not (isinstance(op, tuple) and op[0] == "decode"):
                work = op[1] if isinstance(op, tuple) else op
                # a tile (or this vector core's half) whose first row is past an upper bound lies wholly outside
                # the domain -- a fused loop runs past the statement's range -- and a copy whose GM region lies
                # wholly outside is not clipped to nothing
                whole = self._whole_tile_condition(work.tile)
                first = self._first_row_condition(work.tile, work.tile.mask) if work.tile.axes else None
                rows = "this vector core's rows start" if split else "the tile starts"
                why = {(True, False): "this tile is inside the domain", (False, True): f"{rows} inside the domain",
                       (True, True): f"this tile is inside the domain, and {rows} inside it"}
                if whole or first:
                    self.emit(f"if {_and_code([c for c in (whole, first) if c])}:  # {why[bool(whole), bool(first)]}")
                    self.depth += 1
            guarded = self.depth > depth
            if isinstance(op, tuple) and op[0] == "from-cube":
                self._from_cube(op[1])
            elif isinstance(op, tuple):
                self._decode_operands(op[1])
            else:
                self._vector_op(op)
            self.depth = depth
            if guarded and all(line.strip().startswith("#") for line in self.lines[guard + 1:]):
                self.lines[guard:] = [line[4:] for line in self.lines[guard + 1:]]  # no code: no guard
            self._release(op[1] if isinstance(op, tuple) else op)
        if all(l.strip().startswith("#") for l in self.lines[start:]):
            self.emit("T.evaluate(0)  # scalar values only: computed where they are used")
        if not split:
            self.depth -= 1
        # the flags both vector cores wait for go before the work, those they set after it
        self.lines[head:head] = ["    " * self.depth + line for line in self.flags_before]
        for line in self.flags_after:
            self.emit(line)
        self.flags_before, self.flags_after = [], []
        self.depth -= 1

    def _release(self, op) -> None:
        """After a top-level statement: its UB temporaries that hold no value read later become reusable.

        Only outside serial loops: inside one, a buffer freed after its last reader would be overwritten
        before the next iteration reads it again."""
        if self.tracking is None:
            return
        later = set()
        for other in self.kernel.body[self.kernel.body.index(op) + 1:] if op in self.kernel.body else []:
            later |= registers_read(other)
        live = {acc for acc, _ in self.accs.values()}
        live |= {v.code.split("[")[0] for s, v in self.values.items() if v.kind == "tile" and s in later}
        for t in self.tracking:
            if t[0] not in live and t not in self.free:  # a reused buffer is tracked once per use: free it once
                self.free.append(t)
        self.expr_temps.clear()
        self.tracking = None

    EMPTY_BODY = ""  # the cube and vector sides of a loop print their own bodies (and their empty cases)

    def index(self, e: T.Expr) -> str:
        return index_code(e, self.vars)  # this module's: no T.Or in tilelang-ascend

    def _workspace(self, name: str, space: T.Workspace) -> str:
        """A kernel parameter for a GM workspace of the tile program (one tile slot per block)."""
        self.workspaces.append((name, list(space.shape), space.dtype))
        return name

    # ------------------------------------------------------------ cube

    def _cube_op(self, op) -> None:
        if isinstance(op, T.SerialLoop):
            self.serial(op, lambda body: [self._cube_op(o) for o in body])
        elif isinstance(op, T.AccInit):
            shape = [a.size for a in op.tile.axes]
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            acc = self.alloc(self.local(("L0C", op.stmt), f"{op.stmt}_L0C"), shape, "f32", "L0C",
                             "accumulator, cleared by the first T.mma (init)")
            self.accs[op.stmt] = (acc, shape)
            self.acc_depth[op.stmt] = len(self.loops)
        elif isinstance(op, T.AccUpdate):
            self._mma(op)

    def _mma(self, op: T.AccUpdate) -> None:
        _, operands = operand_layout(op)
        acc, _ = self.accs[op.stmt]
        loop = self.loops[-1] if self.loops else None
        stages = op.staged[0].stages  # the L1 copies of compiler/analysis/placement.py
        fp8 = op.stmt in self.fp8_dots
        if fp8:
            decoded = self.cross_core[op.stmt, "fp8-operands"].flags[0]
            self.emit(f"T.wait_cross_flag({decoded})  # the vector core decoded this step")
        l0 = []
        for n, ((load, transposed, shape, dtype), scope) in enumerate(zip(operands, ("L0A", "L0B"))):
            if transposed and scope == "L0A":
                raise BackendError(f"{op.stmt}: operand {load.tensor} is stored [K, M]; T.mma takes L0A [M, K] and "
                                   f"this backend emits the transposing L1 -> L0 copy only for L0B")
            cache = op.staged[n].cache
            note = f"cache_read {load.tensor} -> {cache.scope} at {cache.loop}" if cache else "staged for the cube"
            dtype = "f16" if fp8 else dtype
            l1 = self.alloc(self.local(("L1", load.tensor), f"{load.tensor}_L1"), [stages] + shape, dtype, "L1", note)
            slot = f"{self.vars[loop.var]} % {stages}" if stages > 1 else "0"
            if fp8:
                ws = self._decoded_workspace(op, n)
                self.emit(f"T.copy({ws}[{self.cid}, 0, 0], {l1}[{slot}, :, :])  # GM workspace (decoded FP8) -> L1")
            else:
                starts = [axis_start(x, op.tile, self.vars) for x in load.indices]
                self.emit(f"T.copy({self.tensor(load.tensor)}[{', '.join(starts)}], {l1}[{slot}, :, :])  # GM -> L1")
            l0_shape = list(reversed(shape)) if transposed else shape
            buf = self.alloc(self.local((scope, load.tensor), f"{load.tensor}_{scope}"), l0_shape, dtype, scope)
            flip = ", transpose=True" if transposed else ""
            self.emit(f"T.copy({l1}[{slot}, :, :], {buf}{flip})  # L1 -> {scope}")
            l0.append(buf)
        first = [f"{self.vars[l.var]} == {index_code(simplify(l.lower), self.vars)}"
                 for l in self.loops[self.acc_depth[op.stmt]:]]
        init = "True" if not first else first[0]
        for c in first[1:]:
            init = f"T.And({init}, {c})"
        self.emit(f"T.mma({l0[0]}, {l0[1]}, {acc}, init={init})")
        if fp8 and loop is not None:
            self.emit(f"if {self.vars[loop.var]} < {index_code(simplify(loop.upper), self.vars)} - 1:")
            consumed = self.cross_core[op.stmt, "fp8-operands"].flags[1]
            self.emit(f'    T.set_cross_flag("MTE2", {consumed})  # workspace read: decode the next step')

    def _decode_split(self, op: T.AccUpdate) -> bool:
        """Whether both vector cores decode half of each FP8 operand tile's rows."""
        _, operands = operand_layout(op)
        return all(shape[0] >= 2 and shape[0] % 2 == 0 for _, _, shape, _ in operands)

    def _decoded_workspace(self, op: T.AccUpdate, n: int) -> str:
        return self.local(("workspace", op.stmt, n), f"{op.stmt}_ws{'AB'[n]}")

    def _decode_operands(self, op: T.AccUpdate) -> None:
        """The V side of an FP8 matrix step: operand bytes GM -> UB, decoded to f16, UB -> this block's workspace."""
        _, operands = operand_layout(op)
        loop = self.loops[-1] if self.loops else None
        transfer = self.cross_core[op.stmt, "fp8-operands"]
        decoded, consumed = transfer.flags
        self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}: FP8 operands decoded for the cube")
        if loop is not None:
            self.flags_before.append(f"if {self.vars[loop.var]} > {index_code(simplify(loop.lower), self.vars)}:")
            self.flags_before.append(f"    T.wait_cross_flag({consumed})  # the cube has read the previous step's workspace")
        split = self._decode_split(op)
        for n, (load, _, shape, _) in enumerate(operands):
            ws = self._workspace(self._decoded_workspace(op, n), transfer.workspaces[n])
            axes = {a.iter: a for a in op.tile.axes}
            tile_axes = [axes[x.name] for x in load.indices]
            if split:  # each vector core decodes half of the operand tile's rows
                half = shape[0] // 2
                first = tile_axes[0]
                tile_axes[0] = T.Axis(first.iter, simplify(T.Bin("+", first.offset, T.Bin("*", T.Var(VID),
                                                                                          T.Const(half)))), half)
                shape = [half] + shape[1:]
            raw = self.alloc(self.fresh(f"{load.tensor}_bytes"), shape, "f8e4m3", "UB", f"E4M3 bytes of {load.tensor}")
            starts = [index_code(simplify(a.offset), self.vars) for a in tile_axes]
            tile = T.Tile(axes=tile_axes, scalars=op.tile.scalars, mask=load.mask)
            depth = self.depth
            # this core's half may lie past the tensor: then it writes zeros for the cube
            outside = split and self._guard_first_row(tile, load.mask)
            self.emit(f"T.copy({self.tensor(load.tensor)}[{', '.join(starts)}], {raw})  # GM -> UB (clipped: zero bytes "
                      f"are 0.0)")
            values = e4m3.decode_e4m3(self, raw, shape)
            if load.mask is not None:  # a clipped copy leaves uint8 lanes unfilled (no 8-bit Duplicate): zero them
                self._mask_lanes(values, tile, load.mask, scalar="0.0")
            if outside:
                self.depth = depth
                self.emit("else:")
                self.emit(f"    T.tile.fill({values}, 0.0)")
            row = f"{self.vid} * {shape[0]}" if split else "0"
            self.emit(f"T.copy({values}, {ws}[{self.cid}, {row}, 0])  # UB -> this block's GM workspace slot")
        self.flags_after.append(f'T.set_cross_flag("MTE3", {decoded})  # tell the cube (it waits for both vector cores)')

    def _cube_finish(self, op: T.AccFinish) -> None:
        """The C side of a finished cube reduction: L0C -> GM (stored f32) or -> this block's workspace slot."""
        acc, shape = self.accs[op.stmt]
        starts = [index_code(simplify(a.offset), self.vars) for a in op.tile.axes]
        if not self.facts.needs_vector(op):
            clipped = "  (clipped to the tensor)" if op.tile.mask is not None else ""
            self.emit(f"T.copy({acc}, {self.tensor(op.stmt)}[{', '.join(starts)}])  # L0C -> GM{clipped}")
            return
        transfer = self.cross_core[op.stmt, "cube-result"]
        ws = self._workspace(self.local(("workspace", op.stmt), f"{op.stmt}_ws"), transfer.workspaces[0])
        (flag,) = transfer.flags
        self.ws_flag[op.stmt] = (ws, flag)
        self.emit(f"T.copy({acc}, {ws}[{', '.join([self.cid] + ['0'] * len(shape))}])  # L0C -> this block's GM "
                  f"workspace slot")
        self.emit(f'T.set_cross_flag("FIX", {flag})  # tell the vector cores')

    def _from_cube(self, op: T.AccFinish) -> None:
        """The V side: wait for the cube, bring the tile into UB, round it, store it if the program stores it."""
        shape = [a.size for a in op.tile.axes]
        ws, flag = self.ws_flag[op.stmt]
        self.flags_before.append(f"T.wait_cross_flag({flag})  # the cube's result is in the workspace")
        ub = self.alloc(self.local(("from L0C", op.stmt), f"{op.stmt}_ub"), shape, "f32", "UB", "cube result")
        self.expr_temps.add(ub)  # read only by the rounding below, which may write its result here
        rows = [self.cid, f"{self.vid} * {self.half}" if self.half else "0"] + ["0"] * (len(shape) - 1)
        self.emit(f"T.copy({ws}[{', '.join(rows)}], {ub})  # GM workspace -> UB")
        value = self._round(op.dtype, _Opnd("tile", ub), shape)
        self.values[op.stmt] = value
        self.expr_temps.discard(value.code)
        self.shapes[op.stmt] = shape
        if op.store:
            self._store(op.stmt, op.tile, op.lhs, value)

    # ------------------------------------------------------------ vector

    def _vector_op(self, op) -> None:
        if isinstance(op, T.Compute):
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            if self._by_rows(op.value, op.tile):
                return self._compute_rows(op)
            shape = [a.size for a in op.tile.axes]
            value = self._round(op.dtype, self._value(op.value, op.tile), shape)
            self.values[op.stmt] = value
            self.expr_temps.discard(value.code)
            self.shapes[op.stmt] = shape
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, value)
        elif isinstance(op, T.AccInit):
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            shape = [a.size for a in op.tile.axes]
            acc = self.alloc(self.local(("acc", op.stmt), f"acc_{op.stmt}"), shape, "f32", "UB", f"{op.op} accumulator")
            self.accs[op.stmt] = (acc, shape)
            fill = "0.0" if op.op == "sum" else '-T.infinity("float32")'
            self.emit(f"T.tile.fill({acc}, {fill})")
        elif isinstance(op, T.AccUpdate):
            product = self._product(op)
            if product is not None:
                self._vector_matmul(op, *product)
            else:
                self._tile_reduce(op)
        elif isinstance(op, T.AccFinish):
            acc, shape = self.accs[op.stmt]
            value = self._round(op.dtype, _Opnd("tile", acc) if shape else _Opnd("scalar", f"{acc}[0]"), shape)
            self.values[op.stmt] = value
            self.expr_temps.discard(value.code)
            self.shapes[op.stmt] = shape
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, value)
        else:
            raise BackendError(f"{type(op).__name__} has no ascend-910b form here")

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

    # rows: a 2-D tile that reads values broadcast along its rows

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
            self._store(op.stmt, sub, op.lhs, value)
        if full is not None:
            self.done(value)  # kept in `full`: the row's buffer is free, once the store above has read it
        self.row = None
        self.depth = depth
        if fp8:
            rounded = self._round(op.dtype, _Opnd("tile", full), [row.size, col.size], into=full)
            if op.store:
                self._store(op.stmt, op.tile, op.lhs, rounded)
        if full is not None:
            self.values[op.stmt] = _Opnd("tile", full)
            self.shapes[op.stmt] = [row.size, col.size]

    @staticmethod
    def _condition(parts, names) -> str:
        """A conjunction of comparisons as a scalar condition."""
        conds = [f"{index_code(a.lhs, names)} {a.op} {index_code(a.rhs, names)}" for a in parts]
        out = conds[0]
        for c in conds[1:]:
            out = f"T.And({out}, {c})"
        return out

    # masks

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
        if len(rows) > 1:
            raise BackendError(f"a mask on a {len(tile.axes)}-D tile has no ascend-910b form (rows of 1-D and 2-D "
                               f"tiles only)")
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
        if rows:
            r = self.fresh("r")
            self.emit(f"for {r} in T.serial({rows[0].size}):")
            self.depth += 1
            names[rows[0].iter] = self._row_code(rows[0], r)
            dst = f"{buf}[{r}, :]"
            if tensor is not None:
                alt = f"{tensor}[{r}, :]"
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
        self._mask_lanes(out, tile, cond, scalar=_float_code(other.value))
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
            self.emit(f"    {held}[0] = {_float_code(other.value)}")
        return _Opnd("scalar", f"{held}[0]")

    # reductions

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
            part = self.alloc(self.fresh(f"r_{op.stmt}"), acc_shape, "f32", "UB")
            fn = "T.reduce_sum" if op.op == "sum" else "T.reduce_max"
            self.emit(f"{fn}({terms.code}, {part}, dim=-1, clear=True)")
            self.done(terms)
            terms = _Opnd("tile", part)
            self.expr_temps.add(part)
        fn = "T.tile.add" if op.op == "sum" else "T.tile.max"
        self.emit(f"{fn}({acc}, {acc}, {terms.code})")
        self.done(terms)
        if op.accum != "f32":
            self._round(op.accum, _Opnd("tile", acc), acc_shape, into=acc)

    def _product(self, op: T.AccUpdate):
        """(mask, lhs load, rhs load) of sum(k) X * Y over a [rows, columns, k] tile on the vector core, or None."""
        if op.op != "sum" or len(op.tile.axes) != 3:
            return None
        if isinstance(op.partial, T.Dot):
            return op.tile.mask, op.partial.lhs, op.partial.rhs
        if not (isinstance(op.partial, T.Reduce) and tuple(op.partial.axes) == (2,)):
            return None
        body, mask = op.partial.operand, None
        if isinstance(body, T.Select) and body.other == T.Const(0.0):
            body, mask = body.then, body.cond
        if isinstance(body, T.Bin) and body.op == "*" and isinstance(body.lhs, T.Load) and isinstance(body.rhs, T.Load):
            return mask, body.lhs, body.rhs
        return None

    def _vector_matmul(self, op: T.AccUpdate, mask, lhs: T.Load, rhs: T.Load) -> None:
        """acc[r, :] += A[r, k] * B[k, :] for every row r and step k in order: the program's summation order,
        each product rounded to f32 and added (no fused multiply-add), masked (i, j, k) lanes adding nothing."""
        row, col, red = op.tile.axes
        acc, acc_shape = self.accs[op.stmt]
        if acc_shape != [row.size, col.size]:
            raise BackendError(f"{op.stmt}: accumulator tile {acc_shape} differs from the product's rows and columns")

        def order(load):
            return [x.name if isinstance(x, T.Var) else None for x in load.indices]

        if {row.iter, red.iter} != set(order(lhs)):
            lhs, rhs = rhs, lhs
        if set(order(lhs)) != {row.iter, red.iter} or set(order(rhs)) != {red.iter, col.iter}:
            raise BackendError(f"{op.stmt}: the operands of sum({red.iter}) are not [{row.iter}, {red.iter}] and "
                               f"[{red.iter}, {col.iter}] tiles")
        self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}: on the vector core, row by row")
        a_rows = order(lhs) == [row.iter, red.iter]
        a = self._operand_f32(lhs, op.tile, [row.size, red.size] if a_rows else [red.size, row.size])
        b_rows = order(rhs) == [red.iter, col.iter]
        b = self._operand_f32(rhs, op.tile, [red.size, col.size] if b_rows else [col.size, red.size])
        if not b_rows:  # the product needs rows of B along the columns: transpose the tile (scalar loop)
            bt = self.alloc(self.fresh(f"{rhs.tensor}_t"), [red.size, col.size], "f32", "UB", f"{rhs.tensor} transposed")
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
            mentions(p, red.iter) or not implied_by_bounds(p, list(rhs.indices), self.facts.dims(rhs.tensor)))]
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

    def _operand_f32(self, load: T.Load, tile: T.Tile, shape) -> str:
        """An operand tile GM -> UB (clipped, zero-padded), widened to f32.  The product reads it element by
        element and row by row, so E4M3 bytes may come in a buffer of more rows than the tile: their decoding
        compares whole 256-byte repeats of f16 (128 values)."""
        arg = next(t for t in self.kernel.tensors if t.name == load.tensor)
        names = self._region_names(tile)
        rows, cols = shape
        held = [max(rows, 128 // cols), cols] if arg.dtype == "f8e4m3" and rows * cols < 128 else shape
        raw = self.alloc(self.fresh(f"{load.tensor}_ub"), held, arg.dtype, "UB", f"tile of {load.tensor}")
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

    # stores

    def _store(self, stmt, tile, lhs, value: _Opnd) -> None:
        arg = next(t for t in self.kernel.tensors if t.name == stmt)
        shape = [a.size for a in tile.axes]
        src = value if value.kind == "tile" else self._materialise(value, shape)
        names = self._region_names(tile)
        region = f"{self.tensor(stmt)}[{', '.join(names[it] for it in lhs)}]"
        column = self.facts.store_layout(stmt, tile, lhs) == "column"
        indices = [tile.scalars[it] if it in tile.scalars else T.Var(it) for it in lhs]
        axes = [a.iter for a in tile.axes]
        extra = [a for a in atoms(tile.mask) if not implied_by_bounds(a, indices, self.facts.dims(stmt))
                 and any(mentions(a, it) for it in axes)]  # the others are the whole statement's condition
        if len(axes) == 2 and any(not mentions(a, axes[-1]) for a in extra):
            return self._store_rows(stmt, tile, lhs, src)
        if extra and not column:  # read-modify-write: the GM tile is kept where the mask is false
            self._check_read_modify_write(stmt, tile, extra)
            if arg.dtype == "f8e4m3":
                raise BackendError(f"{stmt}: a store of FP8 bytes under a mask other than the tensor's bounds is not "
                                   f"generated for ascend-910b")
            old = self.alloc(self.fresh(f"{stmt}_old"), shape, arg.dtype, "UB", f"{stmt} as it is in GM")
            self.emit(f"T.copy({region}, {old})  # GM -> UB: lanes outside the domain keep these values")
            old = self._widen(old, arg.dtype, shape)
            out = self.temp(f"{stmt}_new", shape)
            self.emit(f"T.copy({src.code}, {out})  # UB -> UB")
            self._mask_lanes(out, tile, conjunction(extra), tensor=old)
            self.expr_temps.add(old)
            self.done(old)
            src = _Opnd("tile", out)
        if arg.dtype == "f8e4m3":
            src = _Opnd("tile", e4m3.encode_e4m3(self, src.code, shape))
            self.expr_temps.add(src.code)
        elif arg.dtype != "f32":
            out = self.temp(f"{stmt}_out", shape, arg.dtype, f"{stmt} in {arg.dtype}")
            self.emit(f'T.tile.cast({out}, {src.code}, "CAST_RINT", {math.prod(shape or [1])})')
            self.done(src)
            src = _Opnd("tile", out)
        if column:
            self._store_column(stmt, tile, lhs, src.code, arg.dtype)
        else:
            clipped = " (clipped to the tensor)" if tile.mask is not None else ""
            self.emit(f"T.copy({src.code}, {region})  # UB -> GM{clipped}")
        self.done(src)

    def _store_rows(self, stmt, tile, lhs, src: _Opnd) -> None:
        """A 2-D tile some of whose rows lie outside the domain (a tile size that is not a power of two: the
        tile's last rows are the next tile's first ones, which another vector core or block may be writing):
        stored row by row, each row inside the domain as a 1-D tile; the others are not written at all."""
        row, col = tile.axes
        r = self.fresh("r")
        parts = atoms(tile.mask)
        row_parts = [a for a in parts if not mentions(a, col.iter) and mentions(a, row.iter)]
        scalars = {**tile.scalars, row.iter: simplify(T.Bin("+", row.offset, T.Var(ROW)))}
        sub = T.Tile(axes=[col], scalars=scalars, mask=conjunction([a for a in parts if a not in row_parts]))
        saved, self.vars[ROW] = self.vars.get(ROW), r
        depth = self.depth
        self.emit(f"for {r} in T.serial({row.size}):  # {stmt} row by row: rows outside the domain are not written")
        self.depth += 1
        self.emit(f"if {self._condition(row_parts, self._scalar_names(sub))}:")
        self.depth += 1
        self._store(stmt, sub, lhs, _Opnd("tile", f"{src.code}[{r}, :]"))
        self.depth = depth
        self.vars[ROW] = saved
        self.done(src)

    def _check_read_modify_write(self, stmt, tile, extra) -> None:
        """A masked store writes the lanes outside its mask back as they were in GM.  That is right only if no
        other core writes them meanwhile: lanes outside the statement's domain, or those of a neighbouring tile
        that this core stores itself (a serial loop) -- not a neighbour another block stores at the same time."""
        grid = {v for axis in self.kernel.grid for v in axis.vars}
        for atom in extra:
            shared = sorted(v for v in grid if mentions(atom, v))
            if shared:
                col = tile.axes[-1]
                raise BackendError(
                    f"{stmt}: its tile of {col.size} lanes along {col.iter} reaches into the tile of the next "
                    f"{'/'.join(shared)} (the mask {_atom_text(atom)}), which another block stores at the same "
                    f"time; the 910B stores whole rows of lanes, so the store would write that block's lanes back "
                    f"as they were. Use a tile size that is a power of two along {col.iter} (or a serial loop for "
                    f"{'/'.join(shared)})")

    def _store_column(self, stmt, tile, lhs, src: str, dtype: str) -> None:
        """A 1-D tile down a GM column, element by element: each into the first lane of a row of whole 32-byte
        blocks (a UB -> GM copy starts on one), copied to its own GM element.  Rows outside the tile's mask
        (past the tensor, or outside the domain) are not written: the copies need no clipping and no
        read-modify-write."""
        axis = tile.axes[0]
        rows = self._column_rows(stmt, axis.size, dtype)
        r = self.fresh("r")
        names = self._scalar_names(tile)
        names[axis.iter] = self._row_code(axis, r)
        depth = self.depth
        self.emit(f"for {r} in T.serial({axis.size}):  # {stmt}'s column, one element at a time")
        self.depth += 1
        if tile.mask is not None:
            self.emit(f"if {self._condition(atoms(tile.mask), names)}:  # rows inside the domain")
            self.depth += 1
        self.emit(f"{rows}[{r}, 0] = {src}[{r}]")
        self.emit(f"T.copy({rows}[{r}, 0:1], {self.tensor(stmt)}[{', '.join(names[it] for it in lhs)}])  # UB -> GM")
        self.depth = depth
        self.done(rows)

    # three-address values (f32)

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
            return _Opnd("scalar", _float_code(e.value))
        if isinstance(e, T.Reg):
            return self._reg(e, axes, shape)
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
                return self._binop(e.func, args[0], args[1], shape)
            # The primitives of compiler/model/functions.py (rsqrt, sigmoid, silu arrive expanded into them, so the
            # 910B computes the interpreter's steps, not its own T.tile.silu).
            fn = {"exp": "exp", "log": "ln", "sqrt": "sqrt", "abs": "abs"}.get(e.func)
            if fn is None:
                raise BackendError(f"{e.func} has no T.tile form in tilelang-ascend 0.1.4")
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
        """A value computed earlier in this kernel; row by row, a row of it or its element for the row."""
        value = self.values[e.stmt]
        if value.kind == "scalar":
            return value
        if self.row is not None:
            rank = len(self.shapes.get(e.stmt, []))
            if tuple(e.axes) == (0, 1) and rank == 2:
                return _Opnd("tile", f"{value.code}[{self.row}, :]")
            if tuple(e.axes) == (1,) and rank == 1:
                return value
            if tuple(e.axes) == (0,) and rank == 1:
                return _Opnd("scalar", f"{value.code}[{self.row}]")
            raise BackendError(f"reading {e.stmt} (axes {e.axes}) row by row has no ascend-910b form")
        if list(e.axes) != list(range(len(axes))):
            held = self.shapes.get(e.stmt, [])
            if len(axes) == 2 and [shape[p] for p in e.axes] == list(held) and list(e.axes) in ([1, 0], [1], [0]):
                return self._arrange(value.code, list(e.axes), shape)
            raise BackendError(f"reading {e.stmt} broadcast along some tile axes has no whole-tile T.tile form "
                               f"for ascend-910b")
        return value

    def _load(self, e, tile, shape, axes) -> _Opnd:
        used = {x.name for idx in e.indices for x in expr_vars(idx)}
        arg = next(t for t in self.kernel.tensors if t.name == e.tensor)
        names = self._region_names(tile)
        if not used & set(axes):
            if arg.dtype == "f8e4m3":
                raise BackendError(f"a scalar read of the FP8 tensor {e.tensor} has no ascend-910b form")
            indices = ", ".join(index_code(simplify(i), names) for i in e.indices)
            return _Opnd("scalar", f'T.Cast("float32", {self.tensor(e.tensor)}[{indices}])')
        order = [i.name for i in e.indices if isinstance(i, T.Var) and i.name in axes]
        plain = all(isinstance(i, T.Var) for i in e.indices if used & set(axes) & {v.name for v in expr_vars(i)})
        if order != list(axes) and plain and len(set(order)) == len(order) and len(axes) == 2:
            return self._load_arranged(e, tile, order)
        layout = tile_layout(e.tensor, e.indices, axes, "load")
        raw = self.alloc(self.fresh(f"{e.tensor}_ub"), shape, arg.dtype, "UB", f"tile of {e.tensor}")
        region = ", ".join(index_code(simplify(i), names) for i in e.indices)
        if layout == "column":
            self._load_column(e.tensor, region, raw, shape[0], arg.dtype)
        else:
            clipped = " (clipped to the tensor, zero-padded)" if e.mask is not None else ""
            self.emit(f"T.copy({self.tensor(e.tensor)}[{region}], {raw})  # GM -> UB{clipped}")
        return _Opnd("tile", self._widen(raw, arg.dtype, shape))

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

    def _binop(self, op: str, a: _Opnd, b: _Opnd, shape) -> _Opnd:
        """a op b into a UB temporary; the temporary may be an operand's own buffer (a subexpression its parent
        consumes): the T.tile.* operations work element by element, so dst may be src0 or src1."""
        if a.kind == b.kind == "scalar":
            code = f"T.{op}({a.code}, {b.code})" if op in ("max", "min") else f"({a.code} {op} {b.code})"
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
        fn = {"+": "add", "-": "sub", "*": "mul", "/": "div", "max": "max", "min": "min"}[op]
        self.done(a, b)
        out = self.temp("t", shape)
        self.emit(f"T.tile.{fn}({out}, {a.code}, {b.code})")
        return _Opnd("tile", out)

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



TEMPLATES = Path(__file__).parent / "templates"


def emit_module(program: T.TileProgram, source="", schedule_name="", statements=(), signature="") -> str:
    """The module text: the kernels of `program` and their torch launcher (templates/module.py.j2)."""
    names = ModuleNames(program)
    kernels = [Ascend910BPrinter(program, k, names).render() for k in program.kernels]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True)
    return env.get_template("module.py.j2").render(
        source=source, schedule_name=schedule_name, signature=signature or program.name,
        statements=list(statements), schedule_lines=[l for l in program.schedule.splitlines() if l.strip()],
        kernels=kernels, workspaces=sorted({w for k in kernels for w in k.get("workspaces", [])}),
        e4m3=sorted({n for k in kernels for n in k.get("e4m3", [])}), renamed=names.renamed_code())


def _exact_reciprocal(code: str) -> str | None:
    """1/c as code when c is a literal power of two whose reciprocal is a normal f32 (then x / c == x * (1/c))."""
    try:
        c = float(code.strip("()"))
    except ValueError:
        return None
    m, e = math.frexp(abs(c)) if c else (0.0, 0)
    if m != 0.5 or not -125 <= 1 - e <= 127:
        return None
    return repr(1.0 / c)


def _and_code(conds: list) -> str:
    out = conds[0]
    for c in conds[1:]:
        out = f"T.And({out}, {c})"
    return out


def _float_code(value) -> str:
    value = float(value)
    if math.isinf(value):
        return '-T.infinity("float32")' if value < 0 else 'T.infinity("float32")'
    return repr(value)


def _atom_text(atom: T.Bin) -> str:
    """A mask comparison as the program's names spell it (for messages)."""
    names = {v.name: v.name for side in (atom.lhs, atom.rhs) for v in expr_vars(side)}
    return f"{index_code(simplify(atom.lhs), names)} {atom.op} {index_code(simplify(atom.rhs), names)}"


def _loop_lowers(kernel: T.TileKernel) -> dict:
    """Loop variable -> its first value, where that is a constant (grid axes and serial loops)."""
    out = {}
    for axis in kernel.grid:
        for var, lo in zip(axis.vars, axis.lowers):
            if isinstance(simplify(lo), T.Const):
                out[var] = simplify(lo).value

    def walk(ops):
        for op in ops:
            if isinstance(op, T.SerialLoop):
                if isinstance(simplify(op.lower), T.Const):
                    out[op.var] = simplify(op.lower).value
                walk(op.body)

    walk(kernel.body)
    return out


def registers_read(op) -> set:
    """Statements whose register values an op (or a loop's body) reads."""
    if isinstance(op, T.SerialLoop):
        return set().union(*[registers_read(o) for o in op.body]) if op.body else set()
    expr = getattr(op, "value", None) or getattr(op, "partial", None)
    out = set()

    def walk(e):
        if isinstance(e, T.Reg):
            out.add(e.stmt)
        elif isinstance(e, T.Dot):
            walk(e.lhs)
            walk(e.rhs)
        elif isinstance(e, T.Reduce):
            walk(e.operand)
        elif isinstance(e, T.Select):
            walk(e.then)
            walk(e.other)
        for c in subexpressions(e):
            walk(c)

    if expr is not None:
        walk(expr)
    return out


def _load_uses(op) -> dict:
    """repr(load) -> how often the op's expression reads it (a load read once may be overwritten by its reader)."""
    uses: dict = {}

    def walk(e):
        if isinstance(e, T.Load):
            uses[repr(e)] = uses.get(repr(e), 0) + 1
        elif isinstance(e, T.Dot):
            walk(e.lhs)
            walk(e.rhs)
        elif isinstance(e, T.Reduce):
            walk(e.operand)
        for c in subexpressions(e):
            walk(c)

    expr = getattr(op, "value", None) or getattr(op, "partial", None)
    if expr is not None:
        walk(expr)
    return uses


def subexpressions(e):
    """The operands of an elementwise value (tileir.value_operands); a tile reduction or product is a whole
    step of its own, not looked into here."""
    return [] if isinstance(e, (T.Reduce, T.Dot)) else T.value_operands(e)


