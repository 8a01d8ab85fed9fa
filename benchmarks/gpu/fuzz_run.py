"""Run the cases of `fuzz_prepare.py` on a real GPU and compare every output with the reference interpreter.

Needs only torch, triton and numpy (the lent H200 has no islpy): each case's module is compiled by Triton
for the GPU and launched on its saved inputs, outputs sitting in NaN-filled buffers with guard regions; the
outputs are compared with the interpreter's (compiler/verify/compare.py tolerance) and the guards must stay NaN.
Cases run in parallel processes (Triton compiles one kernel per process at a time).

    python3 benchmarks/gpu/fuzz_run.py benchmarks/gpu/fuzz_cases --jobs 16 --out $OUT/fuzz_gpu.json

A case's TileLang module (`module_tilelang.py`, fuzz_prepare.py --backends triton,tilelang) runs the same way,
compiled by TileLang (PYTHONPATH=/tmp/site, docs of the recipe in shared/notes/gpu-recipes.md); `--backends`
picks which modules run.  The modules contract no `a * b + c` into an fma (Triton's launches say
enable_fp_fusion=False, TileLang's PASS_CONFIGS give nvcc --fmad=false), as the interpreter rounds twice.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import sys
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # compiler/verify (compare.py) needs numpy only

GUARD = 64


MODULES = {"triton": "module.py", "tilelang": "module_tilelang.py"}


def run_case(job: tuple) -> dict:
    import torch

    from compiler.verify import compare

    folder, backend = Path(job[0]), job[1]
    meta = json.loads((folder / "meta.json").read_text())
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f8e4m3": torch.float8_e4m3fn}
    result = {"case": folder.name, "backend": backend, "ok": True, "problems": []}
    try:
        spec = importlib.util.spec_from_file_location(f"fz_{folder.name}_{backend}", folder / MODULES[backend])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        renamed = getattr(module, "RENAMED", {})  # program names the module had to rename (docs/triton.md)
        for dist in meta["distributions"]:
            ins = np.load(folder / f"inputs_{dist}.npz")
            want = np.load(folder / f"reference_{dist}.npz")
            args = [torch.from_numpy(ins[t["name"]]).to(dtypes[t["dtype"]]).cuda() for t in meta["inputs"]]
            buffers, kwargs = {}, {}
            in_place = getattr(module, "IN_PLACE", {})  # outputs the launcher writes over an input (`store_in`)
            for t in meta["outputs"]:
                if t["name"] in in_place:
                    continue
                numel = int(np.prod(t["shape"]))
                buf = torch.full((numel + 2 * GUARD,), float("nan"), device="cuda").to(dtypes[t["dtype"]])
                buffers[t["name"]] = buf
                kwargs[renamed.get(t["name"], t["name"])] = buf[GUARD:GUARD + numel].view(*t["shape"])
            out = getattr(module, renamed.get(meta["kernel"], meta["kernel"]))(*args, **kwargs)
            torch.cuda.synchronize()
            outs = dict(zip([t["name"] for t in meta["outputs"]], out if isinstance(out, tuple) else (out,)))
            for t in meta["outputs"]:
                spoiled = 0
                if t["name"] in buffers:
                    buf = buffers[t["name"]].float().cpu()
                    spoiled = int((~torch.isnan(buf[:GUARD])).sum() + (~torch.isnan(buf[-GUARD:])).sum())
                got = outs[t["name"]].float().cpu().numpy().reshape(t["shape"])
                # the CPU fuzzer's tolerance; where it fails, widened where the output is ill-conditioned at
                # these inputs (the reference with other allowed roundings: compiler/verify/compare.py VARIANTS)
                dtype, terms = t.get("tolerance", t["dtype"]), t.get("terms", 1)
                c = compare(want[t["name"]], got, dtype, terms)
                count = meta.get("variants", 0)  # per distribution; one count for all in older corpora
                count = count.get(dist, 0) if isinstance(count, dict) else count
                others = [folder / f"variant{n}_{dist}.npz" for n in range(count)]
                others = [f for f in others if f.exists()]  # older corpora counted the first distribution's
                if not c.ok and others:
                    c = compare(want[t["name"]], got, dtype, terms, [np.load(f)[t["name"]] for f in others])
                # zeros of the other sign (equal to the compare, seen by 1 / x): counted, not a mismatch; said
                # where a variant has the same zeros (the GPU's exponentials flush their subnormal results)
                reference = want[t["name"]].astype(np.float32)
                flipped = (reference == 0) & (got == 0) & (np.signbit(reference) != np.signbit(got))
                if flipped.any():
                    same = [n for n, f in enumerate(others) if _same_zeros(np.load(f)[t["name"]], got, flipped)]
                    result.setdefault("zero_signs", []).append(
                        f"{dist} {t['name']}: {int(flipped.sum())} zeros of the other sign"
                        + (f", as variant {same[0]} has them" if same else ", which no variant has"))
                    result["zero_signs_unexplained"] = result.get("zero_signs_unexplained", False) or not same
                if spoiled or not c.ok:
                    result["ok"] = False
                    result["problems"].append(f"{dist} {t['name']}: {c.summary()}"
                                              + (f", {spoiled} guard elements written" if spoiled else ""))
    except Exception as err:  # noqa: BLE001
        result["ok"] = False
        result["problems"].append("".join(traceback.format_exception(type(err), err, err.__traceback__))[-1500:])
    return result


def _same_zeros(variant: np.ndarray, got: np.ndarray, where: np.ndarray) -> bool:
    """Whether a variant of the reference has zeros of `got`'s signs at the elements `where`."""
    v = variant.astype(np.float32)
    return bool(np.all((v[where] == 0) & (np.signbit(v[where]) == np.signbit(got[where]))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--out")
    ap.add_argument("--backends", default="triton", help="triton, tilelang, or triton,tilelang")
    args = ap.parse_args(argv)
    folders = sorted(p for p in Path(args.cases).iterdir() if (p / "meta.json").exists())
    jobs = [(str(p), b) for b in args.backends.split(",") for p in folders if (p / MODULES[b]).exists()]
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        results = pool.map(run_case, jobs, chunksize=2)
    bad = [r for r in results if not r["ok"]]
    for r in bad:
        print(f"{r['case']} ({r['backend']}): " + "; ".join(r["problems"]))
    signs = [r for r in results if r.get("zero_signs")]
    for r in signs[:20]:
        print(f"{r['case']} ({r['backend']}): " + "; ".join(r["zero_signs"]))
    per = {b: sum(r["backend"] == b for r in results) for b in args.backends.split(",")}
    unexplained = sum(bool(r.get("zero_signs_unexplained")) for r in signs)
    print(f"{len(results)} modules on the GPU ({per}), {len(results) - len(bad)} match the interpreter, "
          f"{len(bad)} do not; {len(signs)} with zeros of the other sign, {unexplained} of them with zeros no "
          f"variant has")
    if args.out:
        Path(args.out).write_text(json.dumps({"cases": len(results), "per_backend": per, "mismatches": bad,
                                              "zero_signs": signs}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
