"""`combine fast_accum`: how an FP8 product accumulates is a declared property of the program.  Without it the
generated kernel adds every tensor-core instruction's products to the f32 sum (Triton's `max_num_imprecise_acc=0`);
with it the hardware may keep them in its reduced-precision accumulator for several instructions (cuBLAS's
use_fast_accum), the terms may be reordered as under `reassoc`, and the kernel is compared with the interpreter
in the declared accumulator's units."""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.model.dependences import fast_accumulation, imprecise_products, policy
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs, tolerance_dtype
from tdsl.frontend.diagnostics import TdslError


def _fp8_gemm(combine: str, sizes=(70, 64, 96)):
    m, k, n = sizes
    return loads(f"""const M = {m}, K = {k}, N = {n}
kernel q(Aq: f8e4m3[M, K], Wt: f8e4m3[N, K]) -> (P: f32[M, N]) {{
  P[i, j] = sum(k) Aq[i, k] * Wt[j, k] accum f32{combine}
}}
schedule tiled {{
  io, jo, ii, jj = tile(P.i, P.j, 64, 32)
  ko, kk = split(P.k, 32)
  reorder(P, io, jo, ko, ii, jj, kk)
  bind(P.io, grid.x)
  bind(P.jo, grid.y)
}}
schedule reversed {{
  reverse(P.k)
}}
""", filename="q.tdsl")


def test_fast_accum_orders_like_reassoc_and_is_its_own_property():
    stmt = _fp8_gemm(" combine fast_accum").schedule().model.stmt("P")
    assert policy(stmt) == ("reassoc", None) and fast_accumulation(stmt)
    plain = _fp8_gemm(" combine reassoc").schedule().model.stmt("P")
    assert not fast_accumulation(plain)
    interval = _fp8_gemm(" combine fast_accum(128)").schedule().model.stmt("P")
    assert policy(interval) == ("reassoc", None) and fast_accumulation(interval)
    assert [imprecise_products(s) for s in (plain, stmt, interval)] == [0, None, 128]


def test_only_a_declared_sum_keeps_fp8_products_in_the_narrow_accumulator():
    exact = generate(_fp8_gemm(""), "tiled")
    fast = generate(_fp8_gemm(" combine fast_accum"), "tiled")
    assert "max_num_imprecise_acc=0" in exact
    assert "tl.dot(" in fast and "max_num_imprecise_acc" not in fast
    assert "max_num_imprecise_acc=16)" in generate(_fp8_gemm(" combine fast_accum(16)"), "tiled")
    # Triton takes at most the tile's k (32 here): promoting after every tile keeps "at most N"
    assert "max_num_imprecise_acc=32)" in generate(_fp8_gemm(" combine fast_accum(256)"), "tiled")


def test_legality_reads_the_declaration():
    with pytest.raises(TdslError, match="reduction-order"):
        _fp8_gemm("").schedule("reversed")
    _fp8_gemm(" combine fast_accum").schedule("reversed")


def test_the_comparison_allows_the_narrow_accumulator():
    assert tolerance_dtype(_fp8_gemm("").schedule().model, "P") == "f32"
    assert tolerance_dtype(_fp8_gemm(" combine fast_accum").schedule().model, "P") == "f16"
    assert tolerance_dtype(_fp8_gemm(" combine fast_accum(64)").schedule().model, "P") == "f16"


def test_an_interval_below_one_is_an_error_at_its_place():
    with pytest.raises(TdslError, match=r"unknown combine policy 'fast_accum\(0\)'"):
        _fp8_gemm(" combine fast_accum(0)")


def test_fast_accum_on_a_max_is_an_error_at_its_place():
    with pytest.raises(TdslError, match=r"q.tdsl:3:10: error: `combine fast_accum` lets a matrix unit add FP8 "
                                        r"products in reduced precision; a max adds nothing"):
        loads("const N = 4\nkernel q(X: f32[N, N]) -> (Y: f32[N]) {\n  Y[i] = max(k) X[i, k] combine fast_accum\n}\n",
              filename="q.tdsl").schedule()


@pytest.mark.parametrize("policy", ["fast_accum", "fast_accum(32)"])
def test_a_fast_accum_product_matches_the_interpreter_under_the_triton_interpreter(policy, tmp_path):
    prog = _fp8_gemm(f" combine {policy}")
    sched = prog.schedule("tiled")
    inputs = random_inputs(sched.model, seed=9)
    got = run_generated(load_module(generate(prog, "tiled"), tmp_path / "q.py"), sched.model, inputs, guard=5)
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())
