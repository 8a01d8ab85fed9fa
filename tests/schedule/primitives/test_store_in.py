"""store_in: keep a kernel output in an input's array, updated in place (compiler/schedule/primitives/store_in.py).

Rules: storage-overwrite (in the schedule at the step, a read of the input comes after the output replaced its
value) at the step itself, and after every step that rewrites the program; dependence and parallel-dependence, through the
anti dependences the decision creates (each read of the input before the write that replaces it), at the step
and at every later step.  Accepted schedules run in the interpreter with the shared array (so an overwrite too
early would show), in the Triton interpreter (the caller's array updated in place) and through TileLang's
lowering; rejected ones are run to show the result changes.
"""

import numpy as np
import pytest
import torch

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.errors import ScheduleError, TdslError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import assert_round_trip, sched

# BLAS's C = alpha * A B + beta * C, as C writes it: C updated in place.
GEMM = """
const M = 70, N = 50, K = 40
const alpha = 1.5, beta = 1.2
kernel gemm(C_in: f32[M, N], A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) alpha * A[i, k] * B[k, j] from beta * C_in[i, j]
}
schedule tiles {
  store_in(C, C_in)
  io, jo, ii, jj = tile(C.i, C.j, 32, 16)
  ko, kk = split(C.k, 16)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
schedule reordered {
  store_in(C, C_in)
  reorder(C, j, i, k)
}
"""

# Each element reads its right-hand neighbour's old value: in place it is legal left to right only.
RIGHT = """
const M = 6, N = 9
kernel right(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 0.5 + where(j < N - 1, X[i, j + 1], 0.0)
}
"""

# ... and the left-hand neighbour's, which the element before has replaced.
LEFT = """
const M = 6, N = 9
kernel left(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 0.5 + where(j > 0, X[i, j - 1], 0.0)
}
"""

# Two statements: Z reads X before Y replaces it (in program order), or after.
BEFORE = """
const N = 37
kernel two(X: f32[N]) -> (Y: f32[N], Z: f32[N]) {
  Z[i] = X[i] + 1.0
  Y[i] = X[i] * 2.0
}
"""
AFTER = BEFORE.replace("  Z[i] = X[i] + 1.0\n  Y[i] = X[i] * 2.0", "  Y[i] = X[i] * 2.0\n  Z[i] = X[i] + 1.0")


def assert_generated_matches(prog, schedule: str, target: str, model, inputs: dict, want: dict, tmp_path) -> None:
    """The schedule's generated module, run on the Triton interpreter (nvidia) or in the NumPy model of the Ascend
    code, gives the reference's outputs (the launcher passes the input as the output it holds)."""
    module = generate(prog, schedule, target=target)
    if target == "nvidia":
        got = run_generated(load_module(module, tmp_path / f"{schedule}.py"), model, inputs)
    else:
        from tdsl.compiler.verify.ascend_sim import simulate

        got = simulate(module, inputs, target).tensors
    assert all(c.ok for c in compare_outputs(model, want, got).values())


def test_store_in_trace_round_trip():
    s = sched(GEMM)
    s.store_in("C", "C_in")
    assert_round_trip(GEMM, s)


def test_the_tree_shows_where_the_output_is_stored():
    from tdsl.compiler.schedule.tree_view import tree_text

    s = loads(GEMM).schedule("tiles")
    text = tree_text(s.model, s.tree)
    assert "Storage C[i, j] -> C_in[i, j]  (store_in: C_in is updated in place)" in text


@pytest.mark.parametrize("schedule", ["tiles", "reordered"])
def test_an_output_stored_in_its_start_value_runs_like_program_order(schedule):
    """The sum reads its start value once, before its first term: storing it in that value's place is legal, and
    the interpreter (which shares the array) gives the same bits."""
    prog = loads(GEMM)
    inputs = random_inputs(prog.schedule().model, seed=1)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), inputs)["C"]
    s = prog.schedule(schedule)
    assert s.model.tensors["C"].stored_in == "C_in"
    got = interpret(s.model, s.time_map(), inputs)["C"]
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32))


