"""recompute_at: a producer computed per tile of a consumer loop, for the elements the tile reads (overlapped tiling;
compiler/schedule/primitives/recompute_at.py).

The rewritten program gives the same bits in the interpreter, the copies of different tiles share nothing (so the
tile loop can be bound where compute_at's placement cannot), the kernels run under the Triton interpreter and
lower through TileLang, the cost report counts the redundant instances, and each misuse is a ScheduleError that
says why.
"""

import islpy as isl
import numpy as np
import pytest

from tdsl.compiler.analysis.cost import analyze
from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.errors import ScheduleError
from tdsl.frontend.diagnostics import TdslError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.schedule.tree_view import tree_text
from tdsl.compiler.verify import compare_outputs
from tdsl.frontend.printer import expr_text
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import assert_round_trip, sched

# A three-point stencil on a pointwise producer: tile io of C reads B[32 io - 1 .. 32 io + 32].
BLUR = """
const N = 100
kernel blur(A: f32[N]) -> (C: f32[N]) {
  B[i] = A[i] * A[i] + 1.0
  C[i] = B[i] + where(i > 0, B[i - 1], 0.0) + where(i < N - 1, B[i + 1], 0.0)
}
schedule overlapped {
  io, ii = split(C.i, 32)
  recompute_at(B, C.io)
  bind(C.io, grid.x)
}
"""

# Two stencils in a chain over a 2-D grid of 16 x 8 tiles, at ragged sizes, in bf16 between the steps.
CHAIN = """
const M = 40, N = 37
kernel chain(A: f32[M, N]) -> (D: f32[M, N]) {
  B[i, j]: bf16 = A[i, j] * 0.5 + 1.0
  C[i, j] = B[i, j] + where(i > 0, B[i - 1, j], 0.0) + where(j < N - 1, B[i, j + 1], 0.0)
  D[i, j] = C[i, j] - where(i < M - 1, C[i + 1, j], 0.0) * where(j > 0, C[i, j - 1], 2.0)
}
schedule overlapped {
  io, jo, ii, jj = tile(D.i, D.j, 16, 8)
  recompute_at(C, D.jo)
  recompute_at(B, D.jo)
  bind(D.io, grid.x)
  bind(D.jo, grid.y)
}
"""


def _same_bits_as_program_order(source: str, schedule: str, output: str) -> None:
    prog = loads(source)
    inputs = random_inputs(prog.schedule().model, seed=1)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), inputs)[output]
    s = prog.schedule(schedule)
    got = interpret(s.model, s.time_map(), inputs)[output]
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32))


def test_recompute_at_trace_round_trip():
    s = sched(BLUR)
    s.split("C.i", 32)
    s.recompute_at("B", at="C.io")
    assert_round_trip(BLUR, s)


def test_each_tile_computes_the_elements_it_reads():
    s = loads(BLUR).schedule("overlapped")
    b = s.model.stmt("B")
    # each copy starts one element before its tile (its origin 32 io - 1) and holds 34
    assert b.iters == ["io", "i"] and s.model.tensors["B"].shape == [4, 34] and s.model.tensors["B"].copies == 1
    tile_1 = {tuple(int(v) for v in p) for p in _points(b.domain) if p[0] == 1}
    assert {31 + i for _, i in tile_1} == set(range(31, 65))  # 32..63 and one element either side
    assert expr_text(b.value) == "A[i + (32 * io - 1)] * A[i + (32 * io - 1)] + 1.0"
    reads = {str(r.relation) for r in s.model.stmt("C").reads}  # C(i) reads B[i - 1 .. i + 1] in its tile's copy
    assert "{ C[i] -> B[io, i' = 1 + i - 32io] : 0 <= i <= 99 and -31 + i <= 32io <= i }" in reads
    assert "B[io, i] :" in tree_text(s.model, s.tree).splitlines()[0]


def _points(domain):
    points = []
    n = domain.dim(isl.dim_type.set)
    domain.foreach_point(lambda p: points.append([p.get_coordinate_val(isl.dim_type.set, k).to_python()
                                                  for k in range(n)]))
    return points


@pytest.mark.parametrize("source, output", [(BLUR, "C"), (CHAIN, "D")])
def test_the_rewritten_program_gives_the_same_bits(source, output):
    _same_bits_as_program_order(source, "overlapped", output)


def test_compute_at_cannot_bind_the_tile_loop_and_recompute_at_can():
    """compute_at puts B(32) in tile 0, its first reader: tile 1 then needs tile 0."""
    err = assert_illegal(BLUR, "io, ii = split(C.i, 32)\ncompute_at(B, C.io)\nbind(C.io, grid.x)",
                         rule="parallel-dependence", primitive="bind")
    assert "C reads B written by B" in str(err)
    loads(BLUR).schedule("overlapped")  # legal, bound


@pytest.mark.parametrize("source, output", [(BLUR, "C"), (CHAIN, "D")])
def test_triton_runs_the_overlapped_tiles(source, output, tmp_path):
    prog = loads(source)
    s = prog.schedule("overlapped")
    inputs = random_inputs(s.model, seed=3)
    want = interpret(prog.schedule().model, prog.schedule().time_map(), inputs)
    got = run_generated(load_module(generate(prog, "overlapped"), tmp_path / "k.py"), s.model, inputs, guard=4)
    assert all(c.ok for c in compare_outputs(s.model, want, got).values())


