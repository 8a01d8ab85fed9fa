"""bind: run the iterations of a loop as parallel programs along a grid axis (compiler/schedule/primitives/bind.py).

Rules bind can break: parallel-dependence (the loop carries a dependence), parallel-reduction (the loop
walks a strict reduction: its updates would race) and atomic-combine (a reduction whose policy allows
regrouping but not a run-dependent order would be combined with atomics).
"""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import ParallelDependence, ParallelReduction, ScheduleError, StepError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, STENCIL, TILED, assert_round_trip, sched, tiled, tree_change

GEMM = """
const M = 4, N = 4, K = 32
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32 POLICY
}
"""
SPLIT_K = "ko, kk = split(C.k, 8)\nreorder(C, ko, i, j, kk)\nbind(C.ko, grid.z)"


def test_bind_tree(golden):
    def step(s):
        s.bind("C.io", "grid.x")
        s.bind("C.jo", "grid.y")

    golden(tree_change(tiled(), step))


def test_bind_trace_round_trip():
    s = tiled()
    s.bind("C.io", "grid.x")
    s.bind("C.jo", "y")
    s.bind("Y.i", "grid.z")
    assert_round_trip(GEMM_SILU, s)


def test_binding_a_reduction_loop_is_parallel_reduction():
    s = sched()
    s.split("C.k", 16)
    s.reorder("C", "ko", "i", "j", "kk")
    with pytest.raises(ParallelReduction) as err:
        s.bind("C.ko", "grid.z")
    assert err.value.rule == "parallel-reduction"
    assert "C(i=0, j=0, k=0) and C(i=0, j=0, k=16) run in different iterations of ko" in str(err.value)


def test_binding_a_loop_carrying_a_flow_dependence():
    s = sched(STENCIL)
    s.fuse("T.i", "Y.i")
    with pytest.raises(ParallelDependence) as err:
        s.bind("T.i", "grid.x")
    assert err.value.rule == "parallel-dependence"
    assert "T(i=0) and Y(i=1) run in different iterations of i (Y reads T[0])" in str(err.value)


def test_binding_a_bound_loop_again_is_refused():
    s = tiled()
    s.bind("C.io", "grid.x")
    for axis in ("grid.y", "grid.x"):  # another axis would replace the first bind; the same one repeats it
        with pytest.raises(ScheduleError, match=r"^bind: loop io is already bound to grid.x; a loop runs on one grid axis"):
            s.bind("C.io", axis)
    assert [loop.bind for loop in s.tree.path("C")[:2]] == ["x", None]
    assert [step.primitive for step in s.trace.steps].count("bind") == 1
    s.bind("C.jo", "grid.y")  # another loop of the kernel, another axis: fine
    with pytest.raises(ScheduleError, match=r"^bind: grid.y is already bound to loop jo"):
        s.bind("C.ii", "grid.y")  # another loop, an axis the kernel already uses


def test_binding_twice_in_a_schedule_block_points_at_the_second_bind():
    text = GEMM_SILU + """
schedule twice {
  io, ii = split(C.i, 32)
  bind(C.io, grid.x)
  bind(C.io, grid.y)
}
"""
    from tdsl.compiler.errors import StepError

    with pytest.raises(StepError) as err:
        loads(text, filename="twice.tdsl").schedule("twice")
    assert isinstance(err.value.error, ScheduleError) and err.value.exit_code == 2
    assert "twice.tdsl:11:3: error: bind: loop io is already bound to grid.x" in str(err.value)


def test_bind_of_a_loop_that_carries_a_dependence_is_parallel_dependence():
    assert_illegal(STENCIL, "fuse(T.i, Y.i)\nbind(T.i, grid.x)", rule="parallel-dependence", primitive="bind",
                   statements=["T", "Y"], match="loop i carries a dependence")


def test_bind_of_a_strict_reduction_loop_is_parallel_reduction():
    assert_illegal(GEMM.replace(" POLICY", ""), SPLIT_K, rule="parallel-reduction", primitive="bind",
                   statements=["C"], match="C(i=0, j=0, k=0) and C(i=0, j=0, k=8) run in different iterations of ko "
                                           "(both update C[0, 0])")


def test_bind_of_a_deterministic_reduction_loop_is_atomic_combine():
    assert_legal(GEMM.replace("POLICY", "combine reassoc"), SPLIT_K)  # atomics are fine where any order is
    assert_illegal(GEMM.replace("POLICY", "combine deterministic"), SPLIT_K, rule="atomic-combine", primitive="bind",
                   statements=["C"], match="C declares `combine deterministic`")


def test_bind_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "reverse_compute_at(Y, C.jo)\nbind(C.io, grid.x)\nbind(C.jo, grid.y)",
                 sizes=GEMM_SILU_SMALL, run=True)


def test_an_unknown_grid_axis_is_named_as_written():
    with pytest.raises(StepError, match=r"unknown grid axis 'threadIdx\.x'; use grid\.x, grid\.y or grid\.z"):
        loads("const M = 8\nkernel f(A: f32[M]) -> (C: f32[M]) { C[i] = A[i] * 2.0 }\n"
              "schedule s { bind(C.i, threadIdx.x) }\n").schedule("s")


# A producer and its reader, each its own loop nest: the steps below move one into the other's loop.
PAIR = """
const N = 8, M = 12
kernel pair(X: f32[N, M]) -> (Z: f32[N, M]) {
  Y[i, j] = X[i, j] * 2.0
  Z[i, j] = Y[i, j] + 1.0
}
"""


@pytest.mark.parametrize("steps, lost", [
    ("bind(Y.i, grid.x)\ncompute_at(Y, Z.i)", "Y.i"),
    ("bind(Z.i, grid.x)\nreverse_compute_at(Z, Y.i)", "Z.i"),
    ("bind(Y.i, grid.x)\nrecompute_at(Y, Z.i)", "Y.i"),
    ("bind(Z.i, grid.x)\nfuse(Y.i, Z.i)", "Z.i"),
    ("bind(Y.i, grid.x)\nbind(Z.i, grid.y)\ncompute_at(Y, Z.i)", "Y.i"),  # it would run on grid.y instead
])
def test_a_step_that_would_drop_a_statements_grid_binding_is_refused(steps, lost):
    """The loop a step merges into another statement's loops took its binding with it, silently: deriche's rows,
    bound to grid.x and moved by compute_at, ran serially (probe of the 24th session)."""
    primitive = steps.splitlines()[-1].split("(")[0]
    with pytest.raises(StepError, match=rf"{primitive}: {lost} is bound to grid.x, and after this step no loop "
                                        rf"around {lost[0]} would be.*bind the loop that should run on grid.x"):
        loads(PAIR + "schedule s {\n" + steps + "\n}\n").schedule("s")


@pytest.mark.parametrize("steps", [
    "compute_at(Y, Z.i)\nbind(Z.i, grid.x)",  # bound after the step, as the refusal says
    "bind(Y.i, grid.x)\nbind(Z.i, grid.x)\ncompute_at(Y, Z.i)",  # the target runs on the same axis
    "bind(Y.j, grid.x)\ncompute_at(Y, Z.i)",  # Y keeps its own loop j, bound, inside Z.i
    "bind(Y.i, grid.x)\nfuse(Y.i, Z.i)",  # the fused loop is Y's, bound: Z runs on grid.x too
])
def test_a_step_that_keeps_every_grid_binding_is_accepted(steps):
    sched = assert_legal(PAIR, steps, sizes={}, run=True)
    assert any(loop.bind == "x" for loop in sched.tree.path("Y"))
