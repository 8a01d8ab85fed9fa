"""Sums that start from a value: `C[i, j] = sum(k) A[i, k] * B[k, j] from beta * C_in[i, j]` (BLAS's
`C = beta*C + A*B` without reassociating, PolyBench's `C[i][j] *= beta; for k: C[i][j] += ...`).  The start value
is the accumulator's first value, rounded to the accumulator dtype, before the element's first term; the terms
then follow in order.  Checked in the language (errors), in the interpreter (bit for bit against the recurrence
that spells the same arithmetic out), in legality, and in every backend's generated code."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.schedule.tree_view import tree_text
from tdsl.compiler.verify import compare_outputs
from tdsl.frontend.diagnostics import TdslError
from tdsl.frontend.printer import expr_text

# PolyBench's gemm twice: as a recurrence over k (benchmarks/polybench/blas/gemm.tdsl) and as a sum from a value
_GEMM = """const NI = 20, NJ = 25, NK = 30
const alpha = 1.5, beta = 1.2
kernel gemm(C_in: f32[NI, NJ], A: f32[NI, NK], B: f32[NK, NJ]) -> (C: f32[NI, NJ], D: f32[NI, NJ]) {
  Cs[i, j, k] = where(k == 0, beta * C_in[i, j], Cs[i, j, k - 1]) + alpha * A[i, k] * B[k, j]
  C[i, j] = Cs[i, j, NK - 1]
  D[i, j] = sum(k) alpha * A[i, k] * B[k, j] from beta * C_in[i, j]
}
"""


def test_a_sum_from_a_value_is_the_recurrence_bit_for_bit():
    sched = loads(_GEMM).schedule()
    inputs = random_inputs(sched.model, seed=11)
    out = interpret(sched.model, sched.time_map(), inputs)
    assert np.array_equal(out["C"].view(np.uint32), out["D"].view(np.uint32))


def test_the_start_value_is_rounded_to_the_accumulator():
    text = """const N = 4
