"""Differential evidence for the rounding rules: for each rule, a rejected transform really changes the result
in the reference interpreter on some input (the chapter's inputs where it has them), and accepted transforms
give bit-identical results.  Also: the combine policies' semantics.  (The rule pages in docs/rules/ are checked
by docs/test_rule_pages.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import LegalityError
from tdsl.compiler.reference.interpreter import interpret
from tdsl.testing import assert_illegal, assert_legal, run_differences

from catalog import EXAMPLES

TINY = 2.0 ** -24


def run(state_or_schedule, inputs):
    """Outputs of a Schedule, or of the State a rejected step carries (`err.rejected`), in the interpreter."""
    model, tree = state_or_schedule.model, state_or_schedule.tree
    return interpret(model, tree.union_map(model), inputs)


def program_order(prog, inputs):
    return run(prog.schedule(), inputs)


def bits_equal(a, b) -> bool:
    return np.array_equal(np.atleast_1d(np.asarray(a)).view(np.uint8), np.atleast_1d(np.asarray(b)).view(np.uint8))


# ---------------------------------------------------------------- reduction-order, reduction-grouping

TOTAL = """
const K = 3
kernel total(X: f32[K]) -> (s: f32[1]) {
  s[i] = sum(k) X[k]
}
"""


def test_reduction_order_reversed_sum_of_the_chapter():
    """(1 + 2^-24) + 2^-24 = 1 in program order; reversed, 2^-24 + 2^-24 comes first: 1 + 2^-23."""
    prog = loads(TOTAL)
    err = assert_illegal(prog, "reverse(s.k)", rule="reduction-order")
    X = {"X": np.array([1, TINY, TINY], np.float32)}
    assert program_order(prog, X)["s"].tolist() == [1.0]
    assert run(err.rejected, X)["s"].tolist() == [1.0 + 2.0 ** -23]


FOUR = """
const K = 4
kernel total(X: f32[K]) -> (s: f32[1]) {
  s[i] = sum(k) X[k] POLICY
}
"""


def test_reduction_grouping_partial_sums_of_the_chapter():
    """rfactor into [1, 0] and [2^-24, 2^-24]: the second partial sum is 2^-23 and survives the final add."""
    prog = loads(FOUR.replace("POLICY", ""))
    err = assert_illegal(prog, "ko, kk = split(s.k, 2)\nrfactor(s.ko)", rule="reduction-grouping")
    X = {"X": np.array([1, 0, TINY, TINY], np.float32)}
    assert program_order(prog, X)["s"].tolist() == [1.0]
    assert run(err.rejected, X)["s"].tolist() == [1.0 + 2.0 ** -23]


def test_segments_policy_defines_the_grouping_and_rfactor_reproduces_it():
    """`combine segments(2)` makes the two partial sums the program's own result: the same rfactor is legal and
    bit-identical, and program order itself computes 1 + 2^-23 on the chapter's terms."""
    prog = loads(FOUR.replace("POLICY", "combine segments(2)"))
    X = {"X": np.array([1, 0, TINY, TINY], np.float32)}
    assert program_order(prog, X)["s"].tolist() == [1.0 + 2.0 ** -23]
    s = assert_legal(prog, "ko, kk = split(s.k, 2)\nrfactor(s.ko)")
    assert bits_equal(run(s, X)["s"], program_order(prog, X)["s"])
    # A segment is summed in order: reversing inside the segments is still illegal.
    assert_illegal(prog, "reverse(s.k)", rule="reduction-order")


