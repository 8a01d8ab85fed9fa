"""fold_storage: keep a few planes of a temporary along one dimension (compiler/schedule/primitives/fold_storage.py).

Rules: storage-overwrite (in program order a value is overwritten before its last read) at the step itself;
dependence, through the anti and output dependences folding creates, at the step (against the schedule so far)
and at every later step.  Each rejected case is run in the interpreter to show the result changes.
"""

import importlib.util

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.errors import BackendError, ScheduleError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import SWEEPS, assert_round_trip, sched

# Each step reads the element the step itself has just written and the one the step before wrote.
TWO_STEPS = """
const S = 5, N = 9
kernel two_steps(X: f32[N]) -> (Y: f32[N]) {
  for t < S {
    T[t, i] = where(t == 0, X[i], T[t - 1, i] * 0.5 + 1.0)
    U[t, i] = T[t, i] - where(t == 0, 0.0, T[t - 1, i])
  }
  Y[i] = U[S - 1, i]
}
"""

# Independent steps: U and V of a step read only that step's values; Y reads the last V.
STEPS = """
const S = 5, N = 9
kernel steps(X: f32[S, N]) -> (Y: f32[N]) {
  for t < S {
    U[t, i] = X[t, i] * 2.0 + 1.0
    V[t, i] = U[t, i] * U[t, i]
  }
  Y[i] = V[S - 1, i]
}
"""

ON_HOST = "host(U.t)\nuo, ui = split(U.i, 8)\nbind(U.uo, grid.x)\nto, ti = split(T.i, 8)\nbind(T.to, grid.x)"


def test_fold_storage_trace_round_trip():
    s = sched(SWEEPS)
    s.fold_storage("T", "t", 1)
    s.fold_storage("U", "t", 2)
    assert_round_trip(SWEEPS, s)


def test_folded_sweeps_run_like_program_order():
    assert_legal(SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)", run=True)
    assert_legal(SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)\n" + ON_HOST, run=True)
    assert_legal(TWO_STEPS, "fold_storage(T, t, 2)\nfold_storage(U, t, 1)", run=True)


def test_a_value_overwritten_before_its_last_read_is_storage_overwrite():
    err = assert_illegal(TWO_STEPS, "fold_storage(T, t, 1)", rule="storage-overwrite", primitive="fold_storage",
                         statements=["T", "U"], changes_result=True)
    assert err.counterexample == ("T(t=0, i=0) writes T[0, 0]; T(t=1, i=0) writes T[1, 0] in its place; then "
                                  "U(t=1, i=0) reads T[0, 0]")
    assert err.rules() == ["storage-overwrite", "dependence", "legality"]


def test_a_fusion_that_breaks_an_anti_dependence_of_folded_storage():
    """Unfolded, T(t, i) may run before U(t, i + 1): U reads the previous step's T.  In one plane, T(t, i)
    overwrites T(t - 1, i), which U(t, i + 1) still has to read."""
    assert_legal(SWEEPS, "fuse(U.i, T.i)", run=True)
    err = assert_illegal(SWEEPS, "fold_storage(T, t, 1)\nfuse(U.i, T.i)", rule="dependence", primitive="fuse",
                         statements=["T", "U"], changes_result=True)
    assert "T overwrites T read by U" in err.detail
    assert err.counterexample == "U(t=1, i=1) must run before T(t=1, i=0) (T overwrites T[0, 0]) but would run after"


def test_folding_under_a_schedule_that_already_breaks_it():
    err = assert_illegal(SWEEPS, "fuse(U.i, T.i)\nfold_storage(T, t, 1)", rule="dependence", primitive="fold_storage",
                         changes_result=True)
    assert "T overwrites T read by U" in err.detail


def test_a_reversed_step_loop_breaks_an_output_dependence_of_folded_storage():
    """Unfolded, the steps are independent and may run backwards; in one plane the last write must stay last,
    since Y reads it."""
    assert_legal(STEPS, "reverse(U.t)", run=True)
    assert_legal(STEPS, "fold_storage(U, t, 1)\nfold_storage(V, t, 1)", run=True)
    err = assert_illegal(STEPS, "fold_storage(V, t, 1)\nreverse(U.t)", rule="dependence", primitive="reverse",
                         statements=["V"], changes_result=True)
    assert "V overwrites V written by V" in err.detail
    assert err.counterexample == "V(t=0, i=0) must run before V(t=1, i=0) (both write V[0, 0]) but would run after"


