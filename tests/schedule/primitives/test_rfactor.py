"""rfactor: split a reduction into partial results kept in a new statement's tensor (`C_rf`), combined by the
reduction afterwards (compiler/schedule/primitives/rfactor.py); what groupings are legal is the reduction's `combine`
policy (docs/legality.md).

Rules rfactor can break: reduction-grouping (a strict reduction regrouped), segment-count (partial sums that
are not the program's declared segments) and rounding-added (partial results stored in a narrower dtype).
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import assert_round_trip, sched, tree_change

# A GEMM whose reduction declares POLICY (replaced by each test).
GEMM = """
const M = 4, N = 4, K = 32
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32 POLICY
}
"""
STRICT, REASSOC, SEGMENTS = (GEMM.replace(" POLICY", p) for p in ("", " combine reassoc", " combine segments(4)"))


def test_rfactor_tree(golden):
    def step(s):
        s.split("C.k", 8)
        s.rfactor("C.ko")

    golden(tree_change(sched(REASSOC), step))


def test_rfactor_trace_round_trip():
    s = sched(REASSOC)
    s.split("C.k", 8)
    s.rfactor("C.ko")
    s.bind("C_rf.ko", "grid.z")
    assert_round_trip(REASSOC, s)
    t = sched(SEGMENTS)
    t.rfactor("C.k", segments=4, dtype="f32")
    assert_round_trip(SEGMENTS, t)


def test_rfactor_of_a_strict_reduction_is_reduction_grouping():
    err = assert_illegal(STRICT, "ko, kk = split(C.k, 8)\nrfactor(C.ko)", rule="reduction-grouping",
                         primitive="rfactor", statements=["C"], changes_result=True,
                         match="the reduction C would be split into partial sums C_rf[i, j, ko]")
    assert err.counterexample.startswith("C(i=0, j=0, k=8) and C(i=0, j=0, k=9) would be added to each other")


def test_rfactor_into_other_segments_than_declared_is_segment_count():
    err = assert_illegal(SEGMENTS, "ko, kk = split(C.k, 4)\nrfactor(C.ko)", rule="segment-count", primitive="rfactor",
                         statements=["C"], changes_result=True)
    assert err.counterexample == ("C(i=0, j=0, k=0) and C(i=0, j=0, k=4) are in one segment of the program but would "
                                  "be in different partial sums")


def test_rfactor_partials_in_a_narrower_dtype_is_rounding_added():
    assert_illegal(REASSOC, "rfactor(C.k, segments=4, dtype=bf16)", rule="rounding-added", primitive="rfactor",
                   statements=["C"],
                   match="the partial sums of C would be stored as bf16, rounding the f32 accumulator",
                   changes_result=True)


def test_rfactor_runs_like_program_order():
    """Into the declared segments, the rfactored kernel computes the program bit for bit (also with the partial
    sums' loop bound to the grid: split-K without atomics)."""
    assert_legal(SEGMENTS, "rfactor(C.k, segments=4)\nbind(C_rf.ko, grid.z)", run=True)
    assert_legal(SEGMENTS, "ko, kk = split(C.k, 10)\nrfactor(C.ko)", sizes={"K": 40}, run=True)


def test_the_partial_sums_reads_are_the_accesses_its_value_holds():
    """The partial's value reads A[i, 8*ko + ki]; its reads must name those nodes (the lowering reads the value, the
    buffer plan and the legality checks the reads), not the original A[i, k]."""
    from tdsl.compiler.model.program import collect_accesses

    s = sched(REASSOC)
    s.split("C.k", 8)
    s.rfactor("C.ko")
    partial = s.model.stmt("C_rf")
    in_value = {id(a) for a in collect_accesses(partial.value)}
    assert partial.reads and all(id(r.node) in in_value for r in partial.reads)


def test_the_partial_sums_iterator_is_named_apart_from_the_sizes():
    """rfactor named the partial sums' new iterator `k_in` without looking at the sizes: with a size `k_in` that
    iterator was the size in isl's text, and a schedule `check` called legal computed other values (probe of the
    25th session).  The partial sums' other names are kept apart the same way."""
    program = """
const M = 4, k_in = 6
kernel r(X: f32[M, k_in]) -> (s: f32[M]) {
  s[i] = sum(k) X[i, k] * (k_in + 0.5) accum f32 combine segments(6)
}
"""
    s = assert_legal(program, "ko, kk = split(s.k, 1)\nrfactor(s.ko)", run=True)
    assert "k_in" not in s.model.stmt("s_rf").iters
    with pytest.raises(ScheduleError, match="'s_rf' is a size of the kernel: rename the size"):
        sched(program.replace("k_in", "s_rf")).rfactor("s.k", segments=6)


def test_a_run_time_size_named_like_a_primed_iterator_leaves_segments_alone():
    """The segments' pairs were read from isl text naming the second instance's iterators `k_`: a run-time size
    `k_` made rfactor into the declared 3 segments illegal ("would make 3 partial sums")."""
    program = """
param k_
const K = 12
kernel r(X: f32[k_, K]) -> (s: f32[k_]) {
  s[i] = sum(k) X[i, k] accum f32 combine segments(3)
}
"""
    assert_legal(program, "rfactor(s.k, segments=3)", sizes={"k_": 5}, run=True)
    assert_legal(program, "rfactor(s.k, segments=3)")


MAXIMA_IN_STORE_DTYPE = """
const M = 4, K = 12
kernel s(X: f32[M, K], Xb: bf16[M, K]) -> (Y: f32[M], Z: f32[M]) {
  m[i]: bf16 = max(k) X[i, k] accum f32
  n[i]: f8e4m3 = max(k) Xb[i, k] accum bf16
  Y[i] = 1.0 / m[i]
  Z[i] = 1.0 / n[i]
}
"""


@pytest.mark.parametrize("stmt, dtype", [("m", "bf16"), ("n", "f8e4m3")])
def test_partial_maxima_in_the_results_own_dtype_are_exact(stmt, dtype):
    """Rounding is monotone, and the store rounds to the result's dtype anyway: r(max(r(a), r(b))) = r(max(a, b)).
    So partial maxima stored in that dtype change no bit (probe V of the 28th session: refused as rounding-added).
    Checked in the interpreter on normal values, ties of the narrow grid, zeros of both signs, NaN and infinities;
    a partial dtype narrower than the accumulator but not the result's stays refused."""
    import numpy as np

    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs

    program = loads(MAXIMA_IN_STORE_DTYPE)
    s = program.schedule()
    s.split(f"{stmt}.k", 4)
    s.rfactor(f"{stmt}.ko", dtype=dtype)
    original = program.schedule()
    rng = np.random.default_rng(5)
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 448.0, 464.0, 1.0625, 1.0 + 2 ** -9, -1e-45], np.float32)
    for trial in range(40):
        x = (rng.standard_normal((4, 12)) * 4).astype(np.float32)
        if trial % 2:
            x.flat[rng.integers(0, 48, 12)] = rng.choice(specials, 12)
        inputs = program_order_inputs(s.model, {"X": x, "Xb": x})
        want = interpret(original.model, original.time_map(), inputs)
        got = interpret(s.model, s.time_map(), inputs)
        for name in ("Y", "Z"):
            assert np.asarray(want[name]).tobytes() == np.asarray(got[name]).tobytes()
    from tdsl.compiler.errors import RoundingAdded

    narrower = loads(MAXIMA_IN_STORE_DTYPE).schedule()
    narrower.split("m.k", 4)
    with pytest.raises(RoundingAdded, match="partial maxima of m would be stored as f8e4m3"):
        narrower.rfactor("m.ko", dtype="f8e4m3")


@pytest.mark.parametrize("loop, hint", [("C.kk", "rfactor(C.ko)"), ("C.i", "rfactor(C.ko)")])
def test_a_loop_rfactor_does_not_take_names_the_one_it_does(loop, hint):
    """The inner loop of the split (k mod 8) or an output's loop: the message says which loop to pass (outside
    probe of the 30th session: "must split ... (ji = floor(j/F))" read as if ji itself should be floor(j/F))."""
    s = sched(REASSOC)
    s.split("C.k", 8)
    with pytest.raises(ScheduleError) as err:
        s.rfactor(loop)
    assert "rfactor takes the loop over the first reduction iterator k, or the outer loop of a split" in str(err.value)
    assert str(err.value).endswith(hint)


def test_without_a_loop_rfactor_takes_the_message_says_to_split():
    s = sched(REASSOC)
    s.split("C.k", 8)
    s.fuse("C.ko", "C.kk")
    with pytest.raises(ScheduleError, match=r": split C's loop over k and pass its outer loop$"):
        s.rfactor("C.ko_kk")
