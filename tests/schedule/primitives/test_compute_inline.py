"""compute_inline: substitute an elementwise statement's expression into its readers and drop the statement
(compiler/schedule/primitives/compute_inline.py); its rounding stays as a cast unless `round=false`.

Rule compute_inline can break: rounding-removed (`round=false`, where the statement's dtype rounds).
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, assert_round_trip, sched, tree_change

CHAIN = """
const N = 8
kernel chain(G: bf16[N], U: bf16[N]) -> (Z: bf16[N]) {
  T[i]: bf16 = silu(G[i])
  Z[i] = T[i] * U[i]
}
"""


def test_compute_inline_tree(golden):
    """The tree loses T; the statement Z reads T's expression, rounded as T was (shown after the tree)."""
    from tdsl.frontend.printer import expr_text

    s = sched(CHAIN)
    text = tree_change(s, lambda s: s.compute_inline("T"))
    golden(text + f"\nZ[i] = {expr_text(s.model.stmt('Z').value)}\n")


def test_compute_inline_trace_round_trip():
    s = sched(CHAIN)
    s.compute_inline("T")
    assert_round_trip(CHAIN, s)
    f32 = CHAIN.replace("T[i]: bf16 =", "T[i]: f32 =")
    t = sched(f32)
    t.compute_inline("T", round=False)
    assert_round_trip(f32, t)


def test_compute_inline_keeps_the_rounding_as_a_cast():
    s = sched(CHAIN)
    s.compute_inline("T")
    from tdsl.frontend.printer import expr_text

    assert expr_text(s.model.stmt("Z").value) == "bf16(silu(G[i])) * U[i]"
    assert s.tree.leaves() == ["Z"]
    assert sorted(a.tensor for a in s.model.stmt("Z").reads) == ["G", "U"]


def test_compute_inline_misuse():
    s = sched()
    with pytest.raises(ScheduleError, match=r"compute_inline: C is a reduction"):
        s.compute_inline("C")
    with pytest.raises(ScheduleError, match=r"compute_inline: Y is a kernel result"):
        s.compute_inline("Y")


def test_compute_inline_without_the_rounding_is_rounding_removed():
    err = assert_illegal(CHAIN, "compute_inline(T, round=false)", rule="rounding-removed", primitive="compute_inline",
                         statements=["T", "Z"], match="Z would use the value of T unrounded", sizes={"N": 64},
                         changes_result=True)
    assert "1.00390625 becomes 1.0 in bf16" in err.counterexample


def test_compute_inline_runs_like_program_order():
    assert_legal(CHAIN, "compute_inline(T)", sizes={"N": 33}, run=True)
    three = GEMM_SILU.replace("  Y[i, j] = silu(C[i, j])", "  S[i, j] = silu(C[i, j])\n  Y[i, j] = S[i, j] * 2.0")
    assert_legal(three, "compute_inline(S)", sizes=GEMM_SILU_SMALL, run=True)
