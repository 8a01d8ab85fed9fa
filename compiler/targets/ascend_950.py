"""Huawei Ascend 950 (950PR; DaVinci C310 "A5"), the target of mainline TileLang's Ascend dialect.

Sources: [cfg] CANN platform configuration Ascend950PR_957bx.ini (`[SoCInfo]`, `[AICoreSpec]`): 28 cube
cores, 56 vector cores, cube 16x16x16 at 1650 MHz, L0A/L0B 65,536 B, L0C 262,144 B, L1 524,288 B,
ub_size 253,952 B (usable), L2 117,440,512 B;
[design] /work/shared/design.md: UB 262,144 B (the physical size mainline TileLang uses), so 8,192 B of it
are reserved; [hc25] Huawei Connect 2025 announcement of the 950 series (950PR: HiBL 1.0 memory, 128 GB,
1.6 TB/s; FP8/MXFP8/HiF8 1 PFLOPS) -- announced figures, not a datasheet.
"""

from tdsl.compiler.targets import Scope, Target

_CORES = 28  # cube cores [cfg ai_core_cnt=28]
_FREQ = 1.65e9  # cube_freq=1650 MHz [cfg]
_MAC = 16 * 16 * 16  # [cfg cube_m/n/k_size]

TARGET = Target(
    name="ascend-950",
    vendor="ascend",
    description="Huawei Ascend 950PR",
    units=_CORES,
    unit_name="AI core",
    scopes={
        "L1": Scope("L1", per_block=524288, per_unit=524288),  # [cfg l1_size]
        "L0A": Scope("L0A", per_block=65536, per_unit=65536),  # [cfg]
        "L0B": Scope("L0B", per_block=65536, per_unit=65536),  # [cfg]
        "L0C": Scope("L0C", per_block=262144, per_unit=262144),  # [cfg l0_c_size]
        "UB": Scope("UB", per_block=253952, per_unit=262144, reserved_per_block=8192,
                    note="per vector core (AIV); 2 AIV per AI core"),  # 262,144 [design]; 253,952 usable [cfg]
        "global": Scope("global", per_block=None, per_unit=None, hard=False, note="HBM (GM), not on chip"),
    },
    aliases={"shared": "UB", "register": "UB", "local": "UB"},
    default_scope="UB",
    dram_bandwidth=1.6e12,  # HiBL 1.0, 1.6 TB/s [hc25]
    dram_bytes=128 * 10**9,  # 128 GB [hc25]; the platform config reports 112 GiB usable
    l2_bytes=117440512,  # 112 MiB [cfg]
    peak_flops={
        "bf16": _CORES * _MAC * 2 * _FREQ,  # 378.5 TFLOP/s (378.47), derived from [cfg]
        "f8e4m3": 1e15,  # FP8 1 PFLOPS [hc25]
    },
    vector_flops=2 * _CORES * 64 * _FREQ,  # 56 AIV x 64 f32 lanes x 1.65 GHz: an estimate from [cfg]
    vector_units_per_core=2,  # [cfg vector_core_cnt=56]
    sources={
        "cfg": "CANN platform config Ascend950PR_957bx.ini",
        "design": "design.md targets table",
        "hc25": "Huawei Connect 2025 Ascend 950 announcement",
    },
)