def test_segment_count_mismatch_changes_the_result():
    """8 declared segments of 4 squares; 16 partial sums of 2 regroup the first segment [1, 0, 2^-24, 2^-24]."""
    prog = loads("""
const M = 1, N = 32
kernel sumsq(X: bf16[M, N]) -> (ss: f32[M]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32 combine segments(8)
}
""")
    err = assert_illegal(prog, "jo, jj = split(ss.j, 2)\nrfactor(ss.jo)", rule="segment-count")
    row = np.zeros((1, 32), np.float32)
    row[0, :4] = [1, 0, 2.0 ** -12, 2.0 ** -12]  # squares 1, 0, 2^-24, 2^-24 (all exact in bf16 and f32)
    X = {"X": row}
    assert program_order(prog, X)["ss"].tolist() == [1.0]
    assert run(err.rejected, X)["ss"].tolist() == [1.0 + 2.0 ** -23]
    # The matching split (4 terms per partial sum) is accepted and bit-identical on random rows too.
    assert_legal(prog, "jo, jj = split(ss.j, 4)\nrfactor(ss.jo)", run=True)


@pytest.mark.parametrize("factor", range(1, 17))
def test_rfactor_under_segments_is_accepted_exactly_for_the_declared_segments(factor):
    prog = loads("""
const M = 2, N = 16
kernel sumsq(X: bf16[M, N]) -> (ss: f32[M]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32 combine segments(4)
}
""")
    steps = f"jo, jj = split(ss.j, {factor})\nrfactor(ss.jo)"
    if factor == 4:
        assert_legal(prog, steps, run=True)
    else:
        assert_illegal(prog, steps, rule="segment-count")


def test_segment_count_from_a_size_makes_a_row_depend_on_the_batch():
    """Allowed with reassoc (the program says any grouping is fine): the same row then gives different sums for
    M = 1 and M = 8, which is what `deterministic` and `segments(N)` forbid (chapter 5.2.4, 10.5.3)."""
    text = """
const M = 1, N = 64
kernel sumsq(X: bf16[M, N]) -> (ss: f32[M]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32 POLICY
}
"""
    row = np.full(64, 2.0 ** -12, np.float32)  # squares: 1, then 63 times 2^-24
    row[0] = 1
    results = {}
    for m in (1, 8):
        prog = loads(text.replace("POLICY", "combine reassoc"), sizes={"M": m})
        s = assert_legal(prog, "rfactor(ss.j, segments=M)")
        X = {"X": np.tile(row, (m, 1)).astype(np.float32)}
        results[m] = float(run(s, X)["ss"][0])
    assert results[1] == 1.0  # one segment: every 2^-24 is rounded away against 1
    assert results[8] == 1.0 + 7 * 2.0 ** -21  # 8 segments: seven partial sums of 8 * 2^-24 survive
    for policy in ("combine deterministic", "combine segments(8)"):
        assert_illegal(loads(text.replace("POLICY", policy), sizes={"M": 8}), "rfactor(ss.j, segments=M)",
                       rule="segment-count", match="would depend on M")


def test_deterministic_rfactor_with_a_constant_count_is_batch_invariant():
    text = """
const M = 1, N = 64
kernel sumsq(X: bf16[M, N]) -> (ss: f32[M]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32 combine deterministic
}
"""
    rng = np.random.default_rng(5)
    row = dt.round_to("bf16", rng.standard_normal(64) * np.exp2(rng.integers(-12, 12, 64)))
    got = []
    for m in (1, 3):
        s = assert_legal(loads(text, sizes={"M": m}), "rfactor(ss.j, segments=8)\nbind(ss_rf.jo, grid.x)")
        got.append(run(s, {"X": np.tile(row, (m, 1)).astype(np.float32)})["ss"])
    assert bits_equal(got[0][0], got[1][0]) and bits_equal(got[1][0], got[1][2])


# ---------------------------------------------------------------- atomic-combine

SPLIT_K = """
const M = 1, N = 1, K = 8
kernel gemm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32 POLICY
}
"""
SPLIT_K_STEPS = "ko, kk = split(C.k, 4)\nreorder(C, ko, i, j, kk)\nbind(C.ko, grid.z)"


