"""Recurrences (a statement reading its own earlier elements) and guarded reads (`where` branches read only where
taken): the model proves the reads, the interpreter runs them in program order, the legality checks keep the
loop-carried dependences, the tile lowering runs the carrying loops serially with a barrier, and the generated
Triton kernels match the interpreter; TileLang lowers them; the Ascend backends order them with barriers."""

import re

import islpy as isl
import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.driver.testing import assert_illegal, assert_legal
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower.build import lower
from tdsl.compiler.lower.tileir import SerialLoop, walk_ops
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.frontend.diagnostics import SourceError

RECURRENCES = """\
const M = 6, N = 9
kernel rec(a: f32[M, N], x: f32[N]) -> (y: f32[N], s: f32[M, N], t: f32[M, N], u: f32[M], w: f32[M, N]) {
  y[i] = where(i == 0, x[i], y[i - 1] + x[i])
  s[i, j] = where(j == 0, a[i, j], s[i, j - 1] * 0.5 + a[i, j])
  t[i, j] = where(i == 0, s[i, j], t[i - 1, j] * 0.25 + s[i, j])
  u[i] = sum(j : j <= i) a[i, j] * where(j == i, 1.0, u[j])
  w[i, j] = where(i == 0, a[i, j], where(j == N - 1, a[i, j], w[i - 1, j + 1] + a[i, j]))
}

schedule tiled {
  io, ii = split(s.i, 4)
  bind(s.io, grid.x)
  jo, jj = split(t.j, 4)
  reorder(t, jo, i, jj)
  bind(t.jo, grid.x)
  wo, wi = split(w.i, 2)
}
"""


def _f32_reference(a: np.ndarray, x: np.ndarray) -> dict:
    """The program written as sequential f32 loops (each operation rounded to f32, as the interpreter does)."""
    f = np.float32
    m, n = a.shape
    y = np.zeros(n, f)
    for i in range(n):
        y[i] = x[i] if i == 0 else f(y[i - 1] + x[i])
    s = np.zeros((m, n), f)
    t = np.zeros((m, n), f)
    w = np.zeros((m, n), f)
    for i in range(m):
        for j in range(n):
            s[i, j] = a[i, j] if j == 0 else f(f(s[i, j - 1] * f(0.5)) + a[i, j])
    for i in range(m):
        for j in range(n):
            t[i, j] = s[i, j] if i == 0 else f(f(t[i - 1, j] * f(0.25)) + s[i, j])
            w[i, j] = a[i, j] if i == 0 or j == n - 1 else f(w[i - 1, j + 1] + a[i, j])
    u = np.zeros(m, f)
    for i in range(m):
        acc = f(0)
        for j in range(i + 1):
            acc = f(acc + f(a[i, j] * (f(1) if j == i else u[j])))
        u[i] = acc
    return {"y": y, "s": s, "t": t, "u": u, "w": w}


def test_the_interpreter_runs_recurrences_in_program_order():
    prog = loads(RECURRENCES)
    sched = prog.schedule()
    inputs = random_inputs(sched.model, seed=3)
    got = interpret(sched.model, sched.time_map(), inputs)
    want = _f32_reference(inputs["a"].astype(np.float32), inputs["x"].astype(np.float32))
    for name, values in want.items():
        assert np.array_equal(got[name], values), name


def test_the_dependences_of_a_recurrence_are_loop_carried_flow_dependences():
    model = loads(RECURRENCES).model()
    deps = [d for d in compute_dependences(model) if d.src == d.dst == "s"]
    assert [d.kind for d in deps] == ["flow"]
    expected = isl.Map("{ s[i, j] -> s[i, j + 1] : 0 <= i < 6 and 0 <= j < 8 }")
    assert deps[0].relation.is_equal(expected)


