"""Compare a kernel's output with the reference interpreter, with tolerances that fit the output dtype.

A generated kernel may legally differ from the interpreter in two ways: a
tile's products are accumulated by hardware in another order (allowed by
default, see docs/legality.md), and exp/rsqrt come from the GPU's math
library.  Both move a result by a few units in the last place of the
output dtype; anything larger is a mismatch.

Tolerance: |got - ref| <= ULPS * ulp(ref) + ulp(max |ref|), where ulp is the
spacing of the output dtype (bf16: 8 bits of precision, f16: 11, f8e4m3: 4,
f32: 24 widened to 2^-16 relative because long f32 reductions reorder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

# Bits of each output dtype the comparison trusts: all of the narrow dtypes' (their precision,
# compiler/dtypes.PRECISION_BITS), 17 of f32's 24 (long f32 reductions are added in another order by the
# hardware, and GPU exp is not correctly rounded).  Kept free of imports: the GPU machine runs this module
# with numpy alone (benchmarks/gpu); tests/model/test_dtypes.py checks it against PRECISION_BITS.
TOLERANCE_BITS = {"bf16": 8, "f16": 11, "f8e4m3": 4, "f32": 17}
# Every bit of each dtype: the units its own rounding moves a value by (compiler/model/dtypes.py PRECISION_BITS).
ROUNDING_BITS = {**TOLERANCE_BITS, "f32": 24}
ULPS = 2
# The units a `combine fast_accum` sum may differ in: Hopper keeps FP8 products in an accumulator of about 14
# significant bits between promotions (DeepSeek-V3 report, 3.3.2); judged in f16's 11 bits, with margin.
FAST_ACCUMULATOR = "f16"
# A kernel may round otherwise than the interpreter where docs/legality.md allows it (a tile's terms added in the
# hardware's order, the GPU's approximate exp), and an ill-conditioned result amplifies that past any fixed
# number of units.  The interpreter with those roundings done otherwise (`interpret(..., variant=seed)`, VARIANTS
# of them: every sum's terms in another order, exp and exp2 off by the GPU's error bound) samples the
# amplification per element: where a variant moves an element by more than its own rounding would (ULPS units
# of every bit of the dtype, ROUNDING_BITS, at the element and one at the largest value), the tolerance widens to
# CONDITIONING_MARGIN times the largest move, or stays where it is larger.  Judged against the rounding, not the
# tolerance: in gramschmidt's last determined column at M = 9 (fuzz seed 5474) the variants moved an f32
# element by up to 70 units of f32 at the largest value, inside its 17-bit tolerance (128 of them), and the
# kernel's order of the sums moved it 4 times as far.  In bf16 the two are equal, so a move of one unit (a
# rounding that flips) widens nothing.  Where one moves it by more than UNDETERMINED units of the output's
# dtype at its largest value (2^-9 of it in f32's trusted 17 bits, all of it in bf16's 8), or changes a number
# into a NaN or an infinity, the program's roundings do not determine the element at these inputs (a
# rank-deficient column of gramschmidt: rounding noise divided by its own norm; an exponential rounded to the
# bf16 infinity or just below it), and no kernel can be checked there.  Several variants, because one can
# leave a noise element in place by chance (a sum of two terms reversed in one order and the next) where the
# kernel's rounding does not.
CONDITIONING_MARGIN = 16
UNDETERMINED = 128
VARIANTS = 4
# Where those already turn an element into another kind of value (a NaN into a number: a rank-deficient
# gramschmidt column, whose norm is 0 in some orders of its sums and not in others), which elements the
# program's roundings leave undetermined is itself found by sampling: MORE_VARIANTS further orders are taken
# before a kernel is judged there.  Four were too few: on the GPU a kernel's order turned 3 NaNs of gramschmidt
# at M = 3, N = 16 into numbers that no one of the 4 did, and 3 of 16 did (GPU fuzz seed 38).
MORE_VARIANTS = 12
# ... and the sums added as tile reductions of these many lanes add them (`interpret(..., lanes=n)`): a tree of
# pairs is an association that no order of single additions gives, and where a sum is rounding noise it decides
# which elements come out NaN (the 910B's reduction of 8-lane f32 rows in gramschmidt at M = 4, N = 31, CPU
# fuzz seed 5525: 33 elements NaN or infinite where all 16 orders gave numbers, or the reverse).
TREE_LANES = (2, 4, 8, 16, 32, 64, 128)


@dataclass
class Comparison:
    ok: bool
    max_abs: float
    worst: float  # largest error as a fraction of its tolerance (ok when <= 1)
    n_bad: int
    n: int
    first_bad: tuple = ()
    nan_mismatch: int = 0
    inf_mismatch: int = 0  # an infinity where the other has a number or the opposite infinity
    undetermined: int = 0  # elements another allowed rounding moves too far to check (UNDETERMINED)
    nan_both: int = 0  # NaN in the reference and in the result alike (agreeing, but worth saying)

    def summary(self) -> str:
        text = f"max abs err {self.max_abs:.4g}, worst {self.worst:.2f} of tolerance, {self.n_bad}/{self.n} elements outside"
        if self.nan_mismatch:
            text += f", {self.nan_mismatch} NaN mismatches"
        if self.inf_mismatch:
            text += f", {self.inf_mismatch} infinity mismatches"
        if self.first_bad:
            text += f", first at {self.first_bad}"
        if self.nan_both:
            text += f", {self.nan_both} NaN in both"
        if self.undetermined:
            text += (f"; {self.undetermined} elements not checked: another allowed rounding (the sums in another "
                     f"order, the GPU's exp) moves them by more than {UNDETERMINED} units of the largest value")
        return text


def ulp(values: np.ndarray, dtype: str, bits_of: dict = TOLERANCE_BITS) -> np.ndarray:
    """The spacing at `values` of `dtype` with the bits `bits_of` gives it (the trusted bits by default)."""
    bits = bits_of[dtype]
    mag = np.maximum(np.abs(values), np.finfo(np.float32).tiny)
    return np.exp2(np.floor(np.log2(mag)) - (bits - 1))


def tolerance_dtype(model, tensor: str) -> str:
    """The dtype whose units a kernel's `tensor` may differ in: the coarsest the value passes through on its
    way -- its own, and the store, accumulator and cast dtypes of every statement it depends on.  A tile's sum
    added in the hardware's order may differ in the last f32 bit; stored in f16 on the way (or cast to it in an
    expression: the same rounding), that bit can become one f16 unit, which the f32 output then shows."""
    writers = {s.name: s for s in model.stmts}
    seen, todo, dtypes = set(), [tensor], [model.tensors[tensor].dtype]
    while todo:
        stmt = writers.get(todo.pop())
        if stmt is None or stmt.name in seen:
            continue
        seen.add(stmt.name)
        dtypes += [stmt.dtype] + ([stmt.accum_dtype or "f32"] if stmt.is_reduction else []) + _casts(stmt)
        # FP8 products held in the tensor core's narrower accumulator; other products are not (a bf16 or f32 sum
        # declared fast_accum was compared in f16 units, which could hide an error: probe MM)
        if (stmt.combine or "").startswith("fast_accum") and _reads_fp8(model, stmt):
            dtypes.append(FAST_ACCUMULATOR)
        todo += [r.tensor for r in stmt.reads]
    return min(dtypes, key=lambda d: TOLERANCE_BITS[d])


def _reads_fp8(model, stmt) -> bool:
    """Whether the statement reads an E4M3 tensor: its products are FP8 ones only then."""
    return any(model.tensors[r.tensor].dtype == "f8e4m3" for r in stmt.reads if r.tensor in model.tensors)


def _casts(stmt) -> list[str]:
    """The dtypes a statement's expressions cast to (`bf16(x)`): each rounds as a store in that dtype does."""
    from tdsl.frontend import ast  # here, not above: the GPU machine runs this module with numpy alone

    exprs = [stmt.value] + ([stmt.init] if stmt.init is not None else [])
    return [e.func for x in exprs for e in ast.walk(x) if isinstance(e, ast.Call) and e.func in ast.DTYPES]


