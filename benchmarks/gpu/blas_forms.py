"""BLAS-style GEMM forms on the GPU: a scaled product (`alpha * A * W`) and a sum that starts from a value
(`... from beta * C_in`) against the plain product and cuBLAS (torch.matmul / torch.addmm) in the same run.

Each form is generated with the Triton backend from one program at the GEMM's best hand-written schedule
(benchmarks/programs/gemm_bf16.tdsl: 128 x 256 x 64, 3 stages, 8 warps), checked against a float64 torch
reference (bf16 tolerance, outputs NaN-poisoned first), then timed with triton.testing.do_bench (median).

    PYTHONPATH=/tmp/pkg:/tmp/site python3 benchmarks/gpu/blas_forms.py --out $OUT/blas_forms.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

M, K, N = 4096, 4096, 4096
SCHEDULE = """
schedule fast {
  io, jo, ii, jj = tile(C.i, C.j, 128, 256)
  ko, kk = split(C.k, 64)
  reorder(C, io, jo, ko, ii, jj, kk)
  cache_read(A, shared, at=C.ko)
  cache_read(W, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
  pipeline(C.ko, stages=3)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
  launch(C, warps=8)
}
"""
# name -> (inputs besides A and W, the statement's right-hand side, alpha, beta)
FORMS = {
    "plain": ("", "sum(k) A[i, k] * W[k, j] accum f32", 1.0, 0.0),
    "alpha_pow2": ("", "sum(k) 0.5 * A[i, k] * W[k, j] accum f32", 0.5, 0.0),
    "alpha_reassoc": ("", "sum(k) 1.5 * A[i, k] * W[k, j] accum f32 combine reassoc", 1.5, 0.0),
    "beta_from": (", C_in: bf16[M, N]", "sum(k) A[i, k] * W[k, j] from 1.25 * C_in[i, j] accum f32", 1.0, 1.25),
}


def source(extra: str, rhs: str) -> str:
    return (f"const M = {M}, K = {K}, N = {N}\n"
            f"kernel g(A: bf16[M, K], W: bf16[K, N]{extra}) -> (C: bf16[M, N]) {{\n  C[i, j] = {rhs}\n}}\n"
            + SCHEDULE)


def main() -> None:
    import torch
    from triton.testing import do_bench

    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate, load_module

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c_in = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    exact = a.double() @ w.double()
    flops = 2 * M * N * K
    results = {"sizes": [M, K, N], "forms": {}}
    ref_mm = do_bench(lambda: torch.matmul(a, w), warmup=25, rep=200) * 1e3
    results["cublas_matmul_us"] = ref_mm
    tmp = Path(tempfile.mkdtemp())
    for name, (extra, rhs, alpha, beta) in FORMS.items():
        text = generate(loads(source(extra, rhs), filename=f"{name}.tdsl"), "fast")
        module = load_module(text, tmp / f"{name}.py")
        inputs = (a, w, c_in) if beta else (a, w)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        module.g(*inputs, C=out)
        want = alpha * exact + (beta * c_in.double() if beta else 0.0)
        err = (out.double() - want).abs()
        tol = 2 ** -7 * want.abs() + 2 ** -7 * want.abs().max()
        ok = bool(torch.isfinite(out).all().item() and (err <= tol).all().item())
        us = do_bench(lambda: module.g(*inputs, C=out), warmup=25, rep=200) * 1e3
        if beta:
            ref = do_bench(lambda: torch.addmm(c_in, a, w, beta=beta, alpha=alpha), warmup=25, rep=200) * 1e3
            ref_name = "torch.addmm (cuBLAS, beta*C + alpha*A@W)"
        elif alpha != 1.0:
            ref = do_bench(lambda: torch.mul(torch.matmul(a, w), alpha), warmup=25, rep=200) * 1e3
            ref_name = "torch.matmul then * alpha"
        else:
            ref, ref_name = ref_mm, "torch.matmul (cuBLAS)"
        results["forms"][name] = {
            "rhs": rhs, "ok": ok, "max_err": float(err.max().item()), "us": us, "tflops": flops / us / 1e6,
            "reference": ref_name, "reference_us": ref, "vs_reference": ref / us, "vs_cublas_matmul": ref_mm / us,
            "tl_dot": "tl.dot(" in text,
        }
        print(f"{name:14s} ok={ok} {us:8.1f} us {flops / us / 1e6:6.0f} TFLOP/s  {ref_name}: {ref:8.1f} us "
              f"-> {ref / us:.2f}x; vs matmul {ref_mm / us:.2f}x; tl.dot={'tl.dot(' in text}")
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
