"""host: run a loop on the host, launching the kernels of its body once per iteration
(compiler/schedule/primitives/host.py).

host changes no execution order, so it breaks no rule; only its misuse is an error (a bound, pipelined or fused
loop, a loop inside one a kernel runs, a loop that walks a reduction or holds cache buffers).  The generated
launcher runs the loop in Python and the kernels inside may be bound to the grid.
"""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.lower.build import lower
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.testing import assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, assert_round_trip, sched, tiled, tree_change

# Heat flow along a rod of N points over T steps (the ends held), each step reading the neighbours of the last.
HEAT = """
const T = 5, N = 40
kernel heat(U0: f32[N]) -> (U: f32[N]) {
  for t < T {
    P[t, i] = where(t == 0, U0[i], Q[t - 1, i])
    Q[t, i] = where(i == 0, P[t, i], where(i == N - 1, P[t, i], P[t, i] + 0.25 * (P[t, i - 1] - 2.0 * P[t, i] + P[t, i + 1])))
  }
  U[i] = Q[T - 1, i]
}
"""

ON_HOST = "host(P.t)\npo, pi = split(P.i, 16)\nbind(P.po, grid.x)\nqo, qi = split(Q.i, 8)\nbind(Q.qo, grid.x)"


def test_host_tree(golden):
    golden(tree_change(sched(HEAT), lambda s: s.host("P.t")))


def test_host_trace_round_trip():
    s = sched(HEAT)
    s.host("P.t")
    s.split("Q.i", 8)
    s.bind("Q.io", "grid.x")
    assert_round_trip(HEAT, s)


def test_host_misuses_are_refused():
    s = sched(HEAT)
    s.split("P.i", 8)
    with pytest.raises(ScheduleError, match=r"loop io is inside loop t, which a kernel runs; host loops are the "
                                            r"outermost loops \(run t on the host first\)"):
        s.host("P.io")
    s.host("P.t")
    with pytest.raises(ScheduleError, match=r"loop t already runs on the host"):
        s.host("Q.t")
    with pytest.raises(ScheduleError, match=r"loop t runs on the host; a loop runs either on the grid or on the host"):
        s.bind("P.t", "grid.x")
    g = tiled()
    g.reorder("C", "ko", "io", "jo", "ii", "jj", "kk")
    with pytest.raises(ScheduleError, match=r"loop ko walks the reduction of C: its accumulator would have to live "
                                            r"from one launch to the next"):
        g.host("C.ko")
    g = tiled()
    g.bind("C.io", "grid.x")
    with pytest.raises(ScheduleError, match=r"loop io is bound to grid.x; a loop runs either on the grid or on the host"):
        g.host("C.io")
    g = tiled()
    g.pipeline("C.io", stages=2)
    with pytest.raises(ScheduleError, match=r"loop io is pipelined"):
        g.host("C.io")


def test_steps_that_would_move_a_host_loop_or_put_a_buffer_on_it_are_refused():
    s = sched(HEAT)
    s.split("Q.i", 8)
    s.host("P.t")
    with pytest.raises(ScheduleError, match=r"loop t runs on the host, where the loops stay in their order"):
        s.reorder("Q", "io", "t")
    with pytest.raises(ScheduleError, match=r"fuse: loop t runs on the host; fuse loops before host"):
        s.fuse("P.t", "Q.io")
    with pytest.raises(ScheduleError, match=r"loop t runs on the host, and a buffer lives inside one kernel"):
        s.cache_read("P", "shared", at="Q.t")
    s.cache_read("P", "shared", at="Q.io")  # a loop inside the host loop: one kernel


def test_host_breaks_no_rule():
    assert_legal(HEAT, ON_HOST, run=True)
    assert_legal(GEMM_SILU, "io, ii = split(C.i, 32)\nhost(C.io)\nbind(C.j, grid.x)", sizes=GEMM_SILU_SMALL, run=True)


def test_each_node_of_a_host_loop_is_a_kernel_launched_per_iteration():
    program = lower(_scheduled(HEAT, ON_HOST))
    assert [(k.comment, [h.var for h in k.host], [g.axis for g in k.grid]) for k in program.kernels] == [
        ("statements P", ["l_t"], ["x"]), ("statements Q", ["l_t"], ["x"]), ("statements U", [], [])]
    text = generate(loads(HEAT + f"schedule on_host {{\n{ON_HOST}\n}}\n"), "on_host")
    assert "    for l_t in range(0, 5):  # host loop\n        heat_0[" in text


