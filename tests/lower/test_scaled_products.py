"""Matrix products with constant factors (`sum(k) alpha * A[i, k] * B[k, j]`, BLAS style) stay matrix products:
the factor leaves the sum when that is exact (a power of two) or allowed (`combine reassoc`), and is applied once
to the finished accumulator (compiler/analysis/placement.py: product_form; tileir.AccFinish.scale).  Checked by
the form, by the emitted instruction of every backend, and by running the kernels (the Triton interpreter, the
NumPy model of the Ascend code) against the interpreter and against the unscaled kernel bit for bit."""

import numpy as np
import pytest

from tdsl.compiler.analysis.cost.traffic import statement_flops
from tdsl.compiler.analysis.placement import product_form
from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import AccFinish, walk_ops
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs

_PROGRAM = """const M = {m}, N = {n}, K = {k}
const alpha = {alpha}
{params}kernel g(A: {dtype}[M, K], B: {dtype}[K, N]) -> (C: f32[M, N]) {{
  C[i, j] = sum(k) {body} accum f32{combine}
}}
schedule gpu {{
  io, jo, ii, jj = tile(C.i, C.j, 32, 32)
  ko, kk = split(C.k, 16)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}}
"""

# (target, backend, the instruction of a matrix-unit product)
_BACKENDS = [("nvidia", "triton", "tl.dot("), ("nvidia", "tilelang", "T.gemm("), ("ascend-950", None, "T.gemm("),
             ("ascend-910b", None, "T.mma(")]


def _program(body: str, alpha="0.5", dtype="bf16", combine="", sizes=(64, 96, 48), params=""):
    m, n, k = sizes
    return loads(_PROGRAM.format(m=m, n=n, k=k, alpha=alpha, dtype=dtype, body=body, combine=combine,
                                 params=params))


@pytest.mark.parametrize("body,alpha,combine,scale", [
    ("A[i, k] * B[k, j]", "0.5", "", 1.0),
    ("alpha * A[i, k] * B[k, j]", "0.5", "", 0.5),
    ("A[i, k] * alpha * B[k, j]", "0.5", "", 0.5),
    ("A[i, k] * B[k, j] * alpha", "0.5", "", 0.5),
    ("alpha * (A[i, k] * B[k, j])", "0.5", "", 0.5),
    ("(-A[i, k]) * (B[k, j] / 4)", "0.5", "", -0.25),
    ("2 * A[i, k] * B[k, j] * alpha", "0.125", "", 0.25),
    ("alpha * A[i, k] * B[k, j]", "1.5", " combine reassoc", 1.5),
    ("A[i, k] * B[k, j] / 3", "0.5", " combine reassoc", 1 / 3),
    ("3 * A[i, k] * B[k, j] / 3", "0.5", " combine reassoc", 1.0),
    ("0.5 * A[i, k] * B[k, j] * 2", "0.5", "", 1.0),
])
def test_constant_factors_leave_the_product(body, alpha, combine, scale):
    model = _program(body, alpha, combine=combine).schedule().model
    form = product_form(model.stmt("C"), model.sizes)
    assert form is not None and (form.lhs.tensor, form.rhs.tensor) == ("A", "B")
    assert form.scale == pytest.approx(scale, rel=1e-15)


@pytest.mark.parametrize("body,alpha", [
    ("alpha * A[i, k] * B[k, j]", "1.5"),  # not a power of two, strict order: each term rounds as written
    ("A[i, k] * B[k, j] / 3", "0.5"),
    ("3 * A[i, k] * B[k, j] / 3", "0.5"),  # the factors multiply to 1, but each term is rounded by them
    ("i * A[i, k] * B[k, j]", "0.5"),  # an iterator is not a constant
    ("A[i, k] * B[k, j] * A[i, k]", "0.5"),  # three reads
    ("A[i, k] * B[k, j] + alpha", "0.5"),
    ("A[i, k] * B[k, j] / A[i, k]", "0.5"),
    ("0 * A[i, k] * B[k, j]", "0.5"),
    ("alpha * A[i, k] * B[k, j]", "0.0"),
])
def test_other_factors_keep_the_terms_as_written(body, alpha):
    model = _program(body, alpha).schedule().model
    assert product_form(model.stmt("C"), model.sizes) is None


