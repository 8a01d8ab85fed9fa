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
every `T.*` call is bound to the API's signatures (`backends/ascend910b/api.py`), and it is
executed in NumPy by `compiler/verify/ascend_sim/`.

Masked tiles (ragged sizes, the causal triangle): T.copy clips GM regions to
the tensor (loads pad, stores write the valid part), so masks that only state
tensor bounds cost nothing; other lanes are excluded with `T.tile.compare` on
lane indices and `T.tile.select` (compiler/lower/lane_masks.py): before a reduction (the
identity), in a matrix product on the vector core (zero), and at a store
(the GM tile is read first and kept where the mask is false).  A 2-D tile that
reads a value broadcast along its rows (`m[i]` in `S[i, j] - m[i]`) is computed
row by row.

Matrix products: one 16-bit operand dtype with operands that are whole tiles or
clipped at the tensor's bounds (zero-filled in L1) go to the cube; FP8 operands
are decoded to f16 by the vector core into a GM workspace that the cube reads
(backends/ascend910b/e4m3.py: the 910B has no FP8 type; E4M3 tensors are bytes); other products
(f32 or mixed operands, tiles under 16 wide) run on the vector core, one row
times one operand element at a time, in the program's summation order.

Not expressible, reported as `BackendError`: values broadcast along columns of a
tile that is not 2-D, non-affine masks, `where`/comparisons on values.