@pytest.mark.parametrize("statement,message", [
    ("Y[i] = Y[i] + A[i]", "Y(i=0) reads Y[0], which this same instance computes"),
    ("Y[i] = where(i == N - 1, A[i], Y[i + 1] + A[i])", "Y(i=0) reads Y[1], which Y(i=1) computes later"),
    ("Y[i] = sum(j) A[j] * Y[0]", "Y(i=0, j=0) reads Y[0], which this reduction is still summing"),
    ("Y[i] = sum(j) A[j] * where(j == 0, 1.0, Y[i])", "Y(i=0, j=1) reads Y[0], which this reduction is still summing"),
    ("Y[i] = sum(j : j <= 1) A[j] * where(i == N - 1, 1.0, Y[i + 1])", "Y(i=0, j=0) reads Y[1], which Y(i=1, j=0) computes later"),
])
def test_a_recurrence_reads_only_elements_computed_before(statement, message):
    src = f"const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {{\n  {statement}\n}}\n"
    with pytest.raises(SourceError) as info:
        loads(src, "prog.tdsl").model()
    text = str(info.value)
    assert text.startswith("prog.tdsl:3:"), text
    assert "reads an element Y has not computed yet" in text and message in text, text
    assert "a statement may read its own tensor only at elements computed before" in text


def test_a_reduction_may_read_its_own_finished_elements():
    src = "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n  Y[i] = sum(j : j <= 1) A[j] * where(i == 0, 1.0, Y[0])\n}\n"
    assert_legal(loads(src), None, run=True)  # Y[0] is complete (both its terms) before Y(i=1, ...) reads it


def test_an_unguarded_boundary_read_is_refused_with_the_instance():
    src = "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n  Y[i] = Y[i - 1] + A[i]\n}\n"
    with pytest.raises(SourceError, match=r"Y\[i - 1\] reads an element of Y that no instance of Y writes: Y\(i=0\) "
                                          r"reads Y\[-1\]"):
        loads(src).model()


@pytest.mark.parametrize("value", [
    "where(i > 0, A[i - 1], 0.0)",
    "where(i == 0, 0.0, A[i - 1])",
    "where(i != 0, A[i - 1], 0.0)",
    "where(i < N - 1, where(i > 0, A[i - 1] + A[i + 1], A[i + 1]), A[i - 1])",
])
def test_a_read_in_a_where_branch_needs_to_be_inside_only_where_the_branch_is_taken(value):
    src = f"const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {{\n  Y[i] = {value}\n}}\n"
    assert_legal(loads(src), None, run=True)


def test_a_branch_chosen_by_data_is_not_a_guard():
    src = "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n  Y[i] = where(A[i] > 0.0, A[i - 1], 0.0)\n}\n"
    with pytest.raises(SourceError, match=r"A\[i - 1\] reads outside A"):
        loads(src).model()


# ---------------------------------------------------------------- legality


def test_a_loop_carrying_a_recurrence_cannot_be_bound_to_the_grid():
    err = assert_illegal(RECURRENCES, "bind(s.j, grid.x)", rule="parallel-dependence",
                         match=["loop j carries a dependence: s reads s written by s",
                                "s(i=0, j=0) and s(i=0, j=1) run in different iterations of j (s reads s[0, 0])"])
    assert err.primitive == "bind"


@pytest.mark.parametrize("steps,counterexample", [
    ("reverse(s.j)", "s(i=0, j=0) must run before s(i=0, j=1) (s reads s[0, 0]) but would run after"),
    ("reorder(w, j, i)", "w(i=0, j=1) must run before w(i=1, j=0) (w reads w[0, 1]) but would run after"),
    ("reverse(y.i)", "y(i=0) must run before y(i=1) (y reads y[0]) but would run after"),
])
def test_a_schedule_that_runs_a_recurrence_backwards_is_rejected(steps, counterexample):
    assert_illegal(RECURRENCES, steps, rule="dependence", match=counterexample)


def test_interchange_and_tiling_that_keep_the_recurrence_are_legal_and_bit_identical():
    assert_legal(RECURRENCES, "reorder(s, j, i)", run=True)
    assert_legal(RECURRENCES, "tiled", run=True)


# ---------------------------------------------------------------- code generation


@pytest.mark.parametrize("schedule", [None, "tiled"])
@pytest.mark.parametrize("sizes", [{}, {"M": 5, "N": 3}, {"M": 1, "N": 17}])
def test_generated_triton_kernels_match_the_interpreter(schedule, sizes, tmp_path):
    prog = loads(RECURRENCES, sizes=sizes)
    sched = prog.schedule()
    inputs = random_inputs(sched.model, seed=11)
    want = interpret(sched.model, sched.time_map(), inputs)
    module = load_module(generate(prog, schedule), tmp_path / "rec.py")
    got = run_generated(module, sched.model, inputs, guard=13)
    for name in want:
        if name in got:  # the outputs
            assert np.array_equal(np.isnan(got[name]), np.isnan(want[name])), name
            assert np.allclose(got[name], want[name], rtol=1e-6, atol=1e-6), name


