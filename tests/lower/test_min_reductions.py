"""`min` reductions (issue 13: Floyd-Warshall's shortest paths, Nussinov's scores): the interpreter's IEEE minimum,
no order to keep under any schedule, the same kernels as `max` in every backend -- Triton against the interpreter
at ragged sizes and with NaN inputs, TileLang lowered, the Ascend 950 in its execution model, the 910B in its
execution model where it folds one term per step and refused (with the fix) where it would reduce a tile."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.driver.testing import assert_legal
from tdsl.compiler.errors import BackendError
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare
from tdsl.frontend.diagnostics import SourceError

EXTREMA = """\
const M = 5, N = 7
kernel ext(X: f32[M, N], Y: bf16[M, N]) -> (lo: f32[M], hi: f32[M], c: bf16[N], s: f32[M]) {
  lo[i] = min(j) X[i, j]
  hi[i] = max(j) X[i, j]
  c[j] = min(i : i <= j) Y[i, j] accum bf16
  s[i] = sum(j) X[i, j] - lo[i]
}

schedule tiles {
  lo_o, lo_i = split(lo.i, 2)
  bind(lo.lo_o, grid.x)
  jo, jj = split(lo.j, 4)
  reorder(lo, lo_o, jo, lo_i, jj)
  co, ci = split(c.j, 4)
  bind(c.co, grid.x)
}

schedule backwards {
  reverse(lo.j)
  reverse(c.i)
}
"""


def test_the_interpreter_takes_the_ieee_minimum():
    prog = loads(EXTREMA)
    sched = prog.schedule()
    inputs = random_inputs(sched.model, seed=4)
    inputs["X"][1, 3] = np.nan
    inputs["X"][2, :] = 0.0
    inputs["X"][2, 5] = -0.0
    got = interpret(sched.model, sched.time_map(), inputs)
    x = inputs["X"].astype(np.float32)
    assert np.isnan(got["lo"][1]) and np.isnan(got["hi"][1])
    rows = [0, 3, 4]
    assert np.array_equal(got["lo"][rows], x[rows].min(axis=1))
    assert np.signbit(got["lo"][2]) and got["lo"][2] == 0.0  # -0.0 < +0.0
    y = inputs["Y"].astype(np.float32)
    assert np.array_equal(got["c"].astype(np.float32), np.array([y[: min(j + 1, 5), j].min() for j in range(7)]))


def test_a_min_reduction_has_no_order_to_keep():
    model = loads(EXTREMA).model()
    assert not [d for d in compute_dependences(model) if d.kind == "reduction" and d.src in ("lo", "c")]
    assert_legal(loads(EXTREMA), "backwards", run=True)  # bit-identical in the reverse order


def test_combine_online_is_for_a_max_only():
    src = "const N = 4\nkernel f(X: f32[N, N]) -> (m: f32[N]) {\n  m[i] = min(j) X[i, j] combine online\n}\n"
    with pytest.raises(SourceError, match="a min reduction cannot be one"):
        loads(src)


@pytest.mark.parametrize("schedule", [None, "tiles"])
@pytest.mark.parametrize("sizes", [{}, {"M": 3, "N": 9}, {"M": 9, "N": 1}])
def test_triton_kernels_match_the_interpreter_nan_included(schedule, sizes, tmp_path):
    prog = loads(EXTREMA, sizes=sizes)
    model = prog.schedule().model
    inputs = random_inputs(model, seed=6)
    inputs["X"][0, -1] = np.nan
    want = interpret(model, prog.schedule().time_map(), inputs)
    got = run_generated(load_module(generate(prog, schedule), tmp_path / "ext.py"), model, inputs, guard=5)
    for t in model.outputs():
        result = compare(want[t.name].astype(np.float32), got[t.name], t.dtype)
        assert result.ok, f"{t.name}: {result.summary()}"


def test_tilelang_reduces_a_tile_with_reduce_min(tmp_path):
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(loads(EXTREMA), "tiles", backend="tilelang")
    assert "T.reduce_min(" in text
    assert len(lower_module(load_module(text, tmp_path / "ext_tl.py"), "sm_90a")) == 4


# one term per step: the accumulator is updated element for element (no tile reduction)
ONE_TERM = EXTREMA + "schedule serial {\n  jo, jj = split(lo.j, 1)\n  io, ii = split(c.i, 1)\n}\n"


@pytest.mark.parametrize("schedule,sizes", [(None, {"M": 6, "N": 16}), ("tiles", {"M": 6, "N": 16}),
                                            ("serial", {"M": 6, "N": 16}), (None, {"M": 1, "N": 1})])
def test_the_ascend_950_kernel_computes_the_program(schedule, sizes):
    from tdsl.compiler.verify.ascend_sim import check_schedule

    result = check_schedule(loads(ONE_TERM, sizes=sizes), schedule, "ascend-950", seed=2)
    assert all(r.ok for r in result.values()), {k: r.summary() for k, r in result.items()}


def test_tilelang_updates_a_minimum_one_term_at_a_time_with_min():
    """NVIDIA's spelling of min is PTX min.NaN (`tdsl_min`, which keeps a NaN term); never a max."""
    text = generate(loads(ONE_TERM), "serial", backend="tilelang")
    assert '"tdsl_min", acc_lo[' in text and '"tdsl_max", acc_lo[' not in text and "T.max(acc_lo[" not in text


def test_the_910b_folds_one_term_per_step_and_refuses_a_tile_minimum():
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(ONE_TERM, sizes={"M": 8, "N": 16})
    result = check_schedule(prog, "serial", "ascend-910b", seed=1)
    assert result["lo"].ok and result["c"].ok
    with pytest.raises(BackendError, match=r"lo: a min over tile axes; tilelang-ascend reduces tiles with "
                                           r"T.reduce_sum and T.reduce_max only"):
        generate(loads(EXTREMA, sizes={"M": 8, "N": 16}), None, target="ascend-910b")
