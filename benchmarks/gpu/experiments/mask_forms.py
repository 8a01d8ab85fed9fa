"""Masks Triton can vectorise: `x < b` against `x <= b - 1` (backends/triton/index.py `_STRICT`), on the H200.

The Triton printer writes a tile's edge mask as `x < b` (x the tile's contiguous lanes, b the same in every lane);
before 2026-12-04 it wrote `x <= b - 1`, which Triton's AxisInfo cannot prove constant over runs of lanes, so
every masked load and store went lane by lane.  Each case is generated both ways here; there both modules run on
the same inputs, their outputs must be bit-identical, and each is timed by the replays of a CUDA graph.

    .venv/bin/python benchmarks/gpu/experiments/mask_forms.py build          # here
    python3 benchmarks/gpu/experiments/mask_forms.py run --out $OUT/mask_forms.json   # the H200 (generated/ carried)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = HERE / "generated" / "mask_forms"

# (name, program, schedule steps, sizes): tiles that do not divide the rows, so every program's loads are masked
CASES = [
    ("swiglu_1x8192_w8", "benchmarks/programs/swiglu.tdsl",
     "compute_inline(T)\nio, jo, ii, ji = tile(Z.i, Z.j, 1, 8192)\nbind(Z.io, grid.x)\nbind(Z.jo, grid.y)\n"
     "launch(Z, warps=8)", {}),
    ("swiglu_ragged_1x1024_w4", "benchmarks/programs/swiglu.tdsl",
     "compute_inline(T)\nio, jo, ii, ji = tile(Z.i, Z.j, 1, 1024)\nbind(Z.io, grid.x)\nbind(Z.jo, grid.y)\n"
     "launch(Z, warps=4)", {"M": 1000, "N": 12000}),
    ("rmsnorm_ragged_row", "examples/rmsnorm.tdsl",
     "compute_at(r, Y.i)\ncompute_at(ss, Y.i)\nbind(Y.i, grid.x)\nlaunch(Y, warps=4)", {"M": 1000, "N": 4000}),
    ("softmax_ragged_row", "examples/softmax.tdsl",
     "compute_at(s, Y.i)\ncompute_at(e, Y.i)\ncompute_at(m, Y.i)\nbind(Y.i, grid.x)\nlaunch(Y, warps=8)",
     {"M": 1000, "N": 4000}),
]


def build() -> None:
    sys.path.insert(0, str(ROOT.parent))
    from tdsl.backends.triton import index
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.tune.measure import block_source

    OUT.mkdir(parents=True, exist_ok=True)
    strict = dict(index._STRICT)
    cases = {}
    for name, path, steps, sizes in CASES:
        prog = loads(block_source((ROOT / path).read_text(), "case", steps), path, sizes=sizes)
        model = prog.schedule("case").model
        cases[name] = {"launcher": model.name,
                       "inputs": [[t.dtype, [int(d) for d in t.shape]] for t in model.inputs()]}
        for form, rule in (("lt", strict), ("le", {})):
            index._STRICT.clear()
            index._STRICT.update(rule)
            text = generate(prog, "case", target="h200", backend="triton")
            (OUT / f"{name}_{form}.py").write_text(text)
        index._STRICT.update(strict)
        print(f"wrote {name}_lt.py, {name}_le.py")
    (OUT / "cases.json").write_text(json.dumps(cases, indent=1))


def run(out: str) -> None:
    import torch

    sys.path.insert(0, str(HERE.parent))
    from by_path import load_module, measure

    graph_us = measure().graph_us
    rows = []
    cases = json.loads((OUT / "cases.json").read_text())
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    for name, case in cases.items():
        lt, le = (getattr(load_module(OUT / f"{name}_{form}.py"), case["launcher"]) for form in ("lt", "le"))
        args = [torch.randn(*shape, device="cuda").to(dtypes[dtype]) for dtype, shape in case["inputs"]]
        same = all(torch.equal(a.float(), b.float()) or torch.equal(a.view(torch.int16), b.view(torch.int16))
                   for a, b in zip(_tuple(lt(*args)), _tuple(le(*args))))
        row = {"case": name, "identical": same, "lt_us": graph_us([lambda: lt(*args)]),
               "le_us": graph_us([lambda: le(*args)])}
        row["speedup"] = row["le_us"] / row["lt_us"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["build", "run"])
    ap.add_argument("--out", default="mask_forms.json")
    args = ap.parse_args()
    build() if args.what == "build" else run(args.out)


if __name__ == "__main__":
    main()
