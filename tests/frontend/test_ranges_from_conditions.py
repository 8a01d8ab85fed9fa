"""An iterator sized by a condition that bounds it above (frontend/check_index.py `_bound_by_conditions`): the
forms PolyBench's loops take when written from the C (lu's `k <= i`, deriche's backward pass `q < H`).  Before,
each was refused with a message that asked for what the program already did (probe of the 24th session)."""

import islpy as isl
import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.frontend.diagnostics import SourceError


def _domain(text: str, stmt: str, sizes=None) -> str:
    return str(loads(text, sizes=sizes).schedule().model.stmt(stmt).domain)


BACKWARD_PASS = """
const W = 3, H = 5
kernel rev(X: f32[W, H]) -> (out: f32[W, H]) {
  y[i, q : q < H] = 0.5 * X[i, H - 1 - q] + where(q >= 1, y[i, q - 1], 0.0)
  out[i, j] = y[i, H - 1 - j]
}
"""


def test_a_condition_k_less_than_a_size_gives_the_size():
    prog = loads(BACKWARD_PASS)
    assert prog.schedule().model.stmt("y").domain.is_equal(isl.Set("{ y[i, q] : 0 <= i <= 2 and 0 <= q <= 4 }"))
    s = prog.schedule()
    inputs = random_inputs(s.model, seed=3)
    x, want = inputs["X"], np.zeros((3, 5), np.float32)
    for q in range(5):  # the recurrence, written out
        want[:, q] = np.float32(0.5) * x[:, 4 - q] + (want[:, q - 1] if q else np.float32(0))
    assert np.array_equal(interpret(s.model, s.time_map(), inputs)["out"], want[:, ::-1])


LU_ROW = """
param N
kernel lower(A: f32[N, N]) -> (Y: f32[N, N]) {
  Y[i, j] = sum(k : k <= i and k <= j) A[i, j] * 0.0 + 1.0
}
"""


@pytest.mark.parametrize("bound", ["k <= i", "i >= k", "k <= N - 1", "N > k", "k == i"])
def test_each_spelling_of_an_upper_bound_sizes_a_reduction_iterator(bound):
    text = f"param N\nkernel f(A: f32[N, N]) -> (Y: f32[N]) {{\n  Y[i] = sum(k : {bound}) A[i, i]\n}}\n"
    domain = _domain(text, "Y", {"N": 4})
    assert "k <= 3" in domain or "k <= i" in domain or "k = i" in domain, domain


def test_an_iterator_bounded_by_one_sized_from_a_condition():
    text = """
const N = 4
kernel f(X: f32[N]) -> (Z: f32[N]) {
  T[r, s : s < r and r < 3] = 1.0
  Z[i] = X[i]
}
"""
    domain = loads(text).schedule().model.stmt("T").domain
    assert domain.is_equal(isl.Set("{ T[r, s] : r <= 2 and 0 <= s < r }"))
    counted = loads(LU_ROW, sizes={"N": 3}).schedule()
    got = interpret(counted.model, counted.time_map(), random_inputs(counted.model, seed=0))["Y"]
    assert np.array_equal(got, np.minimum.outer(np.arange(3), np.arange(3)).astype(np.float32) + 1)


@pytest.mark.parametrize("condition", ["k >= i", "k + 1 <= i", "k < 2 * i", "i < k", "k < i + 1"])
def test_a_condition_that_bounds_it_below_or_not_bare_sizes_nothing(condition):
    text = f"const N = 4\nkernel f(A: f32[N, N]) -> (Y: f32[N]) {{\n  Y[i] = sum(k : {condition}) A[i, i]\n}}\n"
    with pytest.raises(SourceError, match=r"cannot infer the range of iterator 'k'.*bound it above by a condition"):
        loads(text).schedule()


def test_reads_past_a_tensor_under_the_condition_are_still_refused():
    text = "const N = 6\nkernel f(X: f32[N]) -> (Z: f32[N]) {\n  T[r : r < N] = X[N - 2 - r]\n  Z[i] = T[i]\n}\n"
    with pytest.raises(SourceError, match=r"reads outside X .*T\(r=5\) reads X\[-1\]"):
        loads(text).schedule()
