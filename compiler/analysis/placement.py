"""Which unit computes a matrix product: the one place that decides it.

Two questions, asked at two stages of the flow, answered here and nowhere else:

* `matrix_operands(stmt, sizes)` -- is a statement, by its form, a matrix product `sum(k) X[i, k] * Y[k, j]`
  (`product_form`: possibly with constant factors, `sum(k) alpha * X[i, k] * Y[k, j]`, that move to the
  finished sum)?  The cost model counts its FLOPs at the matrix unit's rate, the buffer plan places its
  staged operands and its accumulator where a matrix unit reads and writes them (L1 / L0C on Ascend), and
  the tile lowering turns a tile of it into a `Dot`.
* `assign_units(program, backend)` -- which unit runs each `Dot` of a tile program: `MATRIX` (tensor
  core, cube) or `VECTOR` (exact f32 multiply-add).  The answer depends on what one backend's matrix
  instruction accepts (`MATRIX_UNITS`): operand dtypes, accumulator dtype, operand masks its copies
  reproduce, tile shapes.  The printers read `Dot.unit` and never decide it themselves; nor how the warps
  split a product's tile (`Dot.warp_rows`, `warps_by_rows`).

* `stage_operands(program, backend)` -- where each product's operands are copied before it reads them
  (`STAGING`: shared memory, L1, UB, or not at all), in which loop, with how many copies in flight, and
  which of the schedule's `cache_read` buffers that copy is.

A product the matrix unit does not take keeps the program's f32 semantics on the vector unit: f32 operands
are never rounded to tf32, mixed operands are widened, and masked operand lanes are zeros either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from tdsl.frontend import ast

from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.model.dependences import policy
from tdsl.compiler.lower.tile_rules import lanes, padded_shape
from tdsl.compiler.model.dtypes import power_of_two
from tdsl.compiler.lower.tileir import (AccFinish, AccInit, AccUpdate, Dot, Preload, Preloaded, RegOperand, SerialLoop,
                                       Staged, TileKernel, TileProgram, Var, walk_ops)

MATRIX = "matrix"
VECTOR = "vector"


# ---------------------------------------------------------------- the statement's form


@dataclass(frozen=True)
class ProductForm:
    """`C = sum(k) scale * X[.., i, k] * Y[.., k, j]`: the two operand reads and the product of the constant
    factors of every term, which the finished sum is multiplied by instead (1.0: none)."""

    lhs: ast.Access
    rhs: ast.Access
    scale: float = 1.0


def product_form(stmt, sizes: dict) -> Optional[ProductForm]:
    """The statement as a matrix product, or None.

    The body is a product (`*`, unary `-`, `/` by a constant) of two tensor reads and constant factors
    (literals and `const` values, `sizes`).  Each operand is a plain read indexed by an output iterator and
    the one reduction iterator, the two operands naming different output iterators; other output iterators
    (batch and head in attention, `Q[b, h, i, d] * K[b, h, j, d]`) may index either operand too and select
    which product a tile computes.

    The constant factors leave the sum: `sum(k) a*x_k*y_k` becomes `a * sum(k) x_k*y_k`.  That is exact when
    every factor is a power of two (each term and each partial sum is scaled by 2^e without rounding, as long
    as none overflows or becomes subnormal); for other factors the terms round differently, which the sum's
    `combine reassoc` permits and strict order does not: such a statement is not a matrix product and keeps
    its terms, multiplied one by one, on the vector units.  Nor is a sum with factors that starts from a value
    (`from x`): x is added unscaled."""
    if stmt.reduce_op != "sum" or len(stmt.red_iters) != 1:
        return None
    factors = _factors(stmt.value, sizes)
    if factors is None or len(factors[0]) != 2:
        return None
    (first, second), scale, exact = factors
    if not exact and policy(stmt)[0] != "reassoc":
        return None  # (even when the factors multiply to 1: `3 * x / 3` rounds each term)
    if scale != 1.0 and stmt.init is not None:
        return None  # a start value is not scaled: the factor cannot leave the sum
    if not (math.isfinite(scale) and scale != 0.0 and abs(scale) >= _SMALLEST_NORMAL_F32
            and abs(scale) <= _LARGEST_F32):
        return None
    k = stmt.red_iters[0]
    for lhs, rhs in ((first, second), (second, first)):
        for i in stmt.lhs_iters:
            for j in stmt.lhs_iters:
                batch = set(stmt.lhs_iters) - {i, j}
                if i != j and _indexed_by(lhs, {i, k}, batch) and _indexed_by(rhs, {k, j}, batch):
                    return ProductForm(lhs, rhs, scale)
    return None


def matrix_operands(stmt, sizes: dict) -> Optional[tuple]:
    """The two operand reads of a matrix product (`product_form`), or None."""
    form = product_form(stmt, sizes)
    return None if form is None else (form.lhs, form.rhs)


_SMALLEST_NORMAL_F32 = 2.0 ** -126
_LARGEST_F32 = 3.4028234663852886e38


def _factors(e, sizes: dict) -> Optional[tuple[list, float, bool]]:
    """(tensor reads, product of the constants, whether every constant is a power of two) of a product
    expression, or None when `e` is not one (a sum, a call, an iterator or a run-time size as a factor)."""
    if isinstance(e, ast.Access):
        return [e], 1.0, True
    if isinstance(e, (ast.IntLit, ast.FloatLit)) or (isinstance(e, ast.Name) and isinstance(sizes.get(e.name),
                                                                                           (int, float))):
        value = float(e.value if not isinstance(e, ast.Name) else sizes[e.name])
        return [], value, power_of_two(value)
    if isinstance(e, ast.Neg):
        inner = _factors(e.operand, sizes)
        return None if inner is None else (inner[0], -inner[1], inner[2])
    if isinstance(e, ast.BinOp) and e.op in ("*", "/"):
        lhs, rhs = _factors(e.lhs, sizes), _factors(e.rhs, sizes)
        if lhs is None or rhs is None or (e.op == "/" and (rhs[0] or rhs[1] == 0.0)):
            return None  # dividing by a tensor read or by zero is not a constant factor
        scale = lhs[1] * rhs[1] if e.op == "*" else lhs[1] / rhs[1]
        return lhs[0] + rhs[0], scale, lhs[2] and rhs[2]
    return None


def smallest_dot_tile(dtypes) -> tuple[int, int]:
    """(smallest i and j extent, smallest k extent) of a tile the lowering turns into a `Dot`: 16 everywhere,
    k at least 32 for 8-bit operands (sm_90 wgmma takes k in steps of 32).  A smaller tile is a vector
    product (broadcast multiply and sum), not a matrix-unit one."""
    return 16, 32 if "f8e4m3" in dtypes else 16


def makes_dot(dtypes, m: int, n: int, k: int) -> bool:
    """Does a product's tile of m x n x k values (i, j, k) become a `Dot`?  Its lanes (powers of two) reach
    `smallest_dot_tile`.  The tile lowering asks this of each tile it builds, the cost model of the plan's
    tiles (cost/work.py `products`): a smaller tile is vector work for both."""
    least_ij, least_k = smallest_dot_tile(dtypes)
    return min(lanes(m), lanes(n)) >= least_ij and lanes(k) >= least_k


def _indexed_by(e, iters: set, batch: set) -> bool:
    """A plain read whose indices are distinct iterators: all of `iters`, and otherwise only `batch` ones."""
    if not (isinstance(e, ast.Access) and all(isinstance(x, ast.Name) for x in e.indices)):
        return False
    names = [x.name for x in e.indices]
    return len(set(names)) == len(names) and iters <= set(names) and set(names) - iters <= batch


# ---------------------------------------------------------------- what each backend's matrix unit takes


@dataclass(frozen=True)
class MatrixUnit:
    """The products one backend's matrix instruction computes exactly as the program says."""

    dtypes: frozenset  # operand dtypes it multiplies (both operands of one dtype)
    accum_f32_only: bool = False  # accumulates only in f32 (L0C); other accumulators stay on the vector unit
    operand_masks: str = "any"  # any: masked lanes are zeroed on the way in | none | bounds: only the tensor's
    #                             bounds (a clipped copy zero-fills them)
    fp8_row_elements: int = 0  # FP8 operands cross GM -> UB in rows: every contiguous tile axis at least this
    warp_tile: Optional[tuple] = None  # (rows, cols): each warp owns a multiple of this block of the product
    #                                    tile, and every warp owns one (TileLang's warp partition)
    # a product with absent terms (`Dot.absent_terms`: lanes the program has no term at, a masked 0 times the
    # other operand) -- "exact": the printer keeps it on the matrix unit, and where an operand that meets the
    # masked zeros (`Dot.absent_met`) holds an infinite or NaN element computes it term by term instead |
    # "vector": it runs on the vector unit, whose multiply-add loop skips those lanes
    absent_terms: str = "vector"
    vector_reaches_accumulator: bool = True  # the vector unit reads and writes the matrix unit's accumulator
    #   (NVIDIA: both work on register fragments); otherwise (Ascend's L0C) the accumulator is the matrix unit's
    #   own and a sum the vector unit also adds to or rescales is kept by the vector unit (`sums_on_vector`)


