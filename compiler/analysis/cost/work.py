"""The compute work of a kernel by instruction class: matrix products on the unit their operands choose, other
statements in FP32-instruction slots; tiles padded to the powers of two the backend computes.

Products (`products`, `product_unit`, `product_rate`): tensor cores by operand dtype and layout, scaled by the
product tile's size (`tile_efficiency`) and by one resident warpgroup; f32 or mixed operands on the FMA units
(`ieee_dot_rate`).  Vector work (`vector_slots`): each operation's slots (Target.vector_op_cost), at the issue rate
the resident warps reach (`issue_efficiency`).  docs/cost.md, "Compute: instruction class, tile, padding".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from tdsl.frontend import ast

from tdsl.compiler.analysis.buffer_plan import DTYPE_BYTES, KernelPlan
from tdsl.compiler.analysis.cost.count import card
from tdsl.compiler.analysis.cost.results import KernelCost
from tdsl.compiler.model.dtypes import power_of_two
from tdsl.compiler.analysis.cost.traffic import statement_flops
from tdsl.compiler.analysis.placement import MATRIX_UNITS, makes_dot, matrix_operands
from tdsl.compiler.model.dependences import imprecise_products
from tdsl.compiler.model.functions import COMPOSITIONS
from tdsl.compiler.targets import Target

TENSOR_CORE_DTYPES = MATRIX_UNITS["triton"].dtypes  # what tl.dot runs on tensor cores (placement.py decides)
TRITON_DOT_MIN = 16  # tl.dot needs every dimension of a product tile to be at least 16
FP8_INSTRUCTION_K = 32  # terms one FP8 wgmma adds per output: the shortest promotion interval


@dataclass
class Product:
    """One matrix statement of a kernel: its FLOPs, operand dtypes and the tile one program multiplies."""

    stmt: str
    flops: int
    dtypes: tuple  # (lhs, rhs)
    b_k_major: bool  # both operands have the reduction index last (contiguous)
    m: int
    n: int
    k: int
    tensors: tuple = ()  # (lhs, rhs): the tensors it multiplies
    boxes: tuple = ()  # (lhs, rhs): each operand's tile, in its tensor's dimensions (1 along batch iterators)


def products(model, kp: KernelPlan) -> list:
    """The kernel's matrix statements with their tiles (from the operand buffers of the plan), those whose tile
    the lowering turns into a `Dot` (`placement.makes_dot`).  A smaller product (doitgen's row of sums, one r
    and q a program) is a broadcast multiply and a tile sum on the vector units: `vector_slots` counts it."""
    out = []
    for s in kp.stmts:
        stmt = model.stmt(s)
        operands = matrix_operands(stmt, model.sizes)
        if operands is None:
            continue
        lhs, rhs = operands
        k = stmt.red_iters[0]
        names_l, names_r = _names(lhs), _names(rhs)
        i = next((x for x in names_l if x != k and x not in names_r), None)
        j = next((x for x in names_r if x != k and x not in names_l), None)
        flops = statement_flops(model, s)[0]
        dtypes = (model.tensors[lhs.tensor].dtype, model.tensors[rhs.tensor].dtype)
        k_major = names_l[-1] == k and names_r[-1] == k
        m, n = _output_extent(kp, stmt, lhs, i), _output_extent(kp, stmt, rhs, j)
        k_extent = _tile_extent(kp, s, lhs, k)
        if makes_dot(dtypes, m, n, k_extent):
            extent = {i: m, j: n, k: k_extent}
            boxes = tuple([extent.get(x, 1) for x in names] for names in (names_l, names_r))
            out.append(Product(s, flops, dtypes, k_major, m, n, k_extent, (lhs.tensor, rhs.tensor), boxes))
    return out


def _names(access: ast.Access) -> list:
    return [x.name for x in access.indices]


def _output_extent(kp: KernelPlan, stmt, operand: ast.Access, iterator: Optional[str]) -> int:
    """The product tile's extent along an output iterator: its result's tile, or where the plan holds none, the
    operand's (whose buffer may be wider: covariance's D[k, i] * D[k, j] holds both reads' hull)."""
    results = [b for b in kp.buffers if b.tensor == stmt.write.tensor and stmt.name in b.stmts and b.shape]
    if iterator is None or not results or iterator not in stmt.lhs_iters:
        return _tile_extent(kp, stmt.name, operand, iterator)
    buf = min(results, key=lambda b: math.prod(b.shape))
    position = list(stmt.lhs_iters).index(iterator)
    return buf.shape[position] if position < len(buf.shape) else 1


