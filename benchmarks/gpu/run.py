"""Check and time the generated kernels on a GPU, next to references measured in the same run.

Runs on the lent H200 with only torch + triton (the modules were generated on the CPU machine by
`benchmarks/gpu/build.py`).  For every workload: fresh random inputs, outputs poisoned with NaN before
the launch, the result compared with a float32/float64 torch computation that rounds where the program
rounds, then `triton.testing.do_bench` of the kernel and of the references (cuBLAS via torch eager,
torch.compile, SDPA, and a device-to-device copy for the bandwidth ceiling).

    python3 benchmarks/gpu/run.py --out $OUT/results.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root: compiler/verify (compare.py) needs numpy only
from by_path import measure  # noqa: E402 - this folder is on sys.path when the script runs
from compiler.verify import compare  # noqa: E402

graph_us = measure().graph_us

DEV = "cuda"
BF16, F16, F32, F8 = torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn


def module(name):
    path = HERE / "generated" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(fn) -> float:
    """Median time in microseconds."""
    return do_bench(fn, warmup=25, rep=200) * 1e3


# Microseconds per call with CPU launch overhead removed: the calls (each on its own buffers, rotated so the
# working set exceeds L2) captured `repeat` times in one CUDA graph, the graph's replays timed.
graph_bench = graph_us


def _maybe(measure):
    """A reference that cannot be captured in a CUDA graph is reported as such, not fatal."""
    try:
        return measure()
    except Exception as err:  # noqa: BLE001
        return f"not measured: {type(err).__name__}: {str(err)[:200]}"


def rotated(make, n: int = 4):
    """n independent input sets (together larger than the 60 MB L2)."""
    return [make() for _ in range(n)]


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=torch.float32, device=DEV).to(dtype)


def check(name, got, want, dtype) -> dict:
    g = got.float().cpu().numpy()
    r = want.float().cpu().numpy()
    result = compare(r, g, dtype)
    return {"ok": bool(result.ok), "detail": result.summary(), "nan_left": int(torch.isnan(got.float()).sum())}


class compiled:
    """torch.compile'd reference, warmed up (compilation and autotuning) before it is timed."""

    def __init__(self, fn):
        self.fn = torch.compile(fn)
        self.warm = False

    def __call__(self, *args):
        if not self.warm:
            for _ in range(3):
                self.fn(*args)
            torch.cuda.synchronize()
            self.warm = True
        return self.fn(*args)


def r16(x, dtype=BF16):
    return x.to(dtype).float()


# ---------------------------------------------------------------- workloads


def gemm_bf16(results):
    M, K, N = 1024, 4096, 12288
    A = torch.randn(M, K, device=DEV).to(BF16)
    W = (torch.randn(K, N, device=DEV) / 64).to(BF16)
    want = (A.float() @ W.float())
    flops = 2 * M * N * K
    t_cublas = bench(lambda: A @ W)
    rows = []
    for sched in ["t128x128x64_s3_w4", "t128x128x64_s4_w4", "t128x256x64_s3_w8", "t256x128x64_s3_w8",
                  "t128x256x64_s3_w8_g8"]:
        mod = module(f"gemm_bf16__{sched}")
        out = poisoned((M, N), BF16)
        mod.gemm_bf16(A, W, C=out)
        torch.cuda.synchronize()
        row = check(sched, out, want, "bf16")
        t = bench(lambda: mod.gemm_bf16(A, W, C=out))
        row.update(schedule=sched, us=t, tflops=flops / t / 1e6, vs_cublas=t_cublas / t)
        rows.append(row)
    results["gemm_bf16_1024x4096x12288"] = {"cublas_us": t_cublas, "cublas_tflops": flops / t_cublas / 1e6, "schedules": rows}


