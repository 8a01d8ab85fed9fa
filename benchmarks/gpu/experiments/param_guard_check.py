"""One Triton module of a stencil with a run-time size and boundary guards (`where(i == N - 1, ...)`), run on the
GPU at several sizes against the reference interpreter, and the launcher's refusal beyond the limit
(compiler/model/program.py SIZE_LIMIT).  RESULTS.md, nineteenth session.

    python3 benchmarks/gpu/experiments/param_guard_check.py
"""

import sys
import tempfile
from pathlib import Path

import torch

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare

SOURCE = """
const T = 3
param N
kernel smooth(X: f32[N]) -> (Y: f32[N]) {
  for t < T {
    A[t, i] = where(t == 0, X[i], Y_[t - 1, i])
    Y_[t, i] = where(i == 0, A[t, i], where(i == N - 1, A[t, i], (A[t, i - 1] + A[t, i] + A[t, i + 1]) / 3.0))
  }
  Y[i] = Y_[T - 1, i]
}
schedule tiles {
  ao, ai = split(A.i, 256)
  yo, yi = split(Y_.i, 256)
  zo, zi = split(Y.i, 256)
}
"""


def main() -> int:
    prog = loads(SOURCE)
    module = load_module(generate(prog, "tiles"), Path(tempfile.mkdtemp()) / "smooth.py")
    failed = 0
    for n in (1, 2, 255, 257, 4099, 65537):
        bound = loads(SOURCE.replace("param N", f"const N = {n}")).schedule("tiles")
        inputs = random_inputs(bound.model, seed=n)
        want = interpret(bound.model, bound.time_map(), inputs)["Y"]
        got = run_generated(module, bound.model, inputs, device="cuda", guard=17)["Y"]
        result = compare(want, got, "f32")
        print(f"N = {n}: {result.summary()}")
        failed += not result.ok
    try:
        module.smooth(torch.zeros(2 ** 23 + 1, device="cuda"))
        print("N = 2^23 + 1: NOT refused")
        failed += 1
    except ValueError as err:
        print(f"N = 2^23 + 1: refused: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