def test_tilelang_lowers_the_overlapped_tiles(tmp_path):
    from tdsl.backends.tilelang.lowering import lower_module

    text = generate(loads(CHAIN), "overlapped", backend="tilelang")
    lower_module(load_module(text, tmp_path / "tl.py"), "sm_90a")


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
def test_the_ascend_targets_read_the_tiles_copies_back_after_a_barrier(target):
    # a value read back in the kernel that stores it: both order it (950 T.ascend_pipe_barrier, 910B
    # T.barrier_all); the 910B reads BLUR's B back from GM element by element: B[i // 32, i - (i - i % 32 - 1)]
    # is no one T.copy region
    from tdsl.compiler.verify.ascend_sim import check_schedule

    text = generate(loads(BLUR), "overlapped", target=target)
    if target == "ascend-910b":
        assert "B lane by lane: no T.copy moves its region" in text
    else:
        assert 'T.ascend_pipe_barrier("PIPE_ALL")' in text
    results = check_schedule(loads(BLUR), "overlapped", target, seed=3)
    assert set(results) == {"C"} and results["C"].ok  # B: a copy per tile, not the program's shape


def test_cost_reports_the_redundant_work():
    cost = analyze(loads(BLUR).schedule("overlapped"))
    assert cost.recomputed == {"B": (106, 100)}  # 4 tiles, 3 boundaries read from both sides
    chain = analyze(loads(CHAIN).schedule("overlapped")).recomputed
    assert set(chain) == {"B", "C"} and all(n > e for n, e in chain.values())
    assert analyze(loads(BLUR).schedule()).recomputed == {}


@pytest.mark.parametrize("source, steps, message", [
    (BLUR, "io, ii = split(C.i, 32)\nrecompute_at(C, B.i)", "C is an output of the kernel"),
    ("""const N = 8
kernel k(A: f32[N, N]) -> (C: f32[N]) {
  S[i] = sum(k) A[i, k]
  C[i] = S[i] * 2.0
}""", "io, ii = split(C.i, 4)\nrecompute_at(S, C.io)", "S is a reduction"),
    ("""const N = 8
kernel k(A: f32[N]) -> (C: f32[N], D: f32[N]) {
  B[i] = A[i] + 1.0
  C[i] = B[i] * 2.0
  D[i] = B[i] * 3.0
}""", "io, ii = split(C.i, 4)\nrecompute_at(B, C.io)", "D also reads B outside loop io"),
    (BLUR, "io, ii = split(C.i, 32)\ncompute_at(B, C.io)\nrecompute_at(B, C.io)", "B is already inside loop io"),
    ("""const N = 8
kernel k(A: f32[N]) -> (C: f32[N]) {
  R[i] = where(i < 1, A[i], R[i - 1] * 0.5 + A[i])
  C[i] = R[i] * 2.0
}""", "io, ii = split(C.i, 4)\nrecompute_at(R, C.io)", "R reads its own earlier elements (a recurrence)"),
    ("""const S = 3, N = 8
kernel k(A: f32[N]) -> (C: f32[N]) {
  for t < S {
    B[t, i] = where(t == 0, A[i], B[t - 1, i] * 0.5)
  }
  C[i] = B[S - 1, i]
}""", "io, ii = split(C.i, 4)\nrecompute_at(B, C.io)", "B is a statement of a `for` block"),
])
def test_misuses_are_schedule_errors(source, steps, message):
    prog = loads(source.split("schedule overlapped")[0] + "\nschedule misuse {\n" + steps + "\n}\n")
    with pytest.raises(TdslError, match=r"recompute_at: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        prog.schedule("misuse")


def test_a_start_value_cannot_read_a_copy_made_inside_the_walk_over_its_terms():
    """Fuzz seed 5509: the start value is read before the walk over k that would make the copy it reads."""
    prog = loads("""const M = 4, N = 4, K = 8
kernel k(A: f32[M, K], B: f32[K, N], X: f32[N]) -> (C: f32[M, N]) {
  T[j] = X[j] * 2.0
  C[i, j] = sum(k) A[i, k] * B[k, j] from T[j]
}""")
    assert_illegal(prog, "ko, ki = split(C.k, 4)\nrecompute_at(T, C.ko)", rule="dependence", primitive="recompute_at",
                   match="C starts its sum from a value that reads T, before loop ko walks its terms")


def test_a_start_value_may_read_a_copy_made_outside_the_walk_over_its_terms():
    prog = loads("""const M = 4, N = 8, K = 8
kernel k(A: f32[M, K], B: f32[K, N], X: f32[N]) -> (C: f32[M, N]) {
  T[j] = X[j] * 2.0
  C[i, j] = sum(k) A[i, k] * B[k, j] from where(j > 0, T[j - 1], T[j])
}""")
    s = assert_legal(prog, "jo, ji = split(C.j, 4)\nrecompute_at(T, C.jo)", run=True)
    assert "T" in analyze(s).recomputed


def test_run_time_sizes_are_refused():
    s = sched("""param N
kernel k(A: f32[N]) -> (C: f32[N]) {
  B[i] = A[i] + 1.0
  C[i] = B[i] + where(i > 0, B[i - 1], 0.0)
}""")
    s.split("C.i", 4)
    with pytest.raises(ScheduleError, match="run-time parameters"):
        s.recompute_at("B", "C.io")