def test_binding_the_step_loop_of_folded_storage_is_refused():
    assert_legal(STEPS, "bind(U.t, grid.x)")
    err = assert_illegal(STEPS, "fold_storage(U, t, 1)\nbind(U.t, grid.x)", rule="parallel-dependence",
                         primitive="bind")
    assert "U overwrites U" in err.detail


def test_fold_storage_misuses_are_refused():
    s = sched(SWEEPS)
    with pytest.raises(ScheduleError, match=r"Y is an output of the kernel, an array of the caller's"):
        s.fold_storage("Y", "i", 1)
    with pytest.raises(ScheduleError, match=r"T has no dimension 'k'; it is written as T\[t, i\]"):
        s.fold_storage("T", "k", 1)
    with pytest.raises(ScheduleError, match=r"unknown tensor 'Q'"):
        s.fold_storage("Q", "t", 1)
    with pytest.raises(ScheduleError, match=r"the number of planes must be a positive integer, got 0"):
        s.fold_storage("T", "t", 0)


@pytest.mark.parametrize("planes", [6, 7])
def test_as_many_planes_as_elements_fold_nothing(planes):
    """A fold at or above the dimension's extent is accepted and changes no storage: a schedule written for
    larger sizes applies at small ones."""
    s = sched(SWEEPS)
    s.fold_storage("T", "t", planes)
    assert s.model.tensors["T"].fold == ()
    assert str(s.trace) == f"fold_storage(T, t, {planes})"


def test_as_many_planes_as_elements_undo_an_earlier_fold():
    """Six planes of six steps, after one plane, is T unfolded, at this size as at larger ones (where it keeps
    six): the fusion one plane refuses is legal again (probe O: the earlier fold stayed, and the fusion was
    refused at S = 6 only)."""
    s = sched(SWEEPS)
    s.fold_storage("T", "t", 1)
    assert not s.can("fuse", "U.i", "T.i")
    s.fold_storage("T", "t", 6)
    assert s.model.tensors["T"].fold == ()
    s.fuse("U.i", "T.i")


@pytest.mark.parametrize("sizes", [{}, {"S": 2, "N": 3}, {"S": 4, "N": 40}])
def test_generated_kernels_use_the_folded_arrays(sizes, tmp_path):
    steps = "fold_storage(T, t, 1)\nfold_storage(U, t, 1)\n" + ON_HOST
    prog = loads(SWEEPS + f"schedule folded {{\n{steps}\n}}\n", sizes=sizes)
    s = prog.schedule()
    inputs = random_inputs(s.model, seed=5)
    want = interpret(loads(SWEEPS, sizes=sizes).schedule().model, loads(SWEEPS, sizes=sizes).schedule().time_map(),
                     inputs)
    text = generate(prog, "folded")
    n = sizes.get("N", 17)
    assert text.count(f"torch.empty((1, {n}), ") == 2  # T and U: one plane each, not S
    got = run_generated(load_module(text, tmp_path / "sweeps.py"), s.model, inputs, guard=5)
    assert np.array_equal(got["Y"], want["Y"])


@pytest.mark.parametrize("source, steps, planes", [
    (SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)\n" + ON_HOST, {"T": 1, "U": 1}),
    (TWO_STEPS, "fold_storage(T, t, 2)\nfold_storage(U, t, 1)", {"T": 2, "U": 1}),
])
def test_tilelang_indexes_the_folded_arrays_element_by_element(source, steps, planes, tmp_path):
    """TileLang NVIDIA: a folded tensor is a parameter of `planes` rows, every element at its plane, never a T.copy
    region (one could cross the wrap-around); lowered by TileLang."""
    from tdsl.backends.tilelang.lowering import lower_module

    prog = loads(source + f"schedule folded {{\n{steps}\n}}\n")
    from tdsl.compiler.driver.generate import python_name

    text = generate(prog, "folded", backend="tilelang")
    module = load_module(text, tmp_path / "tl.py")
    for name, p in planes.items():
        ident = python_name(module, name)  # T is TileLang's module: the tensor is T_1 there
        assert f'{ident}: T.Tensor(({p}, ' in text and f"{ident}[(" in text and f") % {p}, " in text
        assert not any(f"{ident}[" in line for line in text.splitlines() if "T.copy(" in line)  # never a region
    lower_module(module, "sm_90a")