def test_atomics_depend_on_the_arrival_order():
    """Two programs add partial results [1, 0, 0, 0] and [2^-24, 2^-24, 0, 0] to C with atomics: in one arrival
    order C = 1, in the other C = 1 + 2^-23.  Rejected for `deterministic`; allowed for `reassoc`."""
    err = assert_illegal(loads(SPLIT_K.replace("POLICY", "combine deterministic")), SPLIT_K_STEPS,
                         rule="atomic-combine")
    model = err.rejected.model
    X = {"A": np.array([[1, 0, 0, 0, TINY, TINY, 0, 0]], np.float32), "B": np.ones((8, 1), np.float32)}
    first = interpret(model, "{ C[i, j, k] -> [floor(k/4), k mod 4] }", X)["C"]  # program 0 finishes first
    second = interpret(model, "{ C[i, j, k] -> [-floor(k/4), k mod 4] }", X)["C"]  # program 1 finishes first
    assert first.tolist() == [[1.0]] and second.tolist() == [[1.0 + 2.0 ** -23]]
    assert_legal(loads(SPLIT_K.replace("POLICY", "combine reassoc")), SPLIT_K_STEPS)
    assert_illegal(loads(SPLIT_K.replace("POLICY", "")), SPLIT_K_STEPS, rule="parallel-reduction")


def test_deterministic_split_k_through_rfactor_is_accepted():
    """The deterministic alternative: partial sums in a buffer (one element per program), added in ko order."""
    prog = loads(SPLIT_K.replace("POLICY", "combine deterministic"))
    s = assert_legal(prog, "ko, kk = split(C.k, 4)\nrfactor(C.ko)\nreorder(C_rf, ko, i, j)\nbind(C_rf.ko, grid.z)")
    X = {"A": np.array([[1, 0, 0, 0, TINY, TINY, 0, 0]], np.float32), "B": np.ones((8, 1), np.float32)}
    assert run(s, X)["C"].tolist() == [[1.0 + 2.0 ** -23]]  # (1) + (2^-24 + 2^-24), the same on every run


# ---------------------------------------------------------------- reduction-incomplete: SiLU and E4M3


def test_silu_of_partial_sums_of_the_chapter():
    """Partial sums 1 and -1: SiLU(1) + SiLU(-1) = 0.4621 != SiLU(0) = 0."""
    silu = lambda x: x / (1 + math.exp(-x))  # noqa: E731
    assert abs(silu(1) + silu(-1) - 0.4621171572600098) < 1e-15 and silu(0) == 0
    prog = loads("""
const M = 1, K = 2
kernel act(X: f32[M, K]) -> (Y: f32[M]) {
  C[i] = sum(k) X[i, k]
  Y[i] = silu(C[i])
}
""")
    err = assert_illegal(prog, "reverse_compute_at(Y, C.k)", rule="reduction-incomplete", match="SiLU(1) + SiLU(-1)")
    X = {"X": np.array([[1, -1]], np.float32)}
    assert program_order(prog, X)["Y"].tolist() == [0.0]
    assert run(err.rejected, X)["Y"].tolist() == [pytest.approx(silu(1), rel=1e-6)]  # SiLU of the partial sum 1


QUANT = """
const M = 1, K = 256, N = 1
kernel quant_gemm(A: f16[M, K], W: f8e4m3[K, N]) -> (Out: f16[M, N]) {
  amax[i] = max(k) abs(A[i, k])
  Aq[i, k]: f8e4m3 = A[i, k] * 448.0 / amax[i]
  P[i, j] = sum(k) Aq[i, k] * W[k, j] accum f32
  Out[i, j] = P[i, j] * amax[i] / 448.0
}
"""


