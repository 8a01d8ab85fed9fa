"""The ranking estimate: a kernel's time from the counted bytes and FLOPs plus what the roofline leaves out.

    t = launch + max(L2, overlap(overlap(compute, loads in flight), DRAM), program starts)
    compute = (products + vector work) x waves + spilled registers' round trips + tile edges

One function per term (docs/cost.md, "The estimate", gives each formula and its source):

* `launch_time`     the time a launch adds (Target.launch_overhead_s, measured with an empty kernel);
* `program_time`    each SM starts its programs one after another (Target.program_launch_s each): many small
                    programs are bound by that rate, not by their bytes;
* `dram_time`       global bytes after reuse in L2 (l2.py's `dram_bytes`: programs resident together, one wave,
                    read a tile they share once) at the measured DRAM bandwidth;
* `l2_time`         every counted tile load and store passes through L2 (Target.l2_bandwidth);
* compute           work.py: each product at the rate of its instruction class (`matrix_time`), other work in
                    FP32-instruction slots at the issue rate the resident warps reach (`vector_time`), tiles
                    padded to powers of two;
* `spill_time`      a K loop whose register tile does not fit moves that tile through local memory (L2) and back
                    in every step; without a K loop, each spilled value's reload waits an L2 hit
                    (`spill_latency_time`);
* `edge_time`       each program's first load step and its stores are not overlapped with its products, unless
                    the launch is persistent (one program walks its SM's tiles and prefetches across them);
* `wave_factor`     the busiest SM's (core's) work over the mean: a partial last wave, a longest program;
* `inflight_time`   Little's law: each load step waits the memory latency (an L2 hit's when it re-reads what is
                    in L2: `step_waits`), and only resident programs x (pipeline stages - 1) of them are in
                    flight at once;
* `overlap`         compute and loads in flight overlap, but not perfectly: their 3-norm, not their maximum; and
                    so do the SMs' work and the DRAM stream (a kernel at the copy bandwidth with more work per
                    byte runs slower than the copy).

The estimate reuses what `analyze` already counted (transfers, occupancy, the K step); the only isl work added
is per global load: whether its tile changes with each grid loop, and the longest program's number of steps.
"""

from __future__ import annotations

import math

import islpy as isl

from tdsl.compiler.analysis.buffer_plan import KernelPlan
from tdsl.compiler.analysis.cost.l2 import dram_bytes, grid_dependence
from tdsl.compiler.analysis.cost.results import Estimate, KernelCost
from tdsl.compiler.analysis.cost.timing import REGISTER_OVERHEAD, register_demand, thread_register_limit, unheld_buffer
from tdsl.compiler.analysis.cost.work import matrix_time, vector_time
from tdsl.compiler.model.isl_code import integer_bounds
from tdsl.compiler.targets import Target


def kernel_estimate(model, tgt: Target, kp: KernelPlan, cost: KernelCost, prods: list) -> Estimate:
    """Every term of one kernel's estimate; `prods` its matrix products (work.py `products`)."""
    resident = resident_programs(kp, cost, tgt)
    warps = resident * kp.warps if cost.occupancy is not None else 0
    nbytes = dram_bytes(model, kp, cost, tgt, resident)
    t_matrix, units = matrix_time(model, tgt, prods, cost, resident)
    waves = wave_factor(kp, cost, tgt)
    return Estimate(
        t_launch=launch_time(tgt),
        t_programs=program_time(cost, tgt),
        wave=min(cost.programs, resident * tgt.units),
        dram_bytes=nbytes,
        t_dram=dram_time(nbytes, tgt),
        t_l2=l2_time(cost.global_bytes, tgt),
        t_matrix=t_matrix,
        t_vector=vector_time(model, tgt, kp, warps),
        waves=waves,
        t_inflight=inflight_time(kp, cost, tgt, resident, waves),
        t_spill=spill_time(kp, cost, tgt, waves, resident),
        t_edges=edge_time(kp, cost, tgt, resident, waves),
        units=units,
        resident_warps=warps,
    )


# ---------------------------------------------------------------- launch, residency


def launch_time(tgt: Target) -> float:
    """Target.launch_overhead_s: an empty kernel timed as the benchmarks time kernels (h100.py [mb])."""
    return tgt.launch_overhead_s or 0.0


def program_time(cost: KernelCost, tgt: Target) -> float:
    """The busiest SM's programs, each started after the one before by its block scheduler
    (Target.program_launch_s: 80 ns on the H200, measured with empty programs of 1-8 warps)."""
    if not tgt.program_launch_s:
        return 0.0
    return math.ceil(cost.programs / tgt.units) * tgt.program_launch_s


