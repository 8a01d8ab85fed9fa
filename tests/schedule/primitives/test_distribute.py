"""distribute: one loop around several nodes becomes one loop per node (compiler/schedule/primitives/distribute.py).

Rule distribute can break: dependence (a later node's instance read by an earlier node's instance of a later
iteration would now run after it).
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.lower.build import lower
from tdsl.compiler.lower.tileir_text import program_text
from tdsl.compiler.driver.api import loads
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import STENCIL, assert_round_trip, sched, tree_change

# Two statements sharing one loop (a time block of one step): Q reads P one point ahead, P reads Q behind.
PAIR = """
const N = 21
kernel pair(X: f32[N]) -> (Y: f32[N]) {
  for s < 1 {
    P[s, i] = X[i] + 1.0
    Q[s, i] = P[s, i] * where(i == N - 1, 1.0, P[s, i + 1])
  }
  Y[i] = Q[0, i]
}
"""


def test_distribute_tree(golden):
    golden(tree_change(sched(STENCIL), lambda s: (s.fuse("T.i", "Y.i"), s.distribute("T.i"))))


def test_distribute_trace_round_trip():
    s = sched(STENCIL)
    s.fuse("T.i", "Y.i")
    s.split("T.i", 4)
    s.distribute("T.ii")
    assert_round_trip(STENCIL, s)


def test_distribute_is_legal_when_every_dependence_runs_forward():
    assert_legal(STENCIL, "fuse(T.i, Y.i)\nio, ii = split(T.i, 4)\ndistribute(T.ii)", run=True)
    assert_legal(PAIR, "shift(Q.i, 1)\nfuse(P.i, Q.i)\ndistribute(P.i)", run=True)


def test_distribute_a_loop_whose_later_statement_feeds_an_earlier_one():
    body = """
const N = 9
kernel back(X: f32[N]) -> (Y: f32[N]) {
  for t < N {
    A[t] = where(t == 0, X[t], B[t - 1] + X[t])
    B[t] = 2.0 * A[t]
  }
  Y[i] = B[i]
}
"""
    err = assert_illegal(body, "distribute(A.t)", rule="dependence", primitive="distribute", statements=["B", "A"],
                         changes_result=True)
    assert err.counterexample == "B(t=0) must run before A(t=1) (A reads B[0]) but would run after"


def test_distributed_point_loops_become_tiles():
    steps = "fuse(T.i, Y.i)\nio, ii = split(T.i, 4)\ndistribute(T.ii)"
    fused = program_text(lower(loads(STENCIL + "schedule s {\nfuse(T.i, Y.i)\nio, ii = split(T.i, 4)\n}\n").schedule("s")))
    text = program_text(lower(loads(STENCIL + f"schedule s {{\n{steps}\n}}\n").schedule("s")))
    assert "loop ii" in fused and "loop ii" not in text


def test_distribute_misuses_are_refused():
    s = sched(STENCIL)
    with pytest.raises(ScheduleError, match=r"loop i encloses a single node; there is nothing to distribute"):
        s.distribute("T.i")
    s.fuse("T.i", "Y.i")
    s.pipeline("T.i", stages=2)
    with pytest.raises(ScheduleError, match=r"loop i is pipelined; distribute it first"):
        s.distribute("T.i")