def test_e4m3_quantization_with_the_first_blocks_max_example_5_7():
    """Example 5-7: two blocks of 128, first elements 1 and 10, weights 1 at k = 0 only.  With the row's max,
    1 * 448/10 = 44.8 rounds to 44 in E4M3 and dequantizes to 44 * 10/448 = 55/56; with the first block's max
    (1) it is exactly 448 -> 1.  The rejected schedule quantizes with the block max and gives neither."""
    prog = loads(QUANT)
    err = assert_illegal(prog, "ko, kk = split(amax.k, 128)\nreverse_compute_at(Aq, amax.ko)",
                         rule="reduction-incomplete", match=["55/56", "statistic of a whole row"])
    A = np.zeros((1, 256), np.float32)
    A[0, 0], A[0, 128] = 1, 10
    W = np.zeros((256, 1), np.float32)
    W[0, 0] = 1
    X = {"A": A, "W": W}
    want = program_order(prog, X)["Out"]
    assert float(want[0, 0]) == float(dt.round_to("f16", 55 / 56))
    assert float(dt.round_to("f8e4m3", 1 * 448 / 10)) == 44  # the rounding that cannot be undone
    assert float(dt.round_to("f8e4m3", 1 * 448 / 1)) * 1 / 448 == 1.0  # the chapter's block-max result
    got = run(err.rejected, X)["Out"]
    assert not bits_equal(got, want)
    assert float(got[0, 0]) == 10.0  # quantized with the block max 1 (448), dequantized with the row max 10


def test_softmax_and_rmsnorm_before_their_statistics_change_the_result():
    for text, steps in [
        ("""
const M = 2, N = 8
kernel softmax(X: bf16[M, N]) -> (Y: bf16[M, N]) {
  m[i] = max(j) X[i, j]
  e[i, j] = exp(X[i, j] - m[i])
  s[i] = sum(j) e[i, j] accum f32
  Y[i, j] = e[i, j] / s[i]
}
""", "jo, jj = split(s.j, 4)\nreverse_compute_at(Y, s.jo)"),
        ("""
const M = 2, N = 8
const eps = 1e-6
kernel rmsnorm(X: bf16[M, N], g: bf16[N]) -> (Y: bf16[M, N]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32
  r[i] = rsqrt(ss[i] / N + eps)
  Y[i, j] = X[i, j] * r[i] * g[j]
}
""", "jo, jj = split(ss.j, 4)\nreverse_compute_at(r, ss.jo)"),
    ]:
        assert_illegal(loads(text), steps, rule="reduction-incomplete", match="statistic of a whole row",
                       changes_result=True)


# ---------------------------------------------------------------- rounding-removed, rounding-added

GEMM_SILU = """
const M = 2, K = 4, N = 2
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
"""
FUSED = "reverse_compute_at(Y, C.j)"


def gemm_silu_inputs():
    A = np.zeros((2, 4), np.float32)
    A[0, :2] = [1, 2.0 ** -8]  # C[0, 0] = 1 + 2^-8 in f32, 1 in bf16 (a tie, rounded to even)
    return {"A": A, "W": np.ones((4, 2), np.float32)}


def test_rounding_removed_register_copy_feeds_silu_unrounded():
    prog = loads(GEMM_SILU)
    err = assert_illegal(prog, [FUSED, "cache_write(C, register, at=C.j, dtype=f32)"], rule="rounding-removed")
    X = gemm_silu_inputs()
    want, got = program_order(prog, X)["Y"], run(err.rejected, X)["Y"]
    assert float(want[0, 0]) == float(dt.round_to("bf16", 1 / (1 + math.exp(-1))))  # SiLU(1)
    assert float(got[0, 0]) != float(want[0, 0])  # SiLU(1 + 2^-8)
    # The default register copy keeps the rounding, and so does an f32 copy nothing inside the loop reads.
    s = assert_legal(prog, [FUSED, "cache_write(C, register, at=C.j)"], run=True)
    assert bits_equal(run(s, X)["Y"], want)
    assert_legal(prog, "cache_write(C, register, at=C.j, dtype=f32)", run=True)