def gemm_silu(results):
    M, K, N = 1024, 4096, 12288
    A = torch.randn(M, K, device=DEV).to(BF16)
    W = (torch.randn(K, N, device=DEV) / 64).to(BF16)
    C = r16(A.float() @ W.float())
    want = C * torch.sigmoid(C)
    eager = lambda: F.silu(A @ W)  # noqa: E731
    comp = compiled(lambda a, w: F.silu(a @ w))
    comp(A, W)
    t_eager, t_comp = bench(eager), bench(lambda: comp(A, W))
    rows = []
    for sched in ["fused", "fast"]:
        mod = module(f"gemm_silu__{sched}")
        out = poisoned((M, N), BF16)
        mod.gemm_silu(A, W, Y=out)
        torch.cuda.synchronize()
        row = check(sched, out, want, "bf16")
        t = bench(lambda: mod.gemm_silu(A, W, Y=out))
        row.update(schedule=sched, us=t, vs_eager=t_eager / t, vs_compile=t_comp / t)
        rows.append(row)
    results["gemm_silu_1024x4096x12288"] = {"eager_us": t_eager, "compile_us": t_comp, "schedules": rows}


def copy_bandwidth(results):
    x = torch.empty(1024 * 12288 * 8, dtype=BF16, device=DEV)
    y = torch.empty_like(x)
    t = bench(lambda: y.copy_(x))
    bytes_moved = 2 * x.numel() * x.element_size()
    results["copy"] = {"us": t, "tb_per_s": bytes_moved / t / 1e6}
    pairs = rotated(lambda: (torch.empty(1024 * 12288 * 3, dtype=BF16, device=DEV),
                             torch.empty(1024 * 12288 * 3, dtype=BF16, device=DEV)))
    tg = graph_bench([lambda p=p: p[1].copy_(p[0]) for p in pairs])
    results["copy_72MB_graph"] = {"us": tg, "tb_per_s": 2 * 1024 * 12288 * 3 * 2 / tg / 1e6}
    return bytes_moved / t / 1e6


