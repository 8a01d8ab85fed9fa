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