def test_rounding_removed_inline_without_the_cast():
    prog = loads("""
const N = 1
kernel ties(x: bf16[N], m: bf16[N]) -> (hit: f32[N]) {
  q[i]: bf16 = x[i] / 3.0
  hit[i] = where(q[i] == m[i], 1.0, 0.0)
}
""")
    err = assert_illegal(prog, "compute_inline(q, round=false)", rule="rounding-removed")
    third = float(dt.round_to("bf16", np.float32(1) / np.float32(3)))  # 0.333984375
    X = {"x": np.array([1], np.float32), "m": np.array([third], np.float32)}
    assert program_order(prog, X)["hit"].tolist() == [1.0]  # the stored bf16 quotient equals m
    assert run(err.rejected, X)["hit"].tolist() == [0.0]  # PyTorch #195214: the f32 quotient does not
    s = assert_legal(prog, "compute_inline(q)", run=True)  # the default keeps the cast
    assert run(s, X)["hit"].tolist() == [1.0]


def test_inline_without_a_cast_is_legal_for_f32():
    prog = loads("""
const N = 8
kernel chain(G: f32[N], U: f32[N]) -> (Z: f32[N]) {
  T[i] = silu(G[i])
  Z[i] = T[i] * U[i]
}
""")
    assert_legal(prog, "compute_inline(T, round=false)", run=True)


def test_rounding_added_quantized_copy_and_narrow_accumulator():
    prog = loads("""
const M = 1, N = 1, K = 4
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}
""")
    X = {"A": np.array([[1.0625, 0, 0, 0]], np.float32), "B": np.ones((4, 1), np.float32)}
    err = assert_illegal(prog, "cache_read(A, shared, at=C.i, dtype=f8e4m3)", rule="rounding-added")
    assert program_order(prog, X)["C"].tolist() == [[1.0625]]
    assert run(err.rejected, X)["C"].tolist() == [[1.0]]  # 1.0625 is not an E4M3 value
    s = assert_legal(prog, "cache_read(A, shared, at=C.i, dtype=f32)", run=True)  # a wider copy is exact
    assert run(s, X)["C"].tolist() == [[1.0625]]
    X = {"A": np.array([[1, 2.0 ** -8, 2.0 ** -8, 0]], np.float32), "B": np.ones((4, 1), np.float32)}
    err = assert_illegal(prog, "cache_write(C, register, at=C.i, dtype=bf16)", rule="rounding-added")
    assert program_order(prog, X)["C"].tolist() == [[1 + 2.0 ** -7]]
    assert run(err.rejected, X)["C"].tolist() == [[1.0]]  # each 1 + 2^-8 rounds back to 1 in a bf16 accumulator


def test_rounding_added_partial_sums_in_bf16():
    prog = loads(FOUR.replace("POLICY", "combine reassoc"))
    err = assert_illegal(prog, "rfactor(s.k, segments=2, dtype=bf16)", rule="rounding-added")
    X = {"X": np.array([1, 2.0 ** -8, 0, 0], np.float32)}
    assert program_order(prog, X)["s"].tolist() == [1 + 2.0 ** -8]
    assert run(err.rejected, X)["s"].tolist() == [1.0]


# ---------------------------------------------------------------- accepted transforms are bit-identical


@pytest.mark.parametrize("name, schedule, sizes", [
    ("gemm_silu", "fused", {"M": 70, "N": 70, "K": 40}),
    ("swiglu_quant", "fused", {"M": 8, "N": 40}),
    ("swiglu_quant", "inlined", {"M": 8, "N": 40}),
    ("softmax", "row_fused", {"M": 4, "N": 24}),
    ("rmsnorm", "row_per_program", {"M": 4, "N": 24}),
    ("quant_gemm", "separate", {"M": 8, "K": 24, "N": 16}),
])
def test_accepted_example_schedules_are_bit_identical(name, schedule, sizes):
    assert_legal(EXAMPLES / f"{name}.tdsl", schedule, sizes=sizes, run=True)


