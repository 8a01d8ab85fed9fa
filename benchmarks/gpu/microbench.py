"""Microbenchmarks of the H200 figures the cost model reads (compiler/targets/h200.py, docs/cost.md).

Needs only torch and triton; the script is small enough to be sent inline to the lent GPU machine:
    python3 benchmarks/gpu/microbench.py > microbench.json
Each figure is a median of triton.testing.do_bench (L2 flushed before every call), as in benchmarks/gpu/run.py.
"""
import json
import torch
import triton
import triton.language as tl
from triton.testing import do_bench

D = "cuda"
SMS = torch.cuda.get_device_properties(0).multi_processor_count
R = {"device": torch.cuda.get_device_name(), "triton": triton.__version__, "sms": SMS,
     "l2_bytes": torch.cuda.get_device_properties(0).L2_cache_size}


def us(f):
    return do_bench(f, warmup=25, rep=200) * 1e3


@triton.jit
def nop(x):
    pass


@triton.jit
def read(x, out, mask_n, REPS: tl.constexpr, B: tl.constexpr):
    """Each program reads REPS contiguous blocks of B bf16 elements (16-byte loads); block starts wrap at
    mask_n + 1 (a power of two), so the bytes read come from a footprint of that many elements."""
    pid = tl.program_id(0)
    acc = tl.zeros([B], tl.float32)
    for r in range(REPS):
        start = tl.multiple_of(((pid * REPS + r) * B) & mask_n, B)
        acc += tl.load(x + start + tl.arange(0, B)).to(tl.float32)
    tl.store(out + pid * B + tl.arange(0, B), acc)


@triton.jit
def dot(a, b, out, ITERS: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, KIND: tl.constexpr):
    """A program multiplies ITERS pairs of tiles (L2-resident) into one accumulator, as a K loop does.
    KIND 0: tensor cores; 1: f32 x widened bf16 with input_precision="ieee" (FMA); 2: FP8 with FP32 accumulation."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    acc = tl.zeros([M, N], tl.float32)
    for i in range(ITERS):
        p = tl.load(a + (i % 8) * M * K + rm[:, None] * K + rk[None, :])
        v = tl.load(b + (i % 8) * K * N + rk[:, None] * N + rn[None, :])
        if KIND == 1:
            acc = tl.dot(p, v.to(tl.float32), acc, input_precision="ieee")
        elif KIND == 2:
            acc = tl.dot(p, v, acc, max_num_imprecise_acc=0)
        else:
            acc = tl.dot(p, v, acc)
    tl.store(out + tl.program_id(0) * M * N + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def chain(x, out, OP: tl.constexpr, ITERS: tl.constexpr, B: tl.constexpr):
    """ITERS dependent operations per element on B elements per program (4 independent chains per thread)."""
    offs = tl.program_id(0) * B + tl.arange(0, B)
    y = tl.load(x + offs)
    for i in range(ITERS):
        if OP == 0:
            y = y * 0.999 + 0.5
        elif OP == 1:
            y = tl.div_rn(1.0, 1.0 + y)
        else:
            y = tl.exp(-y)
    tl.store(out + offs, y)


x = torch.zeros(1, device=D)
R["launch_us"] = us(lambda: nop[(1,)](x))
R["launch_1056_programs_us"] = us(lambda: nop[(SMS * 8,)](x))
big = torch.randn(1 << 30, device=D).to(torch.bfloat16)  # 2 GiB
o = torch.empty(SMS * 8 * 2048, device=D)
for name, n in (("l2_read_8MiB", 1 << 22), ("l2_read_32MiB", 1 << 24), ("dram_read", 1 << 30)):
    t = us(lambda: read[(SMS * 8,)](big, o, n - 1, REPS=256, B=2048))
    R[name + "_tbs"] = SMS * 8 * 256 * 2048 * 2 / t / 1e6
y = torch.empty_like(big[: 1 << 27])
R["copy_256MiB_tbs"] = 2 * (1 << 28) / us(lambda: y.copy_(big[: 1 << 27])) / 1e6
a, b = torch.randn(8192, 8192, device=D).to(torch.bfloat16), torch.randn(8192, 8192, device=D).to(torch.bfloat16)
R["bf16_matmul_8192_tflops"] = 2 * 8192 ** 3 / us(lambda: a @ b) / 1e6
F8 = torch.float8_e4m3fn
for m, n, k, w, kind, g in ((64, 128, 64, 4, 1, 1), (64, 64, 16, 4, 1, 1), (64, 128, 16, 4, 1, 1),
                            (64, 64, 64, 4, 1, 1), (128, 128, 64, 4, 2, 2),
                            (128, 128, 64, 4, 0, 2), (64, 64, 32, 4, 0, 6)):
    dt = (torch.bfloat16, torch.float32, F8)[kind]
    pa = torch.randn(8 * m * k, device=D).to(dt)
    vb = torch.randn(8 * k * n, device=D).to(torch.bfloat16 if kind == 1 else dt)
    oo = torch.empty(g * SMS * m * n, device=D)
    t = us(lambda: dot[(g * SMS,)](pa, vb, oo, ITERS=64, M=m, N=n, K=k, KIND=kind, num_warps=w))
    R[f"dot_{m}x{n}x{k}_w{w}_{('bf16', 'ieee', 'f8')[kind]}_{g}_per_sm_tflops"] = g * SMS * 64 * 2 * m * n * k / t / 1e6
xs = torch.rand(SMS * 64 * 512, device=D)
for op, name in ((0, "fma"), (1, "div_rn"), (2, "exp")):
    t = us(lambda: chain[(SMS * 64,)](xs, xs, OP=op, ITERS=256, B=512, num_warps=4))
    R[f"{name}_per_sm_per_clock_at_1980MHz"] = xs.numel() * 256 / (t * 1e-6) / SMS / 1.98e9
print(json.dumps(R, indent=1))
