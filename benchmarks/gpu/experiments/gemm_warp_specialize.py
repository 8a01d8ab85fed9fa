"""Would Triton's automatic warp specialisation close the GEMM's and GEMM+SiLU's last gaps?  A hand-edit
experiment on the generated persistent modules (benchmarks/gpu/gemm_persistent.py --generate), not a backend
feature: each module is run as generated and with `warp_specialize=True` added to its persistent tile loop
(`ws_tiles`: a producer warp loads the next tiles' operands while the consumers compute and store, so the
epilogue overlaps the next tile's products) or to its K loop (`ws_k`).

    .venv/bin/python benchmarks/gpu/gemm_persistent.py --generate       # here
    python3 benchmarks/gpu/experiments/gemm_warp_specialize.py --out $OUT/ws.json   # on the H200, the folder carried

Every variant's output is NaN-poisoned and checked against an f32 product (GEMM) or silu of the rounded product
(GEMM+SiLU) before it is timed with `triton.testing.do_bench` (median) in interleaved rounds beside cuBLAS /
torch.compile; a variant Triton refuses is reported with its error.
"""

import argparse
import importlib.util
import json
import re
import statistics
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERATED = HERE.parent / "generated" / "gemm_persistent"
SHAPES = [(1024, 12288, 4096), (4096, 4096, 4096), (8192, 8192, 1024)]  # M, N, K
EDITS = {
    "as_generated": lambda t: t,
    "ws_tiles": lambda t: t.replace("flatten=True)", "flatten=True, warp_specialize=True)"),
    "ws_k": lambda t: re.sub(r"(tl\.range\(0, [^()]*num_stages=\d+)\)", r"\1, warp_specialize=True)", t),
}


def variants(path: Path, tmp: Path) -> dict:
    """name -> module (or the error text) of each edit of one generated module."""
    text = path.read_text()
    out = {}
    for name, edit in EDITS.items():
        edited = edit(text)
        if name != "as_generated" and edited == text:
            continue
        target = tmp / f"{path.stem}_{name}.py"
        target.write_text(edited)
        spec = importlib.util.spec_from_file_location(target.stem, target)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            out[name] = module
        except Exception as err:  # noqa: BLE001 - an experiment records what fails
            out[name] = f"{type(err).__name__}: {err}"[:300]
    return out


def timed(call, check) -> str:
    """'' when the call is correct (then timed later), else its error."""
    try:
        call()
        return check()
    except Exception as err:  # noqa: BLE001
        traceback.print_exc(limit=1)
        return f"{type(err).__name__}: {err}"[:300]


def run(rounds: int, out: str) -> None:
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for m, n, k in SHAPES:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            want = a.float() @ w.float()
            mods = variants(GENERATED / f"gemm_t128x256x64_s3_w8_g8_p_{m}x{n}x{k}.py", tmp)
            row = {"shape": [m, n, k], "errors": {}, "us": {"cublas": []}}
            good = {}
            for name, mod in mods.items():
                if isinstance(mod, str):
                    row["errors"][name] = mod
                    continue
                c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)

                def check(c=c):
                    err = ((c.float() - want).abs().max() / want.abs().max()).item()
                    return "" if err < 2 ** -7 else f"relative error {err}"

                problem = timed(lambda mod=mod, c=c: mod.gemm_bf16(a, w, C=c), check)
                if problem:
                    row["errors"][name] = problem
                else:
                    good[name] = mod
                    row["us"][name] = []
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for _ in range(rounds):
                row["us"]["cublas"].append(do_bench(lambda: torch.matmul(a, w, out=c)) * 1e3)
                for name, mod in good.items():
                    row["us"][name].append(do_bench(lambda mod=mod: mod.gemm_bf16(a, w, C=c)) * 1e3)
            row["median_us"] = {s: statistics.median(v) for s, v in row["us"].items()}
            row["vs_cublas"] = {s: row["median_us"]["cublas"] / t for s, t in row["median_us"].items()}
            rows.append(row)
            print(f"{m}x{n}x{k}: " + ", ".join(f"{s} {row['median_us'][s]:.1f} us ({row['vs_cublas'][s]:.3f}x)"
                                               for s in row["median_us"]) + f"; errors {row['errors']}", flush=True)

        m, k, n = 1024, 4096, 12288
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        w = (torch.randn(k, n, device="cuda") / 64).to(torch.bfloat16)
        prod = (a.float() @ w.float()).to(torch.bfloat16).float()
        want = prod * torch.sigmoid(prod)
        compiled = torch.compile(lambda x, y: F.silu(x @ y))
        compiled(a, w)
        mods = variants(GENERATED / "gemm_silu_fast_g8_p.py", tmp)
        silu = {"errors": {}, "us": {"compile": []}}
        good = {}
        for name, mod in mods.items():
            if isinstance(mod, str):
                silu["errors"][name] = mod
                continue
            y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)

            def check(y=y):
                err = ((y.float() - want).abs().max() / want.abs().max()).item()
                return "" if err < 2 ** -7 else f"relative error {err}"

            problem = timed(lambda mod=mod, y=y: mod.gemm_silu(a, w, Y=y), check)
            if problem:
                silu["errors"][name] = problem
            else:
                good[name] = mod
                silu["us"][name] = []
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(rounds):
            silu["us"]["compile"].append(do_bench(lambda: compiled(a, w)) * 1e3)
            for name, mod in good.items():
                silu["us"][name].append(do_bench(lambda mod=mod: mod.gemm_silu(a, w, Y=y)) * 1e3)
        silu["median_us"] = {s: statistics.median(v) for s, v in silu["us"].items()}
        silu["vs_compile"] = {s: silu["median_us"]["compile"] / t for s, t in silu["median_us"].items()}
        print("gemm_silu: " + ", ".join(f"{s} {silu['median_us'][s]:.1f} us ({silu['vs_compile'][s]:.3f}x)"
                                        for s in silu["median_us"]) + f"; errors {silu['errors']}", flush=True)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rounds": rounds}
    Path(out).write_text(json.dumps({"meta": meta, "gemm": rows, "gemm_silu": silu}, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="ws.json")
    args = ap.parse_args()
    run(args.rounds, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
