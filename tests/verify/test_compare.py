"""compiler/verify/compare.py: the tolerance a generated result is held to."""

import numpy as np

from tdsl.compiler.driver.api import loads
from tdsl.compiler.verify import compare, reordered_terms

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
