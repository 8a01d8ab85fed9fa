"""NVIDIA RTX PRO 6000 Blackwell Workstation Edition (compute capability 12.0).

Sources: [ch] the chapter, 5.2.2 and 5.3.3 (100 KB shared per SM, 99 KB per block, 1 KiB reserve);
[design] /work/shared/design.md targets table (1792 GB/s, 503.8 TFLOP/s dense bf16);
[guide] NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", column 12.0
(vendor documentation, cited from the published guide; the 48-warp / 1536-thread limit is shared with 8.6 and 8.9);
[ds] NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet / product page (vendor documentation).
"""

from tdsl.compiler.targets import KiB, Scope, Target

TARGET = Target(
    name="rtx-pro-6000",
    vendor="nvidia",
    description="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    units=188,  # SMs: 24,064 CUDA cores / 128 per SM [ds]
    unit_name="SM",
    scopes={
        "shared": Scope(
            "shared",
            per_block=99 * KiB,  # 101,376 B per block [ch 5.3.3] [guide]
            per_unit=100 * KiB,  # 102,400 B per SM [ch 5.2.2] [guide]
            reserved_per_block=1 * KiB,  # [ch 5.2.2] [guide]
        ),
        "register": Scope("register", per_block=65536 * 4, per_unit=65536 * 4, hard=False),  # 64K regs [guide]
        "global": Scope("global", per_block=None, per_unit=None, hard=False, note="device memory (GDDR7), not on chip"),
    },
    aliases={"local": "register"},
    default_scope="register",
    dram_bandwidth=1792e9,  # GDDR7, 1792 GB/s [design] [ds]
    dram_bytes=96 * 10**9,  # 96 GB GDDR7 [ds]
    l2_bytes=128 * 1024 * KiB,  # 128 MB L2 [ds]
    peak_flops={
        "bf16": 503.8e12,  # dense BF16 tensor core [design]
        "f8e4m3": 1007.6e12,  # dense FP8: twice the BF16 rate (derived, as on every tensor-core generation since Hopper)
    },
    vector_flops=125e12,  # FP32 on CUDA cores, "125 TFLOPS" class single precision [ds]
    warp_size=32,  # [guide]
    max_threads_per_unit=1536,  # 48 warps per SM [guide]
    max_threads_per_block=1024,  # [guide]
    max_blocks_per_unit=32,  # [guide]
    registers_per_unit=65536,  # [guide]
    max_registers_per_block=65536,  # [guide]
    max_registers_per_thread=255,  # [guide]
    register_alloc_unit=256,  # per warp (CUDA Occupancy Calculator)
    memory_latency_s=600e-9,  # the chapter's H100 assumption reused [ch 5.1.5]; not measured on this card
    loads_in_flight_per_warp=4,  # [ch 5.1.5] assumption
    bytes_per_load_per_thread=16,  # 128-bit loads [ch 5.1.5] assumption
    # sm_120's mma reads registers, but Triton's pipeliner copies a dot's operands into shared memory all the same,
    # one copy per stage: a 256 x 256 x 64 bf16 GEMM of 2 stages without cache_read asks 131,072 B (AOT for sm_120,
    # probe EE of the 30th session), more than a block's 99 KB
    tensor_operands_in_shared=True,
    sources={
        "ch": "the chapter, 5.2.2 and 5.3.3",
        "design": "design.md targets table",
        "guide": "NVIDIA CUDA C++ Programming Guide, compute capability 12.0 (vendor documentation)",
        "ds": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet",
    },
)
