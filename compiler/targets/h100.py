"""NVIDIA H100 SXM5 (Hopper, compute capability 9.0).

Sources: [ch] the chapter, 5.1.5 (also /work/shared/design.md's targets table);
[guide] NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", column 9.0,
and "Shared Memory" for compute capability 9.0 (vendor documentation, cited from the published guide);
[occ] NVIDIA CUDA Occupancy Calculator / Nsight Compute occupancy section (register allocation unit);
[ds] NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (dense figures are half of the "with sparsity" ones);
[wp] NVIDIA H100 Tensor Core GPU Architecture whitepaper.
"""

from tdsl.compiler.targets import KiB, Scope, Target

TARGET = Target(
    name="h100",
    vendor="nvidia",
    description="NVIDIA H100 SXM5",
    units=132,  # SMs [ch 5.1.5] [wp]
    unit_name="SM",
    scopes={
        "shared": Scope(
            "shared",
            per_block=227 * KiB,  # 232,448 B: largest dynamic shared allocation of one block (opt-in) [guide] [design]
            per_unit=228 * KiB,  # 233,472 B = "228 KB" per SM [ch 5.1.5] [guide]
            reserved_per_block=1 * KiB,  # the CUDA runtime reserves 1 KB of shared memory per resident block [ch 5.1.5] [guide]
        ),
        "register": Scope(
            "register",
            per_block=65536 * 4,  # 64K 32-bit registers per block [guide]
            per_unit=65536 * 4,  # 64K 32-bit registers per SM [ch 5.1.5] [guide]
            hard=False,  # too many live values spill to local memory: slower, not an error
        ),
        "global": Scope("global", per_block=None, per_unit=None, hard=False, note="device memory (HBM3), not on chip"),
    },
    aliases={"local": "register"},
    default_scope="register",
    dram_bandwidth=3.35e12,  # HBM3, 3.35 TB/s [ch 5.1.5] [ds]
    dram_bytes=80 * 10**9,  # 80 GB [ds]
    l2_bytes=50 * 1024 * KiB,  # 50 MB L2 [wp]
    peak_flops={
        "bf16": 989.4e12,  # dense BF16/FP16 tensor core [ch 5.1.5] [ds: 1,979 TFLOPS with sparsity]
        "f8e4m3": 1978.9e12,  # dense FP8 tensor core [ds: 3,958 TFLOPS with sparsity]
        "f32": 494.7e12,  # dense TF32 tensor core, used for f32 operands [ds: 989 TFLOPS with sparsity]
    },
    vector_flops=66.9e12,  # FP32 on CUDA cores [ds: 67 TFLOPS]
    warp_size=32,  # [guide]
    max_threads_per_unit=2048,  # 64 warps per SM [ch 5.1.5] [guide]
    max_threads_per_block=1024,  # [guide]
    max_blocks_per_unit=32,  # [ch 5.1.5] [guide]
    registers_per_unit=65536,  # [ch 5.1.5] [guide]
    max_registers_per_block=65536,  # [guide]
    max_registers_per_thread=255,  # [guide]
    register_alloc_unit=256,  # registers are allocated per warp in units of 256 [occ]
    memory_latency_s=600e-9,  # the chapter's assumed DRAM latency [ch 5.1.5]; an assumption, not a datasheet figure
    loads_in_flight_per_warp=4,  # the chapter's assumption [ch 5.1.5]
    bytes_per_load_per_thread=16,  # 128-bit loads [ch 5.1.5]
    sources={
        "ch": "the chapter, 5.1.5 (and design.md targets table)",
        "guide": "NVIDIA CUDA C++ Programming Guide, compute capability 9.0 (vendor documentation)",
        "occ": "NVIDIA CUDA Occupancy Calculator (register allocation unit 256 per warp)",
        "ds": "NVIDIA H100 Tensor Core GPU datasheet, SXM5",
        "wp": "NVIDIA H100 Tensor Core GPU Architecture whitepaper",
    },
)