The printer is this module (state, sections, the kernel's head and the module text) with its parts in
cube.py, vector.py, stores.py and values.py; common.py holds what they share.  The tile rewrites and the
cross-core transfers are passes (compiler/lower/passes/ascend910b.py); UB buffers for the temporaries of
three-address code are allocated and reused here, while printing (docs/architecture.md says why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path


from tdsl.backends.common.launcher import launch_order
from tdsl.backends.common.module import module_text
from tdsl.backends.ascend910b.common import TL_DTYPES, _and_code, _load_uses, _loop_bounds, _Opnd, index_code
from tdsl.compiler.lower.tileir import registers_read
from tdsl.backends.ascend910b.cube import CubeSide
from tdsl.backends.ascend910b.stores import Stores
from tdsl.backends.ascend910b.values import Values
from tdsl.backends.ascend910b.vector import VectorSide
from tdsl.backends.common.ascend_capacity import TARGETS, check_capacity
from tdsl.backends.common.names import ModuleNames
from tdsl.backends.tilelang.emit import TileLangDialect, kernel_arrays, shape_code
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.lane_masks import (always_holds, atoms, conjunction, lower_bound_on, mentions, substitute,
                                            upper_bound_on)
from tdsl.compiler.lower.passes.ascend910b import BYTES, VID, Kernel910B
from tdsl.compiler.lower.tileir import simplify


@dataclass
class Ascend910BPrinter(CubeSide, VectorSide, Stores, Values, TileLangDialect):
    """One kernel's text: the state and sections here, the cube side, vector statements, stores and values in
    cube.py, vector.py, stores.py and values.py."""

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
    acc_tiles: dict = field(default_factory=dict)  # stmt -> its accumulator's tile (vector cores)
    refs: dict = field(default_factory=dict)  # stmt -> the UB row of maxima a rescaled sum was last brought to
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
    allocated: dict = field(default_factory=dict)  # buffer -> (shape, dtype, scope)
    expr_temps: set = field(default_factory=set)  # buffers holding one subexpression, read once by its parent
    proven: list = field(default_factory=list)  # comparisons the guard around the statement being emitted ensures

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
        self.loop_lowers, self.loop_uppers = _loop_bounds(k)
        self._head()
        self._body(k.body)
        check_capacity(k.name, TARGETS["ascend-910b"], self.footprint)
        params = [f'{self.tensor(t.name)}: T.Tensor({self.names.shape(t.shape)}, "{TL_DTYPES[t.dtype]}")'
                  for t in kernel_arrays(k)]  # an output stored in an input (store_in) is a view of it (below)
        views = [f'{self.tensor(t.name)} = T.decl_buffer({self.names.shape(t.shape)}, "{TL_DTYPES[t.dtype]}", '
                 f'data={self.tensor(t.stored_in)}.data)  # {t.name} is stored in {t.stored_in} (store_in)'
                 for t in k.tensors if t.stored_in]
        params += [f'{n}: T.Tensor({self.names.shape(s)}, "{TL_DTYPES[d]}")' for n, s, d in self.workspaces]
        params += [f"{self.names.var(h.var)}: T.int32" for h in k.host]  # the host loops' values (launches())
        return {"name": self.names.kernel(k.name), "key": k.name, "params": params, "head": views + self.head,
                "allocs": self.allocs, "lines": self.lines, "comment": k.comment, "footprint": dict(self.footprint),
                "cube": sorted(self.cube), "workspaces": [n for n, _, _ in self.workspaces],
                "e4m3": [self.tensor(t.name) for t in kernel_arrays(k) if t.dtype == "f8e4m3"]}  # parameters only

    # ------------------------------------------------------------ helpers

    def alloc(self, name, shape, dtype, scope, note="", pooled=True) -> str:
        """A buffer in `scope`; a UB buffer may be a freed temporary of the same shape and dtype (`pooled`)."""
        shape = list(shape) or [1]
        if name in self.allocated:  # the same buffer again (the parts of a split loop): one allocation
            if self.allocated[name] == (shape, dtype, scope):
                return name
            name = self.fresh(name)  # the same role with another shape (a part with fewer stages)
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
        self.allocated[name] = (shape, dtype, scope)
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

    def _end_lanes_test(self, tile: T.Tile, mask) -> list:
        """The comparisons of `mask` on one tile axis alone (and loop variables) that bound it from above, taken at
        the axis's first lane, and from below, at its last: if that lane fails one, every lane of the axis does, and
        the tile lies wholly outside the domain.  The rows of a ragged tile, and the columns of a tile that a
        skewed grid places past the tensor (gemver's A tiles with `skew(A.bo, A.ao, 1)` start at column 32 of 17,
        or end at column -1, in some programs).  An equality bounds the axis from both sides: fdtd_2d's
        `EYn[t, i + 1, j]` in the branch `i == 0` at NX = 2, where the second vector core's row is i = 1."""
        out = []
        for axis in tile.axes:
            others = {a.iter for a in tile.axes if a is not axis}
            last = simplify(T.Bin("+", axis.offset, T.Const(axis.size - 1)))
            for a in atoms(mask):
                if any(mentions(a, o) for o in others):
                    continue
                for side in ([T.Bin("<=", a.lhs, a.rhs), T.Bin(">=", a.lhs, a.rhs)] if a.op == "==" else [a]):
                    if upper_bound_on(side, axis.iter):
                        out.append(substitute(side, axis.iter, axis.offset))
                    elif lower_bound_on(side, axis.iter):
                        out.append(substitute(side, axis.iter, last))
        return out

    def _in_tensor(self, op) -> list:
        """The bounds of the tensor an op's statement writes, on the tile's axes: its domain lies inside them, but
        its mask may leave them out where the domain's own conditions imply them (`Cu[i, j : j >= i]` has no
        `i < M`: j < M implies it), so a vector core's half of a ragged tile could lie wholly past the tensor
        unguarded (covariance at M = 3 with `split(Cu.i, 2)`, CPU fuzz seed 5528)."""
        lhs = getattr(op, "lhs", None)
        if lhs is None or not any(t.name == op.stmt for t in self.kernel.tensors):
            return []
        axes = {a.iter: a for a in op.tile.axes}

        def at_its_lane(bound: T.Bin) -> T.Bin:  # the lane `_end_lanes_test` takes it at
            it = axes[bound.lhs.name]
            lane = it.offset if bound.op == "<" else simplify(T.Bin("+", it.offset, T.Const(it.size - 1)))
            return substitute(bound, it.iter, lane)

        dims = [k for k, it in enumerate(lhs) if it in axes]
        return [b for b in self._inside(op.stmt, [T.Var(it) for it in lhs], dims)
                if not self._kept_by_the_loops(at_its_lane(b))]

    def _kept_by_the_loops(self, atom: T.Bin, ranges: dict | None = None) -> bool:
        """Whether `atom` holds at every value of the kernel's loops and of the vector core (`VID`, 0 or 1), and of
        the variables in `ranges` (name -> (first, last))."""
        ranges = {VID: (0, 1), **(ranges or {})}
        return always_holds(atom, {**self.loop_lowers, **{n: lo for n, (lo, _) in ranges.items()}},
                            {**self.loop_uppers, **{n: hi for n, (_, hi) in ranges.items()}})

    def _guard_end_lanes(self, tile: T.Tile, mask) -> bool:
        """`if <this vector core's half of the tile is not wholly outside mask>:` (entered; False if no test) --
        its half of a ragged tile may lie past the tensor, and a copy whose GM region lies wholly outside is
        not clipped to nothing."""
        cond = self._end_lanes_condition(tile, mask)
        if cond:
            self.emit(f"if {cond}:  # this vector core's rows start inside the domain")
            self.depth += 1
        return bool(cond)

    def _end_lanes_condition(self, tile: T.Tile, mask) -> str | None:
        """`_end_lanes_test` as code, less what the loops' lower bounds prove: the tile does not lie wholly outside
        the domain."""
        parts = self._unproven(self._end_lanes_test(tile, mask))
        return self._condition(parts, self._scalar_names(tile)) if parts else None

    def _some_lane_atoms(self, tile: T.Tile, mask) -> list:
        """The comparisons of `mask` that, when one fails, fail at every lane of the tile: those on loop variables
        and sizes only, and `_end_lanes_test`'s; less what the loops' lower bounds prove."""
        return self._unproven(_lane_free_atoms(tile, mask) + self._end_lanes_test(tile, mask))

    def _unproven(self, parts: list) -> list:
        return [a for a in parts if not always_holds(a, self.loop_lowers)]

    def _whole_tile_condition(self, tile: T.Tile) -> str | None:
        """The comparisons of the tile's mask that involve none of its axes (loop variables and sizes only: a
        fused loop runs past the statement's range), as one condition on the whole statement -- a tile without
        axes has no lanes to mask, and its scalar reads and stores must not happen outside the domain."""
        parts = _lane_free_atoms(tile, tile.mask)
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
        if self.kernel.grid_group > 1:
            self.emit(f"# launch group={self.kernel.grid_group}: no block order to set on the 910B (the runtime "
                      f"hands blocks to the AI cores)")
        if self.kernel.persistent:
            self.emit("# launch persistent=true: one block per tile (the runtime hands blocks to the AI cores)")
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
            if isinstance(op, T.Barrier):  # stores above, loads of them below: on the vector cores (see BARRIER)
                self._flush(kind, group)
                kind, group = None, []
                self.barrier(op)
                continue
            if isinstance(op, T.AccUpdate) and op.stmt in self.fp8_dots:
                # the vector core decodes this step's FP8 operand tiles, then the cube multiplies them
                self._flush(kind, group)
                kind, group = None, []
                self._vector_group([("decode", op)])
                self._flush("C", [op])
                continue
            sides = self._vector_sides(op) if isinstance(op, T.AccUpdate) else []
            if sides:
                # the vector cores hand the cube an operand they hold, the cube forms the step's product, and
                # the vector cores add it to the sum they keep
                self._flush(kind, group)
                kind, group = None, []
                if any(t.startswith("vector-operand") for t in sides):
                    self._vector_group([("to-cube", op)])
                self._flush("C", [op])
                if "cube-step" in sides:
                    self._vector_group([("cube-step", op)])
                continue
            k = "C" if (self._is_cube(op) or (isinstance(op, T.AccFinish) and op.on_matrix)) else "V"
            if k != kind:
                self._flush(kind, group)
                kind, group = k, []
            group.append(op)
            if k == "C" and isinstance(op, T.AccFinish) and self.facts.needs_vector(op):
                self._flush(kind, group)
                kind, group = "V", [("from-cube", op)]
        self._flush(kind, group)

    def _is_cube(self, op) -> bool:
        """Whether an op (or every op of a loop) is one the cube scope prints alone: a sum's start and its
        product steps (a finished sum goes to GM or to the vector cores from `_body`)."""
        if isinstance(op, T.SerialLoop):
            return all(self._is_cube(o) for o in op.body)
        if isinstance(op, T.AccUpdate) and (op.stmt in self.fp8_dots or self._vector_sides(op)):
            return False
        return isinstance(op, (T.AccInit, T.AccUpdate)) and self.facts.on_cube(op)

    def _vector_sides(self, op: T.AccUpdate) -> list:
        """The kinds of the transfers with the vector cores of a product step on the cube (assign_cross_core)."""
        if not self.facts.on_cube(op):
            return []
        return [kind for (stmt, kind) in self.cross_core if stmt == op.stmt
                and (kind == "cube-step" or kind.startswith("vector-operand"))]

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
            self.proven = []
            if not (isinstance(op, tuple) and op[0] in ("decode", "to-cube", "cube-step")):  # every step, whole
                work = op[1] if isinstance(op, tuple) else op
                # a tile (or this vector core's half) whose first row is past an upper bound lies wholly outside
                # the domain -- a fused loop runs past the statement's range -- and a copy whose GM region lies
                # wholly outside is not clipped to nothing
                whole = self._whole_tile_condition(work.tile)
                self.proven = self._some_lane_atoms(work.tile, work.tile.mask)  # a masked load need not test them
                first = (self._end_lanes_condition(work.tile, conjunction(atoms(work.tile.mask) + self._in_tensor(work)))
                         if work.tile.axes else None)
                rows = "this vector core's rows start" if split else "the tile starts"
                why = {(True, False): "this tile is inside the domain", (False, True): f"{rows} inside the domain",
                       (True, True): f"this tile is inside the domain, and {rows} inside it"}
                if whole or first:
                    self.emit(f"if {_and_code([c for c in (whole, first) if c])}:  # {why[bool(whole), bool(first)]}")
                    self.depth += 1
            guarded = self.depth > depth
            if isinstance(op, tuple):
                {"from-cube": self._from_cube, "decode": self._decode_operands, "to-cube": self._operands_to_cube,
                 "cube-step": self._add_cube_step}[op[0]](op[1])
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
    # GM stores (MTE3) complete before later loads (MTE2) on each vector core: values through memory are the
    # vector cores' alone (compiler/lower/passes/ascend910b.py `refuse_cube_recurrences`), each reading its own
    BARRIER = 'with T.Scope("V"): T.barrier_all()'

    def index(self, e: T.Expr) -> str:
        return index_code(e, self.vars)  # this module's: no T.Or in tilelang-ascend

    def _workspace(self, name: str, space: T.Workspace) -> str:
        """A kernel parameter for a GM workspace of the tile program (one tile slot per block), once for the
        parts of a split loop."""
        if not any(n == name for n, _, _ in self.workspaces):
            self.workspaces.append((name, list(space.shape), space.dtype))
        return name



TEMPLATES = Path(__file__).parent / "templates"


def emit_module(program: T.TileProgram, **common) -> str:
    """The module text: the kernels of `program` and their torch launcher (templates/module.py.j2)."""
    names = ModuleNames(program)
    kernels = [Ascend910BPrinter(program, k, names).render() for k in program.kernels]
    return module_text(TEMPLATES, program, names, kernels, **common, launches=launch_order(program, names),
                       workspaces=sorted({w for k in kernels for w in k.get("workspaces", [])}),
                       e4m3=sorted({n for k in kernels for n in k.get("e4m3", [])}))


def _lane_free_atoms(tile: T.Tile, mask) -> list:
    """The comparisons of `mask` that involve none of the tile's axes (loop variables and sizes only)."""
    axes = [a.iter for a in tile.axes]
    return [a for a in atoms(mask) if not any(mentions(a, it) for it in axes)]
