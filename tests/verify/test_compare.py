"""compiler/verify/compare.py: the tolerance a generated result is held to."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare, online_bound, reordered_terms, tolerance_dtype

SUMS = """
const M = 4, N = 11
kernel k(X: f32[M, N]) -> (strict_sum: bf16[M], relaxed_sum: bf16[M], scaled: bf16[M]) {
  strict_sum[i] = sum(j) X[i, j] accum bf16
  relaxed_sum[i] = sum(j) X[i, j] accum bf16 combine reassoc
  scaled[i] = relaxed_sum[i] * 2.0
}
"""


def test_reordered_terms_counts_the_terms_of_relaxed_reductions_upstream():
    model = loads(SUMS, "sums.tdsl").schedule().model
    assert reordered_terms(model, "strict_sum") == 1  # a strict sum keeps its order: no allowance
    assert reordered_terms(model, "relaxed_sum") == 11
    assert reordered_terms(model, "scaled") == 11  # reads the relaxed sum


def test_terms_widen_the_allowance_and_strict_comparisons_stay_tight():
    ref = np.array([0.75390625, 2.890625], dtype=np.float32)
    got = np.array([0.7890625, 2.890625], dtype=np.float32)  # 0.035 off: 1.5 units of the allowance at 1 term
    assert not compare(ref, got, "bf16").ok
    assert compare(ref, got, "bf16", terms=11).ok
    assert not compare(ref, ref + 1.0, "bf16", terms=11).ok  # a wrong result is still wrong


def test_an_infinity_in_the_reference_does_not_widen_the_tolerance():
    """The tolerance is scaled by the largest reference value: an overflow there once made it infinite, and
    every other element passed whatever the kernel wrote (found by the GPU fuzz's warnings)."""
    ref = np.array([np.inf, 1.0, 2.0], dtype=np.float32)
    result = compare(ref, np.array([np.inf, 5.0, 2.0], dtype=np.float32), "f32")
    assert not result.ok and result.n_bad == 1 and result.first_bad == (1,)
    assert compare(ref, ref.copy(), "f32").ok


def test_infinities_must_be_where_the_reference_has_them():
    ref = np.array([np.inf, -np.inf, 1.0], dtype=np.float32)
    assert not compare(ref, np.array([-np.inf, -np.inf, 1.0], dtype=np.float32), "bf16").ok  # the wrong sign
    result = compare(ref, np.array([3e38, -np.inf, 1.0], dtype=np.float32), "bf16")  # a number for an infinity
    assert not result.ok and result.inf_mismatch == 1 and "1 infinity mismatches" in result.summary()
    assert not compare(np.array([1.0], dtype=np.float32), np.array([np.inf], dtype=np.float32), "f32").ok


def test_nans_in_both_agree_and_are_said():
    """A row the program makes NaN (attention with every key masked) agrees, and the summary says how many, so
    that `ok` is not read as "all numbers" (probe of the 26th session)."""
    ref = np.array([np.nan, np.nan, 1.0], dtype=np.float32)
    result = compare(ref, ref.copy(), "f32")
    assert result.ok and result.nan_both == 2 and result.summary().endswith("0/3 elements outside, 2 NaN in both")
    assert "NaN in both" not in compare(ref[2:], ref[2:], "f32").summary()


GRAMSCHMIDT_RANK_DEFICIENT = {"M": 5, "N": 6}  # six columns in R^5: the last one's residual is rounding noise


def _gramschmidt():
    from pathlib import Path

    from tdsl.compiler.reference.interpreter import interpret, random_inputs, variants
    from tdsl.compiler.verify.compare import VARIANTS

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "polybench" / "solvers" / "gramschmidt.tdsl"
    sched = loads(path.read_text(), str(path), sizes=GRAMSCHMIDT_RANK_DEFICIENT).schedule()
    inputs = random_inputs(sched.model, 3)
    ref = interpret(sched.model, sched.time_map(), inputs)["Q"]
    return ref, [other["Q"] for other in variants(sched.model, sched.time_map(), inputs, VARIANTS)]


def test_an_element_no_order_of_the_sums_determines_is_left_unchecked():
    """Rank-deficient gramschmidt: Q's last column is rounding noise over its own norm, so any other association
    of the sums (a kernel's tile sums, allowed by default) gives another unit vector.  The comparison samples
    other orders and leaves those elements out, and says so (fuzz finding
    gramschmidt-rank-deficient-column-is-rounding-noise)."""
    ref, others = _gramschmidt()
    noise = others[0].copy()  # another association's result: as good as the program's
    assert not compare(ref, noise, "f32").ok
    result = compare(ref, noise, "f32", variants=others[1:] + [others[0]])
    assert result.ok and result.undetermined >= 1
    assert "not checked" in result.summary()
    assert np.all(np.abs(ref[:, :5] - others[0][:, :5]) <= 1e-4)  # the first five columns are determined


def test_widening_for_conditioning_does_not_hide_a_wrong_determined_element():
    ref, others = _gramschmidt()
    wrong = ref.copy()
    wrong[2, 1] += 1e-3  # a determined column: another order of the sums moves it by a few units only
    result = compare(ref, wrong, "f32", variants=others)
    assert not result.ok and result.first_bad == (2, 1)
    assert result.undetermined == 5  # the last column, and only it


def test_an_order_that_stays_within_the_tolerance_widens_nothing():
    """Only an element another order moves past its tolerance is ill-conditioned: elsewhere the tolerance is the
    dtype's, whatever the margin times the move would be."""
    ref = np.array([1.0, 2.0], dtype=np.float32)  # bf16 tolerance at 1.0: 2 units of 2^-7 plus one of 2^-6
    other = np.array([1.01, 2.0], dtype=np.float32)  # moved 0.01, inside it: 16 times that would be 0.16
    assert not compare(ref, np.array([1.04, 2.0], dtype=np.float32), "bf16", variants=[other]).ok
    assert compare(ref, np.array([1.04, 2.0], dtype=np.float32), "bf16",
                   variants=[np.array([1.035, 2.0], dtype=np.float32)]).ok  # moved past it: widened


def test_an_f32_element_moved_past_its_rounding_but_inside_the_tolerance_is_widened():
    """In f32 the tolerance trusts 17 bits, the rounding moves a value in the 24th: a variant that moves an element
    by 128 units of f32 amplifies the sums' roundings, though the move is inside the tolerance, and a kernel's order
    may move it several times as far (fuzz finding gramschmidt-last-determined-column-amplified-inside-the-
    tolerance)."""
    ref = np.array([0.75, 1.0], dtype=np.float32)  # f32 tolerance at 0.75: 2 units of 2^-17 plus one of 2^-16
    other = np.array([0.75 + 128 * 2.0 ** -24, 1.0], dtype=np.float32)  # 2^-17, inside it
    got = np.array([0.75 + 2.0 ** -14, 1.0], dtype=np.float32)  # 2 tolerances out, 4 times the variant's move
    assert not compare(ref, got, "f32").ok
    assert compare(ref, got, "f32", variants=[other]).ok
    assert not compare(ref, np.array([0.75 + 2.0 ** -11, 1.0], dtype=np.float32), "f32", variants=[other]).ok


def test_an_f32_element_moved_by_its_own_rounding_widens_nothing():
    """A variant that moves an f32 element by its last bit (a rounding that flips) says nothing of conditioning:
    the tolerance stays the dtype's."""
    ref = np.array([0.75, 1.0], dtype=np.float32)
    other = np.array([0.75 + 2.0 ** -24, 1.0], dtype=np.float32)
    assert not compare(ref, np.array([0.75 + 2.0 ** -14, 1.0], dtype=np.float32), "f32", variants=[other]).ok


EXPONENTIAL = """\
const N = 3
kernel e(X: f32[N]) -> (E: bf16[N]) {
  E[i] = exp(X[i])
}
"""


def test_an_exponential_at_the_edge_of_the_bf16_range_is_left_unchecked():
    """exp(x) a hair above the value that rounds to the bf16 infinity: the interpreter's correctly rounded exp
    stores inf, a GPU's approximate one (allowed: docs/legality.md) may store the largest finite bf16.  A variant
    with exp off by the GPU's error bound rounds the other way, so the element is not determined there (the one
    TileLang NaN of the GPU fuzz was such an element); the others are checked as before."""
    from tdsl.compiler.reference.interpreter import interpret, variants
    from tdsl.compiler.verify.compare import VARIANTS

    sched = loads(EXPONENTIAL, "e.tdsl").schedule()
    halfway = (2 - 2.0 ** -8) * 2.0 ** 127  # between the largest bf16 and 2^128: rounds to the infinity
    x = np.array([np.log(halfway) + 1e-7, 1.0, -3.0], dtype=np.float32)
    ref = interpret(sched.model, sched.time_map(), {"X": x})["E"].astype(np.float32)
    assert np.isinf(ref[0])
    got = ref.copy()
    got[0] = (2 - 2.0 ** -7) * 2.0 ** 127  # the largest finite bf16
    assert not compare(ref, got, "bf16").ok  # an infinity where the reference has one is a mismatch ...
    others = [v["E"].astype(np.float32) for v in variants(sched.model, sched.time_map(), {"X": x}, VARIANTS)]
    result = compare(ref, got, "bf16", variants=others)
    assert result.ok and result.undetermined == 1  # ... but not one the program determines
    got[1] = 3.0  # exp(1) is e, wherever the exponential rounds
    assert not compare(ref, got, "bf16", variants=others).ok


def test_where_the_first_variants_change_a_kind_more_orders_are_sampled():
    """Gramschmidt at M = 3, N = 16 (GPU fuzz seed 38): columns past the rank are noise over their own norm, a
    NaN (0 / 0) in some orders of the sums and a number in others.  The 4 first variants already turn some
    NaNs into numbers, so 12 more orders are taken, and the sums as tile reductions (TREE_LANES); the GPU kernel turned R[13, 14] and Q[0, 13] into numbers, which
    none of the 4 did and 2 of the 16 do, so those elements are left unchecked instead of reported."""
    import sys
    from pathlib import Path

    from tdsl.compiler.reference.interpreter import interpret, rounding_variants
    from tdsl.compiler.verify.compare import MORE_VARIANTS, TREE_LANES, VARIANTS, kinds_change

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tests"))
    from fuzz import oracles

    path = root / "benchmarks" / "polybench" / "solvers" / "gramschmidt.tdsl"
    sched = loads(path.read_text(), str(path), sizes={"M": 3, "N": 16}).schedule()
    inputs = oracles.inputs_for(sched.model, 269496397, "normal")
    ref = interpret(sched.model, sched.time_map(), inputs)
    others = rounding_variants(sched.model, sched.time_map(), inputs, ref)
    assert len(others) == VARIANTS + MORE_VARIANTS + len(TREE_LANES) and kinds_change(ref, others[:VARIANTS])
    got = {name: value.copy() for name, value in ref.items()}
    got["R"][13, 14], got["Q"][0, 13] = 0.5, 0.25  # numbers where the reference has NaNs, as the GPU kernel did
    for name, element in (("R", (13, 14)), ("Q", (0, 13))):
        assert np.isnan(ref[name][element])
        assert not compare(ref[name], got[name], "f32", 1, [v[name] for v in others[:VARIANTS]]).ok
        assert compare(ref[name], got[name], "f32", 1, [v[name] for v in others]).ok


def test_variants_that_keep_every_kind_are_not_extended():
    """A well-conditioned result: 4 variants, none changes a kind."""
    from tdsl.compiler.reference.interpreter import interpret, random_inputs, rounding_variants
    from tdsl.compiler.verify.compare import VARIANTS

    sched = loads("const N = 8\nkernel k(X: f32[N]) -> (Y: f32[1]) {\n  Y[z] = sum(i) X[i]\n}\n", "k.tdsl").schedule()
    inputs = random_inputs(sched.model, 1)
    ref = interpret(sched.model, sched.time_map(), inputs)
    assert len(rounding_variants(sched.model, sched.time_map(), inputs, ref)) == VARIANTS


ROUNDED_TERMS = """
const M = 4, N = 10
kernel sumexp(X: f32[M, N]) -> (s: f32[M]) {{
  S[i, j] = X[i, j] * 2.0
  m[i] = max(j) S[i, j] combine online
  P[i, j] = exp(S[i, j] - m[i])
  {rounded}
  s[i] = sum(j) D[i, j] accum f32
}}
schedule one_pass {{
  online(m)
  jo, jj = split(s.j, 4)
  compute_at(D, s.jo)
  compute_at(P, s.jo)
  compute_at(m, s.jo)
}}
"""


@pytest.mark.parametrize("dtype", ["f8e4m3", "bf16", "f16"])
def test_a_cast_in_an_expression_rounds_like_a_store(dtype):
    """A cast rounds as a store does, so an f32 output computed through `bf16(x)` is held to bf16's units like
    one computed through a bf16 tensor.  The one-pass softmax (`online`) moves that rounding: with the cast
    written in the expression, `check` accepted the schedule and its own bound then called the result different
    (probe of the 24th session; 3 of 4 elements off by 146 times the f32 tolerance for f8e4m3)."""
    cast = loads(ROUNDED_TERMS.format(rounded=f"D[i, j] = {dtype}(P[i, j])"), "cast.tdsl")
    stored = loads(ROUNDED_TERMS.format(rounded=f"D[i, j]: {dtype} = P[i, j]"), "stored.tdsl")
    assert tolerance_dtype(cast.schedule().model, "s") == tolerance_dtype(stored.schedule().model, "s") == dtype
    original, one_pass = cast.schedule(), cast.schedule("one_pass")
    for seed in range(6):
        inputs = random_inputs(original.model, seed=seed)
        want = interpret(original.model, original.time_map(), inputs)["s"]
        got = interpret(one_pass.model, one_pass.time_map(), inputs)["s"]
        assert online_bound(original.model, "s", want, got).ok
    assert not online_bound(original.model, "s", want, want * np.float32(2)).ok  # a wrong sum is still wrong


def test_only_fp8_products_declared_fast_accum_are_compared_in_the_narrow_accumulators_units():
    """A bf16 product declared `combine fast_accum` was compared in f16 units, 64 times coarser than f32: the
    declaration changes how FP8 products accumulate, and nothing else (probe MM)."""
    from tdsl.compiler.driver.api import loads

    def dtype(a):
        return tolerance_dtype(loads(f"const M = 4, N = 4, K = 64\nkernel p(A: {a}[M, K], B: {a}[K, N]) -> "
                                     f"(C: f32[M, N]) {{\n  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32 combine "
                                     f"fast_accum\n}}\n").model(), "C")

    assert dtype("f8e4m3") == "f16" and dtype("bf16") == "f32" and dtype("f32") == "f32"
