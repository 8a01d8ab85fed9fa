"""compute_at / reverse_compute_at: move a producer into a loop of its consumer, or a consumer into a loop of
its producer; each moved instance runs in the first iteration that exchanges data with it
(compiler/schedule/primitives/compute_at.py).

Rules compute_at can break: dependence (another reader of the producer now runs first), and, through the
re-check of earlier steps, parallel-dependence (the bound loop of the consumer) and cache-conflict (a cached
tensor's writer moved into the copy's loop).
Rules reverse_compute_at can break: dependence (the consumer needs a later iteration of the producer),
reduction-incomplete (the consumer inside a loop of the producer's reduction), and, through the re-check of
earlier steps, rounding-removed (the consumer now reads an unrounded register copy).
"""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import CacheConflict, ParallelDependence, ReductionIncomplete, ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from catalog import EXAMPLES
from primitive_helpers import (GEMM_SILU, GEMM_SILU_SMALL, ROWS, STENCIL, TILED, assert_round_trip, sched, tiled,
                               tree_change)

# T is read by Z, then by Y: placed in Y's loop, T(i) would run after Z(i) reads it.
TWO_READERS = """
const N = 8
kernel two_readers(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 2.0
  Z[i] = T[i] + 1.0
  Y[i] = T[i] * Z[i]
}
"""

# Y(i) reads T(i - 1), T(i) and T(i + 1): placed in T's iteration i - 1, the first that writes its input.
BLUR = """
const N = 8
kernel blur(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 0.5
  Y[i : i >= 1 and i < N - 1] = T[i - 1] + T[i] + T[i + 1]
}
"""


# ---------------------------------------------------------------- compute_at


def test_compute_at_tree(golden):
    golden(tree_change(sched(ROWS), lambda s: s.compute_at("s", "Y.i")))


def test_compute_at_trace_round_trip():
    s = sched(ROWS)
    s.compute_at("s", at="Y.i")
    assert_round_trip(ROWS, s)
    t = sched(STENCIL)
    t.compute_at("T", "Y.i")
    assert_round_trip(STENCIL, t)


def test_compute_at_producer_into_consumer_row():
    s = sched(ROWS)
    s.compute_at("s", "Y.i")
    assert [l.name for l in s.tree.path("s")] == ["i", "j"]
    assert s.tree.path("s")[0] is s.tree.path("Y")[0]


def test_compute_at_misuse():
    s = sched(ROWS)
    with pytest.raises(ScheduleError, match=r"compute_at: no statement under loop i reads what it writes"):
        s.compute_at("Y", "s.i")
    with pytest.raises(ScheduleError, match=r"loop j belongs to Y itself"):
        s.compute_at("Y", "Y.j")


def test_compute_at_of_stencil_producer_into_consumer_loop():
    s = sched(STENCIL)
    s.compute_at("T", "Y.i")  # T(i) runs at the first Y that reads it: Y(i) (Y(0) does not exist, T(0) runs at Y(1))
    assert s.tree.path("T")[0] is s.tree.path("Y")[0]


def test_compute_at_past_another_reader_is_a_dependence_violation():
    err = assert_illegal(TWO_READERS, "compute_at(T, Y.i)", rule="dependence", primitive="compute_at",
                         statements=["T", "Z"], changes_result=True)
    assert err.counterexample == "T(i=0) must run before Z(i=0) (Z reads T[0]) but would run after"


def test_a_later_step_cannot_break_an_earlier_bind():
    s = sched(STENCIL)
    s.bind("Y.i", "grid.x")
    with pytest.raises(ParallelDependence, match=r"loop i carries a dependence"):
        s.compute_at("T", "Y.i")  # T(i) would run in the iteration of Y(i+1), a dependence across programs


def test_compute_at_into_a_bound_loop_is_parallel_dependence():
    assert_illegal(STENCIL, "bind(Y.i, grid.x)\ncompute_at(T, Y.i)", rule="parallel-dependence",
                   primitive="compute_at", statements=["T", "Y"],
                   match="T(i=1) and Y(i=2) run in different iterations of i (Y reads T[1])")


