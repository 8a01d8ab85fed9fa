"""split: one loop becomes an outer (tile) loop and an inner (point) loop (compiler/schedule/primitives/split.py).

split never changes the order of two instances ((floor(i/f), i mod f) orders like i), so it breaks no rule:
it is legal by construction and skips the dependence check.  Tested here: its tree, its trace round trip, the
names and expressions it makes, its misuse, and a differential run with factors that do not divide the loops.
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.tree_view import tree_text
from tdsl.testing import assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, STENCIL, assert_round_trip, sched, tree_change


def test_split_tree(golden):
    golden(tree_change(sched(), lambda s: s.split("C.i", 32)))


def test_split_trace_round_trip():
    s = sched()
    s.split("C.i", 32)
    s.split("C.k", 16, names=("k1", "k2"))
    s.split("Y.j", 7)
    assert_round_trip(GEMM_SILU, s)


def test_split_names_and_expressions():
    s = sched()
    assert s.split("C.i", 32) == ("io", "ii")
    assert s.split("C.j", 32, names=("a", "b")) == ("a", "b")
    text = tree_text(s.model, s.tree)
    assert "io = floor(i/32)" in text and "ii = i mod 32" in text and "a = floor(j/32)" in text


def test_split_rejects_a_bad_factor_and_unknown_loops():
    s = sched()
    with pytest.raises(ScheduleError, match=r"split: the factor must be a positive integer, got 0"):
        s.split("C.i", 0)
    with pytest.raises(ScheduleError, match=r"split: statement C has no loop 'x'; its loops are i, j, k"):
        s.split("C.x", 4)
    with pytest.raises(ScheduleError, match=r"unknown statement 'D'"):
        s.split("D.i", 4)
    with pytest.raises(ScheduleError, match=r"loop name 'i' is ambiguous \(C.i, Y.i\)"):
        s.split("i", 4)
    with pytest.raises(ScheduleError, match=r"a loop named 'j' already exists here"):
        s.split("C.i", 4, names=("j", "ii"))
    assert len(s.trace) == 0  # failed steps leave no trace and no change


def test_split_breaks_no_rule():
    """Split a reduction loop, a loop that carries a dependence (after fusion) and a bound loop: all legal."""
    assert_legal(GEMM_SILU, "ko, kk = split(C.k, 16)\nkko, kkk = split(C.kk, 3)")
    assert_legal(STENCIL, "fuse(T.i, Y.i)\nio, ii = split(T.i, 5)", run=True)
    assert_legal(STENCIL, "bind(T.i, grid.x)\nio, ii = split(T.i, 4)")


def test_split_runs_like_program_order():
    assert_legal(GEMM_SILU, "io, ii = split(C.i, 16)\nko, kk = split(C.k, 7)\njo, jj = split(Y.j, 9)",
                 sizes=GEMM_SILU_SMALL, run=True)