_LOW_PRECISION = frozenset({"bf16", "f16", "f8e4m3"})

MATRIX_UNITS = {
    # tl.dot on tensor cores; f32 and mixed products use input_precision="ieee" (exact FMA)
    "triton": MatrixUnit(_LOW_PRECISION, absent_terms="exact"),
    # T.gemm splits the product tile among the warps ('No valid warp partition' otherwise)
    "tilelang": MatrixUnit(_LOW_PRECISION, warp_tile=(16, 8), absent_terms="exact"),
    # the 950 cube: T.copy GM -> L1 has no masked form; L0C is the cube's (the vector cores read copies of it)
    "ascend-950": MatrixUnit(_LOW_PRECISION, accum_f32_only=True, operand_masks="none",
                                 vector_reaches_accumulator=False),
    # the 910B cube: FP8 decoded to f16 by the vector cores (32-byte rows), clipped copies zero-fill
    "ascend-910b": MatrixUnit(_LOW_PRECISION, accum_f32_only=True, operand_masks="bounds", fp8_row_elements=32,
                              vector_reaches_accumulator=False),
}


def warps_by_rows(kernel: TileKernel, backend: str) -> bool:
    """Whether every product of a kernel must give each warp whole rows of its tile: on TileLang, when one reads
    an operand an earlier statement holds in registers (P in attention's P·V after online()).  T.gemm reads
    such an operand in the layout its producer was computed in, and that producer (the scores, a product
    too) and the row statistics between them share one layout only when no warp splits a row."""
    return MATRIX_UNITS[backend].warp_tile is not None and any(
        isinstance(load, RegOperand) for op in walk_updates(kernel.body) if isinstance(op.partial, Dot)
        for load in (op.partial.lhs, op.partial.rhs))