def reordered_terms(model, tensor: str) -> int:
    """The most terms one element of a relaxed reduction (`combine reassoc` / `deterministic`) upstream of
    `tensor` adds: in another order each of its additions may round differently, in its accumulator's dtype."""
    writers = {s.name: s for s in model.stmts}
    seen, todo, most = set(), [tensor], 1
    while todo:
        stmt = writers.get(todo.pop())
        if stmt is None or stmt.name in seen:
            continue
        seen.add(stmt.name)
        if stmt.domain.is_empty():  # no instance at these sizes: adds nothing, reads nothing
            continue
        # segments(N) too: a kernel adds a segment's terms as one tile sum, in the hardware's order
        if stmt.is_reduction and (stmt.combine or "strict") not in ("strict", "online"):  # online: a max, any order
            first = len(stmt.lhs_iters)
            n = 1
            for p in range(first, first + len(stmt.red_iters)):
                n *= stmt.domain.dim_max_val(p).to_python() - stmt.domain.dim_min_val(p).to_python() + 1
            most = max(most, n)
        todo += [r.tensor for r in stmt.reads]
    return most


def compare(ref, got, dtype: str, terms: int = 1, variants=None) -> Comparison:
    """`got` within the tolerance of `ref` in units of `dtype`; `terms` > 1 for a result a relaxed reduction of
    that many terms may have summed in another order (each term's rounding moves it, by a unit of the largest
    result at most: the allowance grows with the terms).  NaNs and infinities must be where the reference has
    them (an infinity of the same sign); the tolerance is scaled by the finite values alone, so an overflow in
    the reference cannot widen it to infinity.  `variants`, the reference computed with other allowed roundings
    (a list), widens the tolerance where the result is ill-conditioned (CONDITIONING_MARGIN, UNDETERMINED)."""
    r = np.asarray(ref).astype(np.float64)
    g = np.asarray(got).astype(np.float64)
    nan_mismatch = np.isnan(r) != np.isnan(g)
    r_finite = np.isfinite(r)
    finite = r_finite & np.isfinite(g)
    inf_mismatch = ~np.isnan(r) & ~np.isnan(g) & ~finite & (r != g)
    err = np.abs(np.where(finite, r, 0.0) - np.where(finite, g, 0.0))
    scale = np.max(np.abs(r[r_finite])) if r_finite.any() else 0.0
    unit = ulp(np.where(finite, r, 0.0), dtype)
    allowed = ULPS * unit + (terms * ulp(np.array(scale), dtype) if scale else 0.0)
    unchecked = np.zeros(r.shape, dtype=bool)
    if variants is not None:
        limit = UNDETERMINED * ulp(np.array(scale), dtype) if scale else 0.0
        rounding = ULPS * ulp(np.where(finite, r, 0.0), dtype, ROUNDING_BITS) + (
            ulp(np.array(scale), dtype, ROUNDING_BITS) if scale else 0.0)
        allowed, unchecked = _conditioned(r, [np.asarray(v).astype(np.float64) for v in variants], allowed,
                                          rounding, limit)
    bad = ((err > allowed) | nan_mismatch | inf_mismatch) & ~unchecked
    finite &= ~unchecked
    first = tuple(int(x) for x in np.argwhere(bad)[0]) if bad.any() else ()
    return Comparison(
        ok=not bad.any(),
        max_abs=float(np.where(unchecked, 0.0, err).max()) if err.size else 0.0,
        worst=float(np.max(err[finite] / allowed[finite])) if finite.any() else 0.0,
        n_bad=int(bad.sum()),
        n=int(r.size),
        first_bad=first,
        nan_mismatch=int((nan_mismatch & ~unchecked).sum()),
        inf_mismatch=int((inf_mismatch & ~unchecked).sum()),
        undetermined=int(unchecked.sum()),
        nan_both=int((np.isnan(r) & np.isnan(g) & ~unchecked).sum()),
    )


