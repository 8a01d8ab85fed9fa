"""Targets as data: memory scopes with capacities, per-block and per-SM (per-core) limits, bandwidths, peak rates.

Each target is one module of this package (`h100.py`, `h200.py`, `rtx_pro_6000.py`, `ascend_910b.py`,
`ascend_950.py`) that builds a `Target`; every figure carries its source in a comment next to it, and the
same table with sources is in docs/targets.md.

    from tdsl.compiler.targets import get_target
    t = get_target("h100")
    t.scope("shared").per_block          # 232448 bytes (227 KiB) a block may allocate
    t.scope("shared").per_unit           # 233472 bytes (228 KiB) per SM, shared by resident blocks
    t.scope("shared").reserved_per_block # 1024: the CUDA runtime's reserve for every resident block

Scope names are the ones schedules use (`cache_read(A, shared, at=C.ko)`); `aliases` maps the other
names a schedule may use on this target (on NVIDIA `local` is `register`; on Ascend `shared` and
`register` are the Unified Buffer, as in TileLang-Ascend where `T.alloc_shared` allocates UB).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

KiB = 1024
MiB = 1024 * 1024


@dataclass(frozen=True)
class Scope:
    """One on-chip memory a schedule can place buffers in."""

    name: str
    per_block: Optional[int]  # bytes one block (program, task) may allocate; None: no limit known
    per_unit: Optional[int]  # bytes per SM / core, shared by the blocks resident on it
    reserved_per_block: int = 0  # bytes the runtime reserves per resident block, counted against per_unit
    hard: bool = True  # exceeding it is an error (shared memory, L1, UB); soft: a spill (registers)
    note: str = ""


@dataclass(frozen=True)
class Target:
    name: str
    vendor: str  # "nvidia" | "ascend"
    description: str
    units: int  # SMs, or AI cores (cube cores) on Ascend
    unit_name: str  # "SM" | "AI core"
    scopes: dict
    default_scope: str  # where tiles of uncached tensors and fused intermediates live
    dram_bandwidth: float  # bytes/s, datasheet
    peak_flops: dict  # operand dtype -> dense matrix FLOP/s (tensor cores / cube)
    vector_flops: float  # FLOP/s of elementwise f32 work (CUDA cores / vector units)
    aliases: dict = field(default_factory=dict)
    # thread-level limits (NVIDIA); None where the target has no such notion
    warp_size: Optional[int] = None
    max_threads_per_unit: Optional[int] = None
    max_threads_per_block: Optional[int] = None
    max_blocks_per_unit: Optional[int] = None
    registers_per_unit: Optional[int] = None  # 32-bit registers per SM
    max_registers_per_block: Optional[int] = None
    max_registers_per_thread: Optional[int] = None
    register_alloc_unit: Optional[int] = None  # registers are allocated per warp in units of this many
    vector_units_per_core: int = 0  # Ascend: vector cores (AIV) per cube core (AIC)
    dram_bandwidth_measured: Optional[float] = None  # bytes/s, measured where we have it
    dram_bytes: Optional[int] = None
    l2_bytes: Optional[int] = None
    # assumptions used by the chapter's latency-hiding estimate (5.1.5); not hardware facts
    memory_latency_s: Optional[float] = None
    l2_latency_s: Optional[float] = None  # a load hitting L2 (the ranking estimate's re-read steps)
    loads_in_flight_per_warp: Optional[int] = None
    bytes_per_load_per_thread: Optional[int] = None
    # figures of the ranking estimate (compiler/analysis/cost/estimate.py, docs/cost.md "The estimate"); measured
    # where a source says so.  None: the estimate falls back to the datasheet peaks and leaves the term out.
    l2_bandwidth: Optional[float] = None  # bytes/s the SMs read from L2 (tile loads that hit)
    launch_overhead_s: Optional[float] = None  # seconds a launch adds to a kernel's time, as benchmarks time it
    program_launch_s: Optional[float] = None  # seconds an SM's scheduler takes to start each program (block)
    matrix_flops_sustained: dict = field(default_factory=dict)  # operand class -> FLOP/s a large tile sustains
    tensor_tile_efficiency: dict = field(default_factory=dict)  # operand class -> ((m*n/(m+n) of the product
    #                                   tile, fraction of the sustained rate), ...)
    tensor_row_efficiency: tuple = ()  # ((bytes of a K step's operand rows, fraction of the rate), ...)
    tensor_operands_in_shared: bool = False  # the tensor cores read operands from shared memory (sm_90 wgmma):
    #                                   the code generator copies an operand loaded from memory there (cost/staging.py)
    one_warpgroup_efficiency: Optional[float] = None  # tensor rate with one resident warpgroup per SM / with two
    fp8_promotion_wait_s: Optional[float] = None  # a promoted FP8 product's wait for its products, per K step
    fp8_promotion_add_s: Optional[float] = None  # and its addition of 64 promoted outputs a thread into the f32 sum
    vector_instr_rate: Optional[float] = None  # FP32 instructions/s (an FMA is one) at full issue
    vector_op_cost: dict = field(default_factory=dict)  # operation -> FP32-instruction slots one costs
    issue_by_warps: tuple = ()  # ((resident warps per SM, fraction of the full vector issue rate), ...)
    ieee_dot_efficiency: Optional[float] = None  # f32 FMA product (Triton input_precision="ieee"): FMA-rate share
    ieee_dot_register_words: Optional[int] = None  # k x outputs per thread beyond which that share falls (spills)
    sources: dict = field(default_factory=dict)

    # ------------------------------------------------------------ scopes

    def scope(self, name: str) -> Scope:
        """The scope a schedule's scope name means on this target (aliases resolved)."""
        real = self.aliases.get(name, name)
        if real not in self.scopes:  # a schedule written for another target: this one cannot place the buffer
            from tdsl.compiler.errors import BackendError

            known = sorted(set(self.scopes) | set(self.aliases))
            raise BackendError(f"memory scope '{name}' does not exist on target {self.name} (scopes: "
                               f"{', '.join(known)}): place the buffer in one of these", backend=self.name)
        return self.scopes[real]

    def scope_name(self, name: str) -> str:
        return self.scope(name).name

    @property
    def max_warps_per_unit(self) -> Optional[int]:
        if self.max_threads_per_unit and self.warp_size:
            return self.max_threads_per_unit // self.warp_size
        return None

    def peak(self, dtype: str) -> float:
        """Dense matrix peak for operands of this dtype (f16 and bf16 share a rate)."""
        key = {"f16": "bf16", "f8e4m3": "f8e4m3", "bf16": "bf16", "f32": "f32"}.get(dtype, dtype)
        if key in self.peak_flops:
            return self.peak_flops[key]
        return self.peak_flops["bf16"]

    def summary(self) -> str:
        bw = self.dram_bandwidth / 1e12
        return (f"{self.description}: {self.units} {self.unit_name}s, {bw:.3g} TB/s, "
                f"{self.peak('bf16') / 1e12:.1f} TFLOP/s dense bf16")


