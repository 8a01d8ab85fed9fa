"""reverse: run a loop backwards (compiler/schedule/primitives/reverse.py).

Rules reverse can break: reduction-order (the loop of a strict reduction: its terms combined in another
order) and dependence (a loop that carries a flow dependence, after fusion).
"""

import pytest

from tdsl.compiler.errors import ReductionOrder
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, ROWS, STENCIL, assert_round_trip, sched, tree_change

TOTAL = """
const N = 8, M = 2
kernel total(X: f32[M, N]) -> (s: f32[M]) {
  s[i] = sum(k) X[i, k] combine reassoc
}
"""


def test_reverse_tree(golden):
    golden(tree_change(sched(ROWS), lambda s: s.reverse("Y.j")))


def test_reverse_trace_round_trip():
    s = sched()
    s.reverse("Y.j")
    s.reverse("C.i")
    assert_round_trip(GEMM_SILU, s)


def test_reverse_a_reduction_is_reduction_order():
    s = sched()
    s.reverse("Y.j")  # Y has no carried dependence
    with pytest.raises(ReductionOrder) as err:
        s.reverse("C.k")
    assert err.value.rule == "reduction-order"
    assert "C(i=0, j=0, k=0) must run before C(i=0, j=0, k=1) (both update C[0, 0])" in str(err.value)


def test_combine_reassoc_allows_regrouping():
    s = sched(TOTAL)
    s.reverse("s.k")  # the program allows any order
    strict = sched(TOTAL.replace(" combine reassoc", ""))
    with pytest.raises(ReductionOrder):
        strict.reverse("s.k")


def test_reverse_of_a_strict_reduction_changes_the_result():
    assert_illegal(TOTAL.replace(" combine reassoc", ""), "reverse(s.k)", rule="reduction-order", primitive="reverse",
                   statements=["s"], sizes={"N": 64}, changes_result=True)


def test_reverse_a_loop_that_carries_a_flow_dependence():
    err = assert_illegal(STENCIL, "fuse(T.i, Y.i)\nreverse(T.i)", rule="dependence", primitive="reverse",
                         statements=["T", "Y"], changes_result=True)
    assert err.counterexample == "T(i=0) must run before Y(i=1) (Y reads T[0]) but would run after"


def test_reverse_runs_like_program_order():
    assert_legal(GEMM_SILU, "reverse(C.i)\nreverse(C.j)\nreverse(Y.i)", sizes=GEMM_SILU_SMALL, run=True)
    assert_legal(ROWS, "reverse(s.i)\nreverse(Y.j)", run=True)