def test_legal_in_place_schedules_run_in_the_interpreter():
    assert_legal(RIGHT, "store_in(Y, X)", run=True)
    assert_legal(RIGHT, "store_in(Y, X)\nbind(Y.i, grid.x)", run=True)
    assert_legal(BEFORE, "store_in(Y, X)\nfuse(Z.i, Y.i)", run=True)  # Z(i) still reads X[i] before Y(i)


def test_a_read_after_the_value_is_replaced_is_storage_overwrite():
    err = assert_illegal(LEFT, "store_in(Y, X)", rule="storage-overwrite", primitive="store_in",
                         statements=["Y"], changes_result=True)
    assert str(err).splitlines()[0].endswith("Y reads X[0, 0] after Y, stored in X, has replaced it")
    assert err.counterexample == "Y(i=0, j=0) writes Y[0, 0] in the place of X[0, 0]; then Y(i=0, j=1) reads X[0, 0]"
    err = assert_illegal(AFTER, "store_in(Y, X)", rule="storage-overwrite", statements=["Y", "Z"],
                         changes_result=True)
    assert err.counterexample == "Y(i=0) writes Y[0] in the place of X[0]; then Z(i=0) reads X[0]"


def test_a_sum_whose_terms_read_the_input_it_replaces_is_refused():
    """Only the start value is read before the first term; a term reads X[i, k] after Y[i] replaced X[i, 0]."""
    prog = """
const N = 8
kernel rowsum(X: f32[N, N]) -> (Y: f32[N, N]) {
  Y[i, j] = sum(k) X[i, k] * X[k, j]
}
"""
    assert_illegal(prog, "store_in(Y, X)", rule="storage-overwrite", changes_result=True)


def test_the_schedule_must_keep_each_read_before_the_write_that_replaces_it():
    # anti dependences: Y(i, j + 1) replaces X[i, j + 1], which Y(i, j) reads
    err = assert_illegal(RIGHT, "store_in(Y, X)\nreverse(Y.j)", rule="dependence", primitive="reverse",
                         changes_result=True)
    assert "Y overwrites X read by Y" in str(err)
    assert_illegal(RIGHT, "store_in(Y, X)\nbind(Y.j, grid.x)", rule="parallel-dependence", primitive="bind")
    # ... also when the decision comes after the step that breaks it
    assert_illegal(RIGHT, "reverse(Y.j)\nstore_in(Y, X)", rule="dependence", primitive="store_in",
                   changes_result=True)


def test_an_order_the_schedule_made_decides_the_in_place_update():
    """A read wants the input's value whichever of it and the write comes first in program order: LEFT in place is
    legal right to left (each element reads its left neighbour before that one is replaced), and was refused for
    program order's left to right (probe of the 27th session).  The anti dependences hold it to that order."""
    prog = loads(LEFT)
    X = random_inputs(prog.schedule().model, seed=3)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), X)["Y"]
    for steps in ("reverse(Y.j)\nstore_in(Y, X)", "reverse(Y.j)\nstore_in(Y, X)\nbind(Y.i, grid.x)",
                  "reverse(Y.i)\nreverse(Y.j)\nstore_in(Y, X)\njo, ji = split(Y.j, 4)"):
        s = assert_legal(LEFT, steps, run=True)  # the interpreter runs Y in X's array
        got = interpret(s.model, s.time_map(), X)["Y"]
        assert np.array_equal(want.view(np.uint32), got.view(np.uint32)), steps
    assert_illegal(LEFT, "reverse(Y.j)\nstore_in(Y, X)\nreverse(Y.j)", rule="dependence", primitive="reverse",
                   changes_result=True)
    assert_illegal(LEFT, "reverse(Y.j)\nstore_in(Y, X)\nbind(Y.j, grid.x)", rule="parallel-dependence",
                   primitive="bind")
    assert_illegal(LEFT, "store_in(Y, X)", rule="storage-overwrite", changes_result=True)


