"""Batched multi-head attention (examples/mha.tdsl, examples/mha_causal.tdsl) on the H200, next to SDPA.

Two schedules of the same mathematical program: `unfused` (six kernels, S and P in global memory) and `flash`
(the online softmax: one kernel, S, P and the running statistics in registers), the latter also with other
block sizes, warps and pipeline depths (`VARIANTS`, the file's flash schedule with its numbers replaced).  B and H
are `const` (one module per shape), L is a `param`.

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


# flash schedule variants: name -> (query block, key block, warps, pipeline stages or None)
VARIANTS = {
    "flash": None,  # the example's own schedule
    "flash_m128n64_w4": (128, 64, 4, None),
    "flash_m128n64_w8": (128, 64, 8, None),
    "flash_m64n64_w4": (64, 64, 4, None),
    "flash_m128n128_w8_s2": (128, 128, 8, 2),
    "flash_m128n64_w4_s3": (128, 64, 4, 3),
    "flash_m128n64_w8_s3": (128, 64, 8, 3),
    "flash_m128n64_w4_s2": (128, 64, 4, 2),
    "flash_m128n128_w8_s3": (128, 128, 8, 3),
}


def module_name(example: str, b: int, h: int, schedule: str = "unfused") -> str:
    return f"{example}__b{b}h{h}" + ("" if schedule == "unfused" else f"__{schedule}")


def variant_source(text: str, name: str, numbers) -> str:
    """A schedule block `name`: the flash schedule of `text` with other block sizes, warps and pipelining."""
    import re

    block = re.search(r"schedule flash \{\n(.*?)\n\}", text, re.S).group(1)
    m, n, warps, stages = numbers
    block = block.replace("split(l.i, 128)", f"split(l.i, {m})").replace("split(l.j, 128)", f"split(l.j, {n})")
    block = block.replace("launch(l, warps=8)", f"launch(l, warps={warps})")
    if stages:
        block += f"\n  pipeline(l.ko, stages={stages})"
    return f"\nschedule {name} {{\n{block}\n}}\n"


def build() -> None:
    import tempfile

    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate
    from tdsl.frontend.diagnostics import TdslError

    out = HERE / "generated"
    out.mkdir(exist_ok=True)
    for example in ("mha", "mha_causal"):
        source = (ROOT / "examples" / f"{example}.tdsl").read_text()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{example}.tdsl"
            path.write_text(source + "".join(variant_source(source, v, numbers)
                                             for v, numbers in VARIANTS.items() if numbers))
            for b, h in sorted({(b, h) for b, h, _ in SHAPES}):
                prog = load(path, sizes={"B": b, "H": h})
                for schedule in ["unfused", *VARIANTS]:
                    target = out / f"{module_name(example, b, h, schedule)}.py"
                    try:
                        target.write_text(generate(prog, schedule, target="nvidia", backend="triton"))
                    except TdslError as err:
                        print(f"{example} {schedule}: refused: {str(err).splitlines()[0]}")
                        continue
                    print(f"wrote {target.relative_to(ROOT)}")


def reference(q, k, v, causal: bool):
    """O in float64 (on the GPU), for the heads given (S and P of one head at a time)."""
    import torch

    s = q.double() @ k.double().transpose(-1, -2)
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.exp((s - s.amax(-1, keepdim=True)) * SCALE)
    return (p @ v.double()) / p.sum(-1, keepdim=True)


def checked_heads(b: int, h: int) -> list:
    """The (batch, head) pairs compared with the f64 reference: all of a small shape, four of a large one."""
    pairs = [(x, y) for x in range(b) for y in range(h)]
    return pairs if len(pairs) <= 4 else [pairs[0], pairs[1], pairs[len(pairs) // 2], pairs[-1]]


def check_heads(example, out, q, k, v, causal, check) -> dict:
    """The output against the f64 reference on `checked_heads` (the tolerance of compiler/verify/compare.py):
    the first head that fails, or the first head's figures when none does."""
    found = []
    for x, y in checked_heads(q.shape[0], q.shape[1]):
        sl = (slice(x, x + 1), slice(y, y + 1))
        found.append(check(example, out[sl], reference(q[sl], k[sl], v[sl], causal), "bf16"))
    bad = [r for r in found if not r["ok"] or r["nan_left"]]
    return {**(bad[0] if bad else found[0]), "heads_checked": len(found)}


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
            for schedule in ["unfused", *VARIANTS]:
                name = module_name(example, b, h, schedule)
                if not (HERE / "generated" / f"{name}.py").exists():
                    continue  # refused when built
                row = {"example": example, "schedule": schedule, "B": b, "H": h, "L": length,
                       "sdpa_flash_us": t_sdpa, "sdpa_tflops": flops / t_sdpa / 1e6}
                launch = getattr(module(name), example)
                out = poisoned((b, h, length, 128), torch.bfloat16)
                try:
                    launch(q, k, v, O=out)
                except ValueError as err:  # the launcher's 32-bit index check
                    row["refused"] = str(err)
                    results["rows"].append(row)
                    print(json.dumps(row), flush=True)
                    continue
                torch.cuda.synchronize()
                row.update(check_heads(example, out, q, k, v, causal, check))
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
