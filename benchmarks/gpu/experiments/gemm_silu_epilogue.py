"""What does GEMM+SiLU's epilogue cost, and which of its operations?  A hand-edit experiment on the generated
`fast` and `fast_g8_p` (grouped, persistent) modules of examples/gemm_silu.tdsl (benchmarks/gpu/gemm_persistent.py
--generate), not a backend feature.  Each module runs as generated (`x * div_rn(1, 1 + exp(-x))`: IEEE division)
and with one edit of its epilogue line:

* `div_full`: Triton's plain `/` (div.full.f32, about 2 ulp) instead of the IEEE `div_rn`;
* `sigmoid`: `tl.sigmoid(x)`, what torch.compile's Triton code calls;
* `exp2`: `exp2(-x * log2(e))` with the plain `/`;
* `no_silu`: the rounded product stored as it is (a GEMM with this kernel's rounding step; a lower bound).

    .venv/bin/python benchmarks/gpu/gemm_persistent.py --generate       # here
    python3 benchmarks/gpu/experiments/gemm_silu_epilogue.py --out $OUT/silu.json   # H200, the folder carried

Each variant but `no_silu` is checked against silu of the rounded f32 product (within 2^-7 of its largest
magnitude) before it is timed with `do_bench` in interleaved rounds beside torch.compile and cuBLAS's product.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gemm_warp_specialize import GENERATED, compare, variants  # noqa: E402
import gemm_warp_specialize  # noqa: E402

SILU = "(v_C * tl.div_rn(1.0, (1.0 + tl.exp((-v_C)))))"
EDITS = {
    "as_generated": lambda t: t,
    "div_full": lambda t: t.replace(SILU, "(v_C * (1.0 / (1.0 + tl.exp((-v_C)))))"),
    "sigmoid": lambda t: t.replace(SILU, "(v_C * tl.sigmoid(v_C))"),
    "exp2": lambda t: t.replace(SILU, "(v_C * (1.0 / (1.0 + tl.exp2(v_C * -1.4426950408889634))))"),
    "no_silu": lambda t: t.replace(SILU, "v_C"),
}


def main() -> int:
    import torch
    import torch.nn.functional as F

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="silu.json")
    args = ap.parse_args()
    gemm_warp_specialize.EDITS = EDITS  # variants() applies the edits of its module
    m, k, n = 1024, 4096, 12288
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(k, n, device="cuda") / 64).to(torch.bfloat16)
    prod = (a.float() @ w.float()).to(torch.bfloat16).float()
    compiled = torch.compile(lambda x, y: F.silu(x @ y))
    compiled(a, w)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    rows = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        for module in ("gemm_silu_fast", "gemm_silu_fast_g8_p"):
            mods = variants(GENERATED / f"{module}.py", Path(tmpdir))
            no_silu = mods.pop("no_silu")
            row = compare(mods, lambda mod, o: mod.gemm_silu(a, w, Y=o), (m, n), prod * torch.sigmoid(prod),
                          ("compile", lambda: compiled(a, w)), args.rounds)
            bound = compare({"no_silu": no_silu}, lambda mod, o: mod.gemm_silu(a, w, Y=o), (m, n), prod,
                            ("cublas", lambda: torch.matmul(a, w, out=c)), args.rounds)
            rows[module] = {"silu": row, "bound": bound}
            print(module, {s: round(v, 1) for s, v in row["median_us"].items()}, row["errors"],
                  {s: round(v, 1) for s, v in bound["median_us"].items()}, bound["errors"], flush=True)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rounds": args.rounds}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
