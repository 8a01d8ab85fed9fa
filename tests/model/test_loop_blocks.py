"""Loop blocks (`for t < T { ... }`): statements that share an outer loop, so that one may read what a later one
computes at an earlier step (time loops: Jacobi, Gauss-Seidel sweeps, iterative methods).  The checker and the
model prove every read, program order interleaves the statements step by step, the legality checks keep the
dependences the shared loop carries, the interpreter matches sequential f32 loops, and the generated kernels
(values passed through memory, with barriers) match the interpreter, on the Ascend backends in the NumPy model."""

import islpy as isl
import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.driver.testing import assert_illegal, assert_legal
from tdsl.compiler.lower.build import lower
from tdsl.compiler.lower.tileir import Barrier, SerialLoop, walk_ops
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.frontend.diagnostics import SourceError

# PolyBench's jacobi-1d, time loop and both arrays as written there (jacobi-1d.c: B and A updated in turn, the end
# points never written), in value form: Ap[t] is A at the start of step t, Bn / An the arrays after its two sweeps.
JACOBI = """\
const T = 4, N = 12
kernel jacobi_1d(A0: f32[N], B0: f32[N]) -> (A: f32[N], B: f32[N]) {
  for t < T {
    Ap[t, i] = where(t == 0, A0[i], An[t - 1, i])
    Bn[t, i] = where(i == 0, B0[i], where(i == N - 1, B0[i], 0.33333 * (Ap[t, i - 1] + Ap[t, i] + Ap[t, i + 1])))
    An[t, i] = where(i == 0, Ap[t, i], where(i == N - 1, Ap[t, i], 0.33333 * (Bn[t, i - 1] + Bn[t, i] + Bn[t, i + 1])))
  }
  A[i] = An[T - 1, i]
  B[i] = Bn[T - 1, i]
}

schedule tiled {
  bo, bi = split(Bn.i, 4)
  ao, ai = split(An.i, 8)
}

schedule steps_in_pairs {
  to, ti = split(Ap.t, 2)
}
"""

# A Gauss-Seidel sweep per step (seidel-1d): each point uses its left neighbour of this step and its right neighbour
# of the previous one; and an iterative method whose step holds a reduction (x <- M x / 2).
SWEEPS = """\
const T = 3, N = 10
kernel sweeps(A0: f32[N], M: f32[N, N], X0: f32[N]) -> (S: f32[T, N], Y: f32[T, N]) {
  for t < T {
    S[t, i] = where(i == 0, where(t == 0, A0[i], S[t - 1, i]), where(i == N - 1, where(t == 0, A0[i], S[t - 1, i]),
              (S[t, i - 1] + where(t == 0, A0[i], S[t - 1, i]) + where(t == 0, A0[i + 1], S[t - 1, i + 1])) * 0.25))
  }
  for s < T {
    X[s, j] = where(s == 0, X0[j], Y[s - 1, j] * 0.5)
    Y[s, i] = sum(j) M[i, j] * X[s, j]
  }
}
"""


