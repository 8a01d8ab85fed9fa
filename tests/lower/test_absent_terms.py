"""Products with absent terms (`Dot.absent_terms`, compiler/lower/reductions.py `_absent_terms`): a tile product
multiplies every pair of its tile, and where a condition masks one operand only, a lane outside the program's
terms is the masked 0 times the other operand's element, NaN for an infinite or NaN one.  isl finds these
products; each backend then keeps them exact (placement.MatrixUnit.absent_terms).  The numbers are checked by
the saved fuzz findings (tests/fuzz/findings/masked-product-*.json, special inputs) and on the GPU
(benchmarks/gpu/absent_terms.py)."""

import pytest

from tdsl.compiler.analysis.placement import MATRIX, VECTOR, unit_of
from tdsl.compiler.driver.api import loads
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import AccUpdate, Dot, walk_ops

TILED = """
schedule gpu {
  io, jo, ii, jj = tile(C.i, C.j, 32, 32)
  ko, kk = split(C.k, 32)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""


def _products(condition: str, backend: str = "triton", sizes=(40, 50, 37)) -> list:
    m, n, k = sizes
    text = (f"const M = {m}, N = {n}, K = {k}\n"
            f"kernel t(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {{\n"
            f"  C[i, j] = sum(k{condition}) A[i, k] * B[k, j] accum f32\n}}\n" + TILED)
    kernel, = lower_for(loads(text, "t.tdsl").schedule("gpu"), backend).kernels
    return [op for op in walk_ops(kernel.body) if isinstance(op, AccUpdate) and isinstance(op.partial, Dot)]


def test_a_ragged_product_has_no_absent_terms():
    """Lanes past K are masked in both operands: 0 times 0."""
    dots = _products("")
    assert dots and not any(op.partial.absent_terms for op in dots)


@pytest.mark.parametrize("condition", [" : k <= i", " : k <= j", " : k <= i and k + 20 >= j"],
                         ids=["lhs", "rhs", "both"])
def test_a_condition_on_one_operand_makes_absent_terms(condition):
    """A condition tying k to i masks A's lanes only (to j: B's only); the (k, j) condition is a product too
    (`_separable` once lifted it onto the wrong iterators and took it for a tile reduction)."""
    dots = _products(condition)
    assert dots and all(op.partial.absent_terms for op in dots)


def test_a_condition_on_the_output_lanes_makes_none():
    """A condition on (i, j) only masks whole output lanes: every term of a stored lane is the program's."""
    text = ("const M = 40, N = 50, K = 37\n"
            "kernel t(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {\n"
            "  C[i, j : j <= i] = sum(k) A[i, k] * B[k, j] accum f32\n}\n" + TILED)
    kernel, = lower_for(loads(text, "t.tdsl").schedule("gpu"), "triton").kernels
    dots = [op for op in walk_ops(kernel.body) if isinstance(op, AccUpdate) and isinstance(op.partial, Dot)]
    assert dots and not any(op.partial.absent_terms for op in dots)


@pytest.mark.parametrize("backend, unit", [("triton", MATRIX), ("tilelang", MATRIX), ("ascend-950", VECTOR),
                                           ("ascend-910b", VECTOR)])
def test_each_backend_keeps_its_absent_terms_out_its_own_way(backend, unit):
    """Triton keeps the product on the tensor cores (and checks it); the Ascend backends move it to the vector
    unit, whose loop skips the lanes; TileLang's T.gemm still adds them (a known limit)."""
    dots = _products(" : k <= i", backend, sizes=(64, 64, 64))
    assert dots and all(unit_of(op) == unit for op in dots)
