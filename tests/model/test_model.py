"""The polyhedral model of GEMM equals hand-written isl: domains, accesses, dependences."""

import re

import islpy as isl
import pytest

from tdsl.compiler.driver.api import load, loads
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.frontend.diagnostics import SourceError

from catalog import EXAMPLES

GEMM = """
const M = 64, N = 48, K = 32
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}
"""

GEMM_SILU_PARAM = """
param M
const N = 16, K = 8
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
"""


def test_gemm_domain_and_accesses_equal_hand_written_isl():
    model = loads(GEMM).model()
    (c,) = model.stmts
    assert c.domain.is_equal(isl.Set("{ C[i, j, k] : 0 <= i < 64 and 0 <= j < 48 and 0 <= k < 32 }"))
    reads = {a.tensor: a.relation for a in c.reads}
    assert reads["A"].is_equal(isl.Map("{ C[i, j, k] -> A[i, k] : 0 <= i < 64 and 0 <= j < 48 and 0 <= k < 32 }"))
    assert reads["B"].is_equal(isl.Map("{ C[i, j, k] -> B[k, j] : 0 <= i < 64 and 0 <= j < 48 and 0 <= k < 32 }"))
    assert c.write.relation.is_equal(isl.Map("{ C[i, j, k] -> C[i, j] : 0 <= i < 64 and 0 <= j < 48 and 0 <= k < 32 }"))
    assert (c.dtype, c.reduce_op, c.accum_dtype, c.red_iters) == ("f32", "sum", "f32", ["k"])


def test_gemm_dependences_are_the_reduction_chain():
    model = loads(GEMM).model()
    deps = compute_dependences(model)
    assert [(d.kind, d.src, d.dst) for d in deps] == [("reduction", "C", "C")]
    expected = isl.Map(
        "{ C[i, j, k] -> C[i, j, k2] : 0 <= i < 64 and 0 <= j < 48 and 0 <= k < k2 < 32 }"
    )
    assert deps[0].relation.is_equal(expected)


def test_symbolic_param_stays_an_isl_parameter():
    model = loads(GEMM_SILU_PARAM).model()
    assert model.params == ["M"]
    y = model.stmt("Y")
    assert y.domain.is_equal(isl.Set("[M] -> { Y[i, j] : M > 0 and 0 <= i < M and 0 <= j < 16 }"))
    flow = [d for d in compute_dependences(model) if d.kind == "flow"]
    assert len(flow) == 1 and (flow[0].src, flow[0].dst, flow[0].tensor) == ("C", "Y", "C")
    expected = isl.Map("[M] -> { C[i, j, k] -> Y[i, j] : M > 0 and 0 <= i < M and 0 <= j < 16 and 0 <= k < 8 }")
    assert flow[0].relation.is_equal(expected)


def test_size_override_binds_a_param():
    model = loads(GEMM_SILU_PARAM).model(sizes={"M": 4})
    assert model.params == []
    assert model.stmt("Y").domain.count_val().to_python() == 4 * 16


def test_causal_domain_from_conditions():
    text = """
const L = 6
kernel causal(X: f32[L, L]) -> (Y: f32[L]) {
  Y[i] = max(j : j <= i) X[i, j]
}
"""
    model = loads(text).model()
    assert model.stmt("Y").domain.is_equal(isl.Set("{ Y[i, j] : 0 <= j <= i < 6 }"))


def test_shifted_read_out_of_bounds_is_a_located_error():
    text = """
const N = 8
kernel shift(X: f32[N]) -> (Y: f32[N]) {
  Y[i] = X[i + 1]
}
"""
    with pytest.raises(SourceError) as err:
        loads(text, "shift.tdsl").model()
    message = str(err.value)
    assert message.startswith("shift.tdsl:4:10: error: X[i + 1] reads outside X (shape [8]): Y(i=7) reads X[8]")


def test_read_of_undefined_element_is_a_located_error():
    text = """
const L = 4
kernel tri(X: f32[L, L]) -> (Y: f32[L, L]) {
  P[i, j : j <= i] = X[i, j]
  Y[i, j] = P[i, j]
}
"""
    with pytest.raises(SourceError) as err:
        loads(text, "tri.tdsl").model()
    assert "P[i, j] reads an element of P that no instance of P writes: Y(i=0, j=1) reads P[0, 1]" in str(err.value)


# ---------------------------------------------------------------- sizes bound through the Python API


@pytest.mark.parametrize("sizes,message", [
    ({"M": 0}, "size M must be between 1 and 2147483647"),
    ({"M": -3}, "size M must be between 1"),
    ({"M": 2**62}, "size M must be between 1"),
    ({"M": 10**400}, "a number of 401 digits"),
    ({"M": "x"}, "size M must be an integer, got 'x'"),
    ({"M": 1.5}, "size M must be an integer"),
    ({"M": True}, "size M must be an integer"),
    ({"eps": 3}, "'eps' is a float constant"),
    ({"M": 65536, "N": 65536}, "tensor X would hold 4294967296 elements"),
])
def test_sizes_given_through_the_api_obey_the_language_limits(sizes, message):
    from tdsl.frontend.diagnostics import TdslError

    with pytest.raises(TdslError, match=re.escape(message)):
        load(EXAMPLES / "rmsnorm.tdsl", sizes=sizes).schedule()


def test_a_size_named_like_an_internal_dimension_is_its_own_size():
    """Tensor boxes name their dims with reserved '__' names, so a param `a0` stays a size (it was read as
    the box's own first dimension and every read was 'outside A')."""
    prog = loads("param a0\nkernel f(A: f32[a0]) -> (Y: f32[a0]) {\n  Y[i] = A[i]\n}\n")
    box = prog.schedule().model.tensors["A"].box
    assert box.dim(isl.dim_type.param) == 1 and box.get_dim_name(isl.dim_type.param, 0) == "a0"


def test_dependences_of_a_long_chain_are_found_quickly():
    """Only statements that share a tensor can depend on each other: 300 chained statements take well under
    a second (every pair of statements was compared: seconds)."""
    import time

    lines = ["const N = 64", "kernel f(A: f32[N]) -> (Y: f32[N]) {", "  T1[i] = A[i] * 2.0"]
    lines += [f"  T{k}[i] = T{k - 1}[i] + 1.0" for k in range(2, 300)] + ["  Y[i] = T299[i]", "}"]
    start = time.process_time()  # CPU time: other processes do not count
    sched = loads("\n".join(lines) + "\n").schedule()
    assert time.process_time() - start < 5
    assert len([d for d in sched.deps if d.kind == "flow"]) == 299


def test_a_statement_without_instances_is_a_located_error():
    """`Y[i : i >= 1 and i < 1]` computes nothing: a located error (it crashed the interpreter's instance count
    and reached the tile lowering as a tile of no fixed size)."""
    src = "const N = 4\nkernel f(A: f32[N]) -> (Y: f32[N], Z: f32[N]) {\n  Y[i : i >= 1 and i < 1] = A[i]\n  Z[i] = A[i]\n}\n"
    with pytest.raises(SourceError, match=r"<string>:3:3: error: statement Y has no instance"):
        loads(src).schedule()
