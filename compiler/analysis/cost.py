"""The cost model: bytes moved per memory level, FLOPs, arithmetic intensity, roofline time and occupancy.

Everything is computed from the scheduled tree and the isl access relations (see docs/cost.md):

* **Traffic.** The buffer plan (`memory.plan_kernels`) lists, per kernel, every movement of a tensor's
  tile: a `cache_read` copy filled once per iteration of its loop (from global memory or from an outer
  copy), the operands the compute units read from a copy, the tiles of uncached tensors loaded at their
  load level, and the stores of results (from a `cache_write` copy or from registers).  The bytes of one
  movement are the sum over the iterations p of its loop of the bounding box of the region touched in p
  (isl: the access relations composed with the loop prefix, `dim_min`/`dim_max` per dimension), times the
  element size.  When every tile is a full rectangle this is *iterations x tile footprint*; a partial tile at
  an edge counts what it touches.  Intermediates that stay on chip inside a kernel move nothing to global
  memory; one stored between kernels costs a write and every later read.
* **FLOPs.** A `sum` of a product of two tensor reads is matrix work, 2 FLOPs per instance (the chapter's
  2MKN); other statements count one FLOP per arithmetic operation or function per instance (plus one per
  reduction step).  Counts are exact integer-point counts of the iteration domains.
* **Roofline.** Per kernel, time >= global bytes / DRAM bandwidth and >= matrix FLOPs / matrix peak (by
  operand dtype) + other FLOPs / vector peak; the larger one names the bottleneck.
* **Occupancy** (NVIDIA). Resident blocks per SM = min over threads, registers (allocated per warp in units of
  256), shared memory (the working set plus the per-block reserve) and the block limit.

Size: counting, the per-kernel analysis, occupancy, the report and the tile-size sweeps; the split into
counting / analysis / report / sweep modules is an open item of docs/architecture.md.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from math import prod
from typing import Optional

import islpy as isl

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import (
    DTYPE_BYTES,
    KernelPlan,
    PlannedBuffer,
    Violation,
    fmt_bytes,
    is_tile_level,
    plan_kernels,
)
from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.targets import Target, get_target
from tdsl.compiler.schedule.tree import Loop, global_tensors, pw_affs_to_map, statements_under, walk_loops

MiB = 1 << 20
KiB = 1 << 10


# ---------------------------------------------------------------- counting integer points (exact, no barvinok)

MAX_ENUMERATION = 5_000_000


def card(s: isl.Set) -> int:
    """Exact number of integer points of a bounded, parameter-free set.

    Boxes are counted by their extents; a convex set without existential variables is counted fibre by fibre
    along its last dimension (sum over the other dimensions of an affine extent); anything else is sliced."""
    s = s.coalesce()
    if s.is_empty():
        return 0
    if s.dim(isl.dim_type.set) == 0:
        return 1
    return sum(_card_convex(isl.Set.from_basic_set(b)) for b in s.make_disjoint().get_basic_sets())


def box_sum(rel: isl.Map) -> int:
    """Sum over the domain points p of the number of elements in the bounding box of rel(p)."""
    one = isl.Val.one(rel.get_ctx())
    exts = [rel.dim_max(d).sub(rel.dim_min(d)).add_constant_val(one) for d in range(rel.dim(isl.dim_type.out))]
    return sum_products(rel.domain(), exts)


def sum_products(dom: isl.Set, pwaffs: list) -> int:
    """Sum over the points p of `dom` of the product of piecewise quasi-affine functions at p."""
    cells = [(dom, [])]
    for pa in pwaffs:
        new = []
        for cset, affs in cells:
            for pset, aff in pa.get_pieces():
                inter = cset.intersect(pset)
                if not inter.is_empty():
                    new.append((inter, affs + [aff]))
        cells = new
    total = 0
    for cset, affs in cells:
        lins = [_linear(a) for a in affs]
        if any(lin is None for lin in lins):
            total += _enumerate(cset, affs)
        else:
            total += _sum_linear(cset, lins)
    return int(total)


def _box(s: isl.Set):
    n = s.dim(isl.dim_type.set)
    return ([s.dim_min_val(d).to_python() for d in range(n)], [s.dim_max_val(d).to_python() for d in range(n)])


def _is_box(s: isl.Set, los, his) -> bool:
    box = isl.Set.universe(s.get_space())
    ctx = s.get_ctx()
    for d, (lo, hi) in enumerate(zip(los, his)):
        box = box.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, lo))
        box = box.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, hi))
    return box.is_subset(s)


def _card_convex(s: isl.Set) -> int:
    if s.is_empty():
        return 0
    n = s.dim(isl.dim_type.set)
    if n == 0:
        return 1
    los, his = _box(s)
    if _is_box(s, los, his):
        return prod(h - l + 1 for l, h in zip(los, his))
    if not any(b.dim(isl.dim_type.div) for b in s.get_basic_sets()):
        # the fibres of a convex set without existentials along its last dimension are intervals
        m = isl.Map.from_range(s).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, n - 1)
        ext = m.dim_max(0).sub(m.dim_min(0)).add_constant_val(isl.Val.one(s.get_ctx()))
        return sum_products(m.domain(), [ext])
    return _slice(s, 0, _card_convex)


def _slice(s: isl.Set, d: int, fn) -> int:
    lo, hi = s.dim_min_val(d).to_python(), s.dim_max_val(d).to_python()
    if hi - lo + 1 > MAX_ENUMERATION:
        raise TdslError(f"cannot count the points of {s}: too many to enumerate")
    total = 0
    for v in range(lo, hi + 1):
        sv = s.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(s.get_ctx(), v))
        if not sv.is_empty():
            total += fn(sv)
    return total


def _linear(aff: isl.Aff):
    """(coefficients, constant) as Fractions, or None when the function has integer divisions."""
    if aff.dim(isl.dim_type.div):
        return None

    def frac(v: isl.Val) -> Fraction:
        return Fraction(v.get_num_si(), v.get_den_val().to_python())

    n = aff.dim(isl.dim_type.in_)
    return [frac(aff.get_coefficient_val(isl.dim_type.in_, k)) for k in range(n)], frac(aff.get_constant_val())


def _sum_linear(s: isl.Set, lins) -> int:
    s = s.coalesce()
    if s.is_empty():
        return 0
    n = s.dim(isl.dim_type.set)
    used = [d for d in range(n) if any(c[d] != 0 for c, _ in lins)]
    if not used:
        return int(prod(k for _, k in lins)) * card(s)
    if n == 1:
        total = Fraction(0)
        for b in s.make_disjoint().get_basic_sets():
            bs = isl.Set.from_basic_set(b)
            (lo,), (hi,) = _box(bs)
            if hi - lo + 1 > MAX_ENUMERATION:
                raise TdslError(f"cannot sum over {bs}: too many points")
            dense = _is_box(bs, [lo], [hi])
            for x in range(lo, hi + 1):
                if dense or not bs.fix_val(isl.dim_type.set, 0, isl.Val.int_from_si(s.get_ctx(), x)).is_empty():
                    total += prod(c[0] * x + k for c, k in lins)
        return int(total)
    d = used[0]
    lo, hi = s.dim_min_val(d).to_python(), s.dim_max_val(d).to_python()
    if hi - lo + 1 > MAX_ENUMERATION:
        raise TdslError(f"cannot sum over {s}: too many points")
    total = 0
    for v in range(lo, hi + 1):
        sv = s.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(s.get_ctx(), v))
        if not sv.is_empty():
            total += _sum_linear(sv, [(c[:d] + [Fraction(0)] + c[d + 1:], k + c[d] * v) for c, k in lins])
    return total


def _enumerate(s: isl.Set, affs) -> int:
    if card(s) > MAX_ENUMERATION:
        raise TdslError(f"cannot sum over {s}: too many points")
    pas = [isl.PwAff.from_aff(a) for a in affs]
    total = [0]

    def visit(point):
        total[0] += prod(pa.eval(point).to_python() for pa in pas)

    s.foreach_point(visit)
    return total[0]


# ---------------------------------------------------------------- results


@dataclass
class Transfer:
    tensor: str
    kind: str  # read | write
    src: str  # "global" or a scope
    dst: str  # a scope, "compute" or "global"
    loop: str  # once per iteration of this loop ("" = once per kernel)
    iterations: int
    bytes: int
    stmts: list[str]

    @property
    def level(self) -> str:
        return f"{self.src}->{self.dst}"

    @property
    def is_global(self) -> bool:
        return self.src == "global" or self.dst == "global"


@dataclass
class Occupancy:
    threads: int
    warps: int
    regs_per_thread: int
    regs_estimated: bool
    shared_per_block: int
    reserved_per_block: int
    by_resource: dict  # threads / registers / shared / blocks -> blocks that resource allows
    resident_blocks: int
    limiting: list
    resident_warps: int
    max_warps: int
    shared_left: int
    inflight_need: Optional[float] = None  # bytes in flight per SM to cover latency x bandwidth (Little's law)
    inflight_have: Optional[int] = None  # bytes the resident warps keep in flight

    @property
    def occupancy(self) -> float:
        return self.resident_warps / self.max_warps if self.max_warps else 0.0


@dataclass
class Step:
    """One iteration of the innermost serial loop that loads from global memory (the chapter's K step)."""

    loop: str
    per_program: int  # iterations per program
    bytes: float  # global bytes loaded per iteration
    flops: float  # FLOPs per iteration
    stages: int
    t_move: float  # seconds at one SM's (core's) share of the DRAM bandwidth
    t_compute: float  # seconds at one SM's share of the matrix peak
    t_pipeline: float  # whole loop: t_m + (n-1) max(t_m, t_c) + t_c with >= 2 stages, else n (t_m + t_c)


@dataclass
class KernelCost:
    index: int
    name: str
    stmts: list[str]
    programs: int
    grid: list[str]
    warps: int
    buffers: list[PlannedBuffer]
    working_set: dict
    violations: list[Violation]
    transfers: list[Transfer]
    flops_matrix: int
    flops_vector: int
    matrix_dtype: Optional[str]
    loop_iterations: dict
    occupancy: Optional[Occupancy]
    t_memory: float
    t_compute: float
    step: Optional[Step] = None

    @property
    def global_read(self) -> int:
        return sum(t.bytes for t in self.transfers if t.src == "global")

    @property
    def global_write(self) -> int:
        return sum(t.bytes for t in self.transfers if t.dst == "global")

    @property
    def global_bytes(self) -> int:
        return self.global_read + self.global_write

    @property
    def flops(self) -> int:
        return self.flops_matrix + self.flops_vector

    @property
    def intensity(self) -> float:
        return self.flops / self.global_bytes if self.global_bytes else math.inf

    @property
    def t_bound(self) -> float:
        return max(self.t_memory, self.t_compute)

    @property
    def bottleneck(self) -> str:
        return "memory" if self.t_memory >= self.t_compute else "compute"

    def level_bytes(self) -> dict:
        out: dict = {}
        for t in self.transfers:
            out[t.level] = out.get(t.level, 0) + t.bytes
        return out

    def tensor_bytes(self, tensor: str, kind: Optional[str] = None) -> int:
        """Global-memory bytes of one tensor in this kernel (reads and/or writes)."""
        return sum(t.bytes for t in self.transfers if t.tensor == tensor and t.is_global and kind in (None, t.kind))


@dataclass
class ProgramCost:
    program: str
    schedule: Optional[str]
    target: Target
    kernels: list[KernelCost]
    peak_global_memory: int
    peak_at: str
    compulsory_bytes: int
    tensor_sizes: dict = field(default_factory=dict)

    @property
    def global_bytes(self) -> int:
        return sum(k.global_bytes for k in self.kernels)

    @property
    def global_read(self) -> int:
        return sum(k.global_read for k in self.kernels)

    @property
    def global_write(self) -> int:
        return sum(k.global_write for k in self.kernels)

    @property
    def flops(self) -> int:
        return sum(k.flops for k in self.kernels)

    @property
    def flops_matrix(self) -> int:
        return sum(k.flops_matrix for k in self.kernels)

    @property
    def intensity(self) -> float:
        return self.flops / self.global_bytes if self.global_bytes else math.inf

    @property
    def t_bound(self) -> float:
        return sum(k.t_bound for k in self.kernels)

    @property
    def violations(self) -> list[Violation]:
        return [v for k in self.kernels for v in k.violations]

    @property
    def mfu_bound(self) -> float:
        """Upper bound of matrix-unit utilisation: matrix time at peak / roofline time."""
        t_mx = sum(k.flops_matrix / self.target.peak(k.matrix_dtype or "bf16") for k in self.kernels)
        return t_mx / self.t_bound if self.t_bound else 0.0

    def tensor_bytes(self, tensor: str, kind: Optional[str] = None) -> int:
        return sum(k.tensor_bytes(tensor, kind) for k in self.kernels)

    def level_bytes(self) -> dict:
        out: dict = {}
        for k in self.kernels:
            for level, n in k.level_bytes().items():
                out[level] = out.get(level, 0) + n
        return out

    def to_dict(self) -> dict:
        return _to_dict(self)

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def text(self) -> str:
        return report_text(self)


# ---------------------------------------------------------------- the analysis


def analyze(schedule: Schedule, target="h100", regs: Optional[int] = None) -> ProgramCost:
    """The cost report of a (scheduled) program on a target."""
    tgt = get_target(target)
    model = schedule.model
    plans = plan_kernels(schedule, tgt)
    kernels = [_kernel_cost(schedule, tgt, kp, regs) for kp in plans]
    peak, peak_at, sizes = _peak_global_memory(schedule)
    touched = {a.tensor for s in model.stmts for a in s.reads} | {s.write.tensor for s in model.stmts}
    compulsory = sum(sizes[t.name] for t in model.tensors.values()
                     if t.kind == "output" or (t.kind == "input" and t.name in touched))
    return ProgramCost(model.name, schedule.name, tgt, kernels, peak, peak_at, compulsory, sizes)


def _kernel_cost(schedule: Schedule, tgt: Target, kp: KernelPlan, regs: Optional[int]) -> KernelCost:
    transfers = []
    for a in kp.accesses:
        nbytes = box_sum(a.touched) * DTYPE_BYTES[a.dtype]
        iterations = card(a.touched.domain())
        transfers.append(Transfer(a.tensor, a.kind, a.src, a.dst, a.loop_name, iterations, nbytes, list(a.stmts)))
    def rank(t: Transfer) -> int:  # loads from global, then copies between on-chip levels, operand reads, stores
        return 0 if t.src == "global" else (3 if t.dst == "global" else (2 if t.dst == "compute" else 1))

    transfers.sort(key=lambda t: (rank(t), kp.stmts.index(t.stmts[0])))
    model = schedule.model
    fm, fv, mdtype = 0, 0, None
    for s in kp.stmts:
        m, v, dt = statement_flops(model, s)
        fm, fv = fm + m, fv + v
        mdtype = mdtype or dt
    iterations = _loop_iterations(schedule, kp)
    programs = iterations[kp.grid_loops[-1].name] if kp.grid_loops else 1
    global_bytes = sum(t.bytes for t in transfers if t.is_global)
    t_memory = global_bytes / tgt.dram_bandwidth
    t_compute = fm / tgt.peak(mdtype or "bf16") + fv / tgt.vector_flops
    occ = occupancy(kp, tgt, regs) if tgt.vendor == "nvidia" else None
    cost = KernelCost(kp.index, kp.name, list(kp.stmts), programs, [l.name for l in kp.grid_loops], kp.warps,
                      kp.buffers, kp.working_set, kp.violations, transfers, fm, fv, mdtype, iterations, occ,
                      t_memory, t_compute)
    cost.step = _step(kp, cost, tgt)
    return cost


def _loop_iterations(schedule: Schedule, kp: KernelPlan) -> dict:
    """How many times each loop of the kernel runs its body, summed over all enclosing iterations."""
    model, tree = schedule.model, schedule.tree
    loops = [kp.root] + list(walk_loops(kp.root.body)) if isinstance(kp.root, Loop) else []
    out = {}
    for loop in loops:
        image = None
        for s in statements_under(loop):
            path = tree.path(s)
            upto = path[: next(n for n, l in enumerate(path) if l is loop) + 1]
            part = pw_affs_to_map([d for l in upto for d in l.exprs[s]], model.stmt(s).domain).range()
            image = part if image is None else image.union(part)
        out[loop.name] = out.get(loop.name, 0) + card(image)
    return out


def statement_flops(model, stmt_name: str) -> tuple[int, int, Optional[str]]:
    """(matrix FLOPs, other FLOPs, matrix operand dtype) of one statement over its whole domain."""
    stmt = model.stmt(stmt_name)
    n = card(stmt.domain)
    body = stmt.value
    operands = matrix_operands(stmt)
    if operands is not None:
        dtypes = [model.tensors[a.tensor].dtype for a in operands]
        dtype = "f8e4m3" if "f8e4m3" in dtypes else ("f32" if all(d == "f32" for d in dtypes) else "bf16")
        return 2 * n, 0, dtype
    ops = _ops(body) + (1 if stmt.is_reduction else 0)
    return 0, ops * n, None


def _ops(e) -> int:
    if isinstance(e, (ast.BinOp, ast.Compare)):
        return 1 + _ops(e.lhs) + _ops(e.rhs)
    if isinstance(e, ast.Neg):
        return 1 + _ops(e.operand)
    if isinstance(e, ast.Call):
        return (0 if e.func in ("f32",) else 1) + sum(_ops(a) for a in e.args)
    return 0


# ---------------------------------------------------------------- occupancy


def estimate_registers(kp: KernelPlan, tgt: Target) -> int:
    """Registers per thread when none are given: the register-scope working set spread over the block's
    threads, plus 32 for addresses, indices and loop state, rounded up to 8 and capped at the target's limit."""
    threads = kp.warps * (tgt.warp_size or 32)
    reg_bytes = kp.working_set.get(tgt.default_scope, 0)
    regs = math.ceil(reg_bytes / 4 / threads) + 32
    regs = 8 * math.ceil(regs / 8)
    return min(regs, tgt.max_registers_per_thread or regs)


def occupancy(kp: KernelPlan, tgt: Target, regs: Optional[int] = None) -> Occupancy:
    """Resident blocks per SM from threads, registers, shared memory (+ reserve) and the block limit (5.1.5)."""
    warp = tgt.warp_size
    threads = kp.warps * warp
    estimated = regs is None
    if regs is None:
        regs = estimate_registers(kp, tgt)
    shared = tgt.scopes.get("shared")
    smem = kp.working_set.get("shared", 0)
    reserve = shared.reserved_per_block if shared else 0
    unit = tgt.register_alloc_unit or 1
    regs_per_block = math.ceil(regs * warp / unit) * unit * kp.warps
    by = {
        "threads": tgt.max_threads_per_unit // threads,
        "registers": tgt.registers_per_unit // regs_per_block if regs_per_block else tgt.max_blocks_per_unit,
        "shared": (shared.per_unit // (smem + reserve)) if shared and smem + reserve else tgt.max_blocks_per_unit,
        "blocks": tgt.max_blocks_per_unit,
    }
    if regs_per_block > (tgt.max_registers_per_block or regs_per_block):
        by["registers"] = 0
    if shared and smem > shared.per_block:
        by["shared"] = 0
    resident = min(by.values())
    limiting = [k for k, v in by.items() if v == resident]
    resident_warps = resident * kp.warps
    left = shared.per_unit - resident * (smem + reserve) if shared else 0
    need = have = None
    if tgt.memory_latency_s:
        need = tgt.dram_bandwidth * tgt.memory_latency_s / tgt.units
        have = resident_warps * tgt.loads_in_flight_per_warp * warp * tgt.bytes_per_load_per_thread
    return Occupancy(threads, kp.warps, regs, estimated, smem, reserve, by, resident, limiting, resident_warps,
                     tgt.max_warps_per_unit, left, need, have)


def _step(kp: KernelPlan, cost: KernelCost, tgt: Target) -> Optional[Step]:
    """Per-iteration figures of the innermost serial loop that loads from global memory."""
    loads: dict = {}
    for t in cost.transfers:
        if t.src == "global" and t.loop:
            loads.setdefault(t.loop, []).append(t)
    serial = [l for l in walk_loops([kp.root]) if not l.bind and is_tile_level(l) and l.name in loads]
    if not serial:
        return None
    loop = serial[-1]
    n = cost.loop_iterations[loop.name]
    per_program = n // max(cost.programs, 1)
    nbytes = sum(t.bytes for t in loads[loop.name]) / n
    flops = cost.flops_matrix / n if cost.flops_matrix else cost.flops_vector / n
    peak = tgt.peak(cost.matrix_dtype or "bf16") if cost.flops_matrix else tgt.vector_flops
    t_m = nbytes / (tgt.dram_bandwidth / tgt.units)
    t_c = flops / (peak / tgt.units)
    stages = loop.pipeline or 1
    if stages >= 2:
        total = t_m + (per_program - 1) * max(t_m, t_c) + t_c
    else:
        total = per_program * (t_m + t_c)
    return Step(loop.name, per_program, nbytes, flops, stages, t_m, t_c, total)


# ---------------------------------------------------------------- global memory footprint


def _peak_global_memory(schedule: Schedule) -> tuple[int, str, dict]:
    """Peak bytes of global tensors alive, kernel by kernel: a kernel's outputs are allocated before it runs,
    and the inputs / intermediates it read for the last time are freed after it (the chapter's 5.3.1 rule)."""
    model, tree = schedule.model, schedule.tree
    globals_ = global_tensors(model, tree)
    sizes = {}
    for t in model.tensors.values():
        n = DTYPE_BYTES[t.dtype]
        for d in t.shape:
            n *= d if isinstance(d, int) else 0
        sizes[t.name] = n
    kernels = [statements_under(node) for node in tree.body]
    last_read = {}
    for k, stmts in enumerate(kernels):
        for s in stmts:
            for a in model.stmt(s).reads:
                last_read[a.tensor] = k
    live = {t.name for t in model.tensors.values() if t.kind == "input"}
    peak, peak_at = sum(sizes[t] for t in live), "before the first kernel"
    for k, stmts in enumerate(kernels):
        live |= {model.stmt(s).write.tensor for s in stmts if model.stmt(s).write.tensor in globals_}
        total = sum(sizes[t] for t in live)
        if total > peak:
            peak, peak_at = total, f"kernel {model.name}_{k} ({', '.join(sorted(live))})"
        for t in list(live):
            if model.tensors[t].kind != "output" and last_read.get(t, -1) <= k:
                live.discard(t)
    return peak, peak_at, sizes


# ---------------------------------------------------------------- report


def _mib(n: float) -> str:
    if n < MiB:
        return fmt_bytes(int(n))
    x = n / MiB
    if x >= 1000:
        return f"{x:,.0f} MiB" if x == int(x) else f"{x:,.2f} MiB"
    return f"{x:.4g} MiB"


def _time(t: float) -> str:
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


def report_text(cost: ProgramCost) -> str:
    tgt = cost.target
    lines = [f"program {cost.program}, schedule {cost.schedule or 'program order'}, target {tgt.name} "
             f"({tgt.summary()})"]
    for k in cost.kernels:
        lines.append("")
        grid = f"grid {' x '.join(k.grid)} = {k.programs:,} programs" if k.grid else "1 program"
        warps = f"; {k.warps} warps" if tgt.vendor == "nvidia" else ""
        lines.append(f"kernel {k.name}: statements {', '.join(k.stmts)}; {grid}{warps}")
        lines.append("  buffers (per block)")
        lines.append(f"    {'buffer':<16} {'kind':<5} {'scope':<8} {'shape':<12} {'dtype':<7} {'stages':>6} "
                     f"{'bytes':>11}  {'allocated':<10} live")
        for b in k.buffers:
            shape = "x".join(map(str, b.shape)) or "1"
            live = f"{b.first}..{b.last}" if b.first != b.last else b.first
            if b.shares:
                live += f" (reuses {b.shares})"
            lines.append(f"    {b.tensor:<16} {b.kind:<5} {b.scope:<8} {shape:<12} {b.dtype:<7} {b.stages:>6} "
                         f"{fmt_bytes(b.bytes):>11}  {'at ' + (b.loop or 'kernel'):<10} {live}")
        ws = ", ".join(f"{scope} {fmt_bytes(n)}" + _capacity(tgt, scope, n) for scope, n in k.working_set.items())
        lines.append(f"  working set per block: {ws or 'none'}")
        for v in k.violations:
            lines.append(f"  DOES NOT FIT: {v.scope} {v.need:,} B > {v.capacity:,} B ({v.over:,} B over)")
        if k.occupancy is not None:
            o = k.occupancy
            by = ", ".join(f"{r} {n}" for r, n in o.by_resource.items())
            regs = f"{o.regs_per_thread} registers/thread" + (" (estimated; --regs to set)" if o.regs_estimated else "")
            lines.append(f"  residency per {tgt.unit_name}: {o.threads} threads, {regs}, shared "
                         f"{fmt_bytes(o.shared_per_block)} + {fmt_bytes(o.reserved_per_block)} reserve per block")
            lines.append(f"    blocks allowed by {by} -> {o.resident_blocks} resident blocks, {o.resident_warps} of "
                         f"{o.max_warps} warps = {o.occupancy:.1%} occupancy; limited by {', '.join(o.limiting)}")
            if o.inflight_need:
                lines.append(f"    bytes in flight: need {o.inflight_need / 1e3:.3g} KB per {tgt.unit_name} "
                             f"(bandwidth x latency / {tgt.units}), resident warps keep {fmt_bytes(o.inflight_have)}")
        else:
            lines.append(f"  residency: one block at a time per {tgt.unit_name}; {k.programs:,} programs over "
                         f"{tgt.units} {tgt.unit_name}s")
        lines.append("  traffic")
        for t in k.transfers:
            per = f"per {t.loop} ({t.iterations:,}x)" if t.loop else "once"
            lines.append(f"    {t.level:<18} {t.tensor:<10} {per:<26} {_mib(t.bytes):>14}   ({', '.join(t.stmts)})")
        levels = ", ".join(f"{lvl} {_mib(n)}" for lvl, n in k.level_bytes().items())
        lines.append(f"    by level: {levels}")
        lines.append(f"  global memory: read {_mib(k.global_read)}, written {_mib(k.global_write)}, "
                     f"total {_mib(k.global_bytes)} ({k.global_bytes:,} B)")
        kind = f" ({k.matrix_dtype} matrix {k.flops_matrix:,}, other {k.flops_vector:,})" if k.flops_matrix else ""
        lines.append(f"  FLOPs {k.flops:,}{kind}; intensity {k.intensity:.3g} FLOP/byte "
                     f"(ridge {tgt.peak(k.matrix_dtype or 'bf16') / tgt.dram_bandwidth:.0f})")
        lines.append(f"  roofline: memory {_time(k.t_memory)}, compute {_time(k.t_compute)} -> bound "
                     f"{_time(k.t_bound)}, {k.bottleneck}-bound")
        if k.step is not None:
            s = k.step
            lines.append(f"  per iteration of {s.loop} ({s.per_program} per program, {s.stages} stage(s)): "
                         f"{fmt_bytes(int(s.bytes))} loaded in {_time(s.t_move)}, {s.flops:,.0f} FLOPs in "
                         f"{_time(s.t_compute)} at 1/{tgt.units} of the device; loop {_time(s.t_pipeline)}")
    lines.append("")
    lines.append(f"total: {len(cost.kernels)} kernel(s); global memory {_mib(cost.global_bytes)} "
                 f"(read {_mib(cost.global_read)}, written {_mib(cost.global_write)}); each tensor once: "
                 f"{_mib(cost.compulsory_bytes)}")
    lines.append(f"  FLOPs {cost.flops:,}; intensity {cost.intensity:.3g} FLOP/byte; roofline bound "
                 f"{_time(cost.t_bound)}" + (f"; matrix utilisation at most {cost.mfu_bound:.0%}" if cost.flops_matrix else ""))
    lines.append(f"  peak global memory {_mib(cost.peak_global_memory)} at {cost.peak_at}")
    if cost.violations:
        lines.append(f"  capacity: {len(cost.violations)} violation(s); the schedule is rejected for {tgt.name}")
    return "\n".join(lines)


def _capacity(tgt: Target, scope: str, n: int) -> str:
    try:
        info = tgt.scope(scope)
    except TdslError:
        return ""
    if info.per_block is None:
        return ""
    word = "of" if info.hard else "of (soft)"
    return f" {word} {fmt_bytes(info.per_block)}"


def _to_dict(obj):
    if isinstance(obj, Target):
        return obj.name
    if isinstance(obj, isl.Map):
        return str(obj)
    if hasattr(obj, "__dataclass_fields__"):  # fields kept out of repr are links (a tree loop), not data
        out = {k: _to_dict(getattr(obj, k)) for k, f in obj.__dataclass_fields__.items() if f.repr}
        for prop in ("global_read", "global_write", "global_bytes", "flops", "intensity", "t_bound", "bottleneck",
                     "occupancy", "bytes", "label", "level", "mfu_bound", "over"):
            if prop in type(obj).__dict__ and isinstance(type(obj).__dict__[prop], property):
                value = getattr(obj, prop)
                out[prop] = value if not (isinstance(value, float) and math.isinf(value)) else None
        return out
    if isinstance(obj, dict):
        return {str(k): _to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_dict(v) for v in obj]
    if isinstance(obj, float) and math.isinf(obj):
        return None
    return obj


# ---------------------------------------------------------------- sweeps over tile sizes


@dataclass
class SweepRow:
    factors: dict  # loop name -> factor used
    cost: Optional[ProgramCost]
    error: Optional[str] = None
    fitted: Optional[str] = None  # the loop whose factor was fitted to capacity


def with_factors(block: ast.ScheduleBlock, factors: dict) -> ast.ScheduleBlock:
    """A copy of a schedule block whose split/tile steps producing the named loops use the given factors."""
    used = set()
    steps = []
    for step in block.steps:
        results = [r.name for r in step.results]
        args = list(step.args)
        if step.primitive == "split" and results and results[0] in factors:
            for n, a in enumerate(args):
                if a.keyword == "factor" or (a.keyword is None and n == 1):
                    args[n] = replace(a, value=factors[results[0]])
            used.add(results[0])
        elif step.primitive == "tile" and results:
            positional = [n for n, a in enumerate(args) if a.keyword is None]
            half = len(positional) // 2
            for k, name in enumerate(results[:half]):
                if name in factors and half + k < len(positional):
                    args[positional[half + k]] = replace(args[positional[half + k]], value=factors[name])
                    used.add(name)
        steps.append(replace(step, args=args))
    missing = set(factors) - used
    if missing:
        raise TdslError(f"schedule {block.name} has no split or tile producing loop(s) {', '.join(sorted(missing))}")
    return replace(block, steps=steps)


def current_factor(block: ast.ScheduleBlock, loop: str) -> int:
    for step in block.steps:
        results = [r.name for r in step.results]
        if step.primitive == "split" and results and results[0] == loop:
            for n, a in enumerate(step.args):
                if a.keyword == "factor" or (a.keyword is None and n == 1):
                    return int(a.value)
        if step.primitive == "tile" and loop in results:
            positional = [a for a in step.args if a.keyword is None]
            half = len(positional) // 2
            k = results.index(loop)
            if k < half:
                return int(positional[half + k].value)
    raise TdslError(f"schedule {block.name} has no split or tile producing loop {loop}")


def _build(prog, block: ast.ScheduleBlock, kernel=None) -> Schedule:
    from tdsl.compiler.schedule.schedule import apply_block

    sched = Schedule(prog.model(block.kernel or kernel), block.name)
    return apply_block(sched, block, prog.ast.source, prog.ast.filename)


def fit(prog, schedule: str, target, loop: str, factors: Optional[dict] = None, kernel=None,
        limit: int = 1 << 20) -> Optional[int]:
    """The largest factor of `loop` (a split/tile result) for which the schedule fits the target's capacities."""
    tgt = get_target(target)
    base = with_factors(prog.block(schedule), dict(factors or {}))

    def fits(v: int) -> tuple[bool, int]:
        try:
            sched = _build(prog, with_factors(base, {loop: v}), kernel)
            kernels = plan_kernels(sched, tgt)
        except TdslError:
            return False, -1
        return not any(k.violations for k in kernels), sum(sum(k.working_set.values()) for k in kernels)

    lo = None
    v = max(1, current_factor(base, loop))
    ok, size = fits(v)
    while ok:  # grow until it stops fitting, or until the tile stops growing (it covers the whole extent)
        lo = v
        if v >= limit:
            return v
        ok2, size2 = fits(2 * v)
        if ok2 and size2 == size:
            return v  # as large as it gets
        v, ok, size = 2 * v, ok2, size2
    hi = v  # does not fit
    if lo is None:
        lo = 0
        while hi > 1:  # shrink until it fits
            half = hi // 2
            if fits(half)[0]:
                lo = half
                break
            hi = half
        if lo == 0:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid)[0]:
            lo = mid
        else:
            hi = mid
    return lo


def sweep(prog, schedule: str, target, axes: list, fit_loop: Optional[str] = None, kernel=None,
          regs: Optional[int] = None) -> list[SweepRow]:
    """Cost of the schedule for every combination of factors.

    `axes` is a list of (loop names, values): the loops of one entry take each value together (m = n), the
    entries combine as a product.  With `fit_loop`, that loop's factor is the largest that fits the target."""
    import itertools

    tgt = get_target(target)
    block = prog.block(schedule)
    named = [n for names, _ in axes for n in names] + ([fit_loop] if fit_loop else [])
    with_factors(block, {n: 1 for n in named})  # every loop named must come from a split or tile of the block
    rows = []
    for combo in itertools.product(*[[(names, v) for v in values] for names, values in axes]):
        factors = {name: v for names, v in combo for name in names}
        try:
            if fit_loop is not None:
                best = fit(prog, schedule, tgt, fit_loop, factors, kernel)
                if best is None:
                    rows.append(SweepRow(factors, None, f"no factor of {fit_loop} fits {tgt.name}", fit_loop))
                    continue
                factors = {**factors, fit_loop: best}
            sched = _build(prog, with_factors(block, factors), kernel)
            rows.append(SweepRow(factors, analyze(sched, tgt, regs), None, fit_loop))
        except TdslError as err:
            rows.append(SweepRow(factors, None, str(err).split("\n")[0], fit_loop))
    return rows


def sweep_table(rows: list[SweepRow], target) -> str:
    """The sweep as a table in the form of the chapter's (5.2.2, 5.3.3)."""
    tgt = get_target(target)
    if not rows:
        return "(no rows)"
    names = list(rows[0].factors)
    scopes = []
    for r in rows:
        if r.cost:
            for k in r.cost.kernels:
                for s in k.working_set:
                    if s not in scopes and tgt.scope(s).hard:
                        scopes.append(s)
    loops = list(names)
    header = [n + (" (fitted)" if n == rows[0].fitted else "") for n in names]
    header += [f"{s} per block" for s in scopes] + ["resident", "global traffic", "intensity"]
    header += [f"{n} iterations" for n in loops]
    table = [header]
    for r in rows:
        cells = [str(r.factors[n]) for n in names]
        if r.cost is None:
            table.append(cells + [f"({r.error})"])
            continue
        c = r.cost
        for s in scopes:
            n = max((k.working_set.get(s, 0) for k in c.kernels), default=0)
            over = any(v.scope == s for v in c.violations)
            cells.append(fmt_bytes(n) + (" OVER" if over else ""))
        res = [k.occupancy.resident_blocks for k in c.kernels if k.occupancy is not None]
        cells.append(str(min(res)) if res else "1")
        cells.append(_mib(c.global_bytes))
        cells.append(f"{c.intensity:.3g} FLOP/B" if c.flops else "-")
        for n in loops:
            cells.append(f"{sum(k.loop_iterations.get(n, 0) for k in c.kernels):,}")
        table.append(cells)
    widths = [max(len(row[i]) if i < len(row) else 0 for row in table) for i in range(len(header))]
    out = []
    for row in table:
        out.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)))
    return "\n".join(out)