def same_size_copy(nbytes: int) -> float:
    """Copy bandwidth (read + write) for a copy that moves as many bytes as the kernel: same launch overheads."""
    x = torch.empty(nbytes // 2, dtype=torch.uint8, device=DEV)  # read nbytes/2, write nbytes/2
    y = torch.empty_like(x)
    return 2 * x.numel() / bench(lambda: y.copy_(x)) / 1e6


def swiglu(results, copy_tbs):
    M, N = 1024, 12288
    G = torch.randn(M, N, device=DEV).to(BF16)
    U = torch.randn(M, N, device=DEV).to(BF16)
    want = r16(r16(G.float() * torch.sigmoid(G.float())) * U.float())
    eager = lambda: F.silu(G) * U  # noqa: E731
    comp = compiled(lambda g, u: F.silu(g) * u)
    comp(G, U)
    t_eager, t_comp = bench(eager), bench(lambda: comp(G, U))
    bytes_moved = 3 * M * N * 2
    copy_same = same_size_copy(bytes_moved)
    rows = []
    for sched in ["fused", "fused_wide", "t1x4096_w4", "t8x1024_w8", "t1x1024_w4", "t2x1024_w4"]:
        mod = module(f"swiglu__{sched}")
        out = poisoned((M, N), BF16)
        mod.swiglu(G, U, Z=out)
        torch.cuda.synchronize()
        row = check(sched, out, want, "bf16")
        t = bench(lambda: mod.swiglu(G, U, Z=out))
        tbs = bytes_moved / t / 1e6
        row.update(schedule=sched, us=t, tb_per_s=tbs, of_copy=tbs / copy_tbs, of_same_size_copy=tbs / copy_same,
                   vs_eager=t_eager / t, vs_compile=t_comp / t)
        sets = rotated(lambda: (torch.randn(M, N, device=DEV).to(BF16), torch.randn(M, N, device=DEV).to(BF16),
                                torch.empty(M, N, device=DEV, dtype=BF16)))
        tg = graph_bench([lambda s=s: mod.swiglu(s[0], s[1], Z=s[2]) for s in sets])
        row.update(graph_us=tg, graph_of_copy=bytes_moved / tg / 1e6 / copy_tbs)
        rows.append(row)
    csets = rotated(lambda: (torch.randn(M, N, device=DEV).to(BF16), torch.randn(M, N, device=DEV).to(BF16)))
    results["swiglu_compile_graph_us"] = _maybe(lambda: graph_bench([lambda s=s: comp(s[0], s[1]) for s in csets]))
    results["swiglu_1024x12288"] = {"eager_us": t_eager, "compile_us": t_comp, "bytes": bytes_moved,
                                    "same_size_copy_tb_per_s": copy_same, "schedules": rows}


def swiglu_quant(results, copy_tbs):
    M, N, scale = 1024, 12288, 0.25
    G = torch.randn(M, N, device=DEV).to(BF16)
    U = torch.randn(M, N, device=DEV).to(BF16)
    Z = r16(r16(G.float() * torch.sigmoid(G.float())) * U.float())
    want = (Z / scale).clamp(-448, 448).to(F8)

    def ref(g, u):
        z = (F.silu(g.float()).to(BF16).float() * u.float()).to(BF16).float()
        return (z / scale).clamp(-448, 448).to(F8)

    comp = compiled(ref)
    comp(G, U)
    t_eager, t_comp = bench(lambda: ref(G, U)), bench(lambda: comp(G, U))
    bytes_moved = 2 * M * N * 2 + M * N
    copy_same = same_size_copy(bytes_moved)
    rows = []
    for sched in ["fused", "inlined", "t1x4096_w4", "t8x1024_w8", "t2x2048_w4", "t16x512_w4", "t1x1024_w4"]:
        mod = module(f"swiglu_quant__{sched}")
        out = torch.full((M, N), float("nan"), device=DEV).to(F8)
        mod.swiglu_quant(G, U, Q=out)
        torch.cuda.synchronize()
        row = check(sched, out, want, "f8e4m3")
        t = bench(lambda: mod.swiglu_quant(G, U, Q=out))
        tbs = bytes_moved / t / 1e6
        row.update(schedule=sched, us=t, tb_per_s=tbs, of_copy=tbs / copy_tbs, of_same_size_copy=tbs / copy_same,
                   vs_eager=t_eager / t, vs_compile=t_comp / t)
        sets = rotated(lambda: (torch.randn(M, N, device=DEV).to(BF16), torch.randn(M, N, device=DEV).to(BF16),
                                torch.empty(M, N, device=DEV, dtype=F8)))
        tg = graph_bench([lambda s=s: mod.swiglu_quant(s[0], s[1], Q=s[2]) for s in sets])
        row.update(graph_us=tg, graph_of_copy=bytes_moved / tg / 1e6 / copy_tbs)
        rows.append(row)
    csets = rotated(lambda: (torch.randn(M, N, device=DEV).to(BF16), torch.randn(M, N, device=DEV).to(BF16)))
    results["swiglu_quant_compile_graph_us"] = _maybe(lambda: graph_bench([lambda s=s: comp(s[0], s[1]) for s in csets]))
    results["swiglu_quant_1024x12288"] = {"eager_us": t_eager, "compile_us": t_comp, "bytes": bytes_moved,
                                          "same_size_copy_tb_per_s": copy_same, "schedules": rows}


def rmsnorm(results):
    M, N, eps = 1024, 4096, 1e-6
    X = torch.randn(M, N, device=DEV).to(BF16)
    g = torch.randn(N, device=DEV).to(BF16)
    xf = X.float()
    r = torch.rsqrt((xf * xf).sum(-1, keepdim=True) / N + eps)
    want = xf * r * g.float()

    def ref(x, gg):
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * gg.float()).to(BF16)

    comp = compiled(ref)
    comp(X, g)
    t_eager, t_comp = bench(lambda: ref(X, g)), bench(lambda: comp(X, g))
    mod = module("rmsnorm__row_per_program")
    out = poisoned((M, N), BF16)
    mod.rmsnorm(X, g, Y=out)
    torch.cuda.synchronize()
    row = check("row_per_program", out, want, "bf16")
    t = bench(lambda: mod.rmsnorm(X, g, Y=out))
    row.update(schedule="row_per_program", us=t, vs_eager=t_eager / t, vs_compile=t_comp / t)
    results["rmsnorm_1024x4096"] = {"eager_us": t_eager, "compile_us": t_comp, "schedules": [row]}