def test_the_loops_that_carry_a_recurrence_are_serial_and_end_with_a_barrier():
    program = lower(loads(RECURRENCES).schedule("tiled"))
    loops = {k.comment: [op for op in walk_ops(k.body) if isinstance(op, SerialLoop)] for k in program.kernels}
    assert [(l.var, l.barrier) for l in loops["statements s"]] == [("l_j", True)]  # i: lanes, j: serial
    assert [(l.var, l.barrier) for l in loops["statements t"]] == [("l_i", True)]  # j: lanes, i: serial
    text = generate(loads(RECURRENCES), "tiled")
    assert text.count("tl.debug_barrier()") == 6  # y: i; s: j; t: i; u: i; w: wo and wi (both carry w)


def test_tilelang_lowers_the_recurrences(tmp_path):
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(loads(RECURRENCES), "tiled", backend="tilelang")
    assert text.count("T.sync_threads()") == 6
    sources = lower_module(load_module(text, tmp_path / "rec_tilelang.py"), "sm_90a")
    assert len(sources) == 5 and all("__syncthreads()" in s for s in sources.values())


@pytest.mark.parametrize("sizes", [{"M": 8, "N": 16}, {"M": 5, "N": 37}])
def test_the_950_orders_the_recurrences_with_a_barrier_of_every_pipe(sizes, tmp_path):
    """Every loop that carries a recurrence ends with `T.ascend_pipe_barrier("PIPE_ALL")`: in the NumPy model
    every form bit for bit (the 950 adds a tile's terms one lane at a time, in order), refused without the
    barriers; lowered by TileLang with `asc_sync()` in each loop."""
    from ascend950_memory import check_950_orders_memory

    text = check_950_orders_memory(loads(RECURRENCES, sizes=sizes), "tiled", ("y", "s", "t", "u", "w"), tmp_path)
    assert text.count('T.ascend_pipe_barrier("PIPE_ALL")') == 6


FIRST_ORDER = """
const M = 6, N = 64
kernel rec(a: f32[M, N], x: f32[N]) -> (y: f32[N], s: f32[M, N], t: f32[M, N]) {
  y[i] = where(i == 0, x[i], y[i - 1] + x[i])
  s[i, j] = where(j == 0, a[i, j], s[i, j - 1] * 0.5 + a[i, j])
  t[i, j] = where(i == 0, s[i, j], t[i - 1, j] * 0.25 + s[i, j])
}
schedule tiled {
  io, ii = split(s.i, 2)
  bind(s.io, grid.x)
  jo, jj = split(t.j, 16)
  reorder(t, jo, i, jj)
  bind(t.jo, grid.x)
}
"""


def test_the_910b_runs_first_order_recurrences_bit_for_bit():
    """RECURRENCES' first three forms on the 910B: a scalar recurrence (y), one along a row (s) and one down the
    columns of a 16-lane tile (t), each carried by a serial loop that ends with `T.barrier_all()` on the vector
    cores, its first step's `where` computed under `if` / `else`; in the NumPy model, bit for bit."""
    from tdsl.backends.ascend910b.api import check_module
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(FIRST_ORDER)
    sched_ = prog.schedule("tiled")
    text = generate(prog, "tiled", target="ascend-910b")
    assert text.count("T.barrier_all()") == 3 and check_module(text) == []
    inputs = random_inputs(sched_.model, seed=3)
    want = interpret(sched_.model, sched_.time_map(), inputs)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert all(np.array_equal(got[name], want[name]) for name in ("y", "s", "t"))


