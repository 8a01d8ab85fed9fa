"""quant_gemm's FP8 product alone (4096 x 4096 x 1536, E4M3 operands, f32 accumulation, bf16 out) against
`torch._scaled_mm`: exact (tdsl's default: every instruction's products added to the f32 sum), promoted every N
terms (`combine fast_accum(N)`: cuBLASLt's `use_fast_accum=False` promotes at an interval too) and declared fast
(`combine fast_accum`; `use_fast_accum=True`).  B is stored K-major (`Wt[N, K]`, as `_scaled_mm` takes it) and,
for Triton, row-major (`W[K, N]`, as examples/quant_gemm.tdsl has it; exact and fast only).

The modules are generated here (`build`, Triton's and TileLang's: the TileLang printer promotes with a cleared
fragment per interval, T.gemm then an f32 addition; Triton with `max_num_imprecise_acc`) and carried to the device
(`run`).  Each kernel is checked against a float64 torch product (NaN-poisoned output, bf16 tolerance plus the
accumulation's, or no worse than `_scaled_mm`'s own error) and timed with triton.testing.do_bench (median); the
best of a few schedules is reported per (backend, layout, accumulation).

    .venv/bin/python benchmarks/gpu/fp8_accum.py build                      # here
    python3 benchmarks/gpu/fp8_accum.py run --out $OUT/fp8_accum.json      # the H200 (TileLang: PYTHONPATH=/tmp/site)

(Before 2026-12-04 the script generated the Triton modules on the device: `fp8_accum.py --out ...`.)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

M, K, N = 4096, 4096, 1536
GENERATED = Path(__file__).resolve().parent / "generated" / "fp8_accum"
# BM, BN, BK, stages, warps, launch group
TILES = {
    "triton": [(128, 256, 128, 3, 8, 1), (128, 128, 128, 4, 4, 1), (256, 128, 128, 3, 8, 1), (128, 256, 128, 3, 8, 8),
               (64, 128, 128, 4, 4, 1)],
    # TileLang promotes from a second fragment of the tile's size: two per warp group must fit in registers
    "tilelang": [(128, 128, 128, 3, 8, 1), (128, 128, 128, 4, 8, 1), (128, 128, 128, 5, 8, 1), (64, 128, 128, 4, 4, 1),
                 (128, 128, 128, 4, 8, 8)],
}
LAYOUTS = {"k_major": ("Wt: f8e4m3[N, K]", "Wt[j, k]"), "row_major": ("W: f8e4m3[K, N]", "W[k, j]")}
# accumulation -> (the sum's combine clause, the _scaled_mm accumulation it is timed against, the layouts measured)
ACCUMULATIONS = {
    "exact": ("", False, ("k_major", "row_major")),
    "fast_accum(128)": (" combine fast_accum(128)", False, ("k_major",)),
    "fast_accum(64)": (" combine fast_accum(64)", False, ("k_major",)),
    "fast_accum": (" combine fast_accum", True, ("k_major", "row_major")),
}


def source(layout: str, combine: str, tiles: list) -> str:
    decl, read = LAYOUTS[layout]
    text = (f"const M = {M}, K = {K}, N = {N}\n"
            f"kernel q(Aq: f8e4m3[M, K], {decl}) -> (P: bf16[M, N]) {{\n"
            f"  P[i, j] = sum(k) Aq[i, k] * {read} accum f32{combine}\n}}\n")
    for bm, bn, bk, stages, warps, group in tiles:
        text += (f"schedule {_name(bm, bn, bk, stages, warps, group)} {{\n"
                 f"  io, jo, ii, jj = tile(P.i, P.j, {bm}, {bn})\n  ko, kk = split(P.k, {bk})\n"
                 f"  reorder(P, io, jo, ko, ii, jj, kk)\n  cache_read(Aq, shared, at=P.ko)\n"
                 f"  cache_read({decl.split(':')[0]}, shared, at=P.ko)\n  pipeline(P.ko, stages={stages})\n"
                 f"  bind(P.io, grid.x)\n  bind(P.jo, grid.y)\n  launch(P, warps={warps}, group={group})\n}}\n")
    return text


def _name(bm: int, bn: int, bk: int, stages: int, warps: int, group: int) -> str:
    return f"t{bm}x{bn}x{bk}_s{stages}_w{warps}" + (f"_g{group}" if group > 1 else "")


def build(backends: list[str]) -> None:
    """Every (backend, layout, accumulation, tiling) module into GENERATED, and a manifest of them."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate

    GENERATED.mkdir(parents=True, exist_ok=True)
    manifest = []
    for backend in backends:
        for accumulation, (combine, _, layouts) in ACCUMULATIONS.items():
            for layout in layouts:
                if backend == "tilelang" and layout != "k_major":
                    continue  # FP8 wgmma reads B K-major; TileLang falls back to mma.sync otherwise
                prog = loads(source(layout, combine, TILES[backend]), filename=f"q_{layout}.tdsl")
                for tile in TILES[backend]:
                    name = _name(*tile)
                    text = generate(prog, name, target="h200", backend=backend)
                    path = GENERATED / f"{backend}_{layout}_{re.sub(r'[()]', '', accumulation)}_{name}.py"
                    path.write_text(text)
                    manifest.append({"backend": backend, "layout": layout, "accumulation": accumulation,
                                     "schedule": name, "module": path.name,
                                     "imprecise_acc": (re.findall(r"max_num_imprecise_acc=(\d+)", text)
                                                       or re.findall(r"every (\d+) terms", text) or ["none"])[0]})
    (GENERATED / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"wrote {len(manifest)} modules to {GENERATED}")