def decide_unit(op: AccUpdate, kernel: TileKernel, backend: str, by_rows: Optional[bool] = None) -> str:
    """MATRIX if `backend`'s matrix unit computes this tile product exactly as the program says, else VECTOR.
    `by_rows`: the kernel's `warps_by_rows`, when the caller has it."""
    unit, dot = MATRIX_UNITS[backend], op.partial
    if dot.lhs_dtype != dot.rhs_dtype or dot.lhs_dtype not in unit.dtypes:
        return VECTOR
    if unit.accum_f32_only and op.accum != "f32":
        return VECTOR
    if dot.absent_terms and unit.absent_terms == "vector":
        return VECTOR
    # a register operand's masked lanes are zeroed where it is cast to the operand dtype, before any copy
    loads = [load for load in (dot.lhs, dot.rhs) if not isinstance(load, RegOperand)]
    if unit.operand_masks == "none" and any(load.mask is not None for load in loads):
        return VECTOR
    if unit.operand_masks == "bounds" and not all(load.mask_is_bounds for load in loads):
        return VECTOR
    if unit.fp8_row_elements and dot.lhs_dtype == "f8e4m3":
        contiguous = {order[-1] for order in (operand_order(load, op) for load in loads) if order}
        if any(a.size < unit.fp8_row_elements for a in op.tile.axes if a.iter in contiguous):
            return VECTOR
    if unit.warp_tile is not None:
        rows, cols = op.tile.axes[0].size, op.tile.axes[1].size
        wr, wc = unit.warp_tile
        if rows % wr or cols % wc or (rows // wr) * (cols // wc) < kernel.num_warps:
            return VECTOR
        if by_rows is None:
            by_rows = warps_by_rows(kernel, backend)
        if by_rows and rows % (wr * kernel.num_warps):
            return VECTOR
    return MATRIX


def assign_units(program: TileProgram, backend: str) -> TileProgram:
    """The program with the unit of every `Dot` decided for `backend` (`decide_unit`), where each sum is kept
    (`sums_on_vector`), and which accumulators live in the matrix unit's own storage (`AccInit.on_matrix`)."""
    return replace(program, kernels=[_assign_kernel(k, backend) for k in program.kernels])


def _assign_kernel(kernel: TileKernel, backend: str) -> TileKernel:
    by_rows = warps_by_rows(kernel, backend)
    # one pass in program order: which accumulator (its statement, and how many AccInits of it came before) each
    # reduction op belongs to, the unit each product would take on its own, and each accumulator's updates
    seen: dict = {}
    instance = []  # per op of walk_ops: its accumulator's key, or None
    alone = {}  # position -> unit of a product
    updates: dict = {}  # accumulator key -> [(AccUpdate, unit)]
    started = set()  # accumulator keys that start from a value (AccInit.start)
    for n, op in enumerate(walk_ops(kernel.body)):
        if isinstance(op, AccInit):
            seen[op.stmt] = seen.get(op.stmt, 0) + 1
        key = (op.stmt, seen.get(op.stmt, 0)) if isinstance(op, (AccInit, AccUpdate, AccFinish)) else None
        instance.append(key)
        if isinstance(op, AccInit) and op.start is not None:
            started.add(key)
        if isinstance(op, AccUpdate) and isinstance(op.partial, Dot):
            alone[n] = decide_unit(op, kernel, backend, by_rows)
        if isinstance(op, AccUpdate):
            updates.setdefault(key, []).append((op, alone.get(n, VECTOR)))
    own_storage = not MATRIX_UNITS[backend].vector_reaches_accumulator
    on_vector = {key: sums_on_vector(ups, backend, key in started) for key, ups in updates.items()}
    on_matrix = {key: own_storage and not on_vector[key] and all(u == MATRIX for _, u in ups)
                 for key, ups in updates.items()}
    position = iter(range(len(instance)))

    def ops(body):
        out = []
        for op in body:
            n = next(position)
            if isinstance(op, SerialLoop):
                op = replace(op, body=ops(op.body))
            elif isinstance(op, AccUpdate) and isinstance(op.partial, Dot):
                op = replace(op, partial=replace(op.partial, unit=alone[n], warp_rows=by_rows,
                                                 sum_on_vector=alone[n] == MATRIX and on_vector[instance[n]]))
            elif isinstance(op, (AccInit, AccFinish)):
                op = replace(op, on_matrix=on_matrix.get(instance[n], False))
            out.append(op)
        return out

    return replace(kernel, body=ops(kernel.body))


def sums_on_vector(updates: list, backend: str, started: bool = False) -> bool:
    """Whether the vector unit keeps a sum whose updates are `updates` ((AccUpdate, unit) pairs) on a backend whose
    vector unit cannot reach the matrix unit's accumulator: a sum that starts from a value (`started`: the matrix
    unit's accumulator starts from zero), one it rescales (online()), or one that some update adds to on the
    vector unit (a product's masked rest, a tile reduction).  Each matrix product then forms its step's product
    alone and the vector unit adds it (`Dot.sum_on_vector`)."""
    if MATRIX_UNITS[backend].vector_reaches_accumulator or not any(u == MATRIX for _, u in updates):
        return False
    return started or any(op.rescale is not None or u != MATRIX for op, u in updates)


def unit_of(op: AccUpdate) -> str:
    """The unit `assign_units` chose for a tile product (printers ask this; they never decide)."""
    if op.partial.unit not in (MATRIX, VECTOR):
        raise InternalError(f"the product of {op.stmt} has no unit; print programs from "
                             f"compiler.pipeline.lower_for, which assigns them")
    return op.partial.unit


def matrix_statements(kernel: TileKernel) -> set:
    """The statements whose tile products run on the matrix unit (after `assign_units`)."""
    return {op.stmt for op in walk_updates(kernel.body) if isinstance(op.partial, Dot) and unit_of(op) == MATRIX}


def walk_updates(body):
    return (op for op in walk_ops(body) if isinstance(op, AccUpdate))


# ---------------------------------------------------------------- where operands are staged


# backend -> unit -> the scope a product's operands are copied to first (absent: read from global memory)
STAGING = {
    "triton": {},  # tl.load into registers; Triton's own pipeliner places the shared-memory copies
    "tilelang": {MATRIX: "shared", VECTOR: "shared"},  # T.copy to shared, then T.gemm or the FMA loop
    "ascend-950": {MATRIX: "L1", VECTOR: "UB"},  # the cube reads L1 (-> L0A/L0B); the vector unit UB
    "ascend-910b": {MATRIX: "L1"},  # the cube reads L1; vector products load their own UB rows
}

# backend -> unit -> the scope of an operand an earlier statement holds in registers (`RegOperand`, attention's P
# in P·V after online()); absent: the scope of STAGING.  TileLang's T.gemm reads a register operand in place
# (a fragment in the operand dtype); its exact FMA loop reads every lane's row, so a copy in shared memory.
REGISTER_STAGING = {
    "tilelang": {MATRIX: "fragment"},
}

def operand_layout(op: AccUpdate) -> tuple:
    """The (i, j, k) iterators of a tile product and, per operand, (its load, stored transposed?, box shape in
    the tensor's index order, dtype).  A batched operand (`Q[b, h, i, d]`) has other indices besides the two
    tile axes, each with one value in the tile: its box is the 2-D one of the tile axes.  Raises BackendError
    for an operand that is not such a tile."""
    dot = op.partial
    i, j, k = [a.iter for a in op.tile.axes]
    size = {a.iter: a.size for a in op.tile.axes}
    out = []
    for load, rows, cols, dtype in ((dot.lhs, i, k, dot.lhs_dtype), (dot.rhs, k, j, dot.rhs_dtype)):
        order = operand_order(load, op)
        others = [x for x in order if x not in (rows, cols)]
        axes = [x for x in order if x in (rows, cols)]
        if all(x in op.tile.scalars for x in others) and axes == [rows, cols]:
            out.append((load, False, [size[rows], size[cols]], dtype))
        elif all(x in op.tile.scalars for x in others) and axes == [cols, rows]:
            out.append((load, True, [size[cols], size[rows]], dtype))
        else:
            raise BackendError(f"{op.stmt}: operand {operand_name(load)}[{', '.join(map(str, order))}] is not a plain "
                               f"2-D tile")
    return (i, j, k), out


def operand_name(load) -> str:
    """The tensor a product operand is read from, or the statement whose registers hold it."""
    return load.reg.stmt if isinstance(load, RegOperand) else load.tensor


def operand_order(load, op: AccUpdate) -> list:
    """The iterators of a product operand's dimensions, in storage order: a tensor's indices (None where one is
    not a plain iterator), or the producer's tile axes of a register operand."""
    if isinstance(load, RegOperand):
        return [op.tile.axes[p].iter for p in load.reg.axes]
    return [x.name if isinstance(x, Var) else None for x in load.indices]


def tile_dims(load, op: AccUpdate) -> list[int]:
    """The positions of a product operand's indices that run along the tile's axes (two; the others, batch
    indices, hold one value per tile)."""
    axes = {a.iter for a in op.tile.axes}
    return [n for n, x in enumerate(operand_order(load, op)) if x in axes]


def stage_operands(program: TileProgram, backend: str) -> TileProgram:
    """The program with every product's operand copies decided for `backend` (`AccUpdate.staged`).

    An operand is copied in each iteration of the innermost serial loop around the product (once per program
    when there is none), with that loop's pipeline depth; the schedule's `cache_read` of the tensor at that
    loop is that copy, and its planned box must be the box the product reads.  An operand loaded once before
    that loop (`Preload`, compiler/lower/passes/hoist.py) is copied where the Preload stands: in each iteration
    of the loop around it, and the Preload gets the scope of the copy."""
    return replace(program, kernels=[_stage_kernel(k, backend) for k in program.kernels])


def _stage_kernel(kernel: TileKernel, backend: str) -> TileKernel:
    scopes = STAGING[backend]
    preloads = {op.name: op for op in walk_ops(kernel.body) if isinstance(op, Preload)}
    preload_scope = {}

    def ops(body, loops):
        out = []
        for op in body:
            if isinstance(op, SerialLoop):
                op = replace(op, body=ops(op.body, loops + [op]))
            if isinstance(op, AccUpdate) and isinstance(op.partial, Dot) and unit_of(op) in scopes:
                op = replace(op, staged=_staged(op, backend, scopes[unit_of(op)], loops, kernel, preloads))
                for load, st in zip((op.partial.lhs, op.partial.rhs), op.staged):
                    if isinstance(load, Preloaded):
                        preload_scope[load.name] = st.scope
            out.append(op)
        return out

    def with_scopes(body):
        return [replace(op, body=with_scopes(op.body)) if isinstance(op, SerialLoop)
                else replace(op, scope=preload_scope[op.name]) if isinstance(op, Preload) and op.name in preload_scope
                else op for op in body]

    return replace(kernel, body=with_scopes(ops(kernel.body, [])))


def _staged(op: AccUpdate, backend: str, scope: str, loops: list, kernel: TileKernel, preloads: dict) -> tuple:
    dot = op.partial
    loaded = [preloads[x.name].load if isinstance(x, Preloaded) else x for x in (dot.lhs, dot.rhs)]
    layout = operand_layout(replace(op, partial=replace(dot, lhs=loaded[0], rhs=loaded[1])))[1]
    out = []
    for operand, (load, transposed, shape, dtype) in zip((dot.lhs, dot.rhs), layout):
        # copied in each iteration of the innermost loop around the product, or, preloaded, of the one around that
        around = loops[:-1] if isinstance(operand, Preloaded) else loops
        loop = around[-1] if around else None
        owned = loop.buffers if loop is not None else kernel.buffers
        stages = (loop.stages or 1) if loop is not None else 1
        if isinstance(load, RegOperand):  # already on chip: no copy from memory, no cache_read
            where = REGISTER_STAGING.get(backend, {}).get(unit_of(op), scope)
            out.append(Staged(load.reg.stmt, where, tuple(shape), transposed, dtype, 1,
                              loop.var if loop is not None else "", None))
            continue
        cache = next((b for b in owned if b.tensor == load.tensor and b.kind == "read"), None)
        _check_no_outer_copy(op, load.tensor, backend, around, kernel, loop)
        tensor_shape = next((t.shape for t in kernel.tensors if t.name == load.tensor), ())
        dims = tile_dims(load, op)  # a batched operand's plan box is 1 along its batch indices
        planned = [d for n, d in enumerate(cache.shape) if n in dims] if cache is not None else []
        if cache is not None and (any(d != 1 for n, d in enumerate(cache.shape) if n not in dims)
                                  or not _same_box(planned, shape, [tensor_shape[n] for n in dims])):
            raise BackendError(f"{op.stmt}: the buffer plan gives {load.tensor} the box {list(cache.shape)} but the "
                               f"tile reads {list(shape)}")
        out.append(Staged(load.tensor, scope, tuple(shape), transposed, dtype, stages,
                          loop.var if loop is not None else "", cache))
    return tuple(out)


def _check_no_outer_copy(op: AccUpdate, tensor: str, backend: str, around: list, kernel: TileKernel, loop) -> None:
    """Refuse a `cache_read` of a product operand at a loop outside the one its copies are made in.  The backend
    copies the operand in each iteration of the innermost loop around the product, from global memory; a copy
    planned further out (the chapter's 5.4.5: L1 filled per `ko1`, L0A per `ko0` from it) would not be made,
    while `tdsl cost` counts its buffer and its traffic."""
    if loop is None:  # copied once per program: nothing is further out
        return
    outer = [b for l in around[:-1] for b in l.buffers] + list(kernel.buffers)
    cache = next((b for b in outer if b.tensor == tensor and b.kind == "read"), None)
    if cache is None:
        return
    where = f"loop {cache.loop}" if cache.loop else "the program's start"
    raise BackendError(f"{op.stmt}: the schedule copies {tensor} to {cache.scope} at {where} (cache_read), but "
                       f"{backend} copies a product's operands from global memory in each iteration of the innermost "
                       f"loop around the product (loop {loop.var}), so that copy would not be made (and `tdsl cost` "
                       f"counts it): put the cache_read at {op.stmt}.{loop.var} instead, or split the reduction loop "
                       f"once")


def _same_box(planned: list, shape, tensor_shape: list) -> bool:
    """The plan's box (clipped to the tensor, or padded to the tile's lanes: compiler/lower/tile_rules.py) is the
    tile's box, in either index order."""
    clipped = [min(s, d) if isinstance(d, int) else s for s, d in zip(shape, tensor_shape)]
    shape = list(shape)
    return any(box == want or sorted(box) == sorted(want)
               for box in (planned, padded_shape(planned)) for want in (shape, clipped))