def test_a_later_step_cannot_make_a_cached_copy_stale():
    s = sched(ROWS)
    s.cache_read("X", "shared", at="Y.i")
    s.compute_at("s", "Y.i")  # s reads X too: the copy now also serves s
    assert s.tree.buffers[0].stmts == ["s", "Y"]
    t = sched(ROWS)
    t.cache_read("s", "shared", at="Y.i")
    with pytest.raises(CacheConflict, match=r"s writes s inside loop i"):
        t.compute_at("s", "Y.i")


def test_compute_at_into_a_cached_loop_is_cache_conflict():
    assert_illegal(ROWS, "cache_read(s, shared, at=Y.i)\ncompute_at(s, Y.i)", rule="cache-conflict",
                   primitive="compute_at", statements=["s", "Y"],
                   match="s(i=0, j=0) writes s while the shared copy of s is live")


def test_compute_at_runs_like_program_order():
    assert_legal(ROWS, "compute_at(s, Y.i)", sizes={"M": 5, "N": 13}, run=True)
    assert_legal(STENCIL, "compute_at(T, Y.i)", run=True)


# ---------------------------------------------------------------- reverse_compute_at


def test_reverse_compute_at_tree(golden):
    golden(tree_change(tiled(), lambda s: s.reverse_compute_at("Y", "C.jo")))


def test_reverse_compute_at_trace_round_trip():
    s = tiled()
    s.reverse_compute_at("Y", at="C.jo")
    assert_round_trip(GEMM_SILU, s)


def test_reverse_compute_at_after_the_tile_is_legal():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    assert [l.name for l in s.tree.path("Y")] == ["io", "jo", "i", "j"]


def test_silu_inside_ko_is_rejected_with_the_chapter_counterexample():
    s = tiled()
    with pytest.raises(ReductionIncomplete) as err:
        s.reverse_compute_at("Y", "C.ko")
    e = err.value
    assert (e.primitive, e.rule, e.statements) == ("reverse_compute_at", "reduction-incomplete", ["C", "Y"])
    assert "counterexample: C(i=0, j=0, k=16) must run before Y(i=0, j=0) (Y reads C[0, 0]) but would run after" in str(e)


def test_reverse_compute_at_inside_the_reduction_changes_the_result():
    assert_illegal(GEMM_SILU, TILED + "reverse_compute_at(Y, C.ko)", rule="reduction-incomplete",
                   primitive="reverse_compute_at", statements=["C", "Y"], sizes=GEMM_SILU_SMALL, changes_result=True)


def test_reverse_compute_at_before_the_producer_is_done_is_a_dependence_violation():
    err = assert_illegal(BLUR, "reverse_compute_at(Y, T.i)", rule="dependence", primitive="reverse_compute_at",
                         statements=["T", "Y"], changes_result=True)
    assert err.counterexample == "T(i=1) must run before Y(i=1) (Y reads T[1]) but would run after"


def test_reverse_compute_at_next_to_an_unrounded_register_copy_is_rounding_removed():
    """C's f32 register copy at jo is harmless until Y moves into jo and reads C from it."""
    assert_legal(GEMM_SILU, TILED + "cache_write(C, register, at=C.jo, dtype=f32)")
    assert_illegal(GEMM_SILU, TILED + "cache_write(C, register, at=C.jo, dtype=f32)\nreverse_compute_at(Y, C.jo)",
                   rule="rounding-removed", primitive="reverse_compute_at", statements=["C", "Y"],
                   match="skipping the rounding of C to bf16", sizes=GEMM_SILU_SMALL, changes_result=True)


def test_reverse_compute_at_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "reverse_compute_at(Y, C.jo)", sizes=GEMM_SILU_SMALL, run=True)
    assert_legal(ROWS, "reverse_compute_at(Y, s.i)", run=True)


