"""The value a sum starts from is read before the loop that walks its terms (compiler/legality/start_values.py).

Fuzz seed 5509 found the class: `compute_at(T, C.k)` (or `recompute_at`) put the producer of a start value inside
the loop over k, at k = 0, which the dependences of the model allowed (the start read counted at C's instances);
the generated kernels read the start value before that loop and summed from whatever the buffer held.
"""

from __future__ import annotations

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.testing import assert_illegal, assert_legal

SOURCE = """
const M = 4, N = 4, K = 8
kernel k(X: f32[N], A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  T[j] = X[j] * 2.0
  C[i, j] = sum(k) A[i, k] * B[k, j] from T[j]
}
"""


@pytest.mark.parametrize("steps, loop", [
    ("compute_at(T, C.k)", "k"),
    ("ko, ki = split(C.k, 4)\ncompute_at(T, C.ki)", "ko"),
    ("ko, ki = split(C.k, 4)\ncompute_at(T, C.ko)", "ko"),
    ("recompute_at(T, C.k)", "k"),
    ("reorder(C, k, i)\ncompute_at(T, C.i)", "k"),
])
def test_the_producer_of_a_start_value_inside_the_walk_over_the_terms_is_illegal(steps, loop):
    assert_illegal(loads(SOURCE), steps, rule="dependence",
                   match=[f"C starts its sum from a value that reads T, before loop {loop} walks its terms",
                          f"enters loop {loop}"])


@pytest.mark.parametrize("steps", [
    "compute_at(T, C.j)",
    "compute_at(T, C.i)",
    "jo, ji = split(C.j, 2)\ncompute_at(T, C.jo)",
    "jo, ji = split(C.j, 2)\nrecompute_at(T, C.jo)",
    "cache_read(T, register, at=C.k)",
])
def test_the_producer_before_the_walk_is_legal_and_the_kernel_agrees(steps, tmp_path):
    prog = loads(SOURCE + "schedule s {\n" + steps + "\n}\n")
    assert_legal(prog, "s", run=True)
    model = prog.model()
    inputs = random_inputs(model, seed=3)
    want = interpret(model, prog.schedule().time_map(), inputs)["C"]  # program order
    module = load_module(generate(prog, "s", target="h100"), tmp_path / "start.py")
    got = run_generated(module, model, inputs, guard=13)["C"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- which reads are the start value's, after rewrites
# (a probe of this session): start reads were found by the identity of their nodes, which compute_inline makes anew.

FROM_P = """
const M = 6, N = 5, K = 6
kernel f(A: f32[M, K], X: f32[K, N]) -> (C: f32[M, N]) {
  U[i, k] = A[i, k] * 3.0
  P[k, j] = X[k, j] * 2.0
  C[i, j] = sum(k) U[i, k] * P[k, j] from P[i, j]
}
"""

FROM_T = """
const M = 6, N = 5, K = 6
kernel f(A: f32[M, K], X: f32[K, N]) -> (C: f32[M, N]) {
  P[k, j] = X[k, j] * 2.0
  T[i, j] = P[i, j] + 1.0
  C[i, j] = sum(k) A[i, k] * P[k, j] from T[i, j]
}
"""


@pytest.mark.parametrize("source, steps", [
    (FROM_P, "compute_inline(U)\ncompute_at(P, C.k)"),  # an inline into C that does not touch the start value
    (FROM_T, "compute_inline(T)\ncompute_at(P, C.k)"),  # the start value's own producer inlined: it reads P now
])
def test_an_inline_keeps_the_start_value_a_start_value(source, steps):
    assert_illegal(loads(source), steps, rule="dependence",
                   match="C starts its sum from a value that reads P, before loop k walks its terms")


def _runs_like_the_program(source: str, steps: str, tmp_path, combine_reassoc: bool = False) -> None:
    prog = loads(source + "schedule s {\n" + steps + "\n}\n")
    assert_legal(prog, "s", run=not combine_reassoc)
    model = prog.model()
    inputs = random_inputs(model, seed=5)
    want = interpret(model, prog.schedule().time_map(), inputs)
    module = load_module(generate(prog, "s", target="h100"), tmp_path / "start.py")
    got = run_generated(module, model, inputs, guard=13)
    for name, value in got.items():  # the kernel's results
        np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-5)


def test_an_inline_then_rfactor_gives_the_start_value_to_the_combining_sum(tmp_path):
    """The partial sums start from zero and the combining sum from Y; with U inlined first, the start read went to
    the partial sums and the combining sum had none (Triton: StopIteration, the 950: NameError Y)."""
    source = """
const M = 6, N = 5, K = 8
kernel f(A: f32[M, K], B: f32[K, N], Y: f32[M, N]) -> (C: f32[M, N]) {
  U[i, k] = A[i, k] * 3.0
  C[i, j] = sum(k) U[i, k] * B[k, j] from Y[i, j] combine reassoc
}
"""
    _runs_like_the_program(source, "compute_inline(U)\nko, kk = split(C.k, 4)\nrfactor(C.ko)", tmp_path,
                           combine_reassoc=True)


@pytest.mark.parametrize("steps", ["compute_inline(U)\nstore_in(C, X)", "store_in(C, X)\ncompute_inline(U)"])
def test_an_inline_and_a_result_stored_over_its_start_value(steps, tmp_path):
    """C stored in X, the array it starts from: read once before C's first term replaces it (was refused as
    storage-overwrite once U was inlined, the start read then counted as a read at every term)."""
    source = """
const M = 6, N = 5, K = 6
kernel f(A: f32[M, K], B: f32[K, N], X: f32[M, N]) -> (C: f32[M, N]) {
  U[i, k] = A[i, k] * 3.0
  C[i, j] = sum(k) U[i, k] * B[k, j] from X[i, j]
}
"""
    _runs_like_the_program(source, steps, tmp_path)


PLACED = """
const M = 5, N = 8, K = 6
kernel f(A: f32[M, K], B: f32[K, N], X: f32[M, N]) -> (C: f32[M, N]) {
  T[i, j] = X[i, j] * 2.0
  P[i, k] = A[i, k] * 3.0
  C[i, j] = sum(k) P[i, k] * B[k, j] from T[i, j]
}
"""


@pytest.mark.parametrize("steps", [
    "reverse_compute_at(C, P.i)\ncompute_at(T, C.j)",
    "reverse_compute_at(C, P.i)\ncompute_at(T, C.i)",
    "compute_at(P, C.i)\ncompute_at(T, C.j)",
])
def test_a_loop_bounded_by_the_terms_is_not_a_walk_over_them(steps, tmp_path):
    """After a placement, loop i's function for C is `i` on pieces whose domain bounds k: not a loop over k."""
    _runs_like_the_program(PLACED, steps, tmp_path)
