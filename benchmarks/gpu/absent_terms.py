"""Causal attention with an infinite or NaN V element, and what exactness costs (`Dot.absent_terms`).

On the causal diagonal, P·V's tile multiplies P's masked 0 (keys after the query) by V.  With an infinite or NaN
V[j0, c0], 0 · V[j0, c0] is NaN where the program has no term, so rows i < j0 of the same key block came out NaN
in column c0 (GPU fuzz seed 35).  The Triton printer now adds the terms with an infinite or NaN factor apart
(backends/triton/emit.py `_absent_terms`), only where the operand that meets the masked zeros holds one.

    .venv/bin/python benchmarks/gpu/absent_terms.py build --out benchmarks/gpu/generated/absent_new
    PYTHONPATH=<a package dir whose tdsl is the older tree> .venv/bin/python benchmarks/gpu/absent_terms.py build \\
        --out benchmarks/gpu/generated/absent_old
    python3 benchmarks/gpu/absent_terms.py run --old .../absent_old --new .../absent_new --out $OUT/absent.json

`--backend tilelang` does the same for the TileLang modules of the causal example's `flash` and `flash_ws`
schedules (backends/tilelang/emit.py `checked_product`: where the V tile of the diagonal block holds an infinite
or NaN element, the exact product instead of T.gemm); TileLang binds L when it compiles, so each module has its
own (B, H, L), and the timings take the first shape only (each module is compiled on the GPU, ~30 s).

`run` checks on the GPU, for each module: rows before j0 hold no NaN and are those of the same inputs without the
special value (bit for bit, or within the rounding of a tile computed again term by term), rows from j0 on are not
finite in column c0 (the program's own terms), other heads unchanged; then times the old and new
modules of each kernel head to head (median of alternating runs), finite inputs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHAPES = [(8, 32, 4096), (2, 32, 16384)]  # (B, H, L), d = 128 (attention_mha.py's timed shapes)
CHECK_L, J0, C0 = 1000, 300, 5  # a ragged length; key 300 lies inside the diagonal block of queries 256-383


def kernels(backend: str = "triton"):
    """(module stem, example, source, schedule): the causal example's flash schedule, as written and with
    FlashAttention's rounding and exponential (attention_mha.py); on TileLang, its flash and flash_ws schedules."""
    sys.path.insert(0, str(HERE))
    from attention_mha import fa_exponential, fa_rounding

    source = (ROOT / "examples" / "mha_causal.tdsl").read_text()
    if backend == "tilelang":
        return [("mha_causal_flash", "mha_causal", source, "flash"),
                ("mha_causal_flash_ws", "mha_causal", source, "flash_ws")]
    rounded = fa_rounding(source)
    return [("mha_causal", "mha_causal", source, "flash"),
            ("mha_causal_fa_exp2", "mha_causal_fa_exp2", fa_exponential(rounded, "mha_causal"), "flash")]


def shapes(backend: str) -> tuple[list, list]:
    """The (B, H, L) the modules are built for: those the checks run at, and those timed (L None: bound at run
    time, one module for every L)."""
    if backend == "tilelang":
        return [(2, 32, CHECK_L)], SHAPES[:1]
    both = sorted({(b, h, None) for b, h, _ in SHAPES})
    return both, both


def module_name(stem: str, b: int, h: int, length) -> str:
    return f"{stem}__b{b}h{h}" + (f"L{length}" if length is not None else "") + ".py"


def build(out: Path, backend: str) -> None:
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate

    out.mkdir(parents=True, exist_ok=True)
    checked, timed = shapes(backend)
    for stem, _, source, schedule in kernels(backend):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{stem}.tdsl"
            path.write_text(source)
            for b, h, length in sorted(set(checked + timed)):
                sizes = {"B": b, "H": h} | ({"L": length} if length is not None else {})
                target = out / module_name(stem, b, h, length)
                target.write_text(generate(load(path, sizes=sizes), schedule, target="nvidia", backend=backend))
                print(f"wrote {target}")