@pytest.mark.parametrize("n", [1, 2, 13])
def test_a_loop_of_one_iteration_stays_for_the_steps_after_it(n):
    """compute_at drops a moved statement's loops the placement determines (s.i under Y.i), never one over its
    reduction, which only a size of 1 pins: `split(m.j, 4)` after `compute_at(m, Y.i)` failed at N = 1
    ("statement m has no loop 'j'"), so the blocks tune appends for every size, and tune itself at N = 1, failed
    (probe R, 27th session)."""
    import numpy as np

    from tdsl.compiler.reference.interpreter import interpret, random_inputs

    src = ("param M, N\nkernel rs(X: f32[M, N]) -> (Y: f32[M]) {\n  m[i] = max(j) X[i, j]\n  Y[i] = m[i] * 2.0\n}\n"
           "schedule s {\n  compute_at(m, Y.i)\n  jo, ji = split(m.j, 4)\n}\n")
    prog = loads(src, sizes={"M": 3, "N": n})
    sched, original = prog.schedule("s"), prog.schedule(None)
    inputs = random_inputs(original.model, seed=n)
    want = interpret(original.model, original.time_map(), inputs)
    assert np.array_equal(interpret(sched.model, sched.time_map(), inputs)["Y"], want["Y"])


SOFTMAX_ROWS = """param M, N
kernel softmax(X: f32[M, N]) -> (Y: f32[M, N]) {
  m[i] = max(j) X[i, j]
  e[i, j] = exp(X[i, j] - m[i])
  s[i] = sum(j) e[i, j]
  Y[i, j] = e[i, j] / s[i]
}
schedule s {
  compute_at(s, Y.i)
  compute_at(e, Y.i)
  compute_at(m, Y.i)
  jo, ji = split(e.j, 4)
}
"""


def _paths(sched) -> dict:
    return {st.name: [loop.name for loop in sched.state.tree.path(st.name)] for st in sched.state.model.stmts}


@pytest.mark.parametrize("n", [1, 2, 13])
def test_a_pointwise_loop_the_placement_does_not_pin_stays_at_a_size_of_one(n):
    """e.j under s.i has one iteration at N = 1, but s.i does not pin it (s reads the whole row): it stays, so the
    tree has the shape it has at other sizes and `split(e.j, 4)` applies (29th session; tune refused every
    softmax candidate at N = 1, "statement e has no loop 'j'")."""
    import numpy as np

    from tdsl.compiler.reference.interpreter import interpret, random_inputs

    prog = loads(SOFTMAX_ROWS, sizes={"M": 3, "N": n})
    sched, original = prog.schedule("s"), prog.schedule(None)
    assert _paths(sched) == _paths(loads(SOFTMAX_ROWS, sizes={"M": 3, "N": 9}).schedule("s"))
    inputs = random_inputs(original.model, seed=n)
    want = interpret(original.model, original.time_map(), inputs)
    assert np.array_equal(interpret(sched.model, sched.time_map(), inputs)["Y"], want["Y"])


def test_a_loop_the_placement_pins_goes_also_at_a_size_of_one():
    """P.b and P.h under l's fused bh are pinned by the placement at every B and H: dropped at B = H = 1 as at
    B = H = 2 (keeping them broke `fuse(P.i, U.i)`-style steps of the attention schedules)."""
    mha = (EXAMPLES / "mha.tdsl").read_text()
    small, larger = ({"B": b, "H": b, "L": 64} for b in (1, 2))
    one, two = (loads(mha, sizes=sz).schedule("flash") for sz in (small, larger))
    assert _paths(one)["P"] == _paths(two)["P"]


CHAINED = """param M, N
kernel sw(G: f32[M, N], U: f32[M, N]) -> (Q: f32[M, N]) {
  T[i, j] = exp(G[i, j])
  Z[i, j] = T[i, j] * U[i, j]
  Q[i, j] = Z[i, j] * 2.0
}
schedule chained {
  io, jo, ii, jj = tile(Q.i, Q.j, 4, 4)
  compute_at(Z, Q.jo)
  compute_at(T, Q.jo)
  reorder(T, j, i)
}
schedule reverse_chained {
  io, jo, ii, jj = tile(T.i, T.j, 4, 4)
  reverse_compute_at(Z, T.jo)
  reverse_compute_at(Q, T.jo)
  reorder(Q, j, i)
}
"""


