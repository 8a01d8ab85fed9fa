"""tdsl.testing's helpers on arguments a user may get wrong: a clear TypeError or tdsl error naming the argument,
never an error from deep inside (compiler/driver/testing.py)."""

import pytest

from tdsl.frontend.diagnostics import TdslError
from tdsl.testing import assert_illegal, assert_legal, run_differences

SHIFT = """\
const N = 13
kernel shiftup(V: f32[N], X: f32[N]) -> (W: f32[N] in V) {
  T[i] = where(i > 0, V[i - 1], 0.0) * 2.0 + 0.0 * X[i]
  W[i] = T[i] + X[i]
}
"""

SUBSTITUTION = """\
param N
kernel fsub(L: f32[N, N], b: f32[N]) -> (x: f32[N]) {
  x[i] = sum(j : j <= i) where(j == i, 0.0, 0.0 - L[i, j] * x[j]) from b[i]
}
"""


@pytest.mark.parametrize("call, says", [
    (lambda: assert_legal(SHIFT, 42), "a schedule is None (program order), a schedule block's name, steps"),
    (lambda: assert_legal(SHIFT, [1, 2]), "got [1, 2]"),
    (lambda: assert_legal(SHIFT, None, run=True, seed="a"), "seed must be a whole number 0 or more, got 'a'"),
    (lambda: assert_illegal(SHIFT, "compute_at(T, W.i)", match=["W", 3]), "match must be a string or a list of "
                                                                          "strings"),
])
def test_a_wrongly_typed_argument_is_a_type_error_that_names_it(call, says):
    with pytest.raises(TypeError, match=says.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        call()


def test_run_differences_takes_steps_as_the_assertions_do():
    assert run_differences(SHIFT, "io, ii = split(W.i, 4)") == []
    assert run_differences(SHIFT, ["io, ii = split(W.i, 4)", "reorder(W, ii, io)"]) == []


def test_running_a_program_with_a_run_time_size_needs_its_value():
    # It used to fail inside the interpreter ("shape entry 0 is 'N', not an int").
    with pytest.raises(TdslError, match=r"needs a value for every run-time size: give sizes=\{'N': \.\.\.\}"):
        assert_legal(SUBSTITUTION, "jo, ji = split(x.j, 4)", run=True)
    assert_legal(SUBSTITUTION, "jo, ji = split(x.j, 4)", run=True, sizes={"N": 6})
