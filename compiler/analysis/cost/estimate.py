"""The ranking estimate: a kernel's time from the counted bytes and FLOPs plus what the roofline leaves out.

    t = launch + max(DRAM, L2, compute x waves, loads in flight)

One function per term (docs/cost.md, "The estimate", gives each formula and its source):

* `launch_time`     the time a launch adds (Target.launch_overhead_s, measured with an empty kernel);
* `dram_bytes`      global bytes after reuse in L2: programs resident together (one wave) read a tile they share
                    once; `dram_time` at the measured DRAM bandwidth;
* `l2_time`         every counted tile load and store passes through L2 (Target.l2_bandwidth);
* `matrix_time`     each product at the rate of its instruction class (`product_unit`): tensor cores by operand
                    dtype and layout, scaled by the tile's size (`tile_efficiency`) and by one resident
                    warpgroup; an f32 or mixed product on the FMA units (`ieee_dot_rate`); tiles padded to
                    powers of two (`padding`);
* `vector_time`     other work in FP32-instruction slots (`vector_slots`), at the issue rate the resident warps
                    reach (`issue_efficiency`);
* `wave_factor`     the busiest SM's (core's) work over the mean: a partial last wave, a longest program;
* `inflight_time`   Little's law: each load step waits the memory latency, and only resident programs x pipeline
                    stages of them are in flight at once.

The estimate reuses what `analyze` already counted (transfers, occupancy, the K step); the only isl work added
is per global load: whether its tile changes with each grid loop, and the longest program's number of steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import islpy as isl

from tdsl.frontend import ast

from tdsl.compiler.analysis.buffer_plan import DTYPE_BYTES, KernelPlan
from tdsl.compiler.analysis.cost.count import card
from tdsl.compiler.analysis.cost.results import Estimate, KernelCost
from tdsl.compiler.analysis.cost.timing import register_demand
from tdsl.compiler.analysis.cost.traffic import statement_flops
from tdsl.compiler.analysis.placement import MATRIX_UNITS, matrix_operands
from tdsl.compiler.model.functions import COMPOSITIONS
from tdsl.compiler.schedule.tree import Loop
from tdsl.compiler.targets import Target

TENSOR_CORE_DTYPES = MATRIX_UNITS["triton"].dtypes  # what tl.dot runs on tensor cores (placement.py decides)
TRITON_DOT_MIN = 16  # tl.dot needs every dimension of a product tile to be at least 16


def kernel_estimate(model, tgt: Target, kp: KernelPlan, cost: KernelCost) -> Estimate:
    """Every term of one kernel's estimate."""
    resident = resident_programs(cost, tgt)
    warps = cost.occupancy.resident_warps if cost.occupancy is not None else 0
    nbytes = dram_bytes(model, kp, cost, tgt, resident)
    t_matrix, units = matrix_time(model, tgt, kp, cost, resident)
    waves = wave_factor(kp, cost, tgt)
    spill = spill_factor(kp, cost, tgt)
    return Estimate(
        t_launch=launch_time(tgt),
        wave=min(cost.programs, resident * tgt.units),
        dram_bytes=nbytes,
        t_dram=dram_time(nbytes, tgt),
        t_l2=l2_time(cost.global_bytes, tgt),
        t_matrix=t_matrix * spill,
        t_vector=vector_time(model, tgt, kp, warps) * spill,
        waves=waves,
        t_inflight=inflight_time(kp, cost, tgt, resident, waves),
        units=units,
        resident_warps=warps,
    )


# ---------------------------------------------------------------- launch, residency


def launch_time(tgt: Target) -> float:
    """Target.launch_overhead_s: an empty kernel timed as the benchmarks time kernels (h100.py [mb])."""
    return tgt.launch_overhead_s or 0.0


def spill_factor(kp: KernelPlan, cost: KernelCost, tgt: Target) -> float:
    """Compute slows in proportion to the registers a thread needs over those it may have (timing.py's
    `register_demand` against Target.max_registers_per_thread): the rest lives in local memory and every use
    of it is a load or store.  An assumption, not measured by itself; the FMA products' measured law
    (`ieee_dot_rate`) falls the same way once their operands outgrow the registers.  Registers given with
    `--regs` are taken as what the kernel gets (no spill)."""
    if cost.occupancy is None or not cost.occupancy.regs_estimated or not tgt.max_registers_per_thread:
        return 1.0
    return max(1.0, register_demand(kp, tgt) / tgt.max_registers_per_thread)


def resident_programs(cost: KernelCost, tgt: Target) -> int:
    """Programs resident together on one SM (the occupancy model), or one per core on Ascend."""
    if cost.occupancy is None:
        return 1
    return max(cost.occupancy.resident_blocks, 1)


# ---------------------------------------------------------------- DRAM and L2


