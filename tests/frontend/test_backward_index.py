"""An iterator sized by an index that runs a dimension backwards (`X[N - 1 - r]`), frontend/check_kernel.py
`_mirrored`: r takes the dimension's values exactly once, so it gets the extent a plain index would give."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.frontend.diagnostics import SourceError

REVERSED = """
const N = 6
param M
kernel rev(X: f32[N], Y: f32[M, N]) -> (Z: f32[N], W: f32[M, N]) {
  T[r] = X[N - 1 - r] * 2.0
  Z[i] = T[i]
  W[i, r] = Y[M - 1 - i, (N - 1) - r]
}
"""


def test_a_backward_index_sizes_its_iterator():
    s = loads(REVERSED, sizes={"M": 3}).schedule()
    assert str(s.model.stmt("T").domain) == "{ T[r] : 0 <= r <= 5 }"
    inputs = random_inputs(s.model, seed=1)
    got = interpret(s.model, s.time_map(), inputs)
    assert np.array_equal(got["Z"], (inputs["X"][::-1] * 2).astype(np.float32))
    assert np.array_equal(got["W"], inputs["Y"][::-1, ::-1])


@pytest.mark.parametrize("index", ["N - 2 - r", "N - r", "r - 1", "N - 1 - 2 * r"])
def test_other_offsets_do_not_size_an_iterator(index):
    with pytest.raises(SourceError, match=r"cannot infer the range of iterator 'r'"):
        loads(f"const N = 6\nkernel f(X: f32[N]) -> (Z: f32[N]) {{\n  T[r] = X[{index}]\n  Z[i] = T[i]\n}}\n")
