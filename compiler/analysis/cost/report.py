"""The report of a cost analysis: the text of `tdsl cost`, and the dict behind `--json`.

Bytes print in MiB = 2^20 and KiB = 2^10, as in the chapter the tests compare with.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import islpy as isl

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import fmt_bytes
from tdsl.compiler.targets import Target

if TYPE_CHECKING:
    from tdsl.compiler.analysis.cost.results import ProgramCost

MiB = 1 << 20
KiB = 1 << 10


def fmt_mib(n: float) -> str:
    if n < MiB:
        return fmt_bytes(round(n))
    x = n / MiB
    if x >= 1000:
        return f"{x:,.0f} MiB" if x == int(x) else f"{x:,.2f} MiB"
    return f"{x:.4g} MiB"


def fmt_time(t: float) -> str:
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
            if k.copied:
                made = ", ".join(f"{b.tensor} x{b.stages}" for b in k.copied)
                lines.append(f"    the tensor cores read {made} from shared memory: copied there by the code "
                             f"generator in place of their register tiles, and counted so here and in the estimate")
            if k.unmade:  # the working set above is the schedule's; the residency is the generated kernel's
                left = ", ".join(dict.fromkeys(b.tensor for b in k.unmade))
                lines.append(f"    the code generator makes no copy of {left} in shared memory (only a matrix product's "
                             f"operands are copied there): left out here and in the estimate, not in the working set "
                             f"above")
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
            lines.append(f"    {t.level:<18} {t.tensor:<10} {per:<26} {fmt_mib(t.bytes):>14}   ({', '.join(t.stmts)})")
        levels = ", ".join(f"{lvl} {fmt_mib(n)}" for lvl, n in k.level_bytes().items())
        lines.append(f"    by level: {levels}")
        lines.append(f"  global memory: read {fmt_mib(k.global_read)}, written {fmt_mib(k.global_write)}, "
                     f"total {fmt_mib(k.global_bytes)} ({k.global_bytes:,} B)")
        kind = f" ({k.matrix_dtype} matrix {k.flops_matrix:,}, other {k.flops_vector:,})" if k.flops_matrix else ""
        lines.append(f"  FLOPs {k.flops:,}{kind}; intensity {k.intensity:.3g} FLOP/byte "
                     f"(ridge {tgt.peak(k.matrix_dtype or 'bf16') / tgt.dram_bandwidth:.0f})")
        lines.append(f"  roofline: memory {fmt_time(k.t_memory)}, compute {fmt_time(k.t_compute)} -> bound "
                     f"{fmt_time(k.t_bound)}, {k.bottleneck}-bound")
        if k.step is not None:
            s = k.step
            lines.append(f"  per iteration of {s.loop} ({s.per_program} per program, {s.stages} stage(s)): "
                         f"{fmt_bytes(round(s.bytes))} loaded in {fmt_time(s.t_move)}, {s.flops:,.0f} FLOPs in "
                         f"{fmt_time(s.t_compute)} at 1/{tgt.units} of the device; loop {fmt_time(s.t_pipeline)}")
        if k.estimate is not None:
            lines.extend(_estimate_lines(k.estimate, tgt))
    lines.append("")
    lines.append(f"total: {len(cost.kernels)} kernel(s); global memory {fmt_mib(cost.global_bytes)} "
                 f"(read {fmt_mib(cost.global_read)}, written {fmt_mib(cost.global_write)}); each tensor once: "
                 f"{fmt_mib(cost.compulsory_bytes)}")
    lines.append(f"  FLOPs {cost.flops:,}; intensity {cost.intensity:.3g} FLOP/byte; roofline bound "
                 f"{fmt_time(cost.t_bound)}" + (f"; matrix utilisation at most {cost.mfu_bound:.0%}" if cost.flops_matrix else ""))
    lines.append(f"  peak global memory {fmt_mib(cost.peak_global_memory)} at {cost.peak_at}")
    for name, (instances, elements) in cost.recomputed.items():
        lines.append(f"  recomputed per tile (recompute_at): {name} {instances:,} instances for {elements:,} elements "
                     f"({instances / elements:.2f}x)")
    lines.append(f"  estimate {fmt_time(cost.t_estimate)} (kernels one after another; what a schedule search ranks by)")
    if cost.violations:
        lines.append(f"  capacity: {len(cost.violations)} violation(s); the schedule is rejected for {tgt.name}")
    return "\n".join(lines)


def _estimate_lines(e, tgt: Target) -> list:
    """The kernel's ranking estimate and its terms (docs/cost.md, "The estimate")."""
    units = ", ".join(dict.fromkeys(e.units)) or "no products"
    warps = f" at {e.resident_warps} resident warps" if e.resident_warps else ""
    extra = "".join(f" + {name} {fmt_time(t)}" for name, t in (("spills", e.t_spill), ("tile edges", e.t_edges)) if t)
    return [
        f"  estimate {fmt_time(e.t_estimate)}, limited by {e.limit}: launch {fmt_time(e.t_launch)} + max(L2 "
        f"{fmt_time(e.t_l2)}, overlap(overlap(compute {fmt_time(e.t_compute)}, in flight "
        f"{fmt_time(e.t_inflight)}), DRAM {fmt_time(e.t_dram)}), program starts {fmt_time(e.t_programs)})",
        f"    DRAM {fmt_mib(e.dram_bytes)} after L2 reuse in waves of {e.wave:,} programs; compute = (matrix "
        f"{fmt_time(e.t_matrix)} [{units}] + vector {fmt_time(e.t_vector)}{warps}) x {e.waves:.3g} for waves"
        f"{extra}",
    ]


def _capacity(tgt: Target, scope: str, n: int) -> str:
    try:
        info = tgt.scope(scope)
    except TdslError:
        return ""
    if info.per_block is None:
        return ""
    word = "of" if info.hard else "of (soft)"
    return f" {word} {fmt_bytes(info.per_block)}"


def json_data(obj):
    """A result as plain data for JSON: a target by its name, an isl map as its text, a dataclass as its
    fields and derived properties, an infinite intensity as None."""
    if isinstance(obj, Target):
        return obj.name
    if isinstance(obj, isl.Map):
        return str(obj)
    if hasattr(obj, "__dataclass_fields__"):  # fields kept out of repr are links (a tree loop), not data
        out = {k: json_data(getattr(obj, k)) for k, f in obj.__dataclass_fields__.items() if f.repr}
        for prop in ("global_read", "global_write", "global_bytes", "flops", "intensity", "t_bound", "bottleneck",
                     "occupancy", "bytes", "label", "level", "mfu_bound", "over", "t_compute", "limit",
                     "t_estimate"):
            if prop in type(obj).__dict__ and isinstance(type(obj).__dict__[prop], property):
                value = getattr(obj, prop)
                out[prop] = value if not (isinstance(value, float) and math.isinf(value)) else None
        return out
    if isinstance(obj, dict):
        return {str(k): json_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_data(v) for v in obj]
    if isinstance(obj, float) and math.isinf(obj):
        return None
    return obj
