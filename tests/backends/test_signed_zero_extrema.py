"""max and min are IEEE 754-2019's maximum and minimum (docs/interpreter.md): +0.0 above -0.0, in every backend.

The hardware's max / min compare, so of two equal zeros of opposite signs they return either, by the operands'
order: Triton's tl.maximum (also under its interpreter), PTX max.NaN, AscendC Max and the 910B's T.tile.max and
T.reduce_max.  A zero's sign is seen through 1 / x (+inf or -inf), which the comparison of outputs then tells
apart (probe V of the 28th session: 1 / max(+0, -0) came out -inf on Triton and both Ascend models, and a row
maximum of -0s and +0s followed the order of its terms; E4M3 stores on the 910B lost the sign of -0.0).

Each kernel runs against the reference interpreter: Triton under its interpreter, the Ascend modules in their
NumPy models; the outputs must be the same bits (inf against inf of the same sign)."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.cli import _run_in_ascend_model, _run_on_nvidia
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.reference.interpreter import interpret

M, K = 4, 64
ELEMENTWISE = f"""const N = 8
kernel e(X: f32[N], Y: f32[N]) -> (D: f32[N], E: f32[N], R: f32[N], Q: f32[N], P: f8e4m3[N], G: f32[N],
                                   H: f32[N]) {{
  D[i] = 1.0 / max(X[i], Y[i])
  E[i] = 1.0 / min(X[i], Y[i])
  R[i] = 1.0 / max(X[i], 0.0)
  A[i]: f8e4m3 = X[i] * 1.0
  Q[i] = 1.0 / A[i]
  P[i] = Y[i]
  G[i] = 1.0 / (-X[i])
  H[i] = 1.0 / (Y[i] * -0.0)
}}
schedule tiles {{
  bind(D.i, grid.x)
}}
"""
ROWS = f"""const M = {M}, K = {K}
kernel r(X: f32[M, K]) -> (Y: f32[M], Z: f32[M]) {{
  m[i] = max(k) X[i, k]
  n[i] = min(k) X[i, k]
  Y[i] = 1.0 / m[i]
  Z[i] = 1.0 / n[i]
}}
schedule rows {{
  bind(m.i, grid.x)
  bind(n.i, grid.x)
  reverse_compute_at(Y, m.i)
  reverse_compute_at(Z, n.i)
}}
schedule reversed {{
  reverse(m.k)
  reverse(n.k)
}}
"""
# the 910B reduces tile axes only with sums and maxima: its row program has no minimum
ROW_MAXIMA = ROWS.replace("  n[i] = min(k) X[i, k]\n", "").replace("  Z[i] = 1.0 / n[i]\n", "") \
    .replace(", Z: f32[M]", "").replace("  bind(n.i, grid.x)\n", "").replace("  reverse_compute_at(Z, n.i)\n", "") \
    .replace("  reverse(n.k)\n", "")

TARGETS = [("nvidia", "triton"), ("ascend-950", None), ("ascend-910b", None)]


def _elementwise_inputs() -> dict:
    x = np.array([0.0, -0.0, 0.0, -0.0, -1e-45, -5.0, np.inf, -0.0], np.float32)
    y = np.array([-0.0, 0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -np.inf], np.float32)
    return {"X": x, "Y": y}


def _row_inputs() -> dict:
    x = np.zeros((M, K), np.float32)
    x[0, ::2] = -0.0  # -0 and +0 in turn
    x[1, 1::2] = -0.0
    x[2, :] = -0.0  # only -0: the maximum is -0
    x[3, :] = -1.0
    x[3, 5] = -0.0
    return {"X": x}


def _run(program, schedule, target, backend, inputs) -> dict:
    text = generate(program, schedule, target=target, backend=backend)
    model = program.schedule(None).model
    if target == "nvidia":
        return _run_on_nvidia(text, model, inputs, backend)[0]
    return _run_in_ascend_model(text, model, inputs, target)


def _assert_same_bits(program, schedule, target, backend, inputs) -> None:
    original = program.schedule(None)
    want = interpret(original.model, original.time_map(), inputs)
    got = _run(program, schedule, target, backend, inputs)
    for tensor in original.model.outputs():
        expected = np.asarray(want[tensor.name], np.float32)
        actual = np.asarray(got[tensor.name], np.float32)
        assert expected.tobytes() == actual.tobytes(), f"{tensor.name}: {actual} != {expected}"


def test_triton_negates_by_a_product():
    """Triton before 3.9 (3.6 on the lent H100) computes `-x` as 0 - x: +0.0 for x = +0.0, so 1 / -x was +inf on
    the GPU (29th session, benchmarks/gpu/experiments/zero_sign_forms.py).  x * -1.0 is exact in every version."""
    text = generate(loads(ELEMENTWISE, "zeros.tdsl"), None, target="nvidia", backend="triton")
    assert "v_G = tl.div_rn(1.0, (tl.load(X + G_i).to(tl.float32) * -1.0))" in text
    # and the literal -0.0 is the bits of -0.0 reinterpreted: Triton 3.6 makes every float constant -0.0 +0.0 on the
    # GPU (GPU fuzz seed 49: x * -0.0 came out +0.0 for x > 0; confirmed by zero_sign_forms.py, 30th session)
    assert "tl.load(Y + H_i).to(tl.float32) * _negative_zero())" in text


def test_the_interpreter_orders_the_zeros():
    program = loads(ELEMENTWISE, "zeros.tdsl")
    original = program.schedule(None)
    out = interpret(original.model, original.time_map(), _elementwise_inputs())
    assert out["D"].tolist()[:4] == [np.inf, np.inf, np.inf, -np.inf]
    assert out["E"].tolist()[:4] == [-np.inf, -np.inf, np.inf, -np.inf]
    assert out["Q"][1] == -np.inf and out["Q"][4] == -np.inf  # E4M3 keeps -0.0, and a negative rounded to 0
    assert out["G"].tolist()[:2] == [-np.inf, np.inf]
    assert out["H"].tolist()[:2] == [np.inf, -np.inf]  # -0 * -0 is +0, +0 * -0 is -0


@pytest.mark.parametrize("schedule", [None, "tiles"])
@pytest.mark.parametrize("target, backend", TARGETS, ids=[t for t, _ in TARGETS])
def test_elementwise_extrema_and_e4m3_stores_keep_the_sign_of_zero(target, backend, schedule):
    _assert_same_bits(loads(ELEMENTWISE, "zeros.tdsl"), schedule, target, backend, _elementwise_inputs())


@pytest.mark.parametrize("schedule", [None, "rows", "reversed"])
@pytest.mark.parametrize("target, backend", TARGETS, ids=[t for t, _ in TARGETS])
def test_a_row_maximum_of_zeros_is_the_ieee_one_in_any_order(target, backend, schedule):
    source = ROW_MAXIMA if target == "ascend-910b" else ROWS
    inputs = _row_inputs()
    _assert_same_bits(loads(source, "rows.tdsl"), schedule, target, backend, inputs)
    _assert_same_bits(loads(source, "rows.tdsl"), schedule, target, backend, {"X": -inputs["X"]})


# a literal that rounds to zero as an f32 is a zero (probe X of the 28th session: `max(1e-50, x)` was printed as the
# plain max, its operand taken for a number other than zero)
LITERALS = """const N = 2
kernel lit(X: f32[N]) -> (A: f32[N], B: f32[N], C: f32[N]) {
  A[i] = 1.0 / max(1e-50, X[i])
  B[i] = 1.0 / min(X[i], 1e-50)
  C[i] = 1.0 / max(X[i], -1e-50)
}
"""


@pytest.mark.parametrize("target, backend", TARGETS, ids=[t for t, _ in TARGETS])
def test_a_literal_that_rounds_to_zero_is_a_zero(target, backend):
    program = loads(LITERALS, "lit.tdsl")
    for x in ([-0.0, 0.0], [0.0, -0.0]):
        _assert_same_bits(program, None, target, backend, {"X": np.array(x, np.float32)})


def test_the_parser_reads_such_a_literal_as_a_signed_zero():
    from tdsl.frontend.limits import float_value

    assert [str(float_value(v)) for v in (1e-50, -1e-50, 2.0 ** -150, 2.0 ** -149)] == ["0.0", "-0.0", "0.0", str(2.0 ** -149)]