def test_moving_a_statement_out_of_a_shared_loop_keeps_its_own_loops():
    """compute_at(e, s.i) after compute_at(m, e.j): e leaves the loop j it shares with m and takes its own copy
    of j (found by tests/schedule/test_properties.py: e's instances used to collapse onto one time)."""
    s = assert_legal(EXAMPLES / "softmax.tdsl", "jo, jj = split(Y.j, 1)\ncompute_at(m, e.j)\ncompute_at(e, s.i)",
                     sizes={"M": 3, "N": 13}, run=True)
    assert [loop.name for loop in s.tree.path("e")] == ["i", "j"]


def test_rmsnorm_with_declared_segments_split_and_parallel_is_bit_identical():
    """The chapter's 8 segments of a row (5.2.4), declared in the program: partial sums in parallel programs,
    then the fixed-order combine -- bit for bit what the program defines."""
    prog = loads("""
const M = 4, N = 64
const eps = 1e-6
kernel rmsnorm(X: bf16[M, N], g: bf16[N]) -> (Y: bf16[M, N]) {
  ss[i] = sum(j) X[i, j] * X[i, j] accum f32 combine segments(8)
  r[i] = rsqrt(ss[i] / N + eps)
  Y[i, j] = X[i, j] * r[i] * g[j]
}
""")
    assert_legal(prog, "rfactor(ss.j, segments=8)\nbind(ss_rf.i, grid.x)\nbind(ss_rf.jo, grid.y)", run=True)


@pytest.mark.parametrize("text, steps", [
    # apache/tvm#1316: a producer read with a stride, computed at the consumer's outer loop.
    ("""
const N = 15
kernel strided(A: f32[N]) -> (C: f32[5, 3]) {
  B[i] = A[i] + 1.0
  C[i, j] = B[i + j * 5] * 2.0
}
""", "compute_at(B, C.i)"),
    # apache/tvm#2898: producer and consumer split by factors that do not divide each other.
    ("""
const N = 48
kernel copy(A: f16[N]) -> (D: f16[N]) {
  C[i] = A[i]
  D[i] = C[i]
}
""", "co, ci = split(C.i, 10)\ndo, di = split(D.i, 32)\ncompute_at(C, D.do)"),
    # apache/tvm#15911: a consumer chain moved into a split producer loop.
    ("""
const N = 64
kernel chain(A: f32[N], B: f32[N]) -> (E: f32[N]) {
  C[i] = A[i] + B[i]
  D[i] = C[i] + C[i]
  E[i] = D[i] + A[i]
}
""", "i0, i1 = split(D.i, 32)\nreverse_compute_at(E, D.i1)"),
])
def test_legal_twins_from_issue_trackers_are_bit_identical(text, steps):
    assert_legal(loads(text), steps, run=True)


# ---------------------------------------------------------------- the test helpers themselves


def test_assert_helpers_fail_with_the_diagnostic():
    prog = loads(TOTAL)
    with pytest.raises(AssertionError, match=r"expected a legal schedule, but a step is illegal:\n.*rule reduction-order"):
        assert_legal(prog, "reverse(s.k)")
    with pytest.raises(AssertionError, match="every step is legal"):
        assert_illegal(prog, "split(s.k, 2)", rule="reduction-order")
    with pytest.raises(AssertionError, match="expected rule parallel-reduction, got rule reduction-order"):
        assert_illegal(prog, "reverse(s.k)", rule="parallel-reduction")
    with pytest.raises(AssertionError, match="not a legality error"):
        assert_illegal(prog, "split(s.q, 2)", rule="reduction-order")
    with pytest.raises(AssertionError, match="does not contain 'nope'"):
        assert_illegal(prog, "reverse(s.k)", match="nope")
    err = assert_illegal(prog, lambda s: s.reverse("s.k"), rule="dependence")  # a rule refines `dependence`
    assert isinstance(err, LegalityError) and err.rules() == ["reduction-order", "dependence", "legality"]
    assert run_differences(prog, prog.schedule()) == []