def _tile_extent(kp: KernelPlan, stmt: str, access: ast.Access, iterator: Optional[str]) -> int:
    """The tile extent along `iterator` of the operand buffer the product reads (its innermost copy, or the
    registers an earlier statement of the kernel left it in)."""
    if iterator is None:
        return 1
    bufs = [b for b in kp.buffers if b.tensor == access.tensor and stmt in b.stmts and b.kind in ("read", "tile", "temp")]
    if not bufs:
        return 1
    buf = min(bufs, key=lambda b: math.prod(b.shape) if b.shape else 1)
    position = _names(access).index(iterator)
    return buf.shape[position] if position < len(buf.shape) else 1


def product_unit(p: Product, tgt: Target) -> str:
    """The instruction class that runs a product: tensor cores by operand dtype when both operands have one
    dtype Triton's tl.dot takes (placement.MATRIX_UNITS), FP8 with a B operand that is not K-major on the
    slower path Triton 3.6 takes for it, otherwise exact f32 multiply-adds on the FMA units (input_precision
    "ieee").  On targets without measured rates every product runs at the datasheet peak of its dtype."""
    a, b = p.dtypes
    if a != b or a not in TENSOR_CORE_DTYPES:
        return "ieee fma"
    if a == "f8e4m3":
        return "tensor f8e4m3" if p.b_k_major else "tensor f8e4m3_b_not_k_major"
    return "tensor bf16"


def padding(sizes, minimum: int = 1) -> float:
    """How much work a tile does over what it holds: Triton pads every tile dimension to a power of two (and a
    product's to at least 16, what tl.dot accepts); the extra lanes are masked but computed."""
    real = math.prod(max(s, 1) for s in sizes)
    padded = math.prod(max(minimum, 1 << (max(s, 1) - 1).bit_length()) for s in sizes)
    return padded / real


def tile_efficiency(m: int, n: int, dtype: str, tgt: Target) -> float:
    """Fraction of the sustained tensor rate a product tile reaches, by m*n/(m+n) (the tile's FLOPs per operand
    byte staged): linear between the measured points of Target.tensor_tile_efficiency for the operand class
    (bf16's where the class has none), in proportion below."""
    points = tgt.tensor_tile_efficiency
    return _interpolate(points.get(dtype, points.get("bf16", ())), m * n / (m + n))


def row_efficiency(p: Product, tgt: Target) -> float:
    """Fraction of the rate a K step reaches with the operand rows it stages: a K-major operand's rows are k
    elements long, and rows narrower than 128 bytes reach less (Target.tensor_row_efficiency, by the narrowest
    operand's row bytes)."""
    if not tgt.tensor_row_efficiency:
        return 1.0
    rows = [p.k * DTYPE_BYTES[d] for d in p.dtypes] if p.b_k_major else [p.k * DTYPE_BYTES[p.dtypes[0]]]
    return _interpolate(tgt.tensor_row_efficiency, min(rows))


def ieee_dot_rate(p: Product, tgt: Target, warps: int) -> float:
    """FLOP/s of an f32 FMA product: Target.ieee_dot_efficiency of the FMA rate while k x outputs per thread stays
    within Target.ieee_dot_register_words, falling in proportion beyond (operands spill; h100.py [mb])."""
    if not tgt.ieee_dot_efficiency:
        return tgt.vector_flops
    fma_flops = 2 * (tgt.vector_instr_rate or tgt.vector_flops / 2)
    m, n, k = (_pow2(x, TRITON_DOT_MIN) for x in (p.m, p.n, p.k))
    outputs = m * n / (max(warps, 1) * (tgt.warp_size or 32))
    return fma_flops * tgt.ieee_dot_efficiency / max(1.0, k * outputs / tgt.ieee_dot_register_words)


def product_rate(p: Product, unit: str, tgt: Target, warps: int, warpgroups: int) -> float:
    """FLOP/s of one product of a kernel."""
    if unit == "ieee fma":
        return ieee_dot_rate(p, tgt, warps)
    dtype = unit.split()[1]
    if not tgt.matrix_flops_sustained:
        return tgt.peak(p.dtypes[0])
    m, n = _pow2(p.m, TRITON_DOT_MIN), _pow2(p.n, TRITON_DOT_MIN)
    rate = tgt.matrix_flops_sustained.get(dtype, tgt.matrix_flops_sustained["bf16"])
    rate *= tile_efficiency(m, n, dtype, tgt) * row_efficiency(p, tgt)
    if warpgroups <= 1 and tgt.one_warpgroup_efficiency:
        rate *= tgt.one_warpgroup_efficiency
    return rate