@pytest.mark.parametrize("sizes", [{"M": 8, "N": 16}, {"M": 5, "N": 37}])
def test_the_910b_runs_the_recurrences_whose_where_varies_along_the_lanes(sizes):
    """u's and w's `where` has a condition on the tile's lanes and a computed branch (`u[j]`, `w[i - 1, j + 1]`,
    read shifted along the lanes): both branches over the whole tile, then one's lanes put into the other's
    (T.tile.compare, T.tile.select).  In the NumPy model: y, s, t and w bit for bit, u within the tolerance of
    a tile's terms added in the vector unit's order (T.reduce_sum)."""
    from tdsl.backends.ascend910b.api import check_module
    from tdsl.compiler.verify import compare_outputs
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(RECURRENCES, sizes=sizes)
    sched_ = prog.schedule("tiled")
    text = generate(prog, "tiled", target="ascend-910b")
    assert "VSEL_TENSOR_TENSOR_MODE" in text and check_module(text) == []
    inputs = random_inputs(sched_.model, seed=3)
    want = interpret(sched_.model, sched_.time_map(), inputs)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert all(np.array_equal(got[name], want[name]) for name in ("y", "s", "t", "w"))
    assert all(c.ok for c in compare_outputs(sched_.model, want, got).values())


# ---------------------------------------------------------------- steps that would rewrite a recurrence

TRIANGULAR = """\
const N = 8
param M
kernel tri(X: f32[M, N]) -> (R: f32[M], Y: f32[M]) {
  T[i] = where(i == 0, X[i, 0], T[i - 1] * 0.5 + X[i, 0])
  R[i] = sum(j : j <= i) X[i, j] * where(j == i, 1.0, R[j])
  Y[i] = T[i] * 2.0
}
"""


@pytest.mark.parametrize("steps,message", [
    ("compute_inline(T)", "T is a recurrence (it reads its own earlier elements): its value cannot be recomputed"),
    ("rfactor(R.j)", "R is a recurrence (it reads its own finished elements): its partial sums would read elements"),
])
def test_steps_that_would_rewrite_a_recurrence_are_refused(steps, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        assert_legal(loads(TRIANGULAR, sizes={"M": 8}), steps)


def test_online_refuses_a_running_maximum_whose_sums_are_recurrences():
    src = """\
const N = 8
kernel f(X: f32[N, N]) -> (U: f32[N]) {
  m[i] = max(j) X[i, j] combine online
  E[i, j] = exp(X[i, j] - m[i])
  U[i] = sum(j : j <= i) E[i, j] * where(j == i, 1.0, U[j])
}
"""
    with pytest.raises(AssertionError, match=r"U reads its own earlier elements \(a recurrence\)"):
        assert_legal(loads(src), "online(m)")


def test_a_sum_read_inside_the_loop_that_walks_its_terms_is_refused_by_the_lowering():
    prog = loads(TRIANGULAR, sizes={"M": 11})
    with pytest.raises(BackendError, match=r"R reads its own finished elements \(a recurrence\) in loop jo, which "
                                           r"walks its terms too"):
        generate(loads(TRIANGULAR + "schedule t {\n  tile(R.i, R.j, 8, 4)\n}\n", sizes={"M": 11}), "t")
    assert_legal(prog, "jo, jj = split(R.j, 4)", run=True)  # the loop carrying R (i) stays outside jo


def test_the_cost_report_counts_a_recurrence_reading_its_own_elements_from_memory():
    from tdsl.compiler.analysis.buffer_plan import plan_kernels

    sched = loads(RECURRENCES).schedule("tiled")
    kernel = next(k for k in plan_kernels(sched) if "s" in k.stmts)
    reads = {a.tensor for a in kernel.accesses if a.kind == "read" and a.src == "global"}
    assert reads == {"a", "s"}


def test_a_pipelined_loop_that_carries_a_recurrence_is_refused():
    prog = loads(RECURRENCES + "schedule p {\n  jo, jj = split(s.j, 4)\n  pipeline(s.jo, stages=3)\n}\n")
    with pytest.raises(BackendError, match=r"loop jo carries s through memory \(a recurrence.*: a pipelined loop loads "
                                           r"an iteration's elements before the previous iterations have stored them"):
        generate(prog, "p")


def test_a_guard_counts_only_where_f32_compares_the_integers_exactly():
    # where() compares f32 values: past 2^24 an iterator may round onto its neighbour, so both branches count there
    src = "const N = {n}\nkernel f(x: f32[N]) -> (y: f32[N]) {{\n  y[i] = where(i == N - 1, x[i], x[i + 1])\n}}\n"
    assert loads(src.format(n=1000)).model() is not None
    with pytest.raises(SourceError, match=r"x\[i \+ 1\] reads outside x \(shape \[16777220\]\): y\(i=16777219\)"):
        loads(src.format(n=16777220)).model()
