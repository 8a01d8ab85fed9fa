"""What a cost analysis returns: transfers, occupancy, the pipelined step, the estimate's terms, per-kernel and
per-program costs.

The figures derived from the counted ones (global bytes, intensity, roofline bound, bottleneck, matrix
utilisation bound) are properties here, so that the text and JSON reports and the callers read the same values.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Optional

from tdsl.compiler.analysis.buffer_plan import PlannedBuffer, Violation
from tdsl.compiler.analysis.cost.report import json_data, report_text
from tdsl.compiler.targets import Target

OVERLAP_NORM = 3  # compute and loads in flight overlap imperfectly (docs/cost.md "The estimate", fitted on the
                  # H200's K-step series: 3 is within 10% of 5 of 6 step times where the maximum misses by 15-25%)


def overlap(a: float, b: float) -> float:
    """Two activities that run at once but contend (the tensor cores and the loads they wait for, the SMs' work
    and the DRAM stream): their OVERLAP_NORM-norm, between the maximum (perfect overlap) and the sum (none)."""
    return (a ** OVERLAP_NORM + b ** OVERLAP_NORM) ** (1 / OVERLAP_NORM)


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
class Estimate:
    """The terms of one kernel's ranking estimate (compiler/analysis/cost/estimate.py, docs/cost.md "The
    estimate"): t = launch + max(L2, overlap(overlap(compute, loads in flight), DRAM), program starts)."""

    t_launch: float  # the launch overhead
    wave: int  # programs resident at once over all SMs (cores): the ones that share tiles through L2
    dram_bytes: int  # global bytes that reach DRAM once programs of one wave share tiles through L2
    t_dram: float  # dram_bytes at the measured DRAM bandwidth
    t_l2: float  # every counted global byte through L2, at its bandwidth
    t_matrix: float  # matrix products, by instruction class and padded tile
    t_vector: float  # other work in FP32-instruction slots, at the issue rate the resident warps reach
    waves: float  # the busiest SM's (core's) work over the mean: partial last wave, longest program
    t_inflight: float  # Little's law: load steps x latency / (resident programs x (pipeline stages - 1))
    units: list  # the instruction class of each product ("tensor bf16", "ieee fma", ...)
    resident_warps: int  # warps per SM the issue rate is read at (0: no occupancy model)
    t_spill: float = 0.0  # a register tile that does not fit, moved out and back in every K step
    t_edges: float = 0.0  # first load step and stores of each program, not hidden by its products
    t_programs: float = 0.0  # the busiest SM's programs, started one after another by its scheduler

    @property
    def t_compute(self) -> float:
        return (self.t_matrix + self.t_vector) * self.waves + self.t_spill + self.t_edges

    @property
    def limit(self) -> str:
        """The term that sets the estimate: dram, l2, compute or latency."""
        terms = {"dram": self.t_dram, "l2": self.t_l2, "compute": self.t_compute, "latency": self.t_inflight,
                 "program starts": self.t_programs}
        return max(terms, key=terms.get)

    @property
    def t_estimate(self) -> float:
        busy = overlap(overlap(self.t_compute, self.t_inflight), self.t_dram)
        return self.t_launch + max(self.t_l2, busy, self.t_programs)


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
    estimate: Optional[Estimate] = None
    copied: list[PlannedBuffer] = field(default_factory=list)  # operands the code generator copies to shared
    unmade: list[PlannedBuffer] = field(default_factory=list)  # the schedule's copies the code generator does not make
    #                                                          memory itself (staging.py), as it holds them

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

    @property
    def t_estimate(self) -> float:
        """The ranking estimate (seconds); the roofline bound where no estimate was made."""
        return self.estimate.t_estimate if self.estimate is not None else self.t_bound

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
    # a statement recomputed per tile (recompute_at) -> (instances computed, distinct elements)
    recomputed: dict = field(default_factory=dict)

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
    def t_estimate(self) -> float:
        """The predicted run time that ranks schedules (`tdsl tune`): the kernels' estimates, one after another."""
        return sum(k.t_estimate for k in self.kernels)

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
        return json_data(self)

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def text(self) -> str:
        return report_text(self)
