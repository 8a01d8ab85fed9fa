"""tdsl.testing's helpers on arguments a user may get wrong: a clear TypeError or tdsl error naming the argument,
never an error from deep inside (compiler/driver/testing.py)."""

import re

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
    (lambda: assert_illegal(SHIFT, "compute_at(T, W.i)", match=5), "match must be a string or a list of strings, "
                                                                   "got 5"),
    (lambda: assert_illegal(SHIFT, "compute_at(T, W.i)", match=0), "got 0"),  # was ignored
    (lambda: run_differences(SHIFT, None, tries=2.5), "tries must be a whole number from 1 to 5, got 2.5"),
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


@pytest.mark.parametrize("call, says", [
    (lambda: assert_legal(SHIFT, "nope"), "has no schedule 'nope' (schedules: none)"),  # was parsed as steps
    (lambda: assert_legal(SHIFT, None, sizes={"N": -3}), "size N must be between 1 and"),
    (lambda: assert_illegal(SHIFT, "reverse(W.i)", kernel="other"), "has no kernel 'other' (kernels: shiftup)"),
])
def test_a_mistake_in_the_setup_is_raised_as_itself_not_as_a_failed_expectation(call, says):
    """An unknown block name, a size out of range and an unknown kernel were AssertionErrors ("could not be
    built") or a parse error of steps (probe KK): a test whose setup is wrong must not read as a verdict."""
    with pytest.raises(TdslError, match=re.escape(says)):
        call()


def test_a_program_object_with_sizes_is_checked_as_its_own_text(tmp_path, monkeypatch):
    """A Program whose filename names a file on disk was reloaded from that file when sizes were given: another
    kernel was checked (probe KK)."""
    from tdsl.compiler.driver.api import loads

    monkeypatch.chdir(tmp_path)
    (tmp_path / "p1.tdsl").write_text("const N = 4\nkernel other(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i]\n}\n")
    prog = loads("param N\nkernel c(A: f32[N], B: f32[N]) -> (C: f32[N]) {\n  C[i] = sum(k) A[k] * B[i]\n}\n",
                 "p1.tdsl")
    assert assert_illegal(prog, "reverse(C.k)", rule="reduction-order", sizes={"N": 4}).statements == ["C"]
    assert assert_legal(prog, None, sizes={"N": 4}).model.name == "c"