@pytest.mark.parametrize("source, steps, planes", [
    (SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)\n" + ON_HOST, {"T": 1, "U": 1}),
    (SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)", {"T": 1, "U": 1}),
    (TWO_STEPS, "fold_storage(T, t, 2)\nfold_storage(U, t, 1)", {"T": 2, "U": 1}),
])
def test_the_950_reads_and_writes_folded_tensors_element_by_element(source, steps, planes, tmp_path):
    """The 950: a folded tensor kept in memory is a parameter of `planes` rows, every element at its plane, never a
    T.copy region; the interpreter's bits in the NumPy model; lowered by TileLang."""
    from tdsl.compiler.driver.generate import python_name
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(source + f"schedule folded {{\n{steps}\n}}\n")
    text = generate(prog, "folded", target="ascend-950")
    module = load_module(text, tmp_path / "folded_950.py")
    in_memory = {name: p for name, p in planes.items() if f"{python_name(module, name)}: T.Tensor(" in text}
    assert in_memory
    for name, p in in_memory.items():
        ident = python_name(module, name)
        assert f"{ident}: T.Tensor(({p}, " in text and f") % {p}, " in text
        assert not any(f"{ident}[" in line for line in text.splitlines() if "T.copy(" in line)  # never a region
    results = check_schedule(prog, "folded", "ascend-950", seed=4)
    assert "Y" in results and all(r.ok and r.max_abs == 0 for r in results.values()), results
    if importlib.util.find_spec("tilelang"):
        from tdsl.backends.tilelang.lowering import lower_module

        lower_module(module, "ascend")


# A product over a tensor the schedule folds: the step loop on the host, so that the product's operand is U's one
# plane in global memory.
FOLDED_OPERAND = """
const S = 3, M = 16, K = 16, N = 16
kernel steps(X: bf16[S, M, K], W: bf16[K, N]) -> (Y: f32[M, N]) {
  for t < S {
    U[t, i, k]: bf16 = X[t, i, k] * 2.0
    V[t, i, j] = sum(k) U[t, i, k] * W[k, j]
  }
  Y[i, j] = V[S - 1, i, j]
}
schedule folded {
  fold_storage(U, t, 1)
  host(U.t)
}
"""


def test_a_product_over_a_folded_tensor_on_the_ascend_cores():
    """The 950 gathers the folded operand's tile element by element into UB and copies it to L1 for the cube
    (within the tolerance of the cube's sum); the 910B, whose operand copies are whole regions, refuses it."""
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(FOLDED_OPERAND)
    text = generate(prog, "folded", target="ascend-950")
    assert "U_ub[l0, l1] = U[(l_t) % 1, l0, l1]" in text and "T.copy(U_ub, U_l1)  # UB -> L1" in text
    assert "T.gemm(U_l0a, W_l0b" in text
    results = check_schedule(prog, "folded", "ascend-950", seed=4)
    assert "Y" in results and all(r.ok for r in results.values()), results
    with pytest.raises(BackendError, match=r"V: a matrix product reads U, whose storage the schedule folds "
                                           r"\(fold_storage\); the 910B copies operand tiles as whole regions"):
        generate(prog, "folded", target="ascend-910b")


@pytest.mark.parametrize("source, steps, planes", [
    (SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)\n" + ON_HOST, {"T": 1, "U": 1}),
    (SWEEPS, "fold_storage(T, t, 1)\nfold_storage(U, t, 1)", {"T": 1, "U": 1}),
    (TWO_STEPS, "fold_storage(T, t, 2)\nfold_storage(U, t, 1)", {"T": 2, "U": 1}),
])
def test_the_910b_reads_and_writes_folded_tensors_lane_by_lane(source, steps, planes):
    """The 910B: a folded tensor's tiles go element by element, each at its plane (`(t) % planes`), never as a
    T.copy region (one could cross the wrap-around); the interpreter's bits in the NumPy model."""
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(source + f"schedule folded {{\n{steps}\n}}\n")
    text = generate(prog, "folded", target="ascend-910b")
    assert "lane by lane: its storage is folded" in text
    assert all(f") % {p}, " in text for p in planes.values() if p > 1)  # the planes' wrap-around
    assert "T.Tensor((1, 17)" in text or "T.Tensor((1, 9)" in text  # T's one plane
    results = check_schedule(prog, "folded", "ascend-910b", seed=4)
    assert "Y" in results and all(r.ok and r.max_abs == 0 for r in results.values()), results
