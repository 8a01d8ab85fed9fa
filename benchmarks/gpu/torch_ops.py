"""tdsl kernels as torch custom ops on the GPU: inside torch.compile (no graph break) at the speed of a direct call.

A block of RMSNorm (tdsl, `param M`) -> gate/up projections (torch) -> SwiGLU (tdsl) -> down projection (torch),
bf16, hidden 4096, intermediate 12288, M tokens.  Compiled with `torch.compile(fullgraph=True)` (a graph break
would be an error) and timed against the same block in eager mode and against the two tdsl kernels called
directly (their modules' launchers); results compared with an f32 reference.

Runs on the H200 machine with the wheels of islpy, lark, jinja2, markupsafe and ml_dtypes (tdsl compiles the
kernels there; benchmarks/RESULTS.md, "Differential fuzzing", says how they are carried):

    PYTHONPATH=/tmp/pkg:/tmp/site python3 benchmarks/gpu/torch_ops.py --out $OUT/torch_ops.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from triton.testing import do_bench

import tdsl
from tdsl.compiler.driver.api import loads

HIDDEN, FFN = 4096, 12288
RMSNORM = f"""
param M
const N = {HIDDEN}
kernel rmsnorm(X: bf16[M, N], g: bf16[N]) -> (Y: bf16[M, N]) {{
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32
  r[i] = rsqrt(ss[i] / N + 1e-6)
  Y[i, j] = X[i, j] * r[i] * g[j]
}}
schedule rows {{
  compute_at(r, Y.i)
  compute_at(ss, Y.i)
  bind(Y.i, grid.x)
}}
"""
SWIGLU = f"""
param M
const F = {FFN}
kernel swiglu(G: bf16[M, F], U: bf16[M, F]) -> (Z: bf16[M, F]) {{
  Z[i, j] = silu(G[i, j]) * U[i, j]
}}
schedule tiles {{
  io, jo, ii, jj = tile(Z.i, Z.j, 1, 4096)
  bind(Z.io, grid.x)
  bind(Z.jo, grid.y)
}}
"""


class Block(torch.nn.Module):
    def __init__(self, norm, swiglu):
        super().__init__()
        self.norm, self.swiglu = norm, swiglu
        gen = torch.Generator(device="cuda").manual_seed(0)

        def weight(*shape, scale=1.0):
            w = torch.randn(*shape, device="cuda", generator=gen) * scale
            return torch.nn.Parameter(w.to(torch.bfloat16), requires_grad=False)

        self.g = weight(HIDDEN)
        self.w_gate, self.w_up = weight(HIDDEN, FFN, scale=HIDDEN ** -0.5), weight(HIDDEN, FFN, scale=HIDDEN ** -0.5)
        self.w_down = weight(FFN, HIDDEN, scale=FFN ** -0.5)

    def forward(self, x):
        h = self.norm(x, self.g)
        return self.swiglu(h @ self.w_gate, h @ self.w_up) @ self.w_down


def reference(block, x):
    xf = x.float()
    h = (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * block.g.float()).to(torch.bfloat16)
    g, u = h @ block.w_gate, h @ block.w_up
    return (torch.nn.functional.silu(g.float()) * u.float()).to(torch.bfloat16) @ block.w_down


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="torch_ops.json")
    args = ap.parse_args()
    t0 = time.time()
    norm = tdsl.compile(loads(RMSNORM, "rmsnorm.tdsl"), "rows")
    swiglu = tdsl.compile(loads(SWIGLU, "swiglu.tdsl"), "tiles")
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d %H:%M:%S"), "tdsl_compile_s": time.time() - t0, "rows": []}
    block = Block(norm, swiglu)
    t0 = time.time()
    compiled = torch.compile(block, fullgraph=True)
    for tokens in (1024, 4096, 777):  # one tdsl kernel for every M; 777 is not a multiple of anything
        x = torch.randn(tokens, HIDDEN, device="cuda").to(torch.bfloat16)
        got = compiled(x)
        torch.cuda.synchronize()
        want = reference(block, x)
        err = (got.float() - want.float()).abs().max().item()
        scale = want.float().abs().max().item()
        g, u = torch.randn(tokens, FFN, device="cuda").to(torch.bfloat16), torch.randn(tokens, FFN, device="cuda").to(torch.bfloat16)
        row = {
            "tokens": tokens, "max_abs_err": err, "max_abs_ref": scale,
            "same_as_eager": bool(torch.equal(got, block(x))),
            "compiled_block_us": do_bench(lambda: compiled(x), warmup=25, rep=200) * 1e3,
            "eager_block_us": do_bench(lambda: block(x), warmup=25, rep=200) * 1e3,
            "rmsnorm_op_us": do_bench(lambda: norm(x, block.g), warmup=25, rep=200) * 1e3,
            "rmsnorm_direct_us": do_bench(lambda: norm.module.rmsnorm(x, block.g), warmup=25, rep=200) * 1e3,
            "swiglu_op_us": do_bench(lambda: swiglu(g, u), warmup=25, rep=200) * 1e3,
            "swiglu_direct_us": do_bench(lambda: swiglu.module.swiglu(g, u), warmup=25, rep=200) * 1e3,
        }
        results["rows"].append(row)
        print(json.dumps(row), flush=True)
    results["torch_compile_s"] = time.time() - t0
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
