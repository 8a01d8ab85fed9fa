"""Check and time the generated TileLang kernels on the H200, beside the generated Triton kernels and cuBLAS.

Needs torch + triton + tilelang on the device (the modules are generated here: build.py, build_tilelang.py).
For every workload: random inputs, outputs poisoned with NaN, the TileLang result compared with a torch
computation that rounds where the program rounds (compiler/verify/compare.py's tolerance: 2 units in the last
place of the output dtype plus one of the largest magnitude), then the median time (triton.testing.do_bench) of the
TileLang kernel (compiled on first call, not timed), of the Triton kernel of the same schedule, and of cuBLAS /
eager torch.  A workload that fails to compile or run is recorded with its error and the run goes on.

    PYTHONPATH=/tmp/site python3 benchmarks/gpu/run_tilelang.py --out $OUT/tilelang.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from compiler.verify import compare  # noqa: E402

DEV = "cuda"
BF16, F16, F32, F8 = torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn


def module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_" + path.parent.name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(fn) -> float:
    return do_bench(fn, warmup=25, rep=200) * 1e3  # microseconds


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=torch.float32, device=DEV).to(dtype)


def r(x, dtype=BF16):
    return x.to(dtype).float()


def e4m3(x):
    return x.clamp(-448, 448).to(F8).float()


# workload -> (inputs(), reference(inputs), output name, output shape, output dtype, tdsl dtype, baseline(inputs))
def _gemm_bf16():
    M, K, N = 1024, 4096, 12288
    A = torch.randn(M, K, device=DEV).to(BF16)
    W = (torch.randn(K, N, device=DEV) / 64).to(BF16)
    return (A, W), A.float() @ W.float(), ("C", (M, N), BF16, "bf16"), lambda: A @ W, 2 * M * N * K


def _gemm():
    n = 4096
    A = torch.randn(n, n, device=DEV).to(BF16)
    B = (torch.randn(n, n, device=DEV) / 64).to(BF16)
    return (A, B), A.double() @ B.double(), ("C", (n, n), F32, "f32"), lambda: A.float() @ B.float(), 2 * n ** 3


def _gemm_silu():
    M, K, N = 1024, 4096, 12288
    A = torch.randn(M, K, device=DEV).to(BF16)
    W = (torch.randn(K, N, device=DEV) / 64).to(BF16)
    C = r(A.float() @ W.float())
    return (A, W), C * torch.sigmoid(C), ("Y", (M, N), BF16, "bf16"), lambda: F.silu(A @ W), 2 * M * N * K


def _swiglu_quant():
    M, N = 1024, 12288
    G = torch.randn(M, N, device=DEV).to(BF16)
    U = torch.randn(M, N, device=DEV).to(BF16)
    T = r(G.float() * torch.sigmoid(G.float()))
    Z = r(T * U.float())
    return (G, U), e4m3(Z / 0.25), ("Q", (M, N), F8, "f8e4m3"), lambda: (F.silu(G) * U / 0.25).to(F8), None


def _rmsnorm():
    M, N = 1024, 4096
    X = torch.randn(M, N, device=DEV).to(BF16)
    g = torch.randn(N, device=DEV).to(BF16)
    rr = 1.0 / torch.sqrt((X.float() ** 2).sum(1, keepdim=True) / N + 1e-6)
    return (X, g), X.float() * rr * g.float(), ("Y", (M, N), BF16, "bf16"), lambda: F.rms_norm(X, (N,), g, 1e-6), None


def _softmax():
    M, N = 1024, 4096
    X = torch.randn(M, N, device=DEV).to(BF16)
    return (X,), torch.softmax(X.float(), 1), ("Y", (M, N), BF16, "bf16"), lambda: torch.softmax(X, 1), None


def _quant_gemm():
    M, K, N = 4096, 4096, 1536
    A = torch.randn(M, K, device=DEV).to(F16)
    W = (torch.randn(K, N, device=DEV) / 8).to(F8)
    amax = A.float().abs().amax(1, keepdim=True)
    Aq = e4m3(A.float() * 448.0 / amax)
    P = Aq @ W.float()
    return (A, W), P * amax / 448.0, ("Out", (M, N), F16, "f16"), lambda: (A.float() @ W.float()).to(F16), 2 * M * N * K


def _attention():
    L, D = 8192, 128
    Q, K, V = (torch.randn(L, D, device=DEV).to(BF16) for _ in range(3))
    ref = F.scaled_dot_product_attention(Q.float()[None], K.float()[None], V.float()[None], is_causal=True,
                                         scale=0.08838834764831845)[0]
    sdpa = lambda: F.scaled_dot_product_attention(Q[None], K[None], V[None], is_causal=True)  # noqa: E731
    return (Q, K, V), ref, ("O", (L, D), BF16, "bf16"), sdpa, None


WORKLOADS = [
    ("gemm_bf16", "t128x128x64_s3_w4", _gemm_bf16), ("gemm_bf16", "t128x256x64_s3_w8", _gemm_bf16),
    ("gemm", "gpu", _gemm),
    ("gemm_silu", "fused", _gemm_silu), ("gemm_silu", "fast", _gemm_silu),
    ("swiglu_quant", "fused", _swiglu_quant), ("swiglu_quant", "inlined", _swiglu_quant),
    ("rmsnorm", "row_per_program", _rmsnorm), ("softmax", "row_fused", _softmax),
    ("quant_gemm", "separate", _quant_gemm), ("attention", "unfused", _attention),
]


def run_one(program, sched, make) -> dict:
    row = {"workload": f"{program}__{sched}"}
    torch.manual_seed(0)
    args, want, (out_name, shape, dtype, tdtype), baseline, flops = make()
    tl_mod = module(HERE / "generated" / "tilelang" / f"{program}__{sched}.py")
    entry = getattr(tl_mod, program)
    out = poisoned(shape, dtype)
    t0 = time.time()
    entry(*args, **{out_name: out})  # compiles every kernel on first use
    torch.cuda.synchronize()
    row["compile_s"] = round(time.time() - t0, 2)
    result = compare(want.float().cpu().numpy(), out.float().cpu().numpy(), tdtype)
    row.update(ok=bool(result.ok), detail=result.summary(), nan_left=int(torch.isnan(out.float()).sum()))
    row["tilelang_us"] = bench(lambda: entry(*args, **{out_name: out}))
    triton_path = HERE / "generated" / f"{program}__{sched}.py"
    if triton_path.exists():
        tr = getattr(module(triton_path), program)
        tr_out = poisoned(shape, dtype)
        tr(*args, **{out_name: tr_out})
        row["triton_us"] = bench(lambda: tr(*args, **{out_name: tr_out}))
    row["baseline_us"] = bench(baseline)
    if flops:
        row["tilelang_tflops"] = flops / row["tilelang_us"] / 1e6
        row["baseline_tflops"] = flops / row["baseline_us"] / 1e6
    row["vs_baseline"] = row["baseline_us"] / row["tilelang_us"]
    if "triton_us" in row:
        row["vs_triton"] = row["triton_us"] / row["tilelang_us"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="tilelang_results.json")
    parser.add_argument("--only", nargs="*", help="workload names (program__schedule)")
    args = parser.parse_args()
    import tilelang

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "tilelang": tilelang.__version__,
               "rows": []}
    for program, sched, make in WORKLOADS:
        if args.only and f"{program}__{sched}" not in args.only:
            continue
        try:
            row = run_one(program, sched, make)
        except Exception as err:  # record and go on: one workload's failure must not hide the others
            row = {"workload": f"{program}__{sched}", "error": f"{type(err).__name__}: {err}"[:2000],
                   "trace": traceback.format_exc()[-3000:]}
        print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
        results["rows"].append(row)
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