def softmax(results):
    M, N = 1024, 4096
    X = torch.randn(M, N, device=DEV).to(BF16)
    want = torch.softmax(X.float(), -1)
    ref = lambda x: torch.softmax(x.float(), -1).to(BF16)  # noqa: E731
    comp = compiled(ref)
    comp(X)
    t_eager, t_comp = bench(lambda: ref(X)), bench(lambda: comp(X))
    mod = module("softmax__row_fused")
    out = poisoned((M, N), BF16)
    mod.softmax(X, Y=out)
    torch.cuda.synchronize()
    row = check("row_fused", out, want, "bf16")
    t = bench(lambda: mod.softmax(X, Y=out))
    row.update(schedule="row_fused", us=t, vs_eager=t_eager / t, vs_compile=t_comp / t)
    results["softmax_1024x4096"] = {"eager_us": t_eager, "compile_us": t_comp, "schedules": [row]}


def quant_gemm(results):
    M, K, N = 4096, 4096, 1536
    A = torch.randn(M, K, device=DEV).to(F16)
    W = (torch.randn(K, N, device=DEV) / 8).to(F8)
    amax = A.float().abs().amax(-1, keepdim=True)
    Aq = (A.float() * 448.0 / amax).clamp(-448, 448).to(F8).float()
    want = (Aq.double() @ W.double()).float() * amax / 448.0

    def ref(a, w):
        am = a.float().abs().amax(-1, keepdim=True)
        q = (a.float() * 448.0 / am).clamp(-448, 448).to(F8)
        return ((q.to(F16) @ w.to(F16)).float() * am / 448.0).to(F16)

    t_eager = bench(lambda: ref(A, W))
    mod = module("quant_gemm__separate")
    out = poisoned((M, N), F16)
    mod.quant_gemm(A, W, Out=out)
    torch.cuda.synchronize()
    row = check("separate", out, want, "f16")
    t = bench(lambda: mod.quant_gemm(A, W, Out=out))
    row.update(schedule="separate", us=t, vs_eager_f16_dequant=t_eager / t)
    results["quant_gemm_4096x4096x1536"] = {"eager_us": t_eager, "schedules": [row]}


def attention(results):
    L, D = 8192, 128
    scale = 0.08838834764831845
    Q, K, V = (torch.randn(L, D, device=DEV).to(BF16) for _ in range(3))
    S = Q.float() @ K.float().T
    mask = torch.ones(L, L, device=DEV, dtype=torch.bool).tril()
    m = S.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)
    P = torch.exp((S - m) * scale).masked_fill(~mask, 0.0)
    want = (P @ V.float()) / P.sum(-1, keepdim=True)
    q4, k4, v4 = (x.view(1, 1, L, D) for x in (Q, K, V))
    flash = lambda: F.scaled_dot_product_attention(q4, k4, v4, is_causal=True, scale=scale)  # noqa: E731
    t_flash = bench(flash)
    mod = module("attention__unfused")
    out = poisoned((L, D), BF16)
    mod.attention(Q, K, V, O=out)
    torch.cuda.synchronize()
    row = check("unfused", out, want, "bf16")
    t = bench(lambda: mod.attention(Q, K, V, O=out))
    row.update(schedule="unfused", us=t, vs_sdpa_flash=t_flash / t)
    results["attention_causal_8192x128"] = {"sdpa_flash_us": t_flash, "schedules": [row]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="results.json")
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    results = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    copy_tbs = copy_bandwidth(results)
    steps = [gemm_bf16, gemm_silu, lambda r: swiglu(r, copy_tbs), lambda r: swiglu_quant(r, copy_tbs), rmsnorm,
             softmax, quant_gemm, attention]
    names = ["gemm_bf16", "gemm_silu", "swiglu", "swiglu_quant", "rmsnorm", "softmax", "quant_gemm", "attention"]
    for name, step in zip(names, steps):
        if args.only and name not in args.only:
            continue
        t0 = time.time()
        try:
            step(results)
        except Exception as err:  # report and go on: one failure must not hide the other figures
            results[f"{name}_error"] = f"{type(err).__name__}: {err}"[:2000]
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
