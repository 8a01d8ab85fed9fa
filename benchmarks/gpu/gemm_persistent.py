"""The generated GEMM (benchmarks/programs/gemm_bf16.tdsl) launched persistently (`launch(persistent=true)`) against
cuBLAS at issue 14's three shapes, and GEMM + SiLU (examples/gemm_silu.tdsl, its `fast` schedule, and the same
launched persistently) against torch.compile, on the GPU.

The modules are generated here (they import only torch and triton) and carried to the device:

    .venv/bin/python benchmarks/gpu/gemm_persistent.py --generate           # here: benchmarks/gpu/generated/gemm_persistent/
    python3 benchmarks/gpu/gemm_persistent.py --rounds 7 --out $OUT/gemm_persistent.json   # on the GPU (carry the folder)

Each schedule at each shape (M x N x K, bf16 in and out): the output NaN-poisoned, checked against an f32
product (bf16 tolerance: a relative error of the output's largest magnitude under 2^-7), then timed with
`triton.testing.do_bench` (median) in `--rounds` interleaved rounds beside `torch.matmul` (cuBLAS); the
median over the rounds is reported, with TFLOP/s and the ratio to cuBLAS.
"""

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERATED = HERE / "generated" / "gemm_persistent"
PROGRAM = HERE.parent / "programs" / "gemm_bf16.tdsl"
SHAPES = [(1024, 12288, 4096), (4096, 4096, 4096), (8192, 8192, 1024)]  # M, N, K
SCHEDULES = ["t128x256x64_s3_w8", "t128x256x64_s3_w8_g8", "t128x256x64_s3_w8_g8_p"]
SILU = HERE.parents[1] / "examples" / "gemm_silu.tdsl"
# examples/gemm_silu.tdsl's `fast`, launched persistently in groups of 8 (a block of this script, not the example's)
SILU_PERSISTENT = """
schedule fast_g8_p {
  io, jo, ii, jj = tile(C.i, C.j, 128, 256)
  ko, kk = split(C.k, 64)
  reorder(C, io, jo, ko, ii, jj, kk)
  reverse_compute_at(Y, C.jo)
  cache_read(A, shared, at=C.ko)
  cache_read(W, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
  pipeline(C.ko, stages=3)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
  launch(C, warps=8, group=8, persistent=true)
}
"""
SILU_SCHEDULES = ["fast", "fast_g8_p"]


def module_path(schedule: str, m: int, n: int, k: int) -> Path:
    return GENERATED / f"gemm_{schedule}_{m}x{n}x{k}.py"


def generate() -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate as module_text

    from tdsl.compiler.driver.api import loads

    GENERATED.mkdir(parents=True, exist_ok=True)
    for m, n, k in SHAPES:
        prog = load(PROGRAM, sizes={"M": m, "N": n, "K": k})
        for schedule in SCHEDULES:
            module_path(schedule, m, n, k).write_text(module_text(prog, schedule))
    silu = loads(SILU.read_text() + SILU_PERSISTENT, str(SILU))
    for schedule in SILU_SCHEDULES:
        (GENERATED / f"gemm_silu_{schedule}.py").write_text(module_text(silu, schedule))
    print(f"{len(SHAPES) * len(SCHEDULES) + len(SILU_SCHEDULES)} modules in {GENERATED}")


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(rounds: int, out: str) -> None:
    import torch
    from triton.testing import do_bench

    results = []
    for m, n, k in SHAPES:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        want = (a.float() @ w.float())
        modules = {s: load_module(module_path(s, m, n, k)) for s in SCHEDULES}
        row = {"shape": [m, n, k], "errors": {}, "us": {s: [] for s in ["cublas"] + SCHEDULES}}
        for s, mod in modules.items():
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            mod.gemm_bf16(a, w, C=c)
            err = ((c.float() - want).abs().max() / want.abs().max()).item()
            row["errors"][s] = err
            if not err < 2 ** -7:
                raise SystemExit(f"{s} at {m}x{n}x{k}: relative error {err}")
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(rounds):
            row["us"]["cublas"].append(do_bench(lambda: torch.matmul(a, w, out=c)) * 1e3)
            for s, mod in modules.items():
                row["us"][s].append(do_bench(lambda mod=mod: mod.gemm_bf16(a, w, C=c)) * 1e3)
        flop = 2 * m * n * k
        row["median_us"] = {s: statistics.median(v) for s, v in row["us"].items()}
        row["tflops"] = {s: flop / t / 1e6 for s, t in row["median_us"].items()}
        row["vs_cublas"] = {s: row["median_us"]["cublas"] / t for s, t in row["median_us"].items()}
        results.append(row)
        print(f"{m}x{n}x{k}: " + ", ".join(f"{s} {row['median_us'][s]:.1f} us ({row['vs_cublas'][s]:.3f}x)"
                                           for s in row["median_us"]), flush=True)
    silu = run_silu(rounds)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rounds": rounds}
    Path(out).write_text(json.dumps({"meta": meta, "results": results, "gemm_silu": silu}, indent=1))


def run_silu(rounds: int) -> dict:
    """examples/gemm_silu.tdsl at its 1024 x 4096 x 12288 against torch eager and torch.compile of silu(A @ W)."""
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench

    m, k, n = 1024, 4096, 12288
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(k, n, device="cuda") / 64).to(torch.bfloat16)
    c = (a.float() @ w.float()).to(torch.bfloat16).float()
    want = c * torch.sigmoid(c)
    compiled = torch.compile(lambda x, y: F.silu(x @ y))
    compiled(a, w)
    modules = {s: load_module(GENERATED / f"gemm_silu_{s}.py") for s in SILU_SCHEDULES}
    row = {"errors": {}, "us": {s: [] for s in ["eager", "compile"] + SILU_SCHEDULES}}
    for s, mod in modules.items():
        y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        mod.gemm_silu(a, w, Y=y)
        err = ((y.float() - want).abs().max() / want.abs().max()).item()
        row["errors"][s] = err
        if not err < 2 ** -7:
            raise SystemExit(f"gemm_silu {s}: relative error {err}")
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(rounds):
        row["us"]["eager"].append(do_bench(lambda: F.silu(a @ w)) * 1e3)
        row["us"]["compile"].append(do_bench(lambda: compiled(a, w)) * 1e3)
        for s, mod in modules.items():
            row["us"][s].append(do_bench(lambda mod=mod: mod.gemm_silu(a, w, Y=y)) * 1e3)
    row["median_us"] = {s: statistics.median(v) for s, v in row["us"].items()}
    row["vs_compile"] = {s: row["median_us"]["compile"] / t for s, t in row["median_us"].items()}
    print("gemm_silu: " + ", ".join(f"{s} {row['median_us'][s]:.1f} us ({row['vs_compile'][s]:.3f}x compile)"
                                    for s in row["median_us"]), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generate", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default="gemm_persistent.json")
    args = ap.parse_args()
    if args.generate:
        generate()
    else:
        run(args.rounds, args.out)


if __name__ == "__main__":
    main()
