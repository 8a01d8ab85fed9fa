"""The time model: roofline bounds per kernel, NVIDIA occupancy, and the pipelined serial loop (the K step).

Roofline: time >= global bytes / DRAM bandwidth and >= matrix FLOPs / matrix peak (by operand dtype) + other
FLOPs / vector peak.  Occupancy: resident blocks per SM = min over threads, registers (allocated per warp in
units of 256), shared memory (working set + per-block reserve) and the block limit.
"""

from __future__ import annotations

import math
from typing import Optional

from tdsl.compiler.analysis.buffer_plan import KernelPlan
from tdsl.compiler.analysis.cost.results import KernelCost, Occupancy, Step
from tdsl.compiler.schedule.tree import walk_loops
from tdsl.compiler.targets import Target


def roofline(tgt: Target, global_bytes: int, flops_matrix: int, flops_vector: int,
             matrix_dtype: Optional[str]) -> tuple[float, float]:
    """(memory time, compute time) of a kernel at the target's DRAM bandwidth and peaks."""
    t_memory = global_bytes / tgt.dram_bandwidth
    t_compute = flops_matrix / tgt.peak(matrix_dtype or "bf16") + flops_vector / tgt.vector_flops
    return t_memory, t_compute


REGISTER_OVERHEAD = 32  # registers a thread needs besides its tiles: addresses, indices, loop state


def estimate_registers(kp: KernelPlan, tgt: Target, extra_bytes: int = 0) -> int:
    """Registers per thread when none are given: the register-scope working set (and `extra_bytes`, see
    `register_demand`) spread over the block's threads, plus 32 for addresses, indices and loop state, rounded
    up to 8 and capped at the target's limit."""
    regs = register_demand(kp, tgt, extra_bytes)
    return min(regs, tgt.max_registers_per_thread or regs)


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
    serial = [l for l in walk_loops([kp.root]) if l.name in kp.serial_loops and l.name in loads]
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
