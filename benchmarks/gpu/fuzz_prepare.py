"""Prepare random fuzz cases for a run on a real GPU (`benchmarks/gpu/fuzz_run.py`).

The differential fuzzer (tests/fuzz) checks generated Triton kernels under the Triton interpreter on the CPU.
The interpreter is not the compiler: it rounds, fuses and masks its own way.  This script draws random
programs and schedules exactly like the fuzzer, keeps every case that the Triton backend generates, and
writes for each one the module, its inputs and the reference interpreter's outputs, so that the GPU machine
(torch + triton only) can compile and run the kernels for real and compare.  With `--backends triton,tilelang`
each case also carries the TileLang module of the same schedule (`module_tilelang.py`, where TileLang takes
it): on the CPU TileLang kernels are only lowered, so the GPU is where they first run.

    python benchmarks/gpu/fuzz_prepare.py --sequences 400 --seed 5 --out benchmarks/gpu/fuzz_cases
    python benchmarks/gpu/fuzz_prepare.py --sequences 400 --seed 31 --libraries polybench,programs --named-start 0.6

`--libraries` and `--named-start` pick the programs as benchmarks/fuzz.py does (the PolyBench ports and the GPU
programs, sequences grown from one of the file's schedule blocks).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sequences", type=int, default=400)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gpu" / "fuzz_cases"))
    ap.add_argument("--backends", default="triton", help="triton, or triton,tilelang")
    ap.add_argument("--libraries", default="examples", help="examples, polybench, programs (comma-separated)")
    ap.add_argument("--named-start", type=float, default=0.0,
                    help="share of the files' sequences that start from one of the file's named schedules")
    ap.add_argument("--distributions", default="normal,wide",
                    help="the inputs of each case: normal, wide, special (tests/fuzz/cases.py)")
    ap.add_argument("--regenerate", action="store_true",
                    help="rewrite the modules of the cases already in --out with this checkout (after a fix)")
    ap.add_argument("--cases", nargs="+", type=Path, metavar="JSON",
                    help="write these saved cases (fuzz findings, tests/fuzz/findings/*.json) instead of random ones, "
                         "each with --sequences input seeds")
    args = ap.parse_args(argv)
    extra = [b for b in args.backends.split(",") if b != "triton"]
    if args.regenerate:
        return _regenerate(Path(args.out), ["triton", *extra])
    if args.cases:
        return _saved(args.cases, args.sequences, Path(args.out), extra)

    from fuzz import oracles
    from fuzz.cases import parse_distributions
    from fuzz.engine import Fuzzer, Result

    try:
        distributions = parse_distributions(args.distributions)
    except ValueError as err:
        ap.error(str(err))

    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    fuzzer = Fuzzer(backends=("triton",), shrink=False, workdir=Path(tempfile.mkdtemp()),
                    libraries=tuple(name for name in args.libraries.split(",") if name), named_start=args.named_start,
                    distributions=distributions)
    kept = refused = failed = 0
    refused_by = {b: 0 for b in extra}
    for n in range(args.sequences):
        seed = args.seed * 1_000_003 + n
        rng = random.Random(seed)
        case = fuzzer._program(rng, seed)
        if case is None:
            continue
        case, finding = fuzzer._grow(rng, case, Result())
        if finding is not None:
            failed += 1
            continue
        try:
            text, refusal = oracles.generate_text(case, "triton")
            prog, sched, finding = oracles.apply_steps(case)
            original = prog.schedule(kernel=case.kernel)
            refs = oracles.references(case, original, sched)
        except Exception:  # noqa: BLE001 - the CPU fuzzer reports these; here only clean cases travel
            failed += 1
            continue
        if text is None or finding is not None:
            refused += 1
            continue
        folder = out / f"case_{n:05d}"
        _write(folder, case, text, original.model, refs)
        for backend in extra:
            other, _ = oracles.generate_text(case, backend)
            if other is None:
                refused_by[backend] += 1
            else:
                (folder / f"module_{backend}.py").write_text(other)
        kept += 1
    also = "".join(f", {kept - n} with a {b} module ({n} refused by it)" for b, n in refused_by.items())
    print(f"{kept} cases written to {out} ({refused} refused by the backend, {failed} skipped){also}")
    return 0


def _saved(paths: list[Path], seeds: int, out: Path, extra: list[str]) -> int:
    """Each saved case at `seeds` input seeds (its own, then the next ones), on its own distributions: a class
    of programs a fix is about, run on the GPU on many inputs."""
    from fuzz import oracles
    from fuzz.cases import Case

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    kept = 0
    for n, path in enumerate(paths):
        saved = Case.from_json(path.read_text())
        for extra_seed in range(seeds):
            case = saved.but(seed=saved.seed + extra_seed)
            prog, sched, finding = oracles.apply_steps(case)
            case = case.but(trace_text=str(sched.trace))
            text, refusal = oracles.generate_text(case, "triton")
            if text is None or finding is not None:
                print(f"{path.name}: not generated ({refusal or finding})")
                break
            original = prog.schedule(kernel=case.kernel)
            folder = out / f"case_{n:03d}_{extra_seed:03d}"
            _write(folder, case, text, original.model, oracles.references(case, original, sched))
            for backend in extra:
                other, _ = oracles.generate_text(case, backend)
                if other is not None:
                    (folder / f"module_{backend}.py").write_text(other)
            kept += 1
    print(f"{kept} cases written to {out} from {len(paths)} saved cases")
    return 0


def _regenerate(out: Path, backends: list[str]) -> int:
    """Each case's modules again, from its recorded program and steps (inputs and references unchanged)."""
    from fuzz import oracles
    from fuzz.cases import Case

    names = {"triton": "module.py"}
    count = 0
    for folder in sorted(p for p in out.iterdir() if (p / "meta.json").exists()):
        case = Case.from_json(json.dumps(json.loads((folder / "meta.json").read_text())["case"]))
        _, sched, _ = oracles.apply_steps(case)
        case = case.but(trace_text=str(sched.trace))
        for backend in backends:
            text, _ = oracles.generate_text(case, backend)
            path = folder / names.get(backend, f"module_{backend}.py")
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)
        count += 1
    print(f"{count} cases regenerated in {out} ({', '.join(backends)})")
    return 0


def _write(folder: Path, case, text: str, model, refs: dict) -> None:
    folder.mkdir()
    (folder / "module.py").write_text(text)
    from tdsl.compiler.verify import reordered_terms, tolerance_dtype

    # each output with the tolerance the CPU fuzzer holds it to (compiler/verify/compare.py)
    outputs = [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape),
                "tolerance": tolerance_dtype(model, t.name), "terms": reordered_terms(model, t.name)}
               for t in model.outputs()]
    inputs = [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in model.inputs()]
    for dist, ref in refs.items():
        np.savez(folder / f"inputs_{dist}.npz",
                 **{k: np.asarray(v, dtype=np.float32) for k, v in ref.inputs.items()})
        for name, values in [("reference", ref.outputs)] + [(f"variant{n}", other)
                                                            for n, other in enumerate(ref.variants)]:
            np.savez(folder / f"{name}_{dist}.npz",
                     **{t["name"]: np.asarray(values[t["name"]], dtype=np.float32) for t in outputs})
    meta = {"kernel": model.name, "inputs": inputs, "outputs": outputs, "distributions": list(refs),
            # per distribution: 4 variants, or 16 where 4 change an element's kind (compiler/verify/compare.py)
            "variants": {dist: len(ref.variants) for dist, ref in refs.items()},
            "case": json.loads(case.to_json())}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    sys.exit(main())