def spill_time(kp: KernelPlan, cost: KernelCost, tgt: Target, waves: float, resident: int) -> float:
    """A K loop whose registers do not fit moves what spills out to local memory and back in every step, through
    L2 at the SM's share of its bandwidth.  What spills: the excess over the thread's registers, except that a
    single register buffer too large for the registers by itself (an accumulator a matrix instruction reads and
    writes whole) moves whole.  Measured on the H200 (tuning logs of 2026-12-02, benchmarks/RESULTS.md "The
    estimate against the tuner's measurements"): 256 x 256 tiles with 8 warps and 256 x 128 with 4 (an
    accumulator of 256 registers a thread) take 3-11 us per K step, 5-30x the products' time, in proportion to
    the steps and not to the excess.  (Flash attention's 128 x 64 blocks on 4 warps, once taken for a spilled
    excess, keep their operands in shared memory, as Triton does: staging.py.)  A promoted FP8 product's second
    accumulator is not counted: Triton fits it (253-255 registers a thread, at most 34 spilled, where the plan's
    count says 288; microbench_promotion.py), and what it costs is in the promotion's time (work.py
    `promotion_time`)."""
    if not tgt.max_registers_per_thread or not tgt.l2_bandwidth:
        return 0.0
    if cost.occupancy is None or not cost.occupancy.regs_estimated:
        return 0.0
    if cost.step is None:
        return spill_latency_time(kp, cost, tgt, waves, resident)
    excess = register_demand(kp, tgt) - thread_register_limit(kp, tgt)
    if excess <= 0:
        return 0.0
    threads = kp.warps * (tgt.warp_size or 32)
    whole = unheld_buffer(kp, tgt)
    moved = whole.bytes_per_copy if whole is not None else excess * 4 * threads
    steps_per_unit = cost.loop_iterations[cost.step.loop] / tgt.units * waves
    return steps_per_unit * 2 * moved / (tgt.l2_bandwidth / tgt.units)


def spill_latency_time(kp: KernelPlan, cost: KernelCost, tgt: Target, waves: float, resident: int) -> float:
    """A kernel without a K loop whose tiles do not fit a thread's registers keeps the rest in local memory, and
    each spilled value's reload waits an L2 hit (Target.l2_latency_s): a thread's reloads follow one another
    (a row's reduction, then its scaling), the threads and the programs resident together wait at once.  So
    `programs per SM / resident x spilled values a thread x l2_latency_s`, the values being the tiles' registers
    past Target.max_registers_per_thread (addresses and indices not counted: Triton gives 255 registers,
    unspilled, to tiles of 256 values a thread).  Measured on the H200 (RMSNorm's tuning logs of 2026-12-04):
    blocks of 8 rows on 2 warps, 16 on 4 and 16 on 2, 257 / 257 / 769 values a thread past the limit at one
    program an SM, run 61 / 94 / 169 us; 38 / 38 / 114 us of reloads at 148 ns."""
    if not tgt.l2_latency_s:
        return 0.0
    values = register_demand(kp, tgt) - REGISTER_OVERHEAD - thread_register_limit(kp, tgt)
    if values <= 0:
        return 0.0
    return cost.programs / tgt.units * waves / resident * values * tgt.l2_latency_s


def edge_time(kp: KernelPlan, cost: KernelCost, tgt: Target, resident: int, waves: float) -> float:
    """The edges of a program's K loop that its products do not hide: the first load step waits the memory
    latency and its bytes, and the program's stores leave after the last step, both at the SM's share of the
    L2 bandwidth.  Programs resident together overlap each other's edges; a persistent launch has one program
    per SM prefetch the next tile's operands under this tile's stores, so only its first and last edges
    count."""
    if cost.step is None or not tgt.memory_latency_s:
        return 0.0
    share = (tgt.l2_bandwidth or tgt.dram_bandwidth) / tgt.units
    stored = sum(t.bytes for t in cost.transfers if t.dst == "global") / max(cost.programs, 1)
    per_program = tgt.memory_latency_s + (cost.step.bytes + stored) / share
    programs_per_unit = 1.0 if getattr(kp.root, "persistent", False) else cost.programs / tgt.units * waves
    return programs_per_unit * per_program / resident