def matrix_time(model, tgt: Target, prods: list, cost: KernelCost, resident: int) -> tuple:
    """Seconds of the kernel's products (`products`) at their classes' rates, padded tiles, and of the promotions
    of FP8 partial sums (`promotion_time`); and the classes."""
    warps = cost.warps
    warpgroups = resident * max(1, warps // 4)
    total, units = 0.0, []
    for p in prods:
        unit = product_unit(p, tgt) if tgt.matrix_flops_sustained else f"matrix {p.dtypes[0]}"
        units.append(unit)
        pad = padding((p.m, p.n, p.k), TRITON_DOT_MIN if tgt.vendor == "nvidia" else 1)
        total += p.flops * pad / product_rate(p, unit, tgt, warps, warpgroups)
        interval = promotion_interval(model, p, unit)
        if interval:
            total += promotion_time(p, interval, tgt, warps, resident)
    return total, units


def promotion_time(p: Product, interval: int, tgt: Target, warps: int, resident: int) -> float:
    """What promoting an FP8 product's partial sums adds to its products' time.  In each K step a program waits
    for its tensor-core products once (Target.fp8_promotion_wait_s) and adds each promoted partial sum into the
    f32 one (Target.fp8_promotion_add_s per 64 outputs a thread holds, the measured tiles' count); the programs
    resident on an SM overlap their promotions with each other but not with the products, so each round of their
    K steps pays one program's promotions.  Measured on the H200 with L2-resident operands
    (benchmarks/gpu/microbench_promotion.py): a 128 x 128 x 128 tile on 8 warps, 377 ns a K step unpromoted,
    takes 540 / 633 / 768 ns promoted every 128 / 64 / 32 terms; 64 x 128 x 128 on 4 warps with 1 / 2 / 3
    programs an SM takes 358-462 / 520 / 712-757 ns a round of their steps promoted every 128 (this rule: 354 /
    543 / 732, their products at the full rate and one program's promotions); with 128 outputs a thread, 64 x
    256 on 4 warps and 256 x 128 on 8 add 209 and 228 ns a step promoted every 128 (240 by this rule), 128 x 128
    on 4 warps 402."""
    if not tgt.fp8_promotion_wait_s:
        return p.flops / 2 / interval / (tgt.vector_instr_rate or tgt.vector_flops)
    m, n, k = (_pow2(x, TRITON_DOT_MIN) for x in (p.m, p.n, p.k))
    steps = p.flops / (2 * p.m * p.n * p.k)  # K steps of all programs
    rounds = steps / tgt.units / max(resident, 1)
    per_thread = m * n / (max(warps, 1) * (tgt.warp_size or 32))
    promotions = math.ceil(k / interval)
    return rounds * (tgt.fp8_promotion_wait_s + promotions * tgt.fp8_promotion_add_s * per_thread / 64)


def promotion_interval(model, p: Product, unit: str) -> Optional[int]:
    """How many terms an FP8 product on FP8 tensor cores adds in the reduced-precision accumulator before an
    FP32 addition promotes them into the sum (compiler/model/dependences.py `imprecise_products`): every
    instruction (32 terms) without a declaration, N under `combine fast_accum(N)` (at most the tile's k, as the
    Triton printer passes it), never (None) under `combine fast_accum`.  Each promotion is one FP32 addition
    per output, and Triton keeps the promoted sum in a second accumulator of the tile's size
    (`promotion_register_bytes`)."""
    if unit != "tensor f8e4m3":  # the path for a B that is not K-major converts to f16: exact f32 sums
        return None
    n = imprecise_products(model.stmt(p.stmt))
    if n is None:
        return None
    return max(FP8_INSTRUCTION_K, min(n, p.k) if n else FP8_INSTRUCTION_K)


def promotion_register_bytes(model, prods: list, tgt: Target) -> int:
    """Register bytes of the second accumulators of promoted FP8 products (f32, one per output of the tile)."""
    total = 0
    for p in prods:
        unit = product_unit(p, tgt) if tgt.matrix_flops_sustained else ""
        if promotion_interval(model, p, unit):
            total += 4 * _pow2(p.m, TRITON_DOT_MIN) * _pow2(p.n, TRITON_DOT_MIN)
    return total

# ---------------------------------------------------------------- vector work


class SlotAlgebra:
    """FP32-instruction slots of an expression, built with the same compositions as the generated code
    (compiler/model/functions.py: silu is x * (1 / (1 + exp(-x))), so one IEEE division and one exp)."""

    def __init__(self, costs: dict):
        self.costs = costs

    def one(self):
        return 0.0

    def neg(self, x):
        return 1.0 + x

    def add(self, x, y):
        return 1.0 + x + y

    def mul(self, x, y):
        return 1.0 + x + y

    def div(self, x, y):
        return self.costs.get("div", 1.0) + x + y

    def call(self, func, x):
        return self.costs.get(func, 1.0) + x


def expression_slots(e, costs: dict, sizes: dict, on_chip: frozenset = frozenset()) -> float:
    """Slots one instance of an expression costs: an arithmetic operation one, a division by a power of two
    one (the backends multiply by its reciprocal), others their Target.vector_op_cost; a read of global memory
    one (its load and conversion; a value produced in the same kernel is already in registers); a cast to a
    narrower dtype its rounding."""
    if isinstance(e, ast.Access):
        return 0.0 if e.tensor in on_chip else 1.0
    if isinstance(e, (ast.IntLit, ast.FloatLit, ast.Name)):
        return 0.0
    if isinstance(e, ast.Neg):
        return 1.0 + expression_slots(e.operand, costs, sizes, on_chip)
    if isinstance(e, (ast.BinOp, ast.Compare)):
        parts = expression_slots(e.lhs, costs, sizes, on_chip) + expression_slots(e.rhs, costs, sizes, on_chip)
        if isinstance(e, ast.BinOp) and e.op == "/" and not _power_of_two(e.rhs, sizes):
            return costs.get("div", 1.0) + parts
        return 1.0 + parts
    if isinstance(e, ast.Call):
        args = [expression_slots(a, costs, sizes, on_chip) for a in e.args]
        if e.func in COMPOSITIONS:
            return COMPOSITIONS[e.func](args[0], SlotAlgebra(costs))
        if e.func in DTYPE_BYTES:
            return costs.get(f"round_{e.func}", 0.0) + sum(args)
        return costs.get(e.func, 1.0) + sum(args)
    return 0.0


def _power_of_two(e, sizes: dict) -> bool:
    value = e.value if isinstance(e, (ast.IntLit, ast.FloatLit)) else sizes.get(getattr(e, "name", None))
    return isinstance(value, (int, float)) and power_of_two(value)


def vector_slots(model, kp: KernelPlan, tgt: Target) -> float:
    """FP32-instruction slots of the kernel's statements other than matrix products: per instance the
    expression's slots, one more for a reduction's combine and the rounding to a narrower storage dtype; times
    the instances and the padding of the statement's tile.  A sum's start value counts once per element."""
    costs = tgt.vector_op_cost
    produced = frozenset(model.stmt(s).write.tensor for s in kp.stmts)
    dots = {p.stmt for p in products(model, kp)}
    total = 0.0
    for s in kp.stmts:
        stmt = model.stmt(s)
        if stmt.init is not None:  # the value a sum starts from: once per element it writes
            total += expression_slots(stmt.init, costs, model.sizes, produced) * card(stmt.write.relation.range())
        if s in dots:
            continue
        per = expression_slots(stmt.value, costs, model.sizes, produced) + (1.0 if stmt.is_reduction else 0.0)
        per += costs.get(f"round_{stmt.dtype}", 0.0)
        instances = statement_instances(model, s)
        total += per * instances * padding(work_tile(kp, s))
    return total


def statement_instances(model, stmt: str) -> int:
    """Instances of a statement (the count statement_flops already made, remembered by count.py)."""
    return card(model.stmt(stmt).domain)


def work_tile(kp: KernelPlan, stmt: str) -> list:
    """The largest tile a statement touches in one step (its operands' or its result's buffer)."""
    shapes = [b.shape for b in kp.buffers if stmt in b.stmts and b.shape]
    return max(shapes, key=math.prod) if shapes else [1]


def issue_efficiency(warps: int, tgt: Target) -> float:
    """Fraction of the full vector issue rate `warps` resident warps per SM reach (latency hiding): linear between
    the measured points of Target.issue_by_warps; 1 without them."""
    if not tgt.issue_by_warps or warps <= 0:
        return 1.0
    return _interpolate(tgt.issue_by_warps, warps)


def vector_time(model, tgt: Target, kp: KernelPlan, warps: int) -> float:
    """Vector slots at Target.vector_instr_rate (the datasheet's vector FLOP/s, one per operation, without it),
    slowed by the issue efficiency of the resident warps."""
    rate = tgt.vector_instr_rate or tgt.vector_flops
    return vector_slots(model, kp, tgt) / (rate * issue_efficiency(warps, tgt))

# ---------------------------------------------------------------- helpers


def _pow2(n: int, minimum: int = 1) -> int:
    return max(minimum, 1 << (max(n, 1) - 1).bit_length())


def _interpolate(points: tuple, x: float) -> float:
    """Piecewise-linear through (x, y) points; proportional to x below the first, flat above the last."""
    if not points:
        return 1.0
    x0, y0 = points[0]
    if x <= x0:
        return y0 * x / x0
    for (xa, ya), (xb, yb) in zip(points, points[1:]):
        if x <= xb:
            return ya + (yb - ya) * (x - xa) / (xb - xa)
    return points[-1][1]
