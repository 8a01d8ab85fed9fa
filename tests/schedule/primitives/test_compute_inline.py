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


# ---------------------------------------------------------------- what an inline may leave in a value (a probe of
# 2026-12-06): `//` and `%` belong to indices, and every read keeps the node its value holds

DIVIDED = """
const N = 10
kernel k(X: f32[N]) -> (Y: f32[N], Z: f32[N]) {
  T[i] = where(i > 2, X[i], 0.5)
  U[i] = X[i] * i
  Y[i] = T[i // 2]
  Z[i] = U[(i + 1) % 5]
}
"""

BLUR = """
const N = 10
kernel blur(A: f32[N]) -> (C: f32[N]) {
  B[i] = where(i > 0, A[i - 1], 0.0) + A[i]
  C[i] = B[i] + where(i > 0, B[i - 1], 0.0)
}
"""


@pytest.mark.parametrize("source, steps, message", [
    (DIVIDED, "compute_inline(T)", "T uses its iterators as values, and Y reads it at an index with `//`"),
    (DIVIDED, "compute_inline(U)", "U uses its iterators as values, and Z reads it at an index with `%`"),
    (BLUR, "io, ii = split(C.i, 4)\nrecompute_at(B, C.io)\ncompute_inline(B)",
     "B uses its iterators as values, and C reads it at an index with `%`"),
])
def test_an_index_operator_would_reach_a_value(source, steps, message):
    """Inlined, `where(i > 2, ...)` read at `T[i // 2]` would compare `i // 2`: the interpreter and every backend
    refused what `tdsl check` had accepted.  Now the step says so."""
    from tdsl.compiler.driver.api import loads
    from tdsl.frontend.diagnostics import TdslError

    prog = loads(source + "schedule s {\n" + steps + "\n}\n")
    with pytest.raises(TdslError, match="compute_inline: " + message.replace("(", r"\(")):
        prog.schedule("s")
    plain = source.replace("U[(i + 1) % 5]", "U[i]")  # read where i is i: the inline is legal and exact
    assert_legal(loads(plain), "compute_inline(U)" if source is DIVIDED else "compute_inline(B)", run=True)


STALE = """
const M = 6, K = 13
kernel k(X: f32[M, K]) -> (C: f32[M]) {
  T[i, k] = where(K > 100, X[i, k], X[i, k] * 2.0)
  C[i] = sum(k) T[i, k] combine reassoc
}
"""

FROM_T = """
const M = 6, N = 5, K = 6
kernel f(A: f32[M, K], X: f32[K, N]) -> (C: f32[M, N]) {
  P[k, j] = X[k, j] * 2.0
  T[i, j] = P[i, j] + 1.0
  C[i, j] = sum(k) A[i, k] * P[k, j] from T[i, j] combine reassoc
}
"""


@pytest.mark.parametrize("source, steps", [
    (STALE, "compute_inline(T)\nrfactor(C.k, segments=4)"),
    (STALE, "rfactor(C.k, segments=4)\ncompute_inline(T)"),
    (FROM_T, "compute_inline(T)"),
    (FROM_T, "compute_inline(T)\ncompute_inline(P)\nko, kk = split(C.k, 2)\nrfactor(C.ko)"),
    (BLUR, "compute_inline(B)\nio, ii = split(C.i, 4)"),
])
def test_every_read_is_a_node_of_its_statement(source, steps):
    """Later steps find a read by its node (rfactor renames them, recompute_at rewrites them, the register plan
    looks them up): after an inline the nodes are the value's own, each read's in its part (value or start)."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.model.program import collect_accesses

    s = assert_legal(loads(source), steps)
    for stmt in s.model.stmts:
        for read in stmt.reads:
            part = stmt.init if read.start else stmt.value
            assert any(read.node is node for node in collect_accesses(part)), (stmt.name, read.tensor)