TARGET_MODULES = {
    "h100": "h100",
    "h200": "h200",
    "rtx-pro-6000": "rtx_pro_6000",
    "ascend-910b": "ascend_910b",
    "ascend-950": "ascend_950",
}


# Every device's code generator family (what `generate` emits for it); `nvidia` names the default NVIDIA
# device.  The one target vocabulary of the command line and the Python API: `--target h200`, `--target nvidia`.
FAMILY = {"h100": "nvidia", "h200": "nvidia", "rtx-pro-6000": "nvidia", "ascend-910b": "ascend-910b",
          "ascend-950": "ascend-950"}
DEFAULT_DEVICE = {"nvidia": "h100"}


def names() -> list[str]:
    return list(TARGET_MODULES)


def target_names() -> list[str]:
    """Every name `--target` takes: the devices and the `nvidia` alias."""
    return [*DEFAULT_DEVICE, *TARGET_MODULES]


def device_name(name: str) -> str:
    """The device a target name means (`nvidia` -> h100); TdslError for an unknown name."""
    if not isinstance(name, str):  # str(None) read as the unknown target 'none' (probe KK)
        raise TdslError(f"a target is a name such as 'nvidia', 'h200' or 'ascend-950', got {name!r}")
    key = name.lower().replace("_", "-")
    key = DEFAULT_DEVICE.get(key, key)
    get_target(key)  # an unknown name is refused with a suggestion
    return key


def family(name: str) -> str:
    """The code generator family of a target name: nvidia, ascend-950 or ascend-910b."""
    return FAMILY[device_name(name)]


def get_target(name) -> Target:
    """A target by name (`h100`, `h200`, `rtx-pro-6000`, `ascend-910b`, `ascend-950`), or a Target itself."""
    if isinstance(name, Target):
        return name
    key = str(name).lower().replace("_", "-")
    key = DEFAULT_DEVICE.get(key, key)
    if key not in TARGET_MODULES:
        import difflib

        close = difflib.get_close_matches(key, [*DEFAULT_DEVICE, *TARGET_MODULES], n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise TdslError(f"unknown target '{name}'{hint}; targets: {', '.join([*DEFAULT_DEVICE, *TARGET_MODULES])}")
    module = importlib.import_module(f"{__name__}.{TARGET_MODULES[key]}")
    return module.TARGET
