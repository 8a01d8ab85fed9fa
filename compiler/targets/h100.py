"""NVIDIA H100 SXM5 (Hopper, compute capability 9.0).

Sources: [ch] the chapter, 5.1.5 (also /work/shared/design.md's targets table);
[guide] NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", column 9.0,
and "Shared Memory" for compute capability 9.0 (vendor documentation, cited from the published guide);
[occ] NVIDIA CUDA Occupancy Calculator / Nsight Compute occupancy section (register allocation unit);
[ds] NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (dense figures are half of the "with sparsity" ones);
[wp] NVIDIA H100 Tensor Core GPU Architecture whitepaper;
[mb] our microbenchmarks on the lent H200 (same GH100 SM, L2 and clocks as the H100 SXM5), 2026-12-01:
benchmarks/gpu/microbench.py and microbench_occupancy.py, results in benchmarks/gpu/results/2026-12-01-microbench-*.json
(Triton 3.6, triton.testing.do_bench medians).  Not measured on an H100: the per-SM rates carry over, the DRAM
bandwidth does not (the H100's own measured figure is unknown, so its estimate uses the datasheet's).
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
    l2_latency_s=148e-9,  # one thread's chase of dependent loads hitting L2 [mb latency]
    loads_in_flight_per_warp=4,  # the chapter's assumption [ch 5.1.5]
    bytes_per_load_per_thread=16,  # 128-bit loads [ch 5.1.5]
    # --- the ranking estimate's figures (docs/cost.md "The estimate"), all [mb] unless marked
    l2_bandwidth=9.85e12,  # tile loads hitting L2: 9.85 TB/s over an 8 MiB footprint, 9.26 over 32 MiB [mb run2]
    # launch: an empty Triton kernel in a CUDA graph of 20 calls, as tdsl tune times (3.3-3.9 us under do_bench,
    # which the host paces); program: 49,152 empty programs of 1, 4 or 8 warps take 30.5-30.7 us in a graph,
    # 8,448 take 5.9-6.1, and a copy in 256-element programs runs at that rate
    launch_overhead_s=0.9e-6,  # 0.83-1.16 us at 1-132 programs of 1-8 warps [mb launch]
    program_launch_s=80e-9,  # per program on each of 132 SMs [mb launch]
    matrix_flops_sustained={
        "bf16": 717e12,  # Triton tl.dot, 128x256x64 tile, 8 warps, L2-resident operands [mb run1]
        "f8e4m3": 1468e12,  # K-major FP8 operands (wgmma), 128x128x128 tile, 8 warps, unpromoted [mb promotion]
        # FP8 with a B operand that is not K-major: Triton 3.6 takes mma.sync after widening to f16 (HMMA in the
        # SASS of quant_gemm_2): 355 TFLOP/s at 128x128x64 (2 programs per SM), where bf16 gives 670 [mb run2];
        # divided by that tile's efficiency below (0.94) to be a large-tile figure
        "f8e4m3_b_not_k_major": 378e12,
    },
    # tensor rate by the product tile's m*n/(m+n) (operand bytes per FLOP fall as it grows): 64x64x32 with 6
    # programs per SM 371 TFLOP/s, 128x128x64 with 2 per SM 670-681, 128x256x64 717 [mb]; linear between points
    tensor_tile_efficiency={
        "bf16": ((32.0, 0.52), (64.0, 0.94), (85.33, 1.0)),  # [mb], as above
        # E4M3, K steps of 128, the best of 1-4 programs an SM: 64x64 947 TFLOP/s, 64x128 1425 and 128x64 1143 (4
        # warps), 128x128 1496 [mb tiles]
        "f8e4m3": ((32.0, 0.65), (42.67, 0.87), (64.0, 1.0)),
    },
    # the operand rows a K step stages, 128x128 tiles on 8 warps, 2 programs an SM: bf16 rows of 128 / 64 / 32
    # bytes 655 / 561 / 299 TFLOP/s, E4M3 1487 / 1156 / 594
    tensor_row_efficiency=((32, 0.42), (64, 0.8), (128, 1.0)),  # [mb tiles], as above
    tensor_operands_in_shared=True,  # wgmma; Triton's shared memory for flash attention's operands (cost/staging.py)
    one_warpgroup_efficiency=0.87,  # 128x128x64 bf16, 4 warps: 593 TFLOP/s with 1 program per SM, 681 with 2 [mb run1]
    # a promoted FP8 product's K step: 128x128x128 on 8 warps (64 outputs a thread) 377 ns unpromoted, 540 / 633 /
    # 768 promoted once / twice / 4 times; 128x128x64 on 8 warps and 64x128x128 on 4 add 165-171 promoted once
    # [mb promotion]: least squares of wait + n x add
    fp8_promotion_wait_s=90e-9,  # [mb promotion], as above
    fp8_promotion_add_s=75e-9,  # [mb promotion], as above
    vector_instr_rate=27.1e12,  # dependent FMA chains, 64 warps per SM: 103.8 per SM per clock at 1.98 GHz [mb]
    vector_op_cost={
        "div": 14.5,  # IEEE division (tl.div_rn): 7.16 per SM per clock against 103.8 FMAs [mb]
        "exp": 7.0,  # tl.exp (ex2.approx on the 16-lane MUFU pipe + a multiply): 14.74 per SM per clock [mb]
        "exp2": 6.0,  # tl.exp2: the ex2.approx of exp without its multiply; not measured
        "log": 7.0,  # assumed as exp (lg2.approx on the MUFU pipe + a multiply); not measured
        "sqrt": 14.5,  # tl.sqrt_rn, assumed as div (an approximate root, Newton steps and a fix-up); not measured
        "tanh": 21.5,  # libdevice tanh, assumed as exp + div; not measured
        "fast_inverse": 7.0,  # div.full.f32 / rcp.approx on the MUFU pipe (+ a multiply), assumed as exp; not measured
        "round_bf16": 2.0,  # f32 -> bf16 -> f32: F2FP and a shift in the generated kernels' SASS
        "round_f16": 2.0,  # as bf16
        "round_f8e4m3": 6.0,  # NaN test, clamp to +-448 (2), convert and widen: the SASS of swiglu_quant
    },
    # vector issue rate against resident warps: SiLU steps on 32 elements per thread with 1..16 programs of 4
    # warps resident per SM, as a fraction of the rate at 64 warps (latency hiding) [mb occupancy]
    issue_by_warps=((4, 0.39), (8, 0.67), (16, 0.88), (32, 0.95), (64, 1.0)),  # [mb occupancy], as above
    # Triton's FMA product (f32 or mixed operands) keeps each thread's operand rows and columns of the whole k
    # tile in registers: 64x64x16 (k x outputs per thread = 16 x 32 = 512) runs at 0.49 of the FMA rate,
    # 64x128x16 (1024) at 0.27, 64x64x64 (2048) at 0.13, 64x128x64 (4096) at 0.047 [mb]: time per FMA grows
    # in proportion to k x outputs per thread past 512 (spills to local memory)
    ieee_dot_efficiency=0.49,  # 26.7 TFLOP/s of 54.2 (2 x the FMA rate above) [mb], as above
    ieee_dot_register_words=512,  # k x outputs per thread of the fastest measured tile [mb], as above
    sources={
        "ch": "the chapter, 5.1.5 (and design.md targets table)",
        "guide": "NVIDIA CUDA C++ Programming Guide, compute capability 9.0 (vendor documentation)",
        "occ": "NVIDIA CUDA Occupancy Calculator (register allocation unit 256 per warp)",
        "ds": "NVIDIA H100 Tensor Core GPU datasheet, SXM5",
        "wp": "NVIDIA H100 Tensor Core GPU Architecture whitepaper",
        "mb": "benchmarks/gpu/microbench*.py on the lent H200 (same GH100 SM), 2026-12-01; "
              "benchmarks/gpu/results/2026-12-01-microbench-*.json",
        "mb promotion": "benchmarks/gpu/microbench_promotion.py on the lent H200, 2026-12-04; "
                        "benchmarks/gpu/results/2026-12-04-microbench-promotion.json",
        "mb tiles": "benchmarks/gpu/microbench_promotion.py tiles on the lent H200, 2026-12-04; "
                    "benchmarks/gpu/results/2026-12-04-microbench-tiles.json",
        "mb latency": "benchmarks/gpu/microbench_latency.py on the lent H200, 2026-12-04; "
                      "benchmarks/gpu/results/2026-12-04-microbench-latency.json",
        "mb launch": "benchmarks/gpu/microbench_launch.py on the lent H200, 2026-12-04; "
                     "benchmarks/gpu/results/2026-12-04-microbench-launch.json",
    },
)
