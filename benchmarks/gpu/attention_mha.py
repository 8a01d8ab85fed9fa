"""Batched multi-head attention (examples/mha.tdsl, examples/mha_causal.tdsl) on the H200, next to SDPA.

The examples are the unfused mathematical form (scores, row max, exponentials, row sum, P·V, division as
six kernels, S and P stored in f32): this is the baseline that issue 12's fused (online-softmax) kernel is
measured against, at the issue's shapes.  B and H are `const` (one module per shape), L is a `param`.

    .venv/bin/python benchmarks/gpu/attention_mha.py build              # here: writes generated/mha*__b*h*.py
    python3 benchmarks/gpu/attention_mha.py run --out $OUT/mha.json      # on the GPU machine
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHAPES = [(1, 1, 8192), (8, 32, 4096), (2, 32, 16384)]  # (B, H, L), d = 128, bf16 (issue 12)
SCALE = 0.08838834764831845  # 1 / sqrt(128), as in the examples


def module_name(example: str, b: int, h: int) -> str:
    return f"{example}__b{b}h{h}"


def build() -> None:
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate

    out = HERE / "generated"
    for example in ("mha", "mha_causal"):
        for b, h in sorted({(b, h) for b, h, _ in SHAPES}):
            prog = load(ROOT / "examples" / f"{example}.tdsl", sizes={"B": b, "H": h})
            path = out / f"{module_name(example, b, h)}.py"
            path.write_text(generate(prog, "unfused", target="nvidia", backend="triton"))
            print(f"wrote {path.relative_to(ROOT)}")


def reference(q, k, v, causal: bool):
    """O in float64 (on the GPU), rounding where the program rounds: S, P, l and U are f32 in the program, so
    an f64 reference differs from it by less than the bf16 rounding of O."""
    import torch

    s = q.double() @ k.double().transpose(-1, -2)
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.exp((s - s.amax(-1, keepdim=True)) * SCALE)
    return (p @ v.double()) / p.sum(-1, keepdim=True)


def run(out_path: str) -> None:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(HERE))
    from run import bench, check, module, poisoned  # noqa: E402  (benchmarks/gpu/run.py: one way to check and time)

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": []}
    for b, h, length in SHAPES:
        for example, causal in (("mha", False), ("mha_causal", True)):
            torch.manual_seed(0)
            q, k, v = (torch.randn(b, h, length, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
            flops = 4 * b * h * length * length * 128 * (0.5 if causal else 1.0)
            t_sdpa = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE))
            row = {"example": example, "B": b, "H": h, "L": length, "sdpa_flash_us": t_sdpa,
                   "sdpa_tflops": flops / t_sdpa / 1e6}
            mod = module(module_name(example, b, h))
            launch = getattr(mod, example)
            out = poisoned((b, h, length, 128), torch.bfloat16)
            try:
                launch(q, k, v, O=out)
            except ValueError as err:  # the launcher's 32-bit index check
                row["refused"] = str(err)
                results["rows"].append(row)
                print(json.dumps(row), flush=True)
                continue
            torch.cuda.synchronize()
            if b * h * length * length <= 2**27:  # the f64 reference holds S and P: small shapes only
                row.update(check(example, out, reference(q, k, v, causal), "bf16"))
            t = bench(lambda: launch(q, k, v, O=out))
            row.update(us=t, tflops=flops / t / 1e6, vs_sdpa=t_sdpa / t)
            results["rows"].append(row)
            print(json.dumps(row), flush=True)
            del out
            torch.cuda.empty_cache()
    Path(out_path).write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "run"])
    ap.add_argument("--out", default="mha.json")
    args = ap.parse_args()
    build() if args.step == "build" else run(args.out)


if __name__ == "__main__":
    main()
