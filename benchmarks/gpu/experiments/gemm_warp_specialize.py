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


def compare(mods: dict, call, out_shape, want, reference: tuple, rounds: int) -> dict:
    """Check every variant (`call(module, out)` into a NaN-poisoned `out`, against `want` within 2^-7 of its
    largest magnitude), then time the correct ones and the reference (name, callable) in interleaved rounds."""
    import torch
    from triton.testing import do_bench

    row = {"errors": {}, "us": {reference[0]: []}}
    good = {}
    for name, mod in mods.items():
        if isinstance(mod, str):  # the edit did not import
            row["errors"][name] = mod
            continue
        out = torch.full(out_shape, float("nan"), device="cuda", dtype=torch.bfloat16)
        try:
            call(mod, out)
            err = ((out.float() - want).abs().max() / want.abs().max()).item()
            problem = "" if err < 2 ** -7 else f"relative error {err}"
        except Exception as exc:  # noqa: BLE001 - an experiment records what fails
            traceback.print_exc(limit=1)
            problem = f"{type(exc).__name__}: {exc}"[:300]
        if problem:
            row["errors"][name] = problem
        else:
            good[name] = mod
            row["us"][name] = []
    out = torch.empty(out_shape, device="cuda", dtype=torch.bfloat16)
    for _ in range(rounds):
        row["us"][reference[0]].append(do_bench(reference[1]) * 1e3)
        for name, mod in good.items():
            row["us"][name].append(do_bench(lambda mod=mod: call(mod, out)) * 1e3)
    row["median_us"] = {s: statistics.median(v) for s, v in row["us"].items()}
    row["vs_reference"] = {s: row["median_us"][reference[0]] / t for s, t in row["median_us"].items()}
    return row


def run(rounds: int, out: str) -> None:
    import torch
    import torch.nn.functional as F

    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for m, n, k in SHAPES:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            mods = variants(GENERATED / f"gemm_t128x256x64_s3_w8_g8_p_{m}x{n}x{k}.py", tmp)
            row = compare(mods, lambda mod, o: mod.gemm_bf16(a, w, C=o), (m, n), a.float() @ w.float(),
                          ("cublas", lambda: torch.matmul(a, w, out=c)), rounds)
            rows.append(dict(row, shape=[m, n, k]))
            print(f"{m}x{n}x{k}: " + _line(row), flush=True)

        m, k, n = 1024, 4096, 12288
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        w = (torch.randn(k, n, device="cuda") / 64).to(torch.bfloat16)
        prod = (a.float() @ w.float()).to(torch.bfloat16).float()
        compiled = torch.compile(lambda x, y: F.silu(x @ y))
        compiled(a, w)
        mods = variants(GENERATED / "gemm_silu_fast_g8_p.py", tmp)
        silu = compare(mods, lambda mod, o: mod.gemm_silu(a, w, Y=o), (m, n), prod * torch.sigmoid(prod),
                       ("compile", lambda: compiled(a, w)), rounds)
        print("gemm_silu: " + _line(silu), flush=True)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rounds": rounds}
    Path(out).write_text(json.dumps({"meta": meta, "gemm": rows, "gemm_silu": silu}, indent=1))


def _line(row: dict) -> str:
    return (", ".join(f"{s} {row['median_us'][s]:.1f} us ({row['vs_reference'][s]:.3f}x)" for s in row["median_us"])
            + f"; errors {row['errors']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="ws.json")
    args = ap.parse_args()
    run(args.rounds, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