def _module(path: Path):
    """A generated module, loaded as run_tilelang.py loads them."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run_tilelang import module

    return module(path)


def _compile(path: str) -> str:
    """A TileLang module's kernels compiled (TileLang's cache keeps them for the run); in a worker process."""
    mod = _module(Path(path))
    for key in mod.KERNELS:
        mod._kernel(key)
    return path


def precompile(paths: list) -> None:
    """nvcc the TileLang modules in parallel processes: one by one they would take most of a device call."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(min(8, len(paths))) as pool:
        for done in pool.imap_unordered(_compile, [str(p) for p in paths]):
            print("compiled", Path(done).name, flush=True)


def run(out_path: str, manifest_name: str = "manifest.json") -> None:
    import torch
    from triton.testing import do_bench

    manifest = json.loads((GENERATED / manifest_name).read_text())
    tilelang = [GENERATED / m["module"] for m in manifest if m["backend"] == "tilelang"]
    if tilelang:
        precompile(tilelang)
    torch.manual_seed(0)
    a = (torch.randn(M, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    wt = (torch.randn(N, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    w = wt.t().contiguous()
    exact = a.double() @ wt.double().t()
    one = torch.ones((), device="cuda")
    flops = 2 * M * N * K
    results = {"sizes": [M, K, N], "references": {}, "tdsl": {}, "all": [], "failed": []}
    for fast in (False, True):
        def call():
            return torch._scaled_mm(a, wt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
        us = do_bench(call, warmup=25, rep=200) * 1e3
        err = float((call().double() - exact).abs().max().item())  # the yardstick for the same accumulation
        results["references"][f"scaled_mm_fast_accum={fast}"] = {"us": us, "max_err": err}
        print(f"torch._scaled_mm use_fast_accum={fast}: {us:.1f} us, {flops / us / 1e6:.0f} TFLOP/s, max err {err:.4g}")
    loosest = max(r["max_err"] for r in results["references"].values())
    best: dict = {}
    for m in manifest:
        key = f"{m['backend']}_{m['layout']}_{m['accumulation']}"
        b = wt if m["layout"] == "k_major" else w
        ref = results["references"][f"scaled_mm_fast_accum={ACCUMULATIONS[m['accumulation']][1]}"]
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        try:
            launch = _module(GENERATED / m["module"]).q
            launch(a, b, P=out)
            torch.cuda.synchronize()
        except Exception as err:  # one candidate's failure must not hide the others
            print(f"{key:34s} {m['schedule']:22s} FAILED: {type(err).__name__}: {err}"[:400], flush=True)
            results["failed"].append({**m, "error": str(err)[:1000]})
            continue
        same = None
        if m.get("same_as"):  # a hand-edited module must give the bits of the module it was edited from
            twin = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            _module(GENERATED / m["same_as"]).q(a, b, P=twin)
            same = bool(torch.equal(out, twin))
        err = (out.double() - exact).abs()
        tol = 2 ** -7 * exact.abs() + (2 ** -16 if m["accumulation"] == "exact" else 2 ** -10) * exact.abs().max()
        # within the tolerance, or no worse than cuBLASLt's error (its own accumulation for exact and fast; the
        # fast one, the loosest, for an interval)
        yardstick = ref["max_err"] if m["accumulation"] in ("exact", "fast_accum") else loosest
        ok = bool(torch.isfinite(out).all().item() and ((err <= tol).all().item() or err.max().item() <= yardstick)
                  and same is not False)
        us = do_bench(lambda: launch(a, b, P=out), warmup=25, rep=200) * 1e3
        row = {**m, "ok": ok, "bit_identical_to_its_source": same, "us": us, "tflops": flops / us / 1e6, "max_err": float(err.max().item()),
               "vs_scaled_mm": ref["us"] / us}
        print(f"{key:34s} {m['schedule']:22s} ok={ok} {us:8.1f} us {flops / us / 1e6:6.0f} TFLOP/s "
              f"max err {row['max_err']:.4g} ({ref['us'] / us:.2f}x)" + ("" if same is None else f" same bits: {same}"),
              flush=True)
        results["all"].append(row)
        if ok and (key not in best or us < best[key]["us"]):
            best[key] = row
        Path(out_path).write_text(json.dumps({**results, "tdsl": best}, indent=2))
    for key, row in best.items():
        print(f"  best {key}: {row['schedule']} {row['us']:.1f} us = {row['vs_scaled_mm']:.2f}x _scaled_mm")
    Path(out_path).write_text(json.dumps({**results, "tdsl": best}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--backends", nargs="+", default=["triton", "tilelang"], choices=sorted(TILES))
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--manifest", default="manifest.json", help="the modules to run, in generated/fp8_accum/ "
                   "(an experiment's own list: experiments/fp8_warp_specialize.py)")
    args = parser.parse_args()
    if args.command == "build":
        build(args.backends)
    else:
        run(args.out, args.manifest)


if __name__ == "__main__":
    main()
