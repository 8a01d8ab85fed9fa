"""The time model: roofline bounds per kernel, NVIDIA occupancy, and the pipelined serial loop (the K step).

Roofline: time >= global bytes / DRAM bandwidth and >= matrix FLOPs / matrix peak (by operand dtype) + other
FLOPs / vector peak.  Occupancy: resident blocks per SM = min over threads, registers (allocated per warp in
units of 256), shared memory (working set + per-block reserve) and the block limit.
"""

from __future__ import annotations

import math
from typing import Optional

from tdsl.compiler.analysis.buffer_plan import KernelPlan, PlannedBuffer, fmt_bytes
from tdsl.compiler.analysis.cost.results import KernelCost, Occupancy, Step
from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.schedule.tree import walk_loops
from tdsl.compiler.targets import Target


def roofline(tgt: Target, global_bytes: int, flops_matrix: int, flops_vector: int,
             matrix_dtype: Optional[str]) -> tuple[float, float]:
    """(memory time, compute time) of a kernel at the target's DRAM bandwidth and peaks."""
    t_memory = global_bytes / tgt.dram_bandwidth
    t_compute = flops_matrix / tgt.peak(matrix_dtype or "bf16") + flops_vector / tgt.vector_flops
    return t_memory, t_compute


REGISTER_OVERHEAD = 32  # registers a thread needs besides its tiles: addresses, indices, loop state


def thread_register_limit(kp: KernelPlan, tgt: Target) -> int:
    """The registers a thread of this kernel's blocks may have: the target's limit a thread, or fewer where a
    block of that many threads would pass the registers a block may have (1,024 threads: 64 each), rounded down
    to the allocation's 8.  The compiler gives each thread that many and spills the rest (32 warps were
    estimated at 80 registers a thread, a block that could not launch, reported as 0 resident blocks beside a
    time: probe NN)."""
    limit = tgt.max_registers_per_thread
    if limit and tgt.max_registers_per_block:
        limit = min(limit, tgt.max_registers_per_block // (kp.warps * (tgt.warp_size or 32)) // 8 * 8)
    return limit


def unheld_buffer(kp: KernelPlan, tgt: Target) -> Optional[PlannedBuffer]:
    """The largest register buffer when it alone needs more registers a thread than the target allows, past the
    registers every thread needs besides (`REGISTER_OVERHEAD`); else None.  A matrix product's accumulator is
    read and written whole by its instructions, so such a buffer moves through local memory at every K step
    (estimate.py `spill_time`)."""
    if not tgt.max_registers_per_thread:
        return None
    threads = kp.warps * (tgt.warp_size or 32)
    regs = [b for b in kp.buffers if b.scope == tgt.default_scope]
    largest = max(regs, key=lambda b: b.bytes_per_copy, default=None)
    if largest is None or largest.bytes_per_copy / 4 / threads <= thread_register_limit(kp, tgt) - REGISTER_OVERHEAD:
        return None
    return largest


def unheld_accumulator(model, kernels: list, tgt: Target) -> Optional[str]:
    """Why a kernel with matrix products cannot hold its accumulator in registers (`unheld_buffer`), or None.
    The tuning logs of the 27th session (H100) measured 14 such candidates of 320, at 5-12x the best
    candidate's time on the wgmma path (GEMM and FP8 tiles of 128 x 256 on 4 warps, 256 x 256 on 8) and 49x on
    the mma.sync path (quant_gemm's 128 x 256 tile on 4 warps, 8.9 ms: Triton gave it 32 registers and 9 KiB of
    local memory a thread), so the tuner does not measure them (compiler/tune/screen.py)."""
    for kp in kernels:
        products = any(matrix_operands(model.stmt(s), model.sizes) is not None for s in kp.stmts)
        buf = unheld_buffer(kp, tgt) if products else None
        if buf is not None:
            threads = kp.warps * (tgt.warp_size or 32)
            need = math.ceil(buf.bytes_per_copy / 4 / threads)
            return (f"kernel {kp.name}: {buf.tensor} ({'x'.join(map(str, buf.shape))} {buf.dtype}, "
                    f"{fmt_bytes(buf.bytes_per_copy)}) alone needs {need} registers a thread on {kp.warps} warps, "
                    f"more than the {thread_register_limit(kp, tgt) - REGISTER_OVERHEAD} a thread has for tiles; it "
                    f"would move through local memory at every K step: use more warps or a smaller tile")
    return None


def estimate_registers(kp: KernelPlan, tgt: Target, extra_bytes: int = 0) -> int:
    """Registers per thread when none are given: the register-scope working set (and `extra_bytes`, see
    `register_demand`) spread over the block's threads, plus 32 for addresses, indices and loop state, rounded
    up to 8 and capped at what a thread of the block may have (`thread_register_limit`)."""
    regs = register_demand(kp, tgt, extra_bytes)
    return min(regs, thread_register_limit(kp, tgt) or regs)


def register_demand(kp: KernelPlan, tgt: Target, extra_bytes: int = 0) -> int:
    """`estimate_registers` before the cap: past the target's limit the rest spills to local memory.
    `extra_bytes`: registers the code generator adds beside the plan's buffers (the second accumulator of a
    promoted FP8 product, work.py `promotion_register_bytes`)."""
    threads = kp.warps * (tgt.warp_size or 32)
    reg_bytes = kp.working_set.get(tgt.default_scope, 0) + extra_bytes
    regs = math.ceil(reg_bytes / 4 / threads) + REGISTER_OVERHEAD
    return 8 * math.ceil(regs / 8)


def occupancy(kp: KernelPlan, tgt: Target, regs: Optional[int] = None, extra_bytes: int = 0) -> Occupancy:
    """Resident blocks per SM from threads, registers, shared memory (+ reserve) and the block limit (5.1.5).
    `extra_bytes`: registers the code generator adds beside the plan's buffers (`register_demand`)."""
    warp = tgt.warp_size
    threads = kp.warps * warp
    estimated = regs is None
    if regs is None:
        regs = estimate_registers(kp, tgt, extra_bytes)
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


def step_time(kp: KernelPlan, cost: KernelCost, tgt: Target) -> Optional[Step]:
    """Per-iteration figures of the innermost serial loop that loads from global memory."""
    loads: dict = {}
    for t in cost.transfers:
        if t.src == "global" and t.loop:
            loads.setdefault(t.loop, []).append(t)
    names = kp.serial_loops  # a property: derived once here, not per loop
    serial = [l for l in walk_loops([kp.root]) if l.name in names and l.name in loads]
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