def test_a_size_known_only_at_run_time_is_not_a_constant_factor():
    model = _program("P * A[i, k] * B[k, j]", params="param P\n").schedule().model
    assert product_form(model.stmt("C"), model.sizes) is None


@pytest.mark.parametrize("target,backend,instruction", _BACKENDS, ids=[f"{t}-{b or 'ascend'}" for t, b, _ in _BACKENDS])
def test_every_backend_keeps_a_scaled_product_on_the_matrix_unit(target, backend, instruction):
    scaled = generate(_program("alpha * A[i, k] * B[k, j]"), "gpu", target=target, backend=backend)
    assert scaled.count(instruction) == 1
    strict = generate(_program("alpha * A[i, k] * B[k, j]", "1.5"), "gpu", target="nvidia", backend="triton")
    assert "tl.dot(" not in strict  # 1.5 without a policy: the terms one by one, as the program rounds them
    reassoc = generate(_program("alpha * A[i, k] * B[k, j]", "1.5", combine=" combine reassoc"), "gpu",
                       target=target, backend=backend)
    assert reassoc.count(instruction) == 1


def test_the_factor_is_applied_once_by_the_finish():
    sched = _program("alpha * A[i, k] * B[k, j]").schedule("gpu")
    finishes = [op for k in lower_for(sched, "triton").kernels for op in walk_ops(k.body) if isinstance(op, AccFinish)]
    assert [op.scale for op in finishes] == [0.5]


def test_a_scaled_product_costs_matrix_flops():
    model = _program("alpha * A[i, k] * B[k, j]").schedule().model
    assert statement_flops(model, "C") == (2 * 64 * 96 * 48, 0, "bf16")
    strict = _program("alpha * A[i, k] * B[k, j]", "1.5").schedule().model
    assert statement_flops(strict, "C")[0] == 0


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_a_power_of_two_factor_is_bit_identical_under_the_triton_interpreter(dtype, tmp_path):
    """Ragged sizes (every tile masked on some side): the scaled kernel's result is exactly the factor times the
    unscaled kernel's, and both agree with the interpreter."""
    sizes = (70, 50, 40)
    plain = _program("A[i, k] * B[k, j]", dtype=dtype, sizes=sizes)
    scaled = _program("(-A[i, k]) * (alpha * B[k, j])", "0.25", dtype=dtype, sizes=sizes)
    model = scaled.schedule("gpu").model
    inputs = random_inputs(model, seed=3)
    results = {}
    for name, prog in (("plain", plain), ("scaled", scaled)):
        module = load_module(generate(prog, "gpu"), tmp_path / f"{name}_{dtype}.py")
        results[name] = run_generated(module, prog.schedule("gpu").model, inputs, guard=9)["C"]
    assert np.array_equal(np.asarray(results["scaled"]), np.float32(-0.25) * np.asarray(results["plain"]))
    reference = interpret(model, scaled.schedule("gpu").time_map(), inputs)
    assert all(c.ok for c in compare_outputs(model, reference, {"C": results["scaled"]}).values())


def test_a_reassociated_factor_stays_within_the_policy_under_the_triton_interpreter(tmp_path):
    prog = _program("alpha * A[i, k] * B[k, j]", "1.5", combine=" combine reassoc", sizes=(70, 50, 40))
    sched = prog.schedule("gpu")
    inputs = random_inputs(sched.model, seed=4)
    module = load_module(generate(prog, "gpu"), tmp_path / "reassoc.py")
    got = run_generated(module, sched.model, inputs, guard=9)
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
@pytest.mark.parametrize("body,alpha,combine", [("A[i, k] * B[k, j] * alpha", "0.5", ""),
                                                ("alpha * A[i, k] * B[k, j]", "1.5", " combine reassoc")])
def test_the_ascend_cube_scales_the_finished_sum(target, body, alpha, combine):
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = _program(body, alpha, combine=combine)
    sched = prog.schedule("gpu")
    inputs = random_inputs(sched.model, seed=5)
    got = simulate(generate(prog, "gpu", target=target), inputs, target).tensors
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())