@pytest.mark.parametrize("target", ["nvidia", "ascend-950", "ascend-910b"])
def test_a_right_to_left_update_in_place_runs_on_every_backend(target, tmp_path):
    """The generated kernels keep the reversed order (a serial loop over j) and update X in place."""
    text = LEFT.replace("M = 6, N = 9", "M = 5, N = 37") + "schedule rtl {\n  reverse(Y.j)\n  store_in(Y, X)\n  bind(Y.i, grid.x)\n}\n"
    prog = loads(text)
    s = prog.schedule("rtl")
    X = random_inputs(s.model, seed=7)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), X)
    assert_generated_matches(prog, "rtl", target, s.model, X, want, tmp_path)


@pytest.mark.parametrize("steps, message", [
    ("store_in(X, Y)", "X is an input of the kernel; store_in keeps an output of the kernel in an input"),
    ("store_in(Y, Y)", "Y is an output of the kernel; store_in keeps an output"),
    ("store_in(Y, W)", "unknown tensor 'W'"),
    ("store_in(Y, X)\nstore_in(Z, X)", "X already holds Y; an input holds one output"),
    ("store_in(Y, X)\nstore_in(Y, X)", "Y is already stored in X"),
])
def test_misuses_are_schedule_errors(steps, message):
    s = sched(BEFORE)
    *before, last = steps.splitlines()
    for line in before:
        s.store_in(*_args(line))
    with pytest.raises(ScheduleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        s.store_in(*_args(last))


def _args(line: str) -> list[str]:
    return [a.strip() for a in line[len("store_in("):-1].split(",")]


@pytest.mark.parametrize("source, message", [
    ("kernel k(X: bf16[8]) -> (Y: f32[8]) {\n  Y[i] = X[i] * 2.0\n}", "Y is f32 and X is bf16"),
    ("kernel k(X: f32[8, 2]) -> (Y: f32[2, 8]) {\n  Y[i, j] = X[j, i]\n}", "Y has shape [2, 8] and X [8, 2]"),
    ("kernel k(X: f32[8]) -> (Y: f32[8]) {\n  T[i] = X[i] * 2.0\n  Y[i] = T[i]\n}", "T is a temporary"),
])
def test_dtype_shape_and_kind_must_match(source, message):
    s = sched(source)
    output = "T" if "T is" in message else "Y"
    with pytest.raises(ScheduleError, match=message.replace("[", r"\[")):
        s.store_in(output, "X")


def test_rfactor_keeps_the_start_value_on_the_combining_sum_in_place(tmp_path):
    """Split-K on the grid (reassoc): the partial sums start from zero, the combining sum from C_in, in place."""
    prog = loads("""const M = 16, N = 12, K = 64
const beta = 1.2
kernel g(C_in: f32[M, N], A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] from beta * C_in[i, j] combine reassoc
}
schedule split_k {
  store_in(C, C_in)
  ko, kk = split(C.k, 16)
  rfactor(C.ko)
  reorder(C_rf, ko, i, j, kk)
  bind(C_rf.ko, grid.x)
}
""")
    s = prog.schedule("split_k")
    assert s.model.tensors["C"].stored_in == "C_in" and "C_in" in {r.tensor for r in s.model.stmt("C").reads}
    inputs = random_inputs(s.model, seed=3)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), inputs)
    got = run_generated(load_module(generate(prog, "split_k"), tmp_path / "split_k.py"), s.model, inputs, guard=4)
    assert all(c.ok for c in compare_outputs(s.model, want, got).values())


def test_triton_updates_the_callers_array_in_place(tmp_path):
    """Ragged 70 x 50 x 40 in 32 x 16 tiles: the launcher passes C_in as C, returns it, and it holds the result."""
    prog = loads(GEMM)
    s = prog.schedule("tiles")
    text = generate(prog, "tiles")
    assert "C = C_in" in text and "returns C (the input C_in, updated in place)" in text
    inputs = random_inputs(s.model, seed=5)
    want = interpret(s.model, s.time_map(), inputs)
    got = run_generated(load_module(text, tmp_path / "tiles.py"), s.model, inputs)
    assert all(c.ok for c in compare_outputs(s.model, want, got).values())

    module = load_module(text, tmp_path / "direct.py")
    c_in = torch.from_numpy(inputs["C_in"].copy())
    a, b = torch.from_numpy(inputs["A"]), torch.from_numpy(inputs["B"])
    out = module.gemm(c_in, a, b)
    assert out is c_in and np.allclose(c_in.numpy(), want["C"], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="output C is stored in input C_in"):
        module.gemm(c_in, a, b, C=torch.empty_like(c_in))
    with pytest.raises(ValueError, match="input C_in holds output C .* must be contiguous"):
        module.gemm(torch.empty(50, 70).t(), a, b)