def _jacobi_f32(a0: np.ndarray, b0: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """jacobi-1d.c's loops in f32, each operation rounded as the interpreter does."""
    f = np.float32
    a, b = a0.astype(f).copy(), b0.astype(f).copy()
    n = a.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            b[i] = f(f(0.33333) * f(f(a[i - 1] + a[i]) + a[i + 1]))
        for i in range(1, n - 1):
            a[i] = f(f(0.33333) * f(f(b[i - 1] + b[i]) + b[i + 1]))
    return a, b


# ---------------------------------------------------------------- model


def test_the_interpreter_runs_a_time_loop_as_the_c_loops_do():
    sched = loads(JACOBI).schedule()
    inputs = random_inputs(sched.model, seed=5)
    got = interpret(sched.model, sched.time_map(), inputs)
    a, b = _jacobi_f32(inputs["A0"], inputs["B0"], 4)
    assert np.array_equal(got["A"], a) and np.array_equal(got["B"], b)


def test_the_statements_of_a_block_share_its_loop_in_program_order():
    sched = loads(JACOBI).schedule()
    (block, *_rest) = sched.tree.body
    assert block.name == "t" and sorted(block.exprs) == ["An", "Ap", "Bn"] and len(block.body) == 3
    # time vectors [block position, t, position in the block, i, position in the nest]
    order = sched.time_map()
    assert order.intersect_domain(isl.UnionSet("{ An[2, 5] }")).is_equal(isl.UnionMap("{ An[2, 5] -> [0, 2, 2, 5, 0] }"))


def test_a_value_read_from_an_earlier_step_is_a_flow_dependence_the_block_loop_carries():
    model = loads(JACOBI).model()
    deps = [d for d in compute_dependences(model) if (d.src, d.dst) == ("An", "Ap")]
    assert [d.kind for d in deps] == ["flow"]
    assert deps[0].relation.is_equal(isl.Map("{ An[t, i] -> Ap[t + 1, i] : 0 <= t < 3 and 0 <= i < 12 }"))


@pytest.mark.parametrize("body,message", [
    ("Y[t, i] = Z[t, i]\n    Z[t, i] = A[i]",
     "Z[t, i] reads an element Z has not computed yet: Y(t=0, i=0) reads Z[0, 0], which Z(t=0, i=0) computes later"),
    ("Y[t, i] = where(t == T - 1, A[i], Z[t + 1, i])\n    Z[t, i] = A[i] + Y[t, i]",
     "Y(t=0, i=0) reads Z[1, 0], which Z(t=1, i=0) computes later"),
])
def test_a_block_reads_a_later_statement_only_at_earlier_steps(body, message):
    src = f"const T = 3, N = 4\nkernel f(A: f32[N]) -> (Y: f32[T, N]) {{\n  for t < T {{\n    {body}\n  }}\n}}\n"
    with pytest.raises(SourceError) as info:
        loads(src, "prog.tdsl").model()
    text = str(info.value)
    assert text.startswith("prog.tdsl:4:") and message in text, text
    assert "inside a `for` block a statement may read what the block computes only at elements computed before" in text


@pytest.mark.parametrize("body,message,where", [
    ("for t <= T {\n    Y[t, i] = A[i]\n  }", "a loop block reads 'for t < bound'", "3:9"),
    ("for t < T {\n  }", "the loop block 'for t' has no statements", "3:3"),
    ("for t < T {\n    Y[i, j] = A[i]\n  }", "Y is inside the loop block 'for t' but does not index its tensor by t", "4:5"),
    ("for N < T {\n    Y[N, i] = A[i]\n  }", "'N' is a size, not an iterator; a loop block needs a fresh name", "3:7"),
    ("for t < T {\n    for t < T {\n      Y[t, i] = A[i]\n    }\n  }",
     "loop iterator 't' shadows the enclosing loop's iterator 't'", "4:9"),
    ("for t < U {\n    Y[t, i] = A[i]\n  }", "unknown size 'U'", "3:11"),
    ("for t < T {\n    Y[t, i] = A[i] + Z[t - 1]\n    Z[t, i] = A[i]\n  }", "tensor 'Z' has rank 2 but is indexed with 1 index",
     "4:22"),
    ("for t < T + 1 {\n    Y[t, i] = A[i]\n  }", "Y writes outside Y (shape [3, 4]): Y(t=3, i=0) writes Y[3, 0]", "4:5"),
])
def test_misused_blocks_are_refused_at_the_place(body, message, where):
    src = f"const T = 3, N = 4\nkernel f(A: f32[N]) -> (Y: f32[T, N]) {{\n  {body}\n}}\n"
    with pytest.raises(SourceError) as info:
        loads(src, "prog.tdsl").model()
    text = str(info.value)
    assert text.startswith(f"prog.tdsl:{where}:") and message in text, text


def test_a_time_loop_with_a_gauss_seidel_sweep_and_a_reduction_matches_sequential_loops():
    sched = loads(SWEEPS).schedule()
    inputs = random_inputs(sched.model, seed=2)
    got = interpret(sched.model, sched.time_map(), inputs)
    f = np.float32
    a, m, x = inputs["A0"].astype(f).copy(), inputs["M"].astype(f), inputs["X0"].astype(f)
    s_want, y_want = np.zeros((3, 10), f), np.zeros((3, 10), f)
    for t in range(3):
        prev = a.copy()
        for i in range(1, 9):
            a[i] = f(f(f(a[i - 1] + prev[i]) + prev[i + 1]) * f(0.25))
        s_want[t] = a
        xs = x if t == 0 else f(0.5) * y_want[t - 1]
        for i in range(10):
            acc = f(0)
            for j in range(10):
                acc = f(acc + f(m[i, j] * xs[j]))
            y_want[t, i] = acc
    assert np.array_equal(got["S"], s_want) and np.array_equal(got["Y"], y_want)


# ---------------------------------------------------------------- legality


def test_the_block_loop_cannot_be_bound_to_the_grid():
    assert_illegal(JACOBI, "bind(Ap.t, grid.x)", rule="parallel-dependence",
                   match=["loop t carries a dependence", "run in different iterations of t"])


def test_running_the_steps_backwards_is_rejected_with_the_dependence():
    assert_illegal(JACOBI, "reverse(Ap.t)", rule="dependence",
                   match="An(t=0, i=0) must run before Ap(t=1, i=0) (Ap reads An[0, 0]) but would run after")


def test_fusing_the_two_sweeps_of_a_step_is_rejected_with_the_dependence():
    assert_illegal(JACOBI, "fuse(Bn.i, An.i)", rule="dependence", match="An reads Bn")


@pytest.mark.parametrize("schedule", [None, "tiled", "steps_in_pairs"])
def test_legal_schedules_of_a_time_loop_are_bit_identical(schedule):
    assert_legal(JACOBI, schedule, run=True)


# ---------------------------------------------------------------- code generation


@pytest.mark.parametrize("schedule", [None, "tiled", "steps_in_pairs"])
@pytest.mark.parametrize("sizes", [{}, {"T": 1, "N": 3}, {"T": 5, "N": 37}])
def test_generated_triton_kernels_of_a_time_loop_match_the_interpreter(schedule, sizes, tmp_path):
    prog = loads(JACOBI, sizes=sizes)
    sched = prog.schedule()
    inputs = random_inputs(sched.model, seed=17)
    want = interpret(sched.model, sched.time_map(), inputs)
    module = load_module(generate(prog, schedule), tmp_path / "jacobi.py")
    got = run_generated(module, sched.model, inputs, guard=7)
    for name in ("A", "B"):
        assert np.array_equal(got[name], want[name]), name


def test_generated_triton_kernels_of_sweeps_and_reductions_match_the_interpreter(tmp_path):
    prog = loads(SWEEPS)
    sched = prog.schedule()
    inputs = random_inputs(sched.model, seed=4)
    want = interpret(sched.model, sched.time_map(), inputs)
    got = run_generated(load_module(generate(prog, None), tmp_path / "sweeps.py"), sched.model, inputs, guard=3)
    assert np.array_equal(got["S"], want["S"])
    assert np.allclose(got["Y"], want["Y"], rtol=1e-5, atol=1e-5)  # the sum's lanes add as a tree


def test_values_passed_through_memory_are_stored_and_fenced():
    program = lower(loads(JACOBI).schedule())
    kernel = program.kernels[0]
    (loop,) = [op for op in kernel.body if isinstance(op, SerialLoop)]
    assert loop.barrier  # An of step t is read by Ap of step t + 1
    assert [op.tensors for op in walk_ops(kernel.body) if isinstance(op, Barrier)] == [("Ap",), ("Bn",)]
    assert sorted(t.name for t in program.temps) == ["An", "Ap", "Bn"]


def test_tilelang_lowers_a_time_loop(tmp_path):
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(loads(JACOBI), "tiled", backend="tilelang")
    assert text.count("T.sync_threads()") == 3
    sources = lower_module(load_module(text, tmp_path / "jacobi_tilelang.py"), "sm_90a")
    assert any("__syncthreads()" in s for s in sources.values())


@pytest.mark.parametrize("source, sizes, schedule, exact", [
    (SWEEPS, None, None, ("S",)),
    (JACOBI, {"N": 16}, None, ("A", "B")),
    (JACOBI, None, "tiled", ("A", "B")),
    (JACOBI, {"N": 37}, "steps_in_pairs", ("A", "B")),
])
def test_the_950_orders_a_time_loop_with_a_barrier_of_every_pipe(source, sizes, schedule, exact, tmp_path):
    """The steps pass values through GM: the 950 stores them, waits for every pipe of the core
    (`T.ascend_pipe_barrier("PIPE_ALL")`) before each read-back and at the end of every step, and loads them back.
    The NumPy model checks the order and the results (Y's sum within tolerance), and refuses the module without
    the barriers."""
    from ascend950_memory import check_950_orders_memory

    check_950_orders_memory(loads(source, sizes=sizes), schedule, exact, tmp_path, seed=4)


def test_the_910b_orders_a_time_loop_on_its_vector_cores():
    """SWEEPS passes S and X from one step to the next through GM: the 910B stores them, waits for its own pipes
    (`T.barrier_all()` in the vector scope, at the end of every step) and loads them back.  The NumPy model
    checks that a core never loads an element it changed before such a barrier, and the result against the
    interpreter; with the barriers taken out it is refused.  JACOBI's boundary `where` varies along the lanes
    with a computed other branch (both branches over the tile, one's lanes selected into the other), and reads
    its neighbours shifted one lane either way: bit for bit too."""
    from tdsl.backends.ascend910b.api import check_module
    from tdsl.compiler.verify import compare_outputs
    from tdsl.compiler.verify.ascend_sim import SimulationError, simulate

    prog = loads(SWEEPS)
    sched_ = prog.schedule()
    text = generate(prog, None, target="ascend-910b")
    assert text.count('with T.Scope("V"): T.barrier_all()') == 3 and check_module(text) == []
    inputs = random_inputs(sched_.model, seed=4)
    want = interpret(sched_.model, sched_.time_map(), inputs)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert np.array_equal(got["S"], want["S"])
    assert all(c.ok for c in compare_outputs(sched_.model, want, got).values())
    with pytest.raises(SimulationError, match=r"which it changed in this block, without T.barrier_all\(\)"):
        simulate(text.replace('with T.Scope("V"): T.barrier_all()', "pass"), inputs, "ascend-910b")
    jacobi = loads(JACOBI, sizes={"N": 16})
    text = generate(jacobi, None, target="ascend-910b")
    assert "VSEL_TENSOR_TENSOR_MODE" in text and check_module(text) == []
    inputs = random_inputs(jacobi.schedule().model, seed=4)
    want = interpret(jacobi.schedule().model, jacobi.schedule().time_map(), inputs)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert all(np.array_equal(got[t.name], want[t.name]) for t in jacobi.schedule().model.outputs())