def resident_programs(kp: KernelPlan, cost: KernelCost, tgt: Target) -> int:
    """Programs resident together on one SM (the occupancy model), or one per core on Ascend; never more than
    an even share of the launch's programs (128 programs on 132 SMs run one per SM, however many would fit).  A
    persistent launch starts one program per SM, whatever more would fit (backends/triton/launcher.py)."""
    if cost.occupancy is None or getattr(kp.root, "persistent", False):
        return 1
    return max(min(cost.occupancy.resident_blocks, math.ceil(cost.programs / tgt.units)), 1)


# ---------------------------------------------------------------- DRAM and L2 bandwidth


def dram_time(nbytes: int, tgt: Target) -> float:
    """DRAM bytes at the measured bandwidth (Target.dram_bandwidth_measured; the datasheet's without one)."""
    return nbytes / (tgt.dram_bandwidth_measured or tgt.dram_bandwidth)


def l2_time(nbytes: int, tgt: Target) -> float:
    """The counted global bytes (every tile load and store passes through L2) at Target.l2_bandwidth."""
    return nbytes / tgt.l2_bandwidth if tgt.l2_bandwidth else 0.0


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
    span = fibres.dim_max(0).sub(fibres.dim_min(0)).add_constant_val(isl.Val.one(dom.get_ctx()))
    longest = integer_bounds(span)[1]  # rational pieces (a skew under a tile) are integral: max_val refuses them
    mean = cost.loop_iterations[cost.step.loop] / max(cost.programs, 1)
    if not mean or not longest.is_int():  # an empty loop (NaN) has no longest program
        return 1.0
    return max(1.0, longest.to_python() / mean)


def inflight_time(kp: KernelPlan, cost: KernelCost, tgt: Target, resident: int, waves: float) -> float:
    """Little's law: every load step (an iteration of a K loop, or a program's one load of its tiles) waits the
    memory latency (`step_waits`) and its bytes pass at the SM's share of the L2 bandwidth, and an SM has at most
    resident programs x (pipeline stages - 1) of them in flight: a loop pipelined over s stages loads s - 1
    steps ahead of the one it computes (Triton's and TileLang's pipeliners), an unpipelined one loads one step
    at a time."""
    if not tgt.memory_latency_s:
        return 0.0
    loads = sum(t.bytes for t in cost.transfers if t.src == "global")
    ahead = max(cost.step.stages - 1, 1) if cost.step is not None else 1
    share = (tgt.l2_bandwidth or tgt.dram_bandwidth) / tgt.units
    return (step_waits(kp, cost, tgt) + loads / share) / tgt.units * waves / (resident * ahead)


def step_waits(kp: KernelPlan, cost: KernelCost, tgt: Target) -> float:
    """The latency the load steps wait, summed: one memory latency per program without a K loop; with one, per
    iteration of each loop of that name (a statement's own K loop: the loops of a row's statements run one after
    another, each loading its segments), an L2 hit's (Target.l2_latency_s) where every global load of the loop
    reads what is already in L2 (`_in_l2`), the memory latency otherwise."""
    if cost.step is None:
        return cost.programs * tgt.memory_latency_s
    loops: dict = {}
    for a in kp.accesses:
        if a.src == "global" and a.loop_name == cost.step.loop:
            loops.setdefault(id(a.loop), []).append(a)
    if not loops:
        return cost.loop_iterations[cost.step.loop] * tgt.memory_latency_s
    counted = {(t.tensor, t.src, t.loop, tuple(t.stmts)): t.iterations for t in cost.transfers}  # kernel_transfers
    total = 0.0
    for accesses in loops.values():
        iterations = max(counted[a.tensor, a.src, a.loop_name, tuple(a.stmts)] for a in accesses)
        hit = tgt.l2_latency_s and all(_in_l2(kp, a, cost.step.loop) for a in accesses)
        total += iterations * (tgt.l2_latency_s if hit else tgt.memory_latency_s)
    return total


def _in_l2(kp: KernelPlan, access, step_loop: str) -> bool:
    """Whether a load of the K loop reads what is already in L2: what the same program has just stored (an
    intermediate read back) or loaded earlier (a row read a second time: by a loop of another name, or by an
    earlier statement's loop of the step's name), or a tile every program of the wave loads alike (no grid loop
    changes it: RMSNorm's weights)."""
    first = min(kp.stmts.index(s) for s in access.stmts)

    def earlier(b) -> bool:
        return (b.src == "global" and b.tensor == access.tensor and b.loop is not access.loop
                and (b.loop_name != step_loop or max(kp.stmts.index(s) for s in b.stmts) < first))

    return (access.tensor in kp.read_back or any(earlier(b) for b in kp.accesses)
            or not grid_dependence(kp, access))
