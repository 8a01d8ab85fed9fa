"""reorder: permute the loops of one perfectly nested chain (compiler/schedule/primitives/reorder.py).

Rules reorder can break: dependence (a dependence turned backwards), reduction-order (the terms of a
reduction over several loops regrouped), and, through the re-check of earlier steps, parallel-dependence (a
bound loop moved to where it carries a dependence).
"""

import pytest

from tdsl.compiler.errors import DependenceViolation, ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, ROWS, TILED, assert_round_trip, sched, tiled, tree_change

# Y(i, j) reads T(i - 1, j - 1): with the loops fused, the dependence has distance (1, 1) -- carried by i,
# and by j once j is outside.
DIAGONAL = """
const N = 8
kernel diagonal(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] + 1.0
  Y[i, j : i >= 1 and j >= 1] = T[i - 1, j - 1]
}
"""

# Y(i, j) reads T(i - 1, j + 1): distance (1, -1), which turns backwards when j goes outside i.
SKEWED = """
const N = 8
kernel skewed(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] + 1.0
  Y[i, j : i >= 1 and j < 7] = T[i - 1, j + 1]
}
"""

POOL = """
const M = 2, K = 4, L = 4
kernel pool(X: f32[M, K, L]) -> (s: f32[M]) {
  s[i] = sum(k, l) X[i, k, l]
}
"""


def _split_gemm(s):
    s.split("C.i", 32)
    s.split("C.j", 32)
    s.split("C.k", 16)


def test_reorder_tree(golden):
    s = sched()
    _split_gemm(s)
    golden(tree_change(s, lambda s: s.reorder("C", "io", "jo", "ko", "ii", "jj", "kk")))


def test_reorder_trace_round_trip():
    s = tiled()
    s.reorder("C", "jo", "io")
    s.reorder("Y.j", "Y.i")
    assert_round_trip(GEMM_SILU, s)


def test_reorder_builds_the_chapter_loop_nest():
    s = tiled()
    assert [l.name for l in s.tree.path("C")] == ["io", "jo", "ko", "ii", "jj", "kk"]


def test_reorder_rejects_imperfect_nests():
    s = sched(ROWS)
    s.compute_at("s", "Y.i")
    with pytest.raises(ScheduleError, match=r"not perfectly nested: loop i also encloses"):
        s.reorder("Y", "j", "i")


def test_reorder_is_rejected_when_a_dependence_turns_backwards():
    text = """
const N = 8
kernel scan(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] + 1.0
  Y[i, j : i >= 1 and j < 7] = T[i - 1, j + 1]
}
"""
    s = sched(text)
    s.fuse("T.i", "Y.i")
    s.fuse("T.j", "Y.j")
    with pytest.raises(DependenceViolation) as err:
        s.reorder("T", "j", "i")
    e = err.value
    assert e.rule == "dependence" and e.primitive == "reorder" and e.statements == ["T", "Y"]
    assert "T(i=0, j=1) must run before Y(i=1, j=0) (Y reads T[0, 1]) but would run after" in str(e)


def test_reorder_dependence_changes_the_result():
    assert_illegal(SKEWED, "fuse(T.i, Y.i)\nfuse(T.j, Y.j)\nreorder(T, j, i)", rule="dependence", primitive="reorder",
                   statements=["T", "Y"], changes_result=True)


def test_reorder_of_a_strict_reduction_is_reduction_order():
    err = assert_illegal(POOL, "reorder(s, l, k)", rule="reduction-order", primitive="reorder", statements=["s"],
                         changes_result=True)
    assert err.counterexample == ("s(i=0, k=0, l=1) must run before s(i=0, k=1, l=0) (both update s[0]) but would "
                                  "run after")


def test_reorder_cannot_make_a_bound_loop_carry_a_dependence():
    """j is bound while i is outside it (the dependence crosses i only); moving j outside makes j carry it."""
    assert_legal(DIAGONAL, "fuse(T.i, Y.i)\nfuse(T.j, Y.j)\nbind(T.j, grid.x)")
    assert_illegal(DIAGONAL, "fuse(T.i, Y.i)\nfuse(T.j, Y.j)\nbind(T.j, grid.x)\nreorder(T, j, i)",
                   rule="parallel-dependence", primitive="reorder", statements=["T", "Y"],
                   match="T(i=0, j=0) and Y(i=1, j=1) run in different iterations of j (Y reads T[0, 0])")


def test_reorder_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "reorder(C, kk, jj)\nreorder(Y, j, i)", sizes=GEMM_SILU_SMALL, run=True)
    assert_legal(DIAGONAL, "fuse(T.i, Y.i)\nfuse(T.j, Y.j)\nreorder(T, j, i)", run=True)
