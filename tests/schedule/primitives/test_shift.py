"""shift: move a loop's iterations by a constant (compiler/schedule/primitives/shift.py).

shift changes no execution order, so it breaks no rule; it makes fusions legal that were not: a consumer that
reads its producer one point ahead fuses with it once shifted by one.
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import STENCIL, assert_round_trip, sched, tree_change

# Y reads T one point behind and one ahead.
AHEAD = """
const N = 19
kernel ahead(X: f32[N]) -> (Y: f32[N]) {
  T[i] = 2.0 * X[i]
  Y[i] = T[i] + where(i == N - 1, 0.0, T[i + 1]) - where(i == 0, 0.0, T[i - 1])
}
"""


def test_shift_tree(golden):
    golden(tree_change(sched(AHEAD), lambda s: s.shift("Y.i", 1)))


def test_shift_trace_round_trip():
    s = sched(AHEAD)
    s.shift("Y.i", 1)
    s.shift("T.i", -2)
    assert_round_trip(AHEAD, s)


def test_shift_breaks_no_rule():
    assert_legal(AHEAD, "shift(Y.i, 3)", run=True)
    assert_legal(STENCIL, "shift(T.i, -1)\nshift(Y.i, 2)", run=True)


def test_a_fusion_that_reads_ahead_is_legal_only_after_the_shift():
    err = assert_illegal(AHEAD, "fuse(T.i, Y.i)", rule="dependence", primitive="fuse", statements=["T", "Y"],
                         changes_result=True)
    assert err.counterexample == "T(i=1) must run before Y(i=0) (Y reads T[1]) but would run after"
    assert_legal(AHEAD, "shift(Y.i, 1)\nfuse(T.i, Y.i)", run=True)
    assert_illegal(AHEAD, "shift(T.i, 1)\nfuse(T.i, Y.i)", rule="dependence", primitive="fuse")


def test_shift_misuses_are_refused():
    s = sched(AHEAD)
    with pytest.raises(ScheduleError, match=r"the offset must be a nonzero integer between -2147483647 and "
                                            r"2147483647, got 0"):
        s.shift("Y.i", 0)
    with pytest.raises(ScheduleError, match=r"got 2147483648"):
        s.shift("Y.i", 2**31)
    s.bind("Y.i", "grid.x")
    with pytest.raises(ScheduleError, match=r"loop i is bound to grid.x; shift before bind"):
        s.shift("Y.i", 1)
