"""`fast_inverse`, `fast_sigmoid`, `fast_silu`: a program declares where an approximate reciprocal will do.

`silu(x)` divides with IEEE rounding everywhere, as the interpreter does; `fast_silu(x)` lets an NVIDIA kernel
use the GPU's approximate reciprocal (Triton's plain `/`, TileLang's rcp.approx), which cost GEMM+SiLU's epilogue
8% on the H200 (benchmarks/RESULTS.md).  The interpreter computes the IEEE value; the Ascend backends, which have
no approximate form in tdsl, compute it too (bit for bit in their NumPy machines)."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tdsl.compiler.analysis.cost.work import expression_slots
from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.reference import runtime
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.targets import get_target
from tdsl.compiler.verify import compare_outputs
from tdsl.frontend.diagnostics import TdslError

F32 = np.float32


def _pointwise(sizes=(13, 37)):
    m, n = sizes
    return loads(f"""const M = {m}, N = {n}
kernel k(X: bf16[M, N]) -> (Y: bf16[M, N], Z: f32[M, N]) {{
  Y[i, j] = fast_silu(X[i, j])
  Z[i, j] = fast_sigmoid(X[i, j]) + fast_inverse(X[i, j] * X[i, j] + 0.5)
}}
schedule tiled {{
  io, jo, ii, ji = tile(Y.i, Y.j, 4, 16)
  bind(Y.io, grid.x)
}}
""", filename="fast.tdsl")


def _gemm_fast_silu(sizes=(70, 64, 136)):
    m, k, n = sizes
    return loads(f"""const M = {m}, K = {k}, N = {n}
kernel gs(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {{
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = fast_silu(C[i, j])
}}
schedule fast {{
  io, jo, ii, jj = tile(C.i, C.j, 64, 128)
  ko, kk = split(C.k, 32)
  reorder(C, io, jo, ko, ii, jj, kk)
  reverse_compute_at(Y, C.jo)
  cache_read(A, shared, at=C.ko)
  cache_read(W, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
  pipeline(C.ko, stages=2)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
  launch(C, warps=4)
}}
""", filename="gemm_fast_silu.tdsl")


def test_the_interpreter_computes_the_ieee_values():
    prog = _pointwise()
    model = prog.schedule().model
    inputs = random_inputs(model, seed=3)
    out = interpret(model, prog.schedule().time_map(), inputs)
    x = inputs["X"].astype(F32)
    with np.errstate(all="ignore"):
        e = np.array([runtime._exp(F32(-v)) for v in x.ravel()], F32).reshape(x.shape)
        sig = F32(1) / (F32(1) + e)
        want_y = x * sig
        want_z = sig + F32(1) / (x * x + F32(0.5))
    from tdsl.compiler.model.dtypes import round_to

    np.testing.assert_array_equal(out["Y"].astype(F32), round_to("bf16", want_y))
    np.testing.assert_array_equal(out["Z"], want_z)
    assert runtime._fast_inverse(F32(3)) == F32(1) / F32(3)


def test_only_the_declared_functions_divide_approximately_on_nvidia():
    exact = loads("""const N = 8
kernel k(X: f32[N]) -> (Y: f32[N]) {
  Y[i] = silu(X[i])
}""")
    assert "tl.div_rn(1.0" in generate(exact, None)
    triton = generate(_pointwise(), "tiled")
    assert "(1.0 / (1.0 + tl.exp(" in triton and "tl.div_rn" not in triton
    tilelang = generate(_pointwise(), "tiled", backend="tilelang")
    assert "T.fast_rcp((1.0 + T.__exp(" in tilelang
    for target in ("ascend-950", "ascend-910b"):
        assert "fast_rcp" not in generate(_pointwise(), "tiled", target=target)


@pytest.mark.parametrize("prog_schedule", [(_pointwise, "tiled"), (_pointwise, None), (_gemm_fast_silu, "fast")])
def test_the_triton_kernel_matches_the_interpreter(tmp_path, prog_schedule):
    make, schedule = prog_schedule
    prog = make()
    sched = prog.schedule(schedule)
    inputs = random_inputs(sched.model, seed=5)
    got = run_generated(load_module(generate(prog, schedule), tmp_path / "k.py"), sched.model, inputs, guard=7)
    reference = interpret(sched.model, prog.schedule().time_map(), inputs)
    results = compare_outputs(sched.model, reference, got)
    assert results and all(r.ok for r in results.values()), {t: r.summary() for t, r in results.items()}


def test_tilelang_lowers_the_approximate_reciprocal(tmp_path):
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import compile_cubin, lower_module

    text = generate(_gemm_fast_silu(), "fast", backend="tilelang")
    module = load_module(text, tmp_path / "tl.py")
    sources = lower_module(module, "sm_90a")
    assert any("tl::fast_rcp(" in str(s) for s in sources.values())
    if shutil.which("nvcc") or os.environ.get("CUDA_HOME"):  # TileLang's rcp.approx compiles with nvcc too
        name = next(iter(module.KERNELS))
        assert "tl::fast_rcp(" in compile_cubin(module, name).get_kernel_source()


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
@pytest.mark.parametrize("prog_schedule", [(_pointwise, "tiled"), (_gemm_fast_silu, "fast")])
def test_the_ascend_kernels_compute_the_interpreters_bits(target, prog_schedule):
    from tdsl.compiler.verify.ascend_sim import check_schedule

    make, schedule = prog_schedule
    results = check_schedule(make(), schedule, target, seed=2)
    assert results and all(r.ok and r.max_abs == 0 for r in results.values()), results


def test_the_estimate_prices_the_reciprocal_below_the_ieee_division():
    prog = loads("""const N = 8
kernel k(X: f32[N]) -> (Y: f32[N], Z: f32[N]) {
  Y[i] = silu(X[i])
  Z[i] = fast_silu(X[i])
}""")
    costs = get_target("h200").vector_op_cost
    y, z = (prog.schedule().model.stmt(t).value for t in ("Y", "Z"))
    assert expression_slots(z, costs, {}) < expression_slots(y, costs, {})


def test_a_misused_function_is_a_source_error():
    with pytest.raises(TdslError, match="'fast_inverse' takes 1 argument, got 2"):
        loads("""const N = 8
kernel k(X: f32[N]) -> (Y: f32[N]) {
  Y[i] = fast_inverse(X[i], X[i])
}""").schedule()


@pytest.mark.parametrize("schedule", ["fast_g8_p"])  # `fast` is examples/gemm_silu.tdsl's, tested with it
def test_the_benchmarked_program_runs_at_ragged_sizes(tmp_path, schedule):
    """benchmarks/programs/gemm_fast_silu.tdsl (tuned and timed on the H200) at sizes its tiles do not divide."""
    import tdsl

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "programs" / "gemm_fast_silu.tdsl"
    prog = tdsl.load(path, sizes={"M": 136, "K": 72, "N": 264})
    sched = prog.schedule(schedule)
    inputs = random_inputs(sched.model, seed=11)
    got = run_generated(load_module(generate(prog, schedule), tmp_path / "k.py"), sched.model, inputs, guard=5)
    results = compare_outputs(sched.model, interpret(sched.model, prog.schedule().time_map(), inputs), got)
    assert results and all(r.ok for r in results.values()), {t: r.summary() for t, r in results.items()}