def test_the_kernel_op_mutates_its_input_under_torch_compile():
    prog = loads(GEMM)
    kernel = prog.schedule("tiles").compile(target="nvidia")
    inputs = random_inputs(prog.schedule().model, seed=7)
    want = torch.from_numpy(interpret(prog.schedule().model, prog.schedule().time_map(), inputs)["C"])
    a, b = torch.from_numpy(inputs["A"]), torch.from_numpy(inputs["B"])
    c = torch.from_numpy(inputs["C_in"].copy())
    assert kernel(c, a, b) is c and torch.allclose(c, want, rtol=1e-5, atol=1e-5)
    c = torch.from_numpy(inputs["C_in"].copy())
    doubled = torch.compile(lambda c, a, b: kernel(c, a, b) * 2.0)(c, a, b)
    assert torch.allclose(doubled, 2 * want, rtol=1e-5, atol=1e-5) and torch.allclose(c, want, rtol=1e-5, atol=1e-5)


def test_tilelang_declares_the_output_as_a_view_of_the_input(tmp_path):
    """TVM compiles pointer parameters as restrict: the kernel takes C_in once and C is a view of it."""
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(loads(GEMM.replace("f32[M, K]", "bf16[M, K]").replace("f32[K, N]", "bf16[K, N]")), "tiles",
                    backend="tilelang")
    assert 'C = T.decl_buffer((70, 50), "float32", data=C_in.data)' in text
    assert '_kernel("gemm_0")(A, B, C_in)' in text
    source = lower_module(load_module(text, tmp_path / "tl.py"), "sm_90a")["gemm_0"]
    signature = next(line for line in source.splitlines() if "__global__" in line)
    assert signature.count("float* __restrict__") == 1  # one f32 array


ROWS = """
const M = 32, K = 64
kernel rows(X: f32[M, K], Z: f32[M]) -> (Y: f32[M]) {
  Y[i] = sum(k) X[i, k] from Z[i] * 0.5 - 3.0
}
schedule in_place {
  store_in(Y, Z)
  io, ii = split(Y.i, 16)
  ko, kk = split(Y.k, 32)
  reorder(Y, io, ko, ii, kk)
  bind(Y.io, grid.x)
}
"""


@pytest.mark.parametrize("source, output, array", [
    (GEMM.replace("const M = 70, N = 50, K = 40", "const M = 64, N = 48, K = 32"), "C", "C_in"),  # cube + vector
    (ROWS, "Y", "Z"),  # a row sum on the vector cores
])
def test_the_ascend_950_writes_the_output_over_the_input(source, output, array, tmp_path):
    """A view of the input's GM tensor (T.decl_buffer), run in the NumPy model of the 950 and lowered by mainline
    TileLang's Ascend backend."""
    from tdsl.backends.tilelang.lowering import lower_module
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(source)
    name = "tiles" if output == "C" else "in_place"
    s = prog.schedule(name)
    text = generate(prog, name, target="ascend-950")
    assert f"{output} = T.decl_buffer(" in text and f"data={array}.data)" in text
    assert f"IN_PLACE = {{'{output}': '{array}'}}" in text
    inputs = random_inputs(s.model, seed=4)
    got = simulate(text, inputs, "ascend-950").tensors
    assert all(c.ok for c in compare_outputs(s.model, interpret(s.model, s.time_map(), inputs), got).values())
    assert got[output] is got[array]  # one array
    lower_module(load_module(text, tmp_path / "asc.py"), "ascend")


AXPY = """
const M = 8, N = 64
kernel axpy(X: f32[M, N], Y_in: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 2.0 + Y_in[i, j]
}
schedule in_place {
  store_in(Y, Y_in)
  io, ii = split(Y.i, 4)
  bind(Y.io, grid.x)
}
"""


