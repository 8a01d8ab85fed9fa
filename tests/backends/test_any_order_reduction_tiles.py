"""A tile over a loop that walks a reduction, with a serial loop of the same reduction inside it.

The tile backends run such a serial loop around the tile (for vo: one tile over vi), so the terms of an element
combine in another order than the schedule's (vi outer).  That is generated for a reduction whose terms may combine
in any order: `max` and `min` (the same bits in every order) and a sum under `combine reassoc` or `deterministic`
(a strict sum cannot take that schedule at all; probe Y of the 29th session: a legal `reorder(m, vi, vo)` of a row
maximum was refused by every backend, "would add the terms of one element in another order")."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.cli import _run_in_ascend_model, _run_on_nvidia
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.reference.interpreter import interpret

SOURCE = """const M = 6, V = 17
kernel rows(Z: f32[M, V]) -> (m: f32[M]) {
  m[i] = OP(v) Z[i, v] COMBINE
}
schedule inner_first {
  vo, vi = split(m.v, 4)
  reorder(m, vi, vo)
  bind(m.i, grid.x)
}
"""
TARGETS = [("nvidia", "triton"), ("ascend-950", None), ("ascend-910b", None)]
# the 910B reduces tile axes with sums and maxima only
REDUCTIONS = [("max", ""), ("min", ""), ("sum", "combine reassoc"), ("sum", "combine deterministic")]


def _program(op: str, combine: str):
    return loads(SOURCE.replace("OP", op).replace("COMBINE", combine), f"{op}.tdsl")


def _inputs(seed: int) -> dict:
    z = np.random.default_rng(seed).normal(size=(6, 17)).astype(np.float32)
    z[1, 3] = np.nan
    z[2, :] = -0.0
    z[2, 16] = 0.0
    z[3, 5] = np.inf
    z[4, 0] = -np.inf
    return {"Z": z}


def _run(program, target, backend, inputs) -> np.ndarray:
    text = generate(program, "inner_first", target=target, backend=backend)
    model = program.schedule(None).model
    out = _run_on_nvidia(text, model, inputs, backend)[0] if target == "nvidia" else \
        _run_in_ascend_model(text, model, inputs, target)
    return np.asarray(out["m"], np.float32)


@pytest.mark.parametrize("op, combine", REDUCTIONS, ids=[f"{op}-{c.split()[-1]}" if c else op for op, c in REDUCTIONS])
@pytest.mark.parametrize("target, backend", TARGETS, ids=[t for t, _ in TARGETS])
def test_a_reduction_in_any_order_is_tiled_outside_its_serial_loop(target, backend, op, combine):
    if target == "ascend-910b" and op == "min":
        pytest.skip("the 910B has no minimum over a tile axis")
    program = _program(op, combine)
    inputs = _inputs(7)
    original = program.schedule(None)
    want = np.asarray(interpret(original.model, original.time_map(), inputs)["m"], np.float32)
    got = _run(program, target, backend, inputs)
    if op == "sum":  # regrouped: within f32 rounding of the terms' magnitudes
        finite = np.isfinite(want)
        assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~finite & ~np.isnan(want)],
                                                                                 want[~finite & ~np.isnan(want)])
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)
    else:  # the same bits: NaN rows, signed zeros, infinities
        assert got.tobytes() == want.tobytes(), f"{got} != {want}"


def test_a_strict_sum_cannot_take_that_shape():
    """Its order is the program's: the reorder itself is refused (so the backend's order never matters)."""
    from tdsl.compiler.errors import StepError

    with pytest.raises(StepError, match=r"reorder is illegal \[rule reduction-order\]"):
        _program("sum", "").schedule("inner_first")
