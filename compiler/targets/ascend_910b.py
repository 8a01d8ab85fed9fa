"""Huawei Ascend 910B (Atlas A2; DaVinci C220, cube and vector cores split 1:2).

Sources: [cfg] CANN platform configuration Ascend910B2C.ini (`[SoCInfo]`, `[AICoreSpec]`), as shipped in
`${INSTALL_DIR}/<arch>-linux/data/platform_config/` and mirrored at gitcode.com/W4termy/runtime
(src/platform/platform_config/Ascend910B2C.ini): 24 cube cores, 48 vector cores, cube 16x16x16 at 1800 MHz,
L0A/L0B 65,536 B, L0C 131,072 B, L1 524,288 B, UB 196,608 B, L2 201,326,592 B;
[tla] tilelang-ascend (src/target/codegen_ascend.cc, src/transform/ascend_memory_planning.cc): usable
L1 524,032 B and UB 196,352 B, i.e. 256 B reserved in each (shared/notes/anchors.md);
[design] /work/shared/design.md targets table; [ch] the chapter 5.4.4-5.4.5 (buffer names);
[web] HBM2e 64 GB at about 1.6 TB/s is the figure commonly quoted for the 910B; Huawei publishes no
datasheet for it, so treat it as approximate (the platform config's ddr_rate of 32 B/cycle/core gives 1.38 TB/s).
"""

from tdsl.compiler.targets import Scope, Target

_CORES = 24  # cube cores (AIC) [cfg ai_core_cnt=24, cube_core_cnt=24]
_FREQ = 1.8e9  # cube_freq=1800 MHz [cfg]
_MAC = 16 * 16 * 16  # cube_m/n/k_size = 16 [cfg]: one 16x16x16 multiply-accumulate per cycle

TARGET = Target(
    name="ascend-910b",
    vendor="ascend",
    description="Huawei Ascend 910B (910B2)",
    units=_CORES,
    unit_name="AI core",
    scopes={
        "L1": Scope("L1", per_block=524288 - 256, per_unit=524288, reserved_per_block=256),  # [cfg l1_size] [tla]
        "L0A": Scope("L0A", per_block=65536, per_unit=65536),  # [cfg l0_a_size] [tla]
        "L0B": Scope("L0B", per_block=65536, per_unit=65536),  # [cfg l0_b_size] [tla]
        "L0C": Scope("L0C", per_block=131072, per_unit=131072),  # [cfg l0_c_size] [tla]
        "UB": Scope("UB", per_block=196608 - 256, per_unit=196608, reserved_per_block=256,
                    note="per vector core (AIV); 2 AIV per AI core"),  # [cfg ub_size] [tla]
        "global": Scope("global", per_block=None, per_unit=None, hard=False, note="HBM (GM), not on chip"),
    },
    aliases={"shared": "UB", "register": "UB", "local": "UB"},
    default_scope="UB",
    dram_bandwidth=1.6e12,  # [web] approximate, see the module docstring
    dram_bytes=64 * 10**9,  # HBM2e 64 GB [web]
    l2_bytes=201326592,  # 192 MiB [cfg l2_size]
    peak_flops={"bf16": _CORES * _MAC * 2 * _FREQ},  # 353.9 TFLOP/s fp16/bf16, derived from [cfg]
    vector_flops=2 * _CORES * 64 * _FREQ,  # 48 AIV x 64 f32 lanes x 1.8 GHz = 5.5 TFLOP/s: an estimate from [cfg] (vec_calc_size)
    vector_units_per_core=2,  # [cfg vector_core_cnt=48]
    sources={
        "cfg": "CANN platform config Ascend910B2C.ini",
        "tla": "tilelang-ascend codegen_ascend.cc / ascend_memory_planning.cc",
        "design": "design.md targets table",
        "web": "commonly quoted 910B HBM figures (no vendor datasheet)",
    },
)