@pytest.mark.parametrize("source, output, array", [
    (AXPY, "Y", "Y_in"),  # 2-D tiles, their rows split between the two vector cores
    (ROWS, "Y", "Z"),  # a row sum on the vector cores
])
def test_the_910b_writes_the_output_over_the_input(source, output, array):
    """The same view on the 910B (tilelang-ascend re-exports TVMScript's T.decl_buffer), run in its NumPy model."""
    from tdsl.backends.ascend910b.api import check_module
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(source)
    name = "in_place"
    s = prog.schedule(name)
    text = generate(prog, name, target="ascend-910b")
    assert f"{output} = T.decl_buffer(" in text and f"data={array}.data)" in text and check_module(text) == []
    assert f"IN_PLACE = {{'{output}': '{array}'}}" in text
    inputs = random_inputs(s.model, seed=4)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert all(c.ok for c in compare_outputs(s.model, interpret(s.model, s.time_map(), inputs), got).values())
    assert got[output] is got[array]  # one array


def test_cost_counts_no_memory_for_the_stored_output():
    from tdsl.compiler.analysis.cost import analyze

    prog = loads(GEMM)
    plain, in_place = analyze(prog.schedule()), analyze(prog.schedule("tiles"))
    assert plain.peak_global_memory - in_place.peak_global_memory == 70 * 50 * 4
    assert plain.compulsory_bytes == in_place.compulsory_bytes  # C is still written once


def test_rewrites_after_the_decision_are_checked_in_program_order():
    """compute_inline moves T's reads of X into Y, after the decision: checked again in the new program."""
    inline = """
const N = 12
kernel k(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 3.0
  Y[i] = T[i] + where(i > 0, T[i - 1], 0.0)
}
"""
    # T is computed for every i before Y: in place Y may replace X (T holds the values it reads)
    assert_legal(inline, "store_in(Y, X)", run=True)
    # inlined, Y(i) reads X[i - 1] itself, which Y(i - 1) has replaced
    assert_illegal(inline, "store_in(Y, X)\ncompute_inline(T)", rule="storage-overwrite", primitive="compute_inline",
                   changes_result=True)


@pytest.mark.parametrize("source, output", [(GEMM, "C"), (RIGHT, "Y"), (BEFORE, "Y")])
def test_the_step_adds_exactly_the_dependences_a_full_recomputation_finds(source, output):
    """store_in computes only the anti dependences it adds (compile time); a full recomputation agrees."""
    from tdsl.compiler.model.dependences import compute_dependences, overwrite_dependences

    s = sched(source)
    array = {"C": "C_in", "Y": "X"}[output]
    s.store_in(output, array)
    full = {(d.kind, d.src, d.dst, d.tensor, str(d.relation)) for d in compute_dependences(s.model)}
    stepped = {(d.kind, d.src, d.dst, d.tensor, str(d.relation)) for d in s.deps}
    assert full == stepped
    # the stencil and the two statements read the input before it is replaced; the gemm reads its start value
    # once, in the element's own place, before its first term: no dependence
    assert bool(overwrite_dependences(s.model, output)) == (output == "Y")


# An output whose sum is empty at some elements (r[j] for j >= M): the program writes nothing there, so the kernel
# leaves the caller's array as it was (docs/language.md, "an element whose range is empty").  CPU fuzz seed 5521.
EMPTY_SUMS = """const M = 3, N = 5
kernel k(X: f32[M, N], Y: f32[N]) -> (r: f32[N]) {
  R[i, j] = X[i, j] + Y[j]
  r[j] = sum(i : j <= i) R[i, j] * 0.5
}
schedule in_place {
  store_in(r, Y)
}
"""