@pytest.mark.parametrize("block", ["chained", "reverse_chained"])
def test_a_placement_after_another_keeps_the_same_loops_at_a_size_of_one(block):
    """T placed beside Z, which an earlier step placed at Q.jo: the structural test takes Z's coordinates from the
    statements it exchanges with, so T keeps its loops i, j at M = N = 1 as at 2 and 5, and `reorder(T, j, i)`
    applies (probe AA of the 29th session: "statement T has no loop 'j'" at size 1 only)."""
    import numpy as np

    from tdsl.compiler.reference.interpreter import interpret, random_inputs

    shapes = [_paths(loads(CHAINED, sizes={"M": n, "N": n}).schedule(block)) for n in (1, 2, 5)]
    assert shapes[0] == shapes[1] == shapes[2]
    prog = loads(CHAINED, sizes={"M": 1, "N": 1})
    sched, original = prog.schedule(block), prog.schedule(None)
    inputs = random_inputs(original.model, seed=1)
    want = interpret(original.model, original.time_map(), inputs)
    assert np.array_equal(interpret(sched.model, sched.time_map(), inputs)["Q"], want["Q"])


def test_the_flash_schedule_has_one_shape_from_a_single_query_on():
    """mha's flash at L = 1 (decoding one token): S, m and U keep their query loop i as at L = 2 and 64 (the
    running maximum's partner P exchanges with it through a running dependence: counted by its accesses)."""
    mha = (EXAMPLES / "mha.tdsl").read_text()
    one, two, many = (_paths(loads(mha, sizes={"L": n}).schedule("flash")) for n in (1, 2, 64))
    assert one == two == many


HALO = """param N
kernel pk(X: f32[N]) -> (Y: f32[N]) {{
  T[i] = X[i] * 2.0
  Y[i : {domain}] = {body}
}}
schedule tile_cat {{
  yo, yi = split(Y.i, 8)
  compute_at(T, Y.yo)
}}
"""


@pytest.mark.parametrize("domain, body, note", [
    ("i >= 1", "T[i - 1] + T[i]", True),  # T(0) unread only at N = 1, where Y has no instance
    ("i >= 1 and i <= N - 2", "T[i - 1] + T[i + 1]", False),  # also T(1) at N = 3, where Y(1) is
])
def test_an_unplaced_instance_names_the_run_time_sizes_it_exists_at(domain, body, note):
    """Probe HH: with a run-time size, `T(i=0) is read by nothing under the target loop` did not say at which N
    (only at N = 1); and where only sizes without a consumer instance leave it unread, the message says so."""
    from tdsl.frontend.diagnostics import TdslError

    text = HALO.format(domain=domain, body=body)
    with pytest.raises(TdslError) as caught:
        loads(text, "halo.tdsl").schedule("tile_cat")
    assert "compute_at: T(i=0) at N=1 is read by nothing under the target loop" in str(caught.value)
    assert ("only sizes at which Y has no instance leave it so" in str(caught.value)) == note
    loads(text, "halo.tdsl", sizes={"N": 13}).schedule("tile_cat")  # at a given size it is placed


BLUR_TWO_PRODUCERS = """\
const M = 13, N = 17
kernel blur(X: f32[M, N]) -> (Y: f32[M, N], Z: f32[M]) {
  Bx[i, j] = where(j == 0, X[i, j], where(j == N - 1, X[i, j], (X[i, j - 1] + X[i, j] + X[i, j + 1]) * 0.25))
  Y[i, j] = where(i == 0, Bx[i, j], where(i == M - 1, Bx[i, j], Bx[i - 1, j] - Bx[i + 1, j] + Bx[i, j]))
  Z[i] = sum(j) Y[i, j] * Bx[i, N - 1 - j] combine reassoc
}
"""


def test_a_refused_placement_says_which_partner_placed_the_instance():
    """Z reads Bx and Y, both under Y.i; Bx's row 2 runs in Y's iteration 1 (Y(1) reads it), so Z(2) is placed
    there, before Y(2).  The error said only that Z would run before Y (probe LL); it now says where Z(2) runs
    and that Bx decided it."""
    err = assert_illegal(BLUR_TWO_PRODUCERS, "compute_at(Bx, Y.i)\nreverse_compute_at(Z, Y.i)", rule="dependence",
                         primitive="reverse_compute_at")
    assert err.placed == ("Z(i=2, j=0) runs in Y's iteration i=1, the first that writes a value it reads: "
                          "Bx(i=2, j=16) writes Bx[2, 16] there")
    assert "  placed: Z(i=2, j=0) runs in Y's iteration i=1" in str(err)
