"""In-place kernel parameters in the signature: `-> (C: f32[M, N] in C_in)` keeps the result C in the caller's
array C_in, which every schedule of the kernel (program order too) updates in place: the decision `store_in`
makes, taken by the program instead of a schedule.  The program as written must read each element of C_in
before C replaces it (rule storage-overwrite, located at the `in`); every schedule is then checked against the
anti dependences the shared array adds.  docs/language.md#kernels."""

import numpy as np
import pytest
import torch

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs
from tdsl.frontend.diagnostics import SourceError
from tdsl.testing import assert_illegal, assert_legal

GEMM = """
const M = 70, N = 50, K = 40
const alpha = 1.5, beta = 1.2
kernel gemm(C_in: f32[M, N], A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N] in C_in) {
  C[i, j] = sum(k) alpha * A[i, k] * B[k, j] from beta * C_in[i, j]
}
schedule tiles {
  io, jo, ii, jj = tile(C.i, C.j, 32, 16)
  ko, kk = split(C.k, 16)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""

# Y[i, j] reads X[i, j + 1], which Y[i, j + 1] replaces later: legal in program order, not reversed
RIGHT = """
const M = 6, N = 9
kernel right(X: f32[M, N]) -> (Y: f32[M, N] in X) {
  Y[i, j] = X[i, j] + where(j < N - 1, X[i, j + 1], 0.0)
}
"""


def test_every_schedule_of_the_kernel_stores_the_result_in_place():
    prog = loads(GEMM)
    for name in (None, "tiles"):
        s = prog.schedule(name)
        assert s.model.tensors["C"].stored_in == "C_in", name


@pytest.mark.parametrize("schedule", ["tiles"])
def test_triton_updates_the_callers_array(schedule, tmp_path):
    """Ragged 70 x 50 x 40: the launcher takes C_in, writes C over it and returns it (program order is one
    tile too large to generate at these sizes)."""
    prog = loads(GEMM)
    s = prog.schedule(schedule)
    text = generate(prog, schedule)
    assert "C = C_in" in text and "C: f32[M, N] in C_in" in text  # the signature in the module's docstring
    inputs = random_inputs(s.model, seed=7)
    want = interpret(s.model, s.time_map(), inputs)
    got = run_generated(load_module(text, tmp_path / f"{schedule}.py"), s.model, inputs)
    assert all(c.ok for c in compare_outputs(s.model, want, got).values())
    module = load_module(text, tmp_path / f"direct_{schedule}.py")
    c_in = torch.from_numpy(inputs["C_in"].copy())
    out = module.gemm(c_in, torch.from_numpy(inputs["A"]), torch.from_numpy(inputs["B"]))
    assert out is c_in and np.allclose(c_in.numpy(), want["C"], rtol=1e-5, atol=1e-5)


def test_the_shared_array_constrains_every_schedule():
    prog = loads(RIGHT)
    assert_legal(prog, "bind(Y.i, grid.x)")  # each row reads only its own row
    assert_illegal(prog, "reverse(Y.j)", rule="dependence", primitive="reverse", changes_result=True)
    assert_illegal(prog, "bind(Y.j, grid.x)", rule="parallel-dependence", primitive="bind")


def test_a_schedule_cannot_store_it_again():
    s = loads(RIGHT).schedule()
    with pytest.raises(ScheduleError, match="Y is already stored in X"):
        s.store_in("Y", "X")


def _error(source: str) -> SourceError:
    with pytest.raises(SourceError) as info:
        loads(source).schedule()
    return info.value


def test_a_program_that_reads_a_replaced_element_is_refused_at_its_in():
    source = """const N = 6
kernel shift(X: f32[N]) -> (Y: f32[N] in X) {
  Y[i : i > 0] = X[i - 1]
}
"""
    err = _error(source)
    text = str(err)
    assert text.startswith("<string>:2:42: error: 'Y' cannot be kept in 'X' [rule storage-overwrite]")
    assert "Y(i=1) writes Y[1] in the place of X[1]; then Y(i=2) reads X[1]" in text
    assert text.splitlines()[-1] == " " * 43 + "^"  # under the X of `in X`


@pytest.mark.parametrize("signature, message", [
    ("(X: f32[8] in Z) -> (Y: f32[8])", "'in Z' keeps a result in a parameter's array; 'X' is a parameter"),
    ("(X: f32[8]) -> (Y: f32[8] in W)", "unknown tensor 'W'"),
    ("(X: f32[8]) -> (Y: f32[8] in X, Z: f32[8] in X)", "'X' already holds 'Y'; a parameter holds one result"),
    ("(X: f32[8]) -> (Y: f32[8] in Z, Z: f32[8])", "'Z' is a result; 'in' names a parameter"),
    ("(X: bf16[8]) -> (Y: f32[8] in X)", "'Y' is f32 and 'X' is bf16"),
    ("(X: f32[4, 2]) -> (Y: f32[2, 4] in X)", "'Y' has shape [2, 4] and 'X' [4, 2]"),
])
def test_misuses_are_located_errors(signature, message):
    body = "  Y[i] = X[i] * 2.0" if "4, 2" not in signature else "  Y[i, j] = X[j, i]"
    extra = "\n  Z[i] = X[i]" if "Z: f32[8]" in signature else ""
    err = _error(f"kernel k{signature} {{\n{body}{extra}\n}}\n")
    assert message in str(err) and str(err).startswith("<string>:1:"), str(err)


def test_a_param_sized_result_in_a_param_sized_input():
    prog = loads("""param N
kernel scale(X: f32[N]) -> (Y: f32[N] in X) {
  Y[i] = X[i] * 2.0
}
""")
    s = prog.schedule()
    assert s.model.tensors["Y"].stored_in == "X"
