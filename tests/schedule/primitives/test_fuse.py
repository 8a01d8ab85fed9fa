"""fuse: two nested loops become one loop over both, or two adjacent sibling loops become one loop that runs
both bodies in each iteration (compiler/schedule/primitives/fuse.py).

Rules fuse can break: dependence (sibling fusion where the second body reads what a later iteration of the
first writes), and, through the re-check of earlier steps, parallel-dependence (a bound loop that now carries
a dependence) and cache-conflict (a cached tensor now written inside the copy's loop).
"""

import pytest

from tdsl.compiler.errors import DependenceViolation, ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import (GEMM_SILU, GEMM_SILU_SMALL, ROWS, STENCIL, TILED, assert_round_trip, sched, tiled,
                               tree_change)

# Y(i) reads T(i + 1): fused, it would read it one iteration before T writes it.
AHEAD = """
const N = 16
kernel ahead(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 2.0
  Y[i : i < 15] = T[i + 1]
}
"""


def test_fuse_siblings_tree(golden):
    golden(tree_change(sched(STENCIL), lambda s: s.fuse("T.i", "Y.i")))


def test_fuse_nested_tree(golden):
    golden(tree_change(tiled(), lambda s: s.fuse("C.io", "C.jo")))


def test_fuse_trace_round_trip():
    s = tiled()
    s.fuse("C.io", "C.jo", names="tile")
    s.fuse("C.ii", "C.jj")
    assert_round_trip(GEMM_SILU, s)
    t = sched(STENCIL)
    t.fuse("T.i", "Y.i")
    assert_round_trip(STENCIL, t)


def test_fuse_nested_loops_keeps_order():
    s = tiled()
    assert s.fuse("C.io", "C.jo") == "io_jo"
    assert s.tree.path("C")[0].n_dims == 2


def test_fuse_siblings_legal_and_backward_dependence_rejected():
    s = sched(STENCIL)
    assert s.fuse("T.i", "Y.i") == "i"  # Y(i) reads T(i - 1) and T(i): both earlier or in the same iteration
    s = sched(AHEAD)
    with pytest.raises(DependenceViolation) as err:
        s.fuse("T.i", "Y.i")
    assert "T(i=1) must run before Y(i=0) (Y reads T[1]) but would run after" in str(err.value)


def test_fuse_rejects_unrelated_loops():
    s = sched(ROWS)
    with pytest.raises(ScheduleError, match=r"neither nested .* nor adjacent siblings"):
        s.fuse("s.j", "Y.i")


def test_fuse_names_and_trace_replay():
    s = tiled()
    assert s.fuse("C.io", "C.jo", names="tile") == "tile"
    again = s.trace.replay(sched())
    assert [l.name for l in again.tree.path("C")][0] == "tile"


def test_sibling_fuse_that_would_repeat_a_loop_name():
    text = """
const N = 4
kernel k(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j]
  Y[j, i] = T[i, j]
}
"""
    s = sched(text)
    with pytest.raises(ScheduleError, match=r"statement Y would have two loops named i"):
        s.fuse("T.i", "Y.j")


def test_fuse_with_a_backward_dependence_changes_the_result():
    assert_illegal(AHEAD, "fuse(T.i, Y.i)", rule="dependence", primitive="fuse", statements=["T", "Y"],
                   match="Y reads T written by T, but Y would run first", changes_result=True)


def test_fuse_cannot_make_a_bound_loop_carry_a_dependence():
    assert_illegal(STENCIL, "bind(T.i, grid.x)\nfuse(T.i, Y.i)", rule="parallel-dependence", primitive="fuse",
                   statements=["T", "Y"], match="T(i=0) and Y(i=1) run in different iterations of i (Y reads T[0])")


def test_fuse_cannot_bring_a_writer_into_a_cached_loop():
    """Y's loop i holds a shared copy of s; fused with s's loop i, s writes s while the copy lives."""
    assert_illegal(ROWS, "cache_read(s, shared, at=Y.i)\nfuse(s.i, Y.i)", rule="cache-conflict", primitive="fuse",
                   statements=["s", "Y"], match="s(i=0, j=0) writes s while the shared copy of s is live")


def test_fuse_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "fuse(C.io, C.jo)\nfuse(Y.i, Y.j)", sizes=GEMM_SILU_SMALL, run=True)
    assert_legal(STENCIL, "fuse(T.i, Y.i)", run=True)
