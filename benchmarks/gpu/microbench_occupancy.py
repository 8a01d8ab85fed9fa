"""How the H200's vector issue rate and DRAM read rate grow with the warps resident per SM (docs/cost.md).

Every program (4 warps) is resident at once: the grid is `k` programs per SM, k = 1..16.  `silu` runs ITERS
steps of y = y * (1 / (1 + exp(-y))) (IEEE division, as the generated code) on E independent elements per thread;
`read` streams 2 GiB, each program reading blocks of 2048 bf16 elements (16-byte loads) one after another.
    python3 benchmarks/gpu/microbench_occupancy.py > occupancy.json
"""
import json
import torch
import triton
import triton.language as tl
from triton.testing import do_bench

SMS = torch.cuda.get_device_properties(0).multi_processor_count


@triton.jit
def silu(x, ITERS: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    y = tl.load(x + offs)
    for i in range(ITERS):
        y = y * tl.div_rn(1.0, 1.0 + tl.exp(-y))
    tl.store(x + offs, y)


@triton.jit
def read(x, out, REPS: tl.constexpr, B: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([B], tl.float32)
    for r in range(REPS):
        acc += tl.load(x + (pid * REPS + r) * B + tl.arange(0, B)).to(tl.float32)
    tl.store(out + pid * B + tl.arange(0, B), acc)


R = {}
xs = torch.rand(SMS * 16 * 4096, device="cuda")
big = torch.empty(1 << 30, device="cuda", dtype=torch.bfloat16)
o = torch.empty(SMS * 16 * 2048, device="cuda")
for k in (1, 2, 4, 8, 16):
    for e in (8, 32):
        t = do_bench(lambda: silu[(SMS * k,)](xs, ITERS=64, B=128 * e, num_warps=4)) * 1e-3
        R[f"silu_{4 * k}warps_{e}elems_per_sm_clock"] = k * 128 * e * 64 / t / 1.98e9
    reps = (1 << 30) // (SMS * k * 2048)
    t = do_bench(lambda: read[(SMS * k,)](big, o, REPS=reps, B=2048, num_warps=4)) * 1e-3
    R[f"read_{4 * k}warps_tbs"] = SMS * k * reps * 2048 * 2 / t / 1e12
print(json.dumps(R, indent=1))
