"""What a change to the generated flash kernels costs on the GPU: first the -inf guard of the online softmax (26th
session: a running maximum of -inf is read as 0 by its exponentials, `tl.where` per row and key block in the Triton
kernels; --old a `git archive 3045414` tree), then the IEEE maximum of two zeros (28th session: +0.0 above -0.0 in
every max and row maximum; --old a tree before it).

Builds the `flash` schedules of examples/mha.tdsl and examples/mha_causal.tdsl with this checkout (new) and with
another checkout given by --old (linked as /tmp/old_pkg/tdsl), then times the two modules alternately on the same
inputs next to SDPA, after checking both against SDPA's result.

    .venv/bin/python benchmarks/gpu/guard_cost.py build --old /tmp/old_pkg     # here: benchmarks/gpu/generated/guard_*
    python3 benchmarks/gpu/guard_cost.py run --out $OUT/guard.json             # on the GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from by_path import load_module  # this folder is on sys.path when the script runs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "generated"  # ignored by git
SHAPES = [(8, 32, 4096), (2, 32, 16384)]  # (B, H, L), d = 128, bf16, as benchmarks/gpu/attention_mha.py
SCALE = 0.08838834764831845
EXAMPLES = {"mha": False, "mha_causal": True}  # example -> causal

GENERATE = """
import sys
from tdsl.compiler.driver.api import load
from tdsl.compiler.driver.generate import generate
path, b, h, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
open(target, "w").write(generate(load(path, sizes={"B": b, "H": h}), "flash", target="nvidia", backend="triton"))
"""


def build(old: str) -> None:
    """One module per (example, B, H, checkout), each generated in a process of its own checkout."""
    OUT.mkdir(exist_ok=True)
    for label, pythonpath in (("new", "/tmp/tdsl_guard_new_pkg"), ("old", old)):
        if label == "new":  # this checkout, importable as `tdsl`
            link = Path(pythonpath) / "tdsl"
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(ROOT)
        for example in EXAMPLES:
            for b, h in sorted({(b, h) for b, h, _ in SHAPES}):
                target = OUT / f"guard_{label}_{example}_b{b}h{h}.py"
                env = dict(os.environ, PYTHONPATH=pythonpath)
                subprocess.run([sys.executable, "-c", GENERATE, str(ROOT / "examples" / f"{example}.tdsl"),
                                str(b), str(h), str(target)], check=True, env=env)
                print(f"wrote {target.relative_to(ROOT)}")


def run(out_path: str, rounds: int) -> None:
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    def bench(fn) -> float:
        return do_bench(fn, warmup=25, rep=200) * 1e3

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": []}
    for b, h, length in SHAPES:
        for example, causal in EXAMPLES.items():
            torch.manual_seed(0)
            q, k, v = (torch.randn(b, h, length, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
            want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE).float()
            calls, row = {}, {"example": example, "B": b, "H": h, "L": length}
            for label in ("new", "old"):
                launch = getattr(load_module(OUT / f"guard_{label}_{example}_b{b}h{h}.py"), example)
                out = torch.full((b, h, length, 128), float("nan"), device="cuda").to(torch.bfloat16)
                launch(q, k, v, O=out)
                torch.cuda.synchronize()
                row[f"{label}_max_abs_err_vs_sdpa"] = float((out.float() - want).abs().max())
                calls[label] = (lambda launch=launch, out=out: launch(q, k, v, O=out))
            calls["sdpa"] = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE)
            times = {name: [] for name in calls}
            for _ in range(rounds):  # alternated, so that clock and thermal drift fall on both
                for name, call in calls.items():
                    times[name].append(bench(call))
            for name, ts in times.items():
                row[f"{name}_us"] = sorted(ts)[len(ts) // 2]
                row[f"{name}_rounds_us"] = [round(t, 2) for t in ts]
            row["new_over_old"] = row["new_us"] / row["old_us"]
            results["rows"].append(row)
            print(json.dumps(row), flush=True)
            Path(out_path).write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "run"])
    ap.add_argument("--old", help="build: a folder holding the other checkout as `tdsl`")
    ap.add_argument("--out", default="guard.json")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.step == "build":
        build(args.old)
    else:
        run(args.out, args.rounds)


if __name__ == "__main__":
    main()
