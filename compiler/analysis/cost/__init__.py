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
* **Estimate.** The time a schedule search ranks by (`ProgramCost.t_estimate`): per kernel, launch overhead +
  max(L2 bandwidth, the overlap of DRAM after reuse in L2 within a wave with compute by instruction class and
  padded tile at the issue rate of the resident warps x waves and loads in flight, program starts); the
  roofline figures above stay as they are.

The modules, in the order they depend on each other:

    count.py     exact integer-point counts and sums over isl sets (card, box_sum)
    report.py    the text report and the JSON data of a result
    results.py   the result dataclasses (Transfer, Occupancy, Step, Estimate, KernelCost, ProgramCost)
    traffic.py   per kernel: the bytes of each movement, the FLOPs of each statement, loop trip counts
    timing.py    roofline times, occupancy, the pipelined serial loop
    l2.py        the estimate's DRAM bytes after reuse in L2 among the programs of one wave
    work.py      the estimate's compute: products by instruction class, vector work in FP32-instruction slots
    estimate.py  the ranking estimate, one function per term (docs/cost.md, "The estimate")
    program.py   analyze(): the cost of a scheduled program, kernel by kernel, and its peak global memory
    backend_rules.py  whether a code generator can use a candidate's tiles (padded to powers of two, its lowering)
    tiling.py    rewriting a block's split/tile factors; fit(), the largest factor that fits the target
    sweeps.py    sweep() over tile factors and its table
    plot.py      the roofline of a schedule or a sweep (matplotlib)

The names below are the package's API (`from tdsl.compiler.analysis.cost import analyze, sweep, fit`).
"""

from __future__ import annotations

from tdsl.compiler.analysis.cost.count import MAX_ENUMERATION, box_sum, card, sum_products
from tdsl.compiler.analysis.cost.backend_rules import refusal
from tdsl.compiler.analysis.cost.plot import Point, kernel_points, plot_kernels, plot_sweep, roofs, sweep_points
from tdsl.compiler.analysis.cost.program import analyze
from tdsl.compiler.analysis.cost.report import KiB, MiB, report_text
from tdsl.compiler.analysis.cost.results import Estimate, KernelCost, Occupancy, ProgramCost, Step, Transfer
from tdsl.compiler.analysis.cost.sweeps import SweepRow, sweep, sweep_table
from tdsl.compiler.analysis.cost.timing import estimate_registers, occupancy
from tdsl.compiler.analysis.cost.tiling import build_block, current_factor, effective_factors, fit, with_factors
from tdsl.compiler.analysis.cost.traffic import statement_flops

_build = build_block  # the name of tdsl 0.1

__all__ = [
    "MAX_ENUMERATION", "KiB", "MiB",
    "card", "box_sum", "sum_products",
    "Transfer", "Occupancy", "Step", "Estimate", "KernelCost", "ProgramCost",
    "analyze", "statement_flops", "estimate_registers", "occupancy",
    "report_text",
    "with_factors", "current_factor", "effective_factors", "build_block", "fit", "refusal",
    "SweepRow", "sweep", "sweep_table",
    "Point", "kernel_points", "sweep_points", "roofs", "plot_kernels", "plot_sweep",
]