def run(old: Path, new: Path, out_path: str, backend: str) -> None:
    import importlib.util

    import torch
    from triton.testing import do_bench

    def module(path: Path):
        spec = importlib.util.spec_from_file_location(f"m_{abs(hash(str(path)))}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    results = {"checks": [], "timings": []}
    checked, timed = shapes(backend)
    for stem, example, _, _ in kernels(backend):
        for b, h, length in checked:
            launch = {side: getattr(module(d / module_name(stem, b, h, length)), example)
                      for side, d in (("old", old), ("new", new))}
            torch.manual_seed(7)
            q, k, v = (torch.randn(b, h, CHECK_L, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
            for special in (float("inf"), float("nan")):
                bad = v.clone()
                bad[0, 0, J0, C0] = special
                for side, fn in launch.items():
                    plain, got = fn(q, k, v), fn(q, k, bad)
                    torch.cuda.synchronize()
                    before = got[0, 0, :J0].float()
                    same_before = bool(torch.equal(before.view(torch.int32), plain[0, 0, :J0].float().view(torch.int32)))
                    # where the tile is computed again term by term its rounding may differ in the last bits
                    diff_before = float((before - plain[0, 0, :J0].float()).abs().max())
                    nan_before = int(torch.isnan(before).sum())
                    after_special = bool((~torch.isfinite(got[0, 0, J0:, C0].float())).all())
                    other_heads = bool(torch.equal(got[1:].float().view(torch.int32), plain[1:].float().view(torch.int32))
                                       and torch.equal(got[0, 1:].float().view(torch.int32),
                                                       plain[0, 1:].float().view(torch.int32)))
                    row = {"kernel": stem, "B": b, "H": h, "L": CHECK_L, "side": side, "special": repr(special),
                           "rows_before_j0_as_without_it": same_before, "max_abs_diff_before_j0": diff_before,
                           "nan_before_j0": nan_before,
                           "column_non_finite_from_j0": after_special, "other_heads_unchanged": other_heads}
                    results["checks"].append(row)
                    print(json.dumps(row), flush=True)
        for b, h, length in [(b, h, n) for b, h, bound in timed for bb, hh, n in SHAPES
                             if (bb, hh) == (b, h) and bound in (None, n)]:
            bound = length if backend == "tilelang" else None
            mods = {side: getattr(module(d / module_name(stem, b, h, bound)), example)
                    for side, d in (("old", old), ("new", new))}
            torch.manual_seed(1)
            q, k, v = (torch.randn(b, h, length, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
            outs = {side: fn(q, k, v) for side, fn in mods.items()}
            same = bool(torch.equal(outs["old"].float().view(torch.int32), outs["new"].float().view(torch.int32)))
            times = {"old": [], "new": []}
            for _ in range(5):  # alternating, so that clocks and temperature affect both alike
                for side, fn in mods.items():
                    times[side].append(do_bench(lambda: fn(q, k, v, O=outs[side]), warmup=25, rep=200) * 1e3)
            med = {side: sorted(t)[len(t) // 2] for side, t in times.items()}
            flops = 4 * b * h * length * length * 128 * 0.5
            row = {"kernel": stem, "B": b, "H": h, "L": length, "outputs_identical": same,
                   "old_us": med["old"], "new_us": med["new"], "new_over_old": med["new"] / med["old"],
                   "new_tflops": flops / med["new"] / 1e6, "device": torch.cuda.get_device_name()}
            results["timings"].append(row)
            print(json.dumps(row), flush=True)
    Path(out_path).write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["build", "run"])
    ap.add_argument("--out", required=True, help="build: the modules' folder; run: the results' JSON file")
    ap.add_argument("--old", type=Path, help="run: the modules built before the change")
    ap.add_argument("--new", type=Path, help="run: the modules built with it")
    ap.add_argument("--backend", choices=["triton", "tilelang"], default="triton")
    args = ap.parse_args()
    if args.step == "build":
        build(Path(args.out), args.backend)
    else:
        run(args.old, args.new, args.out, args.backend)


if __name__ == "__main__":
    main()
