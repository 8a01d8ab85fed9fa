"""Products with absent terms (`Dot.absent_terms`, compiler/lower/reductions.py `_absent_terms`): a tile product
multiplies every pair of its tile, and where a condition masks one operand only, a lane outside the program's
terms is the masked 0 times the other operand's element, NaN for an infinite or NaN one.  isl finds these
products; each backend then keeps them exact (placement.MatrixUnit.absent_terms).  The numbers are checked by
the saved fuzz findings (tests/fuzz/findings/masked-product-*.json, special inputs) and on the GPU
(benchmarks/gpu/absent_terms.py)."""

from pathlib import Path

import pytest

from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.analysis.cost.staging import absent_term_copies, as_generated
from tdsl.compiler.analysis.cost.work import products
from tdsl.compiler.analysis.placement import MATRIX, VECTOR, unit_of
from tdsl.compiler.driver.api import load, loads
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.targets import get_target
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import AccUpdate, Dot, walk_ops

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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


@pytest.mark.parametrize("condition, met", [(" : k <= i", (False, True)), (" : k <= j", (True, False)),
                                            (" : k <= i and k + 20 >= j", (True, True))], ids=["lhs", "rhs", "both"])
def test_a_condition_on_one_operand_makes_absent_terms(condition, met):
    """A condition tying k to i masks A's lanes only, whose zeros meet B's elements (to j: B's lanes, meeting A's);
    the (k, j) condition is a product too (`_separable` once lifted it onto the wrong iterators and took it for
    a tile reduction)."""
    dots = _products(condition)
    assert dots and all(op.partial.absent_terms for op in dots)
    assert {op.partial.absent_met for op in dots} == {met}


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
    """Triton and TileLang keep the product on the tensor cores (and check it); the Ascend backends move it to
    the vector unit, whose loop skips the lanes."""
    dots = _products(" : k <= i", backend, sizes=(64, 64, 64))
    assert dots and all(unit_of(op) == unit for op in dots)


def _tilelang(condition: str) -> str:
    text = ("const M = 64, N = 64, K = 64\n"
            "kernel t(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {\n"
            f"  C[i, j] = sum(k{condition}) A[i, k] * B[k, j] accum f32\n}}\n" + TILED)
    return generate(loads(text, "t.tdsl"), "gpu", target="nvidia", backend="tilelang")


@pytest.mark.parametrize("condition, checked, masked", [(" : k <= i", "B_s", "A_s"), (" : k <= j", "A_s", "B_s")],
                         ids=["lhs", "rhs"])
def test_tilelang_checks_the_operand_that_meets_masked_lanes(condition, checked, masked):
    """TileLang: the operand whose elements meet the other's masked zeros is looked at for an infinite or NaN
    element (the masked one need not be: its own elements are the program's terms), only in the iterations that
    hold absent lanes (the diagonal block), the threads agree at a named barrier, and then the exact product
    runs instead of T.gemm, adding a term only where the mask holds it."""
    text = _tilelang(condition)
    check = [line for line in text.splitlines() if "T.isfinite" in line]
    assert len(check) == 1 and checked in check[0] and masked not in check[0]
    assert "if (ko == io):" in text or "if (ko == jo):" in text
    assert 'T.call_extern("int32", "tdsl_any"' in text and "bar.red.or.pred" in text
    lines = text.splitlines()
    exact = next(n for n, line in enumerate(lines) if "the exact product" in line)
    assert "T.serial(32)" in lines[exact + 2] and "T.if_then_else" in lines[exact + 3]
    assert lines[exact + 4].strip() == "else:" and lines[exact + 5].strip().startswith("T.gemm(")


def test_tilelang_products_without_absent_terms_print_as_before():
    """A ragged product (both operands masked alike) has no check: a bare T.gemm."""
    text = _tilelang("")
    assert "T.isfinite" not in text and "tdsl_any" not in text and "T.gemm(" in text


def test_the_cost_model_counts_the_copy_of_p_the_exact_product_reads():
    """TileLang's exact product reads P from a copy in shared memory: the cost model counts it, in P's dtype,
    where the reduction range depends on the output's indices (causal attention), not in plain attention; in
    the flash schedule it shares the memory of the pipelined copies (the masked iterations run after them),
    in the warp-specialised one it adds to the ring (tests/backends/tilelang checks both against TileLang)."""
    tgt = get_target("h100")
    for example, copies in (("mha_causal", 1), ("mha", 0)):
        sched = load(EXAMPLES / f"{example}.tdsl", sizes={"L": 4096}).schedule("flash")
        kp, = plan_kernels(sched, tgt)
        found = absent_term_copies(sched.model, kp, products(sched.model, kp), tgt, "tilelang")
        assert len(found) == copies and all(b.tensor == "P" and b.dtype == "bf16" and b.scope == "shared"
                                            for b in found)
        assert not absent_term_copies(sched.model, kp, products(sched.model, kp), tgt, "triton")
    shared = {}
    for name in ("flash", "flash_ws"):
        sched = load(EXAMPLES / "mha_causal.tdsl", sizes={"L": 4096}).schedule(name)
        kp, = plan_kernels(sched, tgt)
        shared[name] = as_generated(sched.model, kp, tgt, "tilelang").working_set["shared"]
    assert shared == {"flash": 224 * 1024, "flash_ws": 192 * 1024}


def test_a_product_per_row_into_the_whole_accumulator_has_absent_terms():
    """`pipeline(C.ii)`: a serial loop over the rows inside the tile, each iteration a product of one row of A
    (the others masked) by all of W into the whole accumulator.  Its other rows hold the sums of the other
    iterations, so a masked 0 times an infinite W there is NaN in a stored sum (CPU fuzz seed 5497): the lanes
    count as absent, meeting W."""
    text = ("const M = 9, K = 9, N = 9\n"
            "kernel t(A: bf16[M, K], W: bf16[K, N]) -> (C: bf16[M, N]) {\n"
            "  C[i, j] = sum(k) A[i, k] * W[k, j] accum f32\n}\n"
            "schedule s {\n  io, jo, ii, jj = tile(C.i, C.j, 128, 256)\n  ko, kk = split(C.k, 64)\n"
            "  reorder(C, io, jo, ko, ii, jj, kk)\n  pipeline(C.ii, stages=2)\n}\n")
    kernel, = lower_for(loads(text, "t.tdsl").schedule("s"), "triton").kernels
    dots = [op for op in walk_ops(kernel.body) if isinstance(op, AccUpdate) and isinstance(op.partial, Dot)]
    assert dots and all(op.partial.absent_terms and op.partial.absent_met == (False, True) for op in dots)