def kinds_change(reference: dict, variants: list) -> bool:
    """Whether a variant turns an element of an output into another kind of value (a NaN, an infinity or a
    number where the reference has another): see MORE_VARIANTS."""
    return any(not np.all(_same_kind(np.asarray(ref, dtype=np.float64), np.asarray(variant[name], dtype=np.float64)))
               for variant in variants for name, ref in reference.items())


def _same_kind(ref: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per element: both numbers, or the same infinity, or both NaN."""
    return (np.isfinite(ref) & np.isfinite(other)) | (ref == other) | (np.isnan(ref) & np.isnan(other))


def _conditioned(ref: np.ndarray, variants: list, allowed: np.ndarray, rounding: np.ndarray, limit: float) -> tuple:
    """(`allowed` widened where a variant moves an element by more than `rounding` moves it, the elements one
    moves past `limit` or to another kind of value): see CONDITIONING_MARGIN."""
    widened, unchecked = allowed, np.zeros(ref.shape, dtype=bool)
    for variant in variants:
        both = np.isfinite(ref) & np.isfinite(variant)
        same_kind = _same_kind(ref, variant)
        moved = np.abs(np.where(both, ref, 0.0) - np.where(both, variant, 0.0))
        widened = np.maximum(widened, np.where(moved > rounding, CONDITIONING_MARGIN * moved, 0.0))
        unchecked |= ~same_kind | (moved > limit)
    return widened, unchecked


def compare_outputs(model, reference: dict, outputs: dict, variants=None) -> dict:
    """Each output of a generated kernel against the interpreter's, at its dtype's tolerance with the allowance
    of the relaxed reductions it reads: {tensor: Comparison}.  `variants`, a function giving the reference with
    other allowed roundings (a list of results: compiler/reference/interpreter.py `variants`), is called once an
    output fails, to tell an ill-conditioned output from a wrong one (CONDITIONING_MARGIN)."""
    results, others = {}, None
    for t in model.outputs():
        want = np.asarray(reference[t.name]).astype(np.float32)
        dtype, terms = tolerance_dtype(model, t.name), reordered_terms(model, t.name)
        result = compare(want, outputs[t.name], dtype, terms)
        if not result.ok and variants is not None:
            others = variants() if others is None else others
            result = compare(want, outputs[t.name], dtype, terms,
                             [np.asarray(other[t.name]).astype(np.float32) for other in others])
        results[t.name] = result
    return results


def online_bound(model, tensor: str, reference, result) -> Comparison:
    """A schedule with `online` against program order: the rewrite moves roundings (docs/rules/online-policy.md),
    and the bound it is held to is a kernel's tolerance in the dtype the output passes through.  Sums of
    exponentials add no cancelling terms, so it holds for every input."""
    return compare(np.asarray(reference, dtype=np.float32), np.asarray(result, dtype=np.float32),
                   tolerance_dtype(model, tensor))


def reordering_bound(model, tensor: str, reference, result) -> Optional[Comparison]:
    """A schedule that sums a relaxed reduction (`combine reassoc` / `deterministic`) upstream of `tensor` in
    another order, against program order: the allowance the backend oracles give it (`reordered_terms`); None
    when no such reduction feeds `tensor` (then only the same bits will do)."""
    terms = reordered_terms(model, tensor)
    if terms <= 1:
        return None
    return compare(np.asarray(reference, dtype=np.float32), np.asarray(result, dtype=np.float32),
                   tolerance_dtype(model, tensor), terms)
