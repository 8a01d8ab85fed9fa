"""argmax / argmin in the language, as docs/language.md#argmax writes them: the row's maximum, then the smallest
index that holds it (a `min` reduction of the iterator's value), the first NaN where the row has one.  The result
is torch's and NumPy's `argmax` (first index of the maximum; NaN counts as the maximum); the interpreter, a fused
schedule and the Triton kernel at ragged sizes agree exactly."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.reference.interpreter import interpret

ARGMAX = """
const M = 37, N = 45
kernel argmax(X: f32[M, N]) -> (best: f32[M], at: f32[M]) {
  best[i] = max(j) X[i, j]
  at[i] = min(j) where(X[i, j] == best[i], j, where(X[i, j] != X[i, j], j, inf))
}

# one program per row: the row's maximum, then where it first is
schedule row {
  compute_at(best, at.i)
  bind(at.i, grid.x)
}

# 8 rows per program, each row in segments of 16 columns
schedule rows_tiled {
  io, ii = split(at.i, 8)
  jo, jj = split(at.j, 16)
  bo, bj = split(best.j, 16)
  compute_at(best, at.io)
  bind(at.io, grid.x)
}
"""

ARGMIN = ARGMAX.replace("max(j) X[i, j]", "min(j) X[i, j]")


def rows(seed: int) -> np.ndarray:
    """Random rows with ties (values on a coarse grid), a row of equal values, a row with NaNs, -0.0 and +0.0."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-6, 7, size=(37, 45)).astype(np.float32) * 0.5
    x[3] = 2.0  # every column ties: the first
    x[5, [7, 30]] = np.nan  # the first NaN
    x[6] = -1.0
    x[6, [9, 11]] = [-0.0, 0.0]  # -0.0 == +0.0: the first of them
    x[8, -1] = np.inf
    return x


def expected(x: np.ndarray, arg) -> np.ndarray:
    return np.array([arg(row) for row in x], dtype=np.float32)  # NumPy: first index, NaN first


@pytest.mark.parametrize("text,arg", [(ARGMAX, np.argmax), (ARGMIN, np.argmin)], ids=["argmax", "argmin"])
def test_the_interpreter_gives_the_first_index_of_the_extremum(text, arg):
    prog = loads(text)
    x = rows(1)
    for name in (None, "row", "rows_tiled"):
        sched = prog.schedule(name)
        got = interpret(sched.model, sched.time_map(), {"X": x})["at"]
        assert np.array_equal(got, expected(x, arg)), name


def test_torch_argmax_agrees():
    torch = pytest.importorskip("torch")
    x = rows(2)
    sched = loads(ARGMAX).schedule("row")
    got = interpret(sched.model, sched.time_map(), {"X": x})["at"]
    assert np.array_equal(got, torch.argmax(torch.from_numpy(x), dim=1).numpy().astype(np.float32))


@pytest.mark.parametrize("schedule", ["row", "rows_tiled"])
def test_triton_kernel_matches_at_ragged_sizes(schedule, tmp_path):
    prog = loads(ARGMAX)
    sched = prog.schedule(schedule)
    x = rows(3)
    module = load_module(generate(prog, schedule), tmp_path / f"{schedule}.py")
    got = run_generated(module, sched.model, {"X": x}, guard=7)
    assert np.array_equal(got["at"], expected(x, np.argmax))
    assert np.array_equal(got["best"], np.max(x, axis=1), equal_nan=True)