@pytest.mark.parametrize("sizes", [{}, {"T": 1, "N": 3}, {"T": 4, "N": 45}])
def test_generated_kernels_of_a_host_loop_match_the_interpreter(sizes, tmp_path):
    prog = loads(HEAT + f"schedule on_host {{\n{ON_HOST}\n}}\n", sizes=sizes)
    sched_ = prog.schedule()
    inputs = random_inputs(sched_.model, seed=9)
    want = interpret(sched_.model, sched_.time_map(), inputs)
    got = run_generated(load_module(generate(prog, "on_host"), tmp_path / "heat.py"), sched_.model, inputs, guard=5)
    assert np.array_equal(got["U"], want["U"])


def test_tilelang_lowers_host_loops(tmp_path):
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(loads(HEAT + f"schedule on_host {{\n{ON_HOST}\n}}\n"), "on_host", backend="tilelang")
    assert 'for l_t in range(0, 5):  # host loop\n        _kernel("heat_0")(P, U0, Q, l_t)' in text
    assert len(lower_module(load_module(text, tmp_path / "heat_tilelang.py"), "sm_90a")) == 3


@pytest.mark.parametrize("sizes", [{}, {"T": 1, "N": 3}, {"T": 4, "N": 45}])
def test_the_ascend_950_module_launches_each_kernel_per_host_iteration(sizes, tmp_path):
    """The 950 module's `launches()` runs the host loop: each kernel takes the loop's value as a T.int32 after its
    tensors; executed by the NumPy model of the module, bit for bit the interpreter's result; lowered by
    mainline TileLang's Ascend backend (the scalar reaches the AscendC kernel)."""
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(HEAT + f"schedule on_host {{\n{ON_HOST}\n}}\n", sizes=sizes)
    sched_ = prog.schedule()
    text = generate(prog, "on_host", target="ascend-950")
    steps = sizes.get("T", 5)
    assert f'for l_t in range(0, {steps}):  # host loop\n        yield "heat_0", (l_t,)' in text
    assert "l_t: T.int32):" in text
    inputs = random_inputs(sched_.model, seed=9)
    want = interpret(sched_.model, sched_.time_map(), inputs)
    assert np.array_equal(simulate(text, inputs).tensors["U"], want["U"])
    if sizes:
        return
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    sources = lower_module(load_module(text, tmp_path / "heat_950.py"), "ascend")
    assert len(sources) == 3 and "int32_t l_t" in sources["heat_0"]


ROWS = """
const R = 3, N = 64
kernel rows(X: f32[R, N], Z: f32[N]) -> (Y: f32[R, N]) {
  Y[r, i] = X[r, i] * 2.0 + Z[i]
}
schedule on_host {
  host(Y.r)
  io, ii = split(Y.i, 16)
  bind(Y.io, grid.x)
}
"""


def test_the_910b_module_launches_each_kernel_per_host_iteration():
    """The 910B module has the same launch order: the host loop's value is a T.int32 after the kernel's tensors;
    executed by the NumPy model of the module, bit for bit the interpreter's result; and HEAT's, whose `where`
    picks between computed values along the tile's lanes and reads P shifted by one lane either way."""
    from tdsl.backends.ascend910b.api import check_module
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(ROWS)
    sched_ = prog.schedule()
    text = generate(prog, "on_host", target="ascend-910b")
    assert 'for l_r in range(0, 3):  # host loop\n        yield "rows_0", (l_r,)' in text
    assert "l_r: T.int32):" in text and check_module(text) == []
    inputs = random_inputs(sched_.model, seed=9)
    want = interpret(sched_.model, sched_.time_map(), inputs)
    assert np.array_equal(simulate(text, inputs).tensors["Y"], want["Y"])
    heat = loads(HEAT.replace("N = 40", "N = 64") + f"schedule on_host {{\n{ON_HOST}\n}}\n")
    text = generate(heat, "on_host", target="ascend-910b")
    assert check_module(text) == []
    inputs = random_inputs(heat.schedule().model, seed=9)
    want = interpret(heat.schedule().model, heat.schedule().time_map(), inputs)
    assert np.array_equal(simulate(text, inputs).tensors["U"], want["U"])


def _scheduled(text: str, steps: str):
    return loads(text + f"schedule s {{\n{steps}\n}}\n").schedule("s")