def dram_bytes(model, kp: KernelPlan, cost: KernelCost, tgt: Target, resident: int) -> int:
    """Global bytes that reach DRAM.  Programs are launched in grid order and `resident` x SMs of them run
    together (a wave); a tile that several programs of one wave load is read from DRAM once and hit in L2 by
    the others, so a load's DRAM bytes are its counted bytes x (distinct tiles in a wave / programs in a wave).
    When every tensor the kernel reads fits in L2 together, none is read from DRAM twice.  Writes reach DRAM once."""
    wave = min(cost.programs, resident * tgt.units)
    order = grid_order(kp, cost)
    counted_bytes = {_key(t): t.bytes for t in cost.transfers}  # what traffic.py counted, by movement
    reads = [a for a in kp.accesses if a.src == "global"]
    sizes = {a.tensor: tensor_bytes(model, a.tensor) for a in reads}
    fits = tgt.l2_bytes is not None and None not in sizes.values() and sum(sizes.values()) <= tgt.l2_bytes
    total = cost.global_write
    for a in reads:
        counted = counted_bytes[_key(a)]
        if a.loop is None:  # loaded once by the whole kernel: nothing to share
            total += counted
            continue
        varies = grid_dependence(kp, a)
        distinct = math.prod(wave_extent(order, name, wave) for name in varies)
        nbytes = min(counted, counted * distinct // max(wave, 1))
        if fits:
            nbytes = min(nbytes, sizes[a.tensor])
        total += nbytes
    return total


def _key(movement) -> tuple:
    """A movement's identity, the same for the plan's TileAccess and the cost's Transfer made from it."""
    loop = movement.loop_name if hasattr(movement, "loop_name") else movement.loop  # TileAccess / Transfer
    return movement.tensor, movement.kind, movement.src, movement.dst, loop, tuple(movement.stmts)


def tensor_bytes(model, tensor: str) -> Optional[int]:
    """Bytes of a whole tensor (None when a size is a run-time parameter)."""
    t = model.tensors[tensor]
    if not all(isinstance(d, int) for d in t.shape):
        return None
    return DTYPE_BYTES[t.dtype] * math.prod(t.shape)


def grid_order(kp: KernelPlan, cost: KernelCost) -> list:
    """The grid loops with their extents, fastest-varying first: CUDA starts blocks in order of their linear
    index (x fastest, then y, z); loops fused on one axis vary innermost first (backends/triton/emit.py)."""
    extents, outer = {}, 1
    for loop in kp.grid_loops:  # tree order: outer to inner
        total = cost.loop_iterations.get(loop.name, 1)
        extents[loop.name] = max(round(total / outer), 1)
        outer = max(total, 1)
    rank = {"x": 0, "y": 1, "z": 2}
    position = {loop.name: n for n, loop in enumerate(kp.grid_loops)}
    loops = sorted(kp.grid_loops, key=lambda l: (rank.get(l.bind, 3), -position[l.name]))
    return [(l.name, extents[l.name]) for l in loops]


def wave_extent(order: list, name: str, wave: int) -> int:
    """How many values grid loop `name` takes over `wave` consecutive programs."""
    stride = 1
    for loop, extent in order:
        if loop == name:
            return min(extent, max(1, math.ceil(wave / stride)))
        stride *= extent
    return 1


def grid_dependence(kp: KernelPlan, access) -> list:
    """The grid loops whose value changes the tile a global access moves (isl: the touched region with that
    loop's dimension projected out is larger than the region itself)."""
    dims = loop_dims(kp.root, access.loop)
    grid = {l.name for l in kp.grid_loops}
    rel = access.touched
    varies = []
    for name, positions in dims.items():
        if name not in grid:
            continue
        for d in positions:
            free = rel.project_out(isl.dim_type.in_, d, 1).insert_dims(isl.dim_type.in_, d, 1)
            if not free.intersect_domain(rel.domain()).is_subset(rel):
                varies.append(name)
                break
    return varies


def loop_dims(root, target: Optional[Loop]) -> dict:
    """Loop name -> positions of its dimensions in a movement's domain (the loops from the kernel's root down to
    the loop the movement happens in, each contributing its dimensions)."""
    if target is None or not isinstance(root, Loop):
        return {}
    path = _path(root, target) or []
    out, d = {}, 0
    for loop in path:
        out[loop.name] = list(range(d, d + loop.n_dims))
        d += loop.n_dims
    return out


def _path(node, target: Loop) -> Optional[list]:
    if node is target:
        return [node]
    for child in getattr(node, "body", []):
        if isinstance(child, Loop):
            found = _path(child, target)
            if found is not None:
                return [node] + found
    return None


def dram_time(nbytes: int, tgt: Target) -> float:
    """DRAM bytes at the measured bandwidth (Target.dram_bandwidth_measured; the datasheet's without one)."""
    return nbytes / (tgt.dram_bandwidth_measured or tgt.dram_bandwidth)


def l2_time(nbytes: int, tgt: Target) -> float:
    """The counted global bytes (every tile load and store passes through L2) at Target.l2_bandwidth."""
    return nbytes / tgt.l2_bandwidth if tgt.l2_bandwidth else 0.0


# ---------------------------------------------------------------- matrix products


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


def products(model, kp: KernelPlan) -> list:
    """The kernel's matrix statements with their tiles (from the operand buffers of the plan)."""
    out = []
    for s in kp.stmts:
        stmt = model.stmt(s)
        operands = matrix_operands(stmt)
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
        out.append(Product(s, flops, dtypes, k_major, _tile_extent(kp, s, lhs, i), _tile_extent(kp, s, rhs, j),
                           _tile_extent(kp, s, lhs, k)))
    return out


def _names(access: ast.Access) -> list:
    return [x.name for x in access.indices]


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


def tile_efficiency(m: int, n: int, tgt: Target) -> float:
    """Fraction of the sustained tensor rate a product tile reaches, by m*n/(m+n) (the tile's FLOPs per operand
    byte staged): linear between the measured points of Target.tensor_tile_efficiency, in proportion below."""
    return _interpolate(tgt.tensor_tile_efficiency, m * n / (m + n))


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
    rate = tgt.matrix_flops_sustained.get(dtype, tgt.matrix_flops_sustained["bf16"]) * tile_efficiency(m, n, tgt)
    if warpgroups <= 1 and tgt.one_warpgroup_efficiency:
        rate *= tgt.one_warpgroup_efficiency
    return rate


def matrix_time(model, tgt: Target, kp: KernelPlan, cost: KernelCost, resident: int) -> tuple:
    """Seconds of the kernel's products at their classes' rates, padded tiles; and the classes."""
    warps = cost.warps
    warpgroups = resident * max(1, warps // 4)
    total, units = 0.0, []
    for p in products(model, kp):
        unit = product_unit(p, tgt) if tgt.matrix_flops_sustained else f"matrix {p.dtypes[0]}"
        units.append(unit)
        pad = padding((p.m, p.n, p.k), TRITON_DOT_MIN if tgt.vendor == "nvidia" else 1)
        total += p.flops * pad / product_rate(p, unit, tgt, warps, warpgroups)
    return total, units


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
    if not isinstance(value, (int, float)) or not value:
        return False
    return abs(math.frexp(float(value))[0]) == 0.5


def vector_slots(model, kp: KernelPlan, tgt: Target) -> float:
    """FP32-instruction slots of the kernel's statements other than matrix products: per instance the
    expression's slots, one more for a reduction's combine and the rounding to a narrower storage dtype; times
    the instances and the padding of the statement's tile."""
    costs = tgt.vector_op_cost
    produced = frozenset(model.stmt(s).write.tensor for s in kp.stmts)
    total = 0.0
    for s in kp.stmts:
        stmt = model.stmt(s)
        if matrix_operands(stmt) is not None:
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


# ---------------------------------------------------------------- waves and latency


def wave_factor(kp: KernelPlan, cost: KernelCost, tgt: Target) -> float:
    """The busiest SM's (core's) work over the mean: programs are spread whole, so one runs ceil(programs /
    SMs) of them, and no SM finishes before the longest program does (a causal loop's last row)."""
    per_unit = cost.programs / tgt.units
    busiest = max(math.ceil(per_unit), longest_program(kp, cost))
    return busiest / per_unit if per_unit else 1.0


def longest_program(kp: KernelPlan, cost: KernelCost) -> float:
    """The longest program's steps of the K loop over the mean program's (1 without such a loop)."""
    if cost.step is None or cost.step.per_program <= 0:
        return 1.0
    access = next((a for a in kp.accesses if a.src == "global" and a.loop_name == cost.step.loop), None)
    if access is None:
        return 1.0
    dom = access.touched.domain()
    n = dom.dim(isl.dim_type.set)
    fibres = isl.Map.from_range(dom).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, n - 1)
    longest = fibres.dim_max(0).sub(fibres.dim_min(0)).add_constant_val(isl.Val.one(dom.get_ctx())).max_val()
    mean = cost.loop_iterations[cost.step.loop] / max(cost.programs, 1)
    if not mean or not longest.is_int():  # an empty loop (NaN) has no longest program
        return 1.0
    return max(1.0, longest.to_python() / mean)


def inflight_time(kp: KernelPlan, cost: KernelCost, tgt: Target, resident: int, waves: float) -> float:
    """Little's law: every load step (an iteration of the K loop, or a program's one load of its tiles) waits the
    memory latency (Target.memory_latency_s) plus its bytes at the SM's share of the L2 bandwidth, and an SM has
    at most resident programs x pipeline stages of them in flight."""
    if not tgt.memory_latency_s:
        return 0.0
    loads = sum(t.bytes for t in cost.transfers if t.src == "global")
    steps = cost.loop_iterations[cost.step.loop] if cost.step is not None else cost.programs
    stages = cost.step.stages if cost.step is not None else 1
    share = (tgt.l2_bandwidth or tgt.dram_bandwidth) / tgt.units
    per_step = tgt.memory_latency_s + loads / max(steps, 1) / share
    return steps / tgt.units * waves * per_step / (resident * stages)


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