def test_an_element_the_program_never_writes_keeps_the_inputs_value(tmp_path):
    """Program order, which the schedule is compared with, starts r from Y's values (`program_order_inputs`):
    the scheduled interpreter, `tdsl.testing`, the Triton kernel and both Ascend models agree with it, and r[3:]
    is Y[3:].  Before, program order left r[3:] NaN and every check called the schedule wrong."""
    from tdsl.compiler.reference.interpreter import program_order_inputs
    from tdsl.compiler.driver.testing import run_differences
    from tdsl.compiler.verify.ascend_sim.check import check_schedule

    prog = loads(EMPTY_SUMS)
    s, original = prog.schedule("in_place"), prog.schedule()
    inputs = random_inputs(s.model, seed=4)
    want = interpret(original.model, original.time_map(), program_order_inputs(s.model, inputs))
    assert np.array_equal(want["r"][3:], inputs["Y"][3:]) and not np.isnan(want["r"][:3]).any()
    assert np.array_equal(interpret(s.model, s.time_map(), inputs)["r"], want["r"])
    assert run_differences(prog, s, tries=5) == []
    assert_legal(prog, "in_place")
    got = run_generated(load_module(generate(prog, "in_place"), tmp_path / "in_place.py"), s.model, inputs)
    assert all(c.ok for c in compare_outputs(s.model, want, got).values())
    for target in ("ascend-950", "ascend-910b"):
        assert all(c.ok for c in check_schedule(prog, "in_place", target, seed=4).values()), target


def test_only_an_output_may_be_given_first_contents():
    """An output's first contents come in with the inputs; a temporary has none (the kernel's own array)."""
    prog = loads(EMPTY_SUMS)
    model = prog.schedule().model
    inputs = random_inputs(model, seed=1)
    first = interpret(model, prog.schedule().time_map(), {**inputs, "r": np.full(5, 7.0, np.float32)})["r"]
    assert np.all(first[3:] == 7.0) and not np.isnan(first[:3]).any()
    with pytest.raises(ValueError, match="'R' is a temporary of the kernel"):
        interpret(model, prog.schedule().time_map(), {**inputs, "R": np.zeros((3, 5), np.float32)})
    with pytest.raises(ValueError, match="output 'r' has shape"):
        interpret(model, prog.schedule().time_map(), {**inputs, "r": np.zeros(4, np.float32)})


def _shifted(d: int) -> str:
    at, inside = (f"i + {d}", f"i + {d} < N") if d >= 0 else (f"i - {-d}", f"i >= {-d}")
    return f"const N = 11\nkernel k(X: f32[N]) -> (Y: f32[N]) {{\n  Y[i] = X[i] * 0.5 + where({inside}, X[{at}], 0.0)\n}}\n"


ORDERS = [[], ["reverse(Y.i)"], ["io, ii = split(Y.i, 3)"], ["reverse(Y.i)", "io, ii = split(Y.i, 3)"],
          ["io, ii = split(Y.i, 3)", "reverse(Y.ii)"], ["io, ii = split(Y.i, 3)", "reverse(Y.io)"]]


@pytest.mark.parametrize("d", [-2, -1, 0, 1, 2])
def test_store_in_is_exact_in_every_order(d):
    """`Y[i] = X[i] / 2 + X[i + d]` in place after each order of its elements: accepted exactly where the order
    gives program order's bits in X's array, and refused exactly where the rejected decision changes them (the
    reversal of blocks and within blocks included: a neighbour's value read after its block replaced it)."""
    prog = loads(_shifted(d))
    X = random_inputs(prog.schedule().model, seed=1)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), X)["Y"]
    verdicts = []
    for steps in ORDERS:
        block = loads(_shifted(d) + "schedule s {\n" + "\n".join(steps + ["store_in(Y, X)"]) + "\n}\n")
        try:
            s = block.schedule("s")
        except TdslError as err:
            r = err.error.rejected
            assert not np.array_equal(interpret(r.model, r.tree.union_map(r.model), X)["Y"], want), steps
            verdicts.append("refused")
            continue
        got = interpret(s.model, s.time_map(), X)["Y"]
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), steps
        verdicts.append("legal")
    right_to_left = [False, True, False, True, False, False]  # every element after its right neighbour
    left_to_right = [True, False, True, False, False, False]
    expect = [d == 0 or (d < 0 and r) or (d > 0 and l) for r, l in zip(right_to_left, left_to_right)]
    assert verdicts == ["legal" if e else "refused" for e in expect]


