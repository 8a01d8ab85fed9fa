"""Products with a constant factor in indices and conditions, as isl reads them (compiler/model/program.py
`affine_text`): isl takes a coefficient only as one integer literal before its factor, so `(1 + 1) * i`,
`(-2) * i2` (written by skew and recompute_at, CPU fuzz seed 5490) and `i * (N - 6)` are printed with the
constant folded (`2 * (i)`).  Before, isl's parser failed on them: an internal error for a legal program."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.reference.interpreter import interpret

PROGRAM = """
const N = 8
kernel k(X: f32[N]) -> (Y: f32[4]) {{
  Y[i] = X[{index}]
}}
"""


@pytest.mark.parametrize("index, expected", [
    ("(1 + 1) * i", [0, 2, 4, 6]),
    ("i * (N - 6)", [0, 2, 4, 6]),
    ("(0 - 1) * i + 7", [7, 6, 5, 4]),
    ("-(2) * i + 7", [7, 5, 3, 1]),
    ("(N // 4) * i + (3 - 2)", [1, 3, 5, 7]),
])
def test_a_constant_factor_in_an_index(index, expected):
    prog = loads(PROGRAM.format(index=index), "k.tdsl")
    x = np.arange(8, dtype=np.float32)
    sched = prog.schedule()
    out = interpret(sched.model, sched.time_map(), {"X": x})["Y"]
    assert out.tolist() == expected


def test_a_constant_factor_in_a_reduction_condition():
    prog = loads("""
const N = 6
kernel k(X: f32[N]) -> (Y: f32[N]) {
  Y[i] = sum(j : (3 - 1) * j <= i) X[j]
}
""", "k.tdsl")
    x = np.arange(1, 7, dtype=np.float32)
    sched = prog.schedule()
    out = interpret(sched.model, sched.time_map(), {"X": x})["Y"]
    assert out.tolist() == [1, 1, 3, 3, 6, 6]  # j <= i / 2