kernel r(X: f32[N, 3], Z: f32[N]) -> (Y: f32[N]) {
  Y[i] = sum(k) X[i, k] from Z[i] accum bf16
}
"""
    sched = loads(text).schedule()
    x = np.zeros((4, 3), np.float32)
    x[2] = -0.0
    z = np.array([1 + 2 ** -10, 3.0, -0.0, 2 ** -9 + 256], np.float32)
    out = interpret(sched.model, sched.time_map(), {"X": x, "Z": z})["Y"]
    assert list(out) == [1.0, 3.0, 0.0, 256.0]  # 1 + 2^-10 and 256 + 2^-9 are not bf16 values: rounded first
    assert np.signbit(out[2])  # -0 plus -0 terms: the start value is the first addend, not 0 + -0


def test_the_start_value_is_printed_in_the_source_and_the_tree():
    prog = loads(_GEMM)
    stmt = prog.schedule().model.stmt("D")
    assert expr_text(stmt.init) == "beta * C_in[i, j]"
    sched = prog.schedule()
    assert "(sum over k from beta * C_in[i, j], accum f32, store f32)" in tree_text(sched.model, sched.tree)


@pytest.mark.parametrize("statement,message", [
    ("Y[i] = max(k) X[i, k] from Z[i]", "only a sum starts from a value; max is exact in any order: take the max "
                                        "in a statement of its own and the start value in the next "
                                        "(`Y_max[i] = max(k) ...`, then `Y[i] = max(Z[i], Y_max[i])`)"),
    ("Y[i] = sum(k) X[i, k] from Z[i] + X[i, k]", "it cannot use the reduction iterator 'k'"),
    ("Y[i] = sum(k) X[i, k] from sum(l) X[i, l]", "the value a sum starts from cannot be a reduction"),
    ("Y[i] = sum(k) X[i, k] from Z[i] combine segments(2)", "cannot declare `combine segments(2)`"),
    ("Y[i] = sum(k) X[i, k] from Y[i]", "reads an element Y has not computed yet"),
    ("Y[i] = sum(k : k < i) X[i, k] from Z[i]", "Y[0] has no term: the reduction's range is empty there, so the "
                                                "value its sum starts from would never be stored"),
    ("Y[i] = sum(k : k < i) X[i, k] from Z[i]",  # the way out, quoted (probe II)
     "keep the element in the range with a term of -0.0: `sum(k : k <= i) where(k < i, ..., -0.0) from ...`"),
])
def test_misused_start_values_are_errors_at_their_position(statement, message):
    text = f"const N = 4\nkernel r(X: f32[N, 3], Z: f32[N]) -> (Y: f32[N]) {{\n  {statement}\n}}\n"
    with pytest.raises(TdslError) as info:
        loads(text, filename="r.tdsl").schedule()
    shown = str(info.value)
    assert message in shown and "r.tdsl:3:" in shown, shown


_SCHEDULES = """
schedule gpu {
  io, jo, ii, jj = tile(C.i, C.j, 32, 16)
  ko, kk = split(C.k, 16)
  reorder(C, io, jo, ko, ii, jj, kk)
  cache_read(A, shared, at=C.ko)
  cache_read(B, shared, at=C.ko)
  pipeline(C.ko, stages=2)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
schedule small {
  io, jo, ii, jj = tile(C.i, C.j, 8, 8)
  ko, kk = split(C.k, 4)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
schedule reversed {
  reverse(C.k)
}
schedule partial_sums {
  ko, kk = split(C.k, 16)
  rfactor(C.ko)
}
"""


def _product(sizes=(70, 50, 40), combine=""):
    m, n, k = sizes
    return loads(f"""const M = {m}, N = {n}, K = {k}
const beta = 1.2
kernel g(C_in: bf16[M, N], A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {{
  E[i, j] = C_in[i, j] * 2.0
  C[i, j] = sum(k) A[i, k] * B[k, j] from beta * E[i, j] - 1.0 accum f32{combine}
}}
""" + _SCHEDULES)


def test_legality_keeps_the_start_first():
    prog = _product()
    with pytest.raises(TdslError, match=r"reduction-order"):
        prog.schedule("reversed")
    _product(combine=" combine reassoc").schedule("reversed")  # the program allows another order
    with pytest.raises(TdslError, match=r"(?s)reduction-grouping.*then to the sum of the start value and the earlier "
                                        r"terms of C\[0, 0\]"):
        prog.schedule("partial_sums")  # strict: the first partial sum would be added to the start value whole


_PARTIALS = """const M = 16, N = 12, K = 64
const beta = 1.2
kernel g(C_in: f32[M, N], A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N], D: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] from beta * C_in[i, j]
  D[i, j] = sum(k) A[i, k] * B[k, j] from beta * C_in[i, j] combine reassoc
}
schedule lone_terms {
  ko, kk = split(C.k, 1)
  rfactor(C.ko)
}
schedule split_k {
  ko, kk = split(D.k, 16)
  rfactor(D.ko)
  reorder(D_rf, ko, i, j, kk)
  bind(D_rf.ko, grid.x)
}
"""


def test_rfactor_starts_the_partial_sums_from_zero_and_their_sum_from_the_value(tmp_path):
    prog = loads(_PARTIALS)
    split_k = prog.schedule("split_k")  # reassoc: split-K on the grid, the start value added by the second pass
    combine = split_k.model.stmt("D")
    assert expr_text(combine.init) == "beta * C_in[i, j]" and split_k.model.stmt("D_rf").init is None
    assert "C_in" in {r.tensor for r in combine.reads}
    assert "C_in" not in {r.tensor for r in split_k.model.stmt("D_rf").reads}
    inputs = random_inputs(split_k.model, seed=4)
    original = prog.schedule()
    want = interpret(original.model, original.time_map(), inputs)
    module = load_module(generate(prog, "split_k"), tmp_path / "split_k.py")
    outputs = run_generated(module, split_k.model, inputs, guard=5)
    assert all(c.ok for c in compare_outputs(split_k.model, want, outputs).values())


def test_a_strict_sum_from_a_value_is_not_rfactored_even_into_partial_sums_of_one_term():
    """Each partial sum is 0 + t, and 0 + (-0.0) = +0.0: the program keeps -0.0 + -0.0 = -0.0 where the
    rfactored sum gives +0.0 (found by a probe, 2026-12-06; it had been accepted as the program's own additions).
    The same steps on D, which declares `combine reassoc`, show the counterexample in the interpreter."""
    prog = loads(_PARTIALS)
    with pytest.raises(TdslError, match=r"(?s)reduction-grouping.*C\(i=0, j=0, k=0\) with beta \* C_in\[i, j\] = "
                                        r"-0.0 and a term of -0.0"):
        prog.schedule("lone_terms")
    lone = loads(_PARTIALS + "schedule lone_d {\n  ko, kk = split(D.k, 1)\n  rfactor(D.ko)\n}\n").schedule("lone_d")
    original = prog.schedule()
    inputs = random_inputs(original.model, seed=4)
    inputs["C_in"][0, 0] = -0.0
    inputs["A"][0, :] = -0.0
    inputs["B"][:, 0] = 1.0  # every term of D[0, 0] is -0.0 * 1.0 = -0.0
    want = interpret(original.model, original.time_map(), inputs)["D"][0, 0]
    got = interpret(lone.model, lone.time_map(), inputs)["D"][0, 0]
    assert want == 0.0 and np.signbit(want) and not np.signbit(got)


@pytest.mark.parametrize("schedule,dot", [("gpu", True), ("small", False)])
def test_triton_starts_the_accumulator_from_the_value(schedule, dot, tmp_path):
    """Ragged sizes: tl.dot accumulates onto the start value (the 32 x 16 x 16 tile), or the tile sum does (8 x 8)."""
    prog = _product()
    sched = prog.schedule(schedule)
    text = generate(prog, schedule)
    assert ("tl.dot(" in text) == dot
    inputs = random_inputs(sched.model, seed=2)
    got = run_generated(load_module(text, tmp_path / f"{schedule}.py"), sched.model, inputs, guard=9)
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())


def test_tilelang_lowers_a_product_that_starts_from_a_value(tmp_path):
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(_product(), "gpu", backend="tilelang")
    assert "T.gemm(" in text and "starts from its own value" in text
    lower_module(load_module(text, tmp_path / "tl.py"), "sm_90a")


# the 910B's vector tiles need rows of 32 bytes: `small`'s 8-wide tiles are refused there (widen_narrow_tiles)
@pytest.mark.parametrize("target,schedule", [("ascend-950", "gpu"), ("ascend-950", "small"), ("ascend-910b", "gpu")])
def test_the_ascend_targets_add_cube_products_to_the_start_value_on_the_vector_cores(target, schedule):
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = _product(sizes=(64, 48, 32))
    sched = prog.schedule(schedule)
    text = generate(prog, schedule, target=target)
    cube = "T.gemm(" if target == "ascend-950" else "T.mma("
    assert (cube in text) == (schedule == "gpu")
    inputs = random_inputs(sched.model, seed=6)
    got = simulate(text, inputs, target).tensors
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
def test_a_row_sum_from_a_value_on_the_ascend_vector_cores(target):
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads("""const M = 32, K = 64
kernel r(X: f32[M, K], Z: f32[M]) -> (Y: f32[M]) {
  Y[i] = sum(k) X[i, k] from Z[i] * 0.5 - 3.0
}
schedule rows {
  io, ii = split(Y.i, 16)
  ko, kk = split(Y.k, 32)
  reorder(Y, io, ko, ii, kk)
  bind(Y.io, grid.x)
}
""")
    sched = prog.schedule("rows")
    inputs = random_inputs(sched.model, seed=8)
    got = simulate(generate(prog, "rows", target=target), inputs, target).tensors
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
def test_a_start_value_read_from_a_statement_of_the_same_kernel(target):
    """Z2 computed at the row tile and read by the start value: its buffer must live until the sum starts."""
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads("""const M = 32, K = 64
kernel r(X: f32[M, K], Z: f32[M]) -> (Y: f32[M]) {
  Z2[i] = Z[i] * 0.5 - 3.0
  Y[i] = sum(k) X[i, k] from Z2[i] * 2.0
}
schedule rows {
  io, ii = split(Y.i, 16)
  ko, kk = split(Y.k, 32)
  reorder(Y, io, ko, ii, kk)
  bind(Y.io, grid.x)
  compute_at(Z2, Y.io)
}
""")
    sched = prog.schedule("rows")
    inputs = random_inputs(sched.model, seed=3)
    got = simulate(generate(prog, "rows", target=target), inputs, target).tensors
    reference = interpret(sched.model, sched.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(sched.model, reference, got).values())