FORWARDED = """
const N = 13
kernel k(X: f32[N]) -> (Y: f32[N]{held}, Z: f32[N]) {{
  Y[i] = X[i] * 2.0
  Z[i] = {z}
}}
schedule fused {{
  fuse(Y.i, Z.i)
{steps}}}
"""


@pytest.mark.parametrize("held, z, steps", [
    ("", "Y[i] + 1.0", "  store_in(Y, X)\n"),
    (" in X", "Y[i] + 1.0", ""),  # the signature's form
    ("", "where(i < N - 1, X[i + 1], 0.0) + Y[i]", "  store_in(Y, X)\n"),
    ("", "Y[i] + 1.0", "  store_in(Y, X)\n  io, ii = split(Y.i, 4)\n  bind(Y.io, grid.x)\n"),
])
@pytest.mark.parametrize("target", ["ascend-910b", "ascend-950", "nvidia"])
def test_a_value_read_after_its_input_is_replaced_is_the_one_computed_before(held, z, steps, target, tmp_path):
    """Probe JJ: the 910B printed Y's one-element value as its expression, and Z, fused after Y's store over X,
    evaluated it again: 2 * (2 * X[i]) + 1 (every element wrong).  A scalar value that loads what the kernel stores
    over is now held in UB when computed."""
    text = FORWARDED.format(held=held, z=z, steps=steps)
    prog = loads(text)
    s = prog.schedule("fused")
    X = random_inputs(prog.schedule(None).model, seed=2)
    want = interpret(prog.schedule(None).model, prog.schedule(None).time_map(), X)
    assert_generated_matches(prog, "fused", target, s.model, X, want, tmp_path)


def test_a_counterexample_at_a_run_time_size_names_the_size_and_its_elements():
    """Probe JJ: `X[N - 1 - i]` in place right to left printed `Y(i=1) writes Y[1] in the place of X[0]`, the
    elements solved at another N than the pair's, and no N."""
    mirror = "param N\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i] * 0.5 + X[N - 1 - i]\n}\n"
    err = assert_illegal(mirror, "reverse(Y.i)\nstore_in(Y, X)", rule="storage-overwrite", primitive="store_in")
    assert err.counterexample == "Y(i=1) writes Y[1] in the place of X[1]; then Y(i=0) reads X[1] with N=2"


START_AHEAD = """
const N = 7, K = 5
kernel k(X: f32[N], A: f32[N, K]) -> (Y: f32[N]) {
  Y[i] = sum(k) A[i, k] from where(i < N - 1, X[i + 1], 0.0)
}
"""


@pytest.mark.parametrize("target", ["nvidia", "ascend-950", "ascend-910b"])
def test_a_start_value_is_read_once_at_its_elements_first_term(target, tmp_path):
    """Probe JJ: the start value counted as read by every term, so `from X[i + 1]` in place with the reduction loop
    outside was refused, although Y(i, 0) reads X[i + 1] before Y(i + 1, 0) replaces it (and a backend reads it
    even earlier, before the reduction loop).  With i reversed inside k, Y(i + 1, 0) runs first: refused."""
    s = assert_legal(START_AHEAD, "reorder(Y, k, i)\nstore_in(Y, X)", run=True)
    assert_legal(START_AHEAD, "store_in(Y, X)\nreorder(Y, k, i)\nio, ii = split(Y.i, 4)", run=True)
    err = assert_illegal(START_AHEAD, "reorder(Y, k, i)\nreverse(Y.i)\nstore_in(Y, X)", rule="storage-overwrite",
                         changes_result=True)
    assert err.counterexample == "Y(i=1, k=0) writes Y[1] in the place of X[1]; then Y(i=0, k=0) reads X[1]"
    prog = loads(START_AHEAD + "schedule k_outer {\n  reorder(Y, k, i)\n  store_in(Y, X)\n}\n")
    X = random_inputs(prog.schedule().model, seed=4)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), X)
    assert_generated_matches(prog, "k_outer", target, s.model, X, want, tmp_path)