def plot_sweep(rows: list[SweepRow], path: str, scope: Optional[str] = None, title: str = "") -> None:
    """Global traffic against local memory per block, one point per tile shape (the chapter's Figure 5-8)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TdslError("--plot needs matplotlib: pip install 'tdsl[plot]' (or pip install matplotlib)") from None
    points = []
    once = capacity = None
    for r in rows:
        if r.cost is None:
            continue
        tgt = r.cost.target
        hard = [s for k in r.cost.kernels for s in k.working_set if tgt.scope(s).hard and scope in (None, s)]
        local = max((sum(k.working_set.get(s, 0) for s in set(hard)) for k in r.cost.kernels), default=0)
        label = "x".join(str(v) for v in r.factors.values())
        points.append((local / KiB, r.cost.global_bytes / MiB, label, not r.cost.violations))
        once = r.cost.compulsory_bytes / MiB
        if len(set(hard)) == 1:
            capacity = tgt.scope(hard[0]).per_block / KiB
    if not points:
        raise TdslError("nothing to plot: no sweep point could be costed")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], "-", color="tab:blue")
    fits = [p for p in points if p[3]]
    over = [p for p in points if not p[3]]
    ax.plot([p[0] for p in fits], [p[1] for p in fits], "o", color="tab:blue", label="fits")
    if over:
        ax.plot([p[0] for p in over], [p[1] for p in over], "x", color="tab:red", markersize=9, label="does not fit")
    for x, y, label, _ in points:
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5))
    if once is not None:
        ax.axhline(once, linestyle="--", color="gray", label=f"each tensor once ({once:,.0f} MiB)")
    if capacity is not None:
        ax.axvline(capacity, linestyle=":", color="tab:red", label=f"per-block capacity ({capacity:,.0f} KiB)")
    ax.legend()
    ax.set_xlabel("local memory per block (KiB)")
    ax.set_ylabel("traffic to the next level (MiB)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
