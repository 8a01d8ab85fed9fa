"""max and min of zeros of opposite signs on the GPU (28th session): IEEE 754-2019's maximum is +0.0 and its minimum
-0.0, whatever the order of the operands or of a row's terms; PTX's max.NaN / min.NaN and Triton's tl.maximum may
return either zero.  The programs of tests/backends/test_signed_zero_extrema.py (1 / max(x, y), row maxima and
minima of -0s and +0s, E4M3 stores of -0.0), generated for Triton and TileLang here, run on the GPU there; every
output must be the interpreter's bits (a zero's sign shows as +inf or -inf).

    .venv/bin/python benchmarks/gpu/signed_zeros.py prepare        # here: benchmarks/gpu/generated/signed_zeros
    python3 benchmarks/gpu/signed_zeros.py run --out $OUT/signed_zeros.json     # on the GPU machine
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "generated" / "signed_zeros"
BACKENDS = ("triton", "tilelang")


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """The same bits, a NaN being any NaN (its sign and payload mean nothing: TileLang's H of the 29th session's
    probe case was counted wrong for the sign of its NaN)."""
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan].view(np.int32), want[~nan].view(np.int32)))


def prepare() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "backends"))
    import test_signed_zero_extrema as cases  # the programs, schedules and inputs of the CPU test

    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.reference.interpreter import interpret

    OUT.mkdir(parents=True, exist_ok=True)
    row_inputs = cases._row_inputs()
    plans = [("elementwise", cases.ELEMENTWISE, [None, "tiles"], [cases._elementwise_inputs()]),
             ("rows", cases.ROWS, [None, "rows", "reversed"], [row_inputs, {"X": -row_inputs["X"]}])]
    manifest = []
    for label, source, schedules, inputs in plans:
        program = loads(source, f"{label}.tdsl")
        original = program.schedule(None)
        model = original.model
        for n, given in enumerate(inputs):
            want = interpret(model, original.time_map(), given)
            np.savez(OUT / f"{label}_inputs{n}.npz", **{k: np.asarray(v, np.float32) for k, v in given.items()})
            np.savez(OUT / f"{label}_want{n}.npz", **{t.name: np.asarray(want[t.name], np.float32)
                                                      for t in model.outputs()})
        for schedule in schedules:
            for backend in BACKENDS:
                name = f"{label}_{schedule or 'program_order'}_{backend}.py"
                (OUT / name).write_text(generate(program, schedule, target="nvidia", backend=backend))
                manifest.append({"module": name, "program": label, "inputs": len(inputs), "kernel": model.name,
                                 "in": [[t.name, t.dtype, list(t.shape)] for t in model.inputs()],
                                 "out": [[t.name, t.dtype, list(t.shape)] for t in model.outputs()]})
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"{len(manifest)} modules in {OUT.relative_to(ROOT)}")


def run(out_path: str, backends: list) -> int:
    import torch

    from by_path import load_module

    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f8e4m3": torch.float8_e4m3fn}
    rows, bad = [], 0
    for entry in json.loads((OUT / "manifest.json").read_text()):
        if not entry["module"].endswith(tuple(f"_{b}.py" for b in backends)):
            continue
        module = load_module(OUT / entry["module"], entry["module"][:-3])
        launch = getattr(module, entry["kernel"])
        for n in range(entry["inputs"]):
            given = np.load(OUT / f"{entry['program']}_inputs{n}.npz")
            want = np.load(OUT / f"{entry['program']}_want{n}.npz")
            args = [torch.from_numpy(given[name]).cuda().to(dtypes[dtype]) for name, dtype, _ in entry["in"]]
            outs = {name: torch.full(shape, float("nan"), device="cuda").to(dtypes[dtype])
                    for name, dtype, shape in entry["out"]}
            launch(*args, **outs)
            torch.cuda.synchronize()
            wrong = [name for name in outs
                     if not _same_bits(outs[name].float().cpu().numpy(), want[name].astype(np.float32))]
            bad += bool(wrong)
            shown = {name: {"got": outs[name].float().cpu().numpy().ravel().tolist()[:16],
                            "want": want[name].astype(np.float32).ravel().tolist()[:16]} for name in wrong}
            rows.append({"module": entry["module"], "inputs": n, "wrong": wrong, "values": shown})
            print(entry["module"], n, "same bits" if not wrong else f"DIFFERENT: {wrong}", flush=True)
    result = {"device": torch.cuda.get_device_name(), "modules_runs": len(rows), "different": bad, "rows": rows}
    Path(out_path).write_text(json.dumps(result, indent=1))
    print(f"{len(rows)} runs, {bad} with different bits")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["prepare", "run"])
    ap.add_argument("--out", default="signed_zeros.json")
    ap.add_argument("--backends", default="triton,tilelang", help="run: which modules (TileLang needs its wheels)")
    args = ap.parse_args()
    if args.step == "prepare":
        prepare()
        return 0
    return run(args.out, args.backends.split(","))


if __name__ == "__main__":
    sys.exit(main())
