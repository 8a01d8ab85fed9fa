"""skew: shift an inner loop by a multiple of an enclosing loop (compiler/schedule/primitives/skew.py).

skew changes no execution order, so it breaks no rule; what it enables does: after a skew the loops of a
Gauss-Seidel sweep can be interchanged into wavefronts (without the skew that interchange is a dependence error),
and each wavefront's points run in parallel.
"""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, assert_round_trip, sched, tree_change

# One Gauss-Seidel sweep over an N x N grid: each point reads its neighbours above and to the left as already
# updated (the recurrence), the others as they were.
SWEEP = """
const N = 11
kernel sweep(X: f32[N, N]) -> (Y: f32[N, N]) {
  Y[i, j] = where(i == 0, X[i, j], where(j == 0, X[i, j], where(j == N - 1, X[i, j],
    (Y[i - 1, j - 1] + Y[i - 1, j] + Y[i - 1, j + 1] + Y[i, j - 1] + X[i, j] + X[i, j + 1]) / 6.0)))
}
"""

WAVEFRONT = "w = skew(Y.j, Y.i, 2)\nreorder(Y, w, i)\nhost(Y.w)\nio, ii = split(Y.i, 4)\nbind(Y.io, grid.x)"


def test_skew_tree(golden):
    golden(tree_change(sched(SWEEP), lambda s: s.skew("Y.j", "Y.i", 2)))


def test_skew_trace_round_trip():
    s = sched(SWEEP)
    s.skew("Y.j", "Y.i", 2, names="w")
    s.reorder("Y", "w", "i")
    s.skew("Y.i", "Y.w", 1)
    assert_round_trip(SWEEP, s)


def test_skew_breaks_no_rule():
    assert_legal(SWEEP, "skew(Y.j, Y.i, 1)", run=True)
    assert_legal(SWEEP, "skew(Y.j, Y.i, 3)\njo, jj = split(Y.j, 4)", run=True)
    assert_legal(GEMM_SILU, "skew(C.k, C.i, 1)\nskew(Y.j, Y.i, 5)", sizes=GEMM_SILU_SMALL, run=True)


def test_the_wavefront_interchange_is_legal_only_after_the_skew():
    err = assert_illegal(SWEEP, "reorder(Y, j, i)", rule="dependence", primitive="reorder", statements=["Y"])
    assert "Y(i=0, j=2) must run before Y(i=1, j=1) (Y reads Y[0, 2]) but would run after" in err.counterexample
    # Skewed by 1, the wavefront i + j still holds Y(i - 1, j + 1) and Y(i, j): its points are not parallel.
    assert_illegal(SWEEP, "skew(Y.j, Y.i, 1)\nreorder(Y, j, i)\nbind(Y.i, grid.x)", rule="parallel-dependence",
                   primitive="bind")
    assert_legal(SWEEP, WAVEFRONT, run=True)


def test_skew_misuses_are_refused():
    s = sched(SWEEP)
    with pytest.raises(ScheduleError, match=r"loop j does not enclose loop i; skew an inner loop by an outer one"):
        s.skew("Y.i", "Y.j", 1)
    with pytest.raises(ScheduleError, match=r"loop i does not enclose loop i"):
        s.skew("Y.i", "Y.i", 1)
    with pytest.raises(ScheduleError, match=r"the factor must be a positive integer, got 0"):
        s.skew("Y.j", "Y.i", 0)
    with pytest.raises(ScheduleError, match=r"a loop named 'i' already exists here"):
        s.skew("Y.j", "Y.i", 1, names="i")
    g = sched(GEMM_SILU)
    g.reorder("C", "k", "i", "j")
    with pytest.raises(ScheduleError, match=r"loop k walks the reduction of C and loop j does not"):
        g.skew("C.j", "C.k", 1)
    g.fuse("C.i", "C.j")
    with pytest.raises(ScheduleError, match=r"loop i_j is a fused loop of 2 dimensions; skew before fusing"):
        g.skew("C.i_j", "C.k", 1)


@pytest.mark.parametrize("sizes", [{}, {"N": 3}, {"N": 14}])
def test_generated_wavefront_kernels_match_the_interpreter(sizes, tmp_path):
    prog = loads(SWEEP + f"schedule wave {{\n{WAVEFRONT}\n}}\n", sizes=sizes)
    s = prog.schedule()
    inputs = random_inputs(s.model, seed=3)
    want = interpret(s.model, s.time_map(), inputs)
    text = generate(prog, "wave")
    assert "for w in range(0, " in text  # one launch per wavefront
    got = run_generated(load_module(text, tmp_path / "sweep.py"), s.model, inputs, guard=5)
    assert np.array_equal(got["Y"], want["Y"])
