"""tile: split several nested loops and move the outer (tile) loops outside the inner (point) loops
(compiler/schedule/primitives/tile.py: split of each loop, then reorder).

tile reorders loops, so it breaks what reorder breaks: rule dependence (a dependence that runs backwards
inside a rectangular tile) and rule reduction-order (a reduction over several loops, its terms regrouped).
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, assert_round_trip, sched, tree_change

# Y(i, j) reads T(i - 1, j + 1): with the two loops fused, the dependence has distance (1, -1).
SKEWED = """
const N = 8
kernel skewed(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] + 1.0
  Y[i, j : i >= 1 and j < 7] = T[i - 1, j + 1]
}
"""

# A reduction over two loops: its terms are combined in the lexicographic order of (k, l).
POOL = """
const M = 2, K = 4, L = 4
kernel pool(X: f32[M, K, L]) -> (s: f32[M]) {
  s[i] = sum(k, l) X[i, k, l]
}
"""


def test_tile_tree(golden):
    golden(tree_change(sched(), lambda s: s.tile("C.i", "C.j", 32, 32)))


def test_tile_trace_round_trip():
    s = sched()
    s.tile("C.i", "C.j", 32, 32)
    s.tile("Y.i", "Y.j", 16, 8, names=("a", "b", "c", "d"))
    assert_round_trip(GEMM_SILU, s)


def test_tile_is_split_then_reorder():
    s = sched()
    assert s.tile("C.i", "C.j", 32, 32) == ["io", "jo", "ii", "jj"]
    assert [l.name for l in s.tree.path("C")] == ["io", "jo", "ii", "jj", "k"]
    with pytest.raises(ScheduleError, match=r"tile: expected loops then one factor per loop"):
        s.tile("C.k", 4, 4)


def test_tile_breaks_a_dependence_that_runs_backwards_in_the_tile():
    err = assert_illegal(SKEWED, "fuse(T.i, Y.i)\nfuse(T.j, Y.j)\ntile(T.i, T.j, 2, 2)", rule="dependence",
                         statements=["T", "Y"], match="(Y reads T[0, 2]) but would run after", changes_result=True)
    assert err.counterexample == "T(i=0, j=2) must run before Y(i=1, j=1) (Y reads T[0, 2]) but would run after"


def test_tile_regrouping_a_strict_reduction_is_reduction_order():
    assert_illegal(POOL, "tile(s.k, s.l, 2, 2)", rule="reduction-order", statements=["s"], changes_result=True,
                   match="the updates of the reduction s would be combined in a different order")


def test_tile_errors_name_tile():
    assert_illegal(POOL, "tile(s.k, s.l, 2, 2)", rule="reduction-order", primitive="tile")


def test_tile_runs_like_program_order():
    assert_legal(GEMM_SILU, "io, jo, ii, jj = tile(C.i, C.j, 16, 8)\na, b, c, d = tile(Y.j, Y.i, 5, 7)",
                 sizes=GEMM_SILU_SMALL, run=True)
