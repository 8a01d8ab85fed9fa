"""The TileLang NVIDIA kernels of the storage decisions and of overlapped tiling, run on a GPU against the interpreter.

The Triton kernels of these schedules run in CI under the Triton interpreter; TileLang's only lower there (no
GPU).  This runs them: an output stored in an input (`store_in`: the kernel takes the input once and declares
the output a view of it), folded planes (`fold_storage`: every element at its plane), per-tile copies
(`recompute_at`), each at ragged sizes, outputs NaN-guarded, compared with the reference interpreter at the
output dtype's tolerance (compiler/verify/compare.py).  The cases are the test modules' own programs.

    PYTHONPATH=/tmp/pkg:/tmp/site:/tmp/pkg/tdsl/tests python3 benchmarks/gpu/tilelang_storage.py --out $OUT/ts.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import traceback
from pathlib import Path


def cases():
    from schedule.primitives import test_fold_storage as fold
    from schedule.primitives import test_recompute_at as rc
    from schedule.primitives import test_store_in as si

    gemm_bf16 = si.GEMM.replace("A: f32[M, K]", "A: bf16[M, K]").replace("B: f32[K, N]", "B: bf16[K, N]")
    return [
        ("store_in gemm (T.gemm from C_in, in place)", gemm_bf16, "tiles"),
        ("store_in row sum from Z", si.ROWS, "in_place"),
        ("store_in stencil, rows bound", si.RIGHT + "schedule s {\n  store_in(Y, X)\n  bind(Y.i, grid.x)\n}\n", "s"),
        ("fold_storage sweeps, host loop", fold.SWEEPS + "schedule folded {\nfold_storage(T, t, 1)\n"
         "fold_storage(U, t, 1)\n" + fold.ON_HOST + "\n}\n", "folded"),
        ("fold_storage two planes", fold.TWO_STEPS + "schedule folded {\nfold_storage(T, t, 2)\n"
         "fold_storage(U, t, 1)\n}\n", "folded"),
        ("recompute_at blur", rc.BLUR, "overlapped"),
        ("recompute_at 2-D chain", rc.CHAIN, "overlapped"),
    ]


def main() -> None:
    import torch  # noqa: F401  (the launchers need it)

    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate, load_module, run_generated
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, random_inputs
    from tdsl.compiler.verify import compare_outputs

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    rows = []
    for n, (title, source, schedule) in enumerate(cases()):
        row = {"case": title, "schedule": schedule}
        try:
            prog = loads(source)
            s = prog.schedule(schedule)
            inputs = random_inputs(s.model, seed=11)
            want = interpret(prog.schedule().model, prog.schedule().time_map(), program_order_inputs(s.model, inputs))
            module = load_module(generate(prog, schedule, backend="tilelang"), tmp / f"case{n}.py")
            got = run_generated(module, s.model, inputs, device="cuda", guard=16)
            checks = compare_outputs(s.model, want, got)
            row.update(ok=all(c.ok for c in checks.values()), detail={k: str(c) for k, c in checks.items()})
        except Exception as err:  # one case's failure must not hide the others
            row.update(ok=False, error=f"{type(err).__name__}: {err}"[:1500], trace=traceback.format_exc()[-3000:])
        rows.append(row)
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {title}: {row.get('detail') or row.get('error')}", flush=True)
    print(f"{sum(r['ok'] for r in rows)}/{len(rows)} TileLang storage cases match the interpreter on the GPU")
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
