"""Every primitive: a legal use (checked against the interpreter elsewhere), an illegal use with its typed
error, rule and counterexample, and misuse reported as a ScheduleError naming the primitive."""

import pytest

from tdsl.compiler.api import loads
from tdsl.compiler.errors import (
    CacheConflict,
    DependenceViolation,
    LegalityError,
    ParallelDependence,
    ParallelReduction,
    ReductionIncomplete,
    ReductionOrder,
    ScheduleError,
)
from tdsl.compiler.tree_view import tree_text

GEMM_SILU = """
const M = 128, K = 64, N = 128
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
"""

STENCIL = """
const N = 16
kernel stencil(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 2.0
  Y[i : i >= 1] = T[i - 1] + T[i]
}
"""

ROWS = """
const M = 8, N = 16
kernel rows(X: f32[M, N]) -> (Y: f32[M, N]) {
  s[i] = sum(j) X[i, j]
  Y[i, j] = X[i, j] / s[i]
}
"""


def sched(text=GEMM_SILU):
    return loads(text).schedule()


def tiled():
    s = sched()
    s.split("C.i", 32)
    s.split("C.j", 32)
    s.split("C.k", 16)
    s.reorder("C", "io", "jo", "ko", "ii", "jj", "kk")
    return s


# ---------------------------------------------------------------- split


def test_split_names_and_expressions():
    s = sched()
    assert s.split("C.i", 32) == ("io", "ii")
    assert s.split("C.j", 32, names=("a", "b")) == ("a", "b")
    text = tree_text(s.model, s.tree)
    assert "io = floor(i/32)" in text and "ii = i mod 32" in text and "a = floor(j/32)" in text


def test_split_rejects_a_bad_factor_and_unknown_loops():
    s = sched()
    with pytest.raises(ScheduleError, match=r"split: the factor must be a positive integer, got 0"):
        s.split("C.i", 0)
    with pytest.raises(ScheduleError, match=r"split: statement C has no loop 'x'; its loops are i, j, k"):
        s.split("C.x", 4)
    with pytest.raises(ScheduleError, match=r"unknown statement 'D'"):
        s.split("D.i", 4)
    with pytest.raises(ScheduleError, match=r"loop name 'i' is ambiguous \(C.i, Y.i\)"):
        s.split("i", 4)
    with pytest.raises(ScheduleError, match=r"a loop named 'j' already exists here"):
        s.split("C.i", 4, names=("j", "ii"))
    assert len(s.trace) == 0  # failed steps leave no trace and no change


# ---------------------------------------------------------------- reorder


def test_reorder_builds_the_chapter_loop_nest():
    s = tiled()
    assert [l.name for l in s.tree.path("C")] == ["io", "jo", "ko", "ii", "jj", "kk"]


def test_reorder_rejects_imperfect_nests():
    s = sched(ROWS)
    s.compute_at("s", "Y.i")
    with pytest.raises(ScheduleError, match=r"not perfectly nested: loop i also encloses"):
        s.reorder("Y", "j", "i")


def test_reorder_is_rejected_when_a_dependence_turns_backwards():
    text = """
const N = 8
kernel scan(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] + 1.0
  Y[i, j : i >= 1 and j < 7] = T[i - 1, j + 1]
}
"""
    s = sched(text)
    s.fuse("T.i", "Y.i")
    s.fuse("T.j", "Y.j")
    with pytest.raises(DependenceViolation) as err:
        s.reorder("T", "j", "i")
    e = err.value
    assert e.rule == "dependence" and e.primitive == "reorder" and e.statements == ["T", "Y"]
    assert "T(i=0, j=1) must run before Y(i=1, j=0) (Y reads T[0, 1]) but would run after" in str(e)


# ---------------------------------------------------------------- tile


def test_tile_is_split_then_reorder():
    s = sched()
    assert s.tile("C.i", "C.j", 32, 32) == ["io", "jo", "ii", "jj"]
    assert [l.name for l in s.tree.path("C")] == ["io", "jo", "ii", "jj", "k"]
    with pytest.raises(ScheduleError, match=r"tile: expected loops then one factor per loop"):
        s.tile("C.k", 4, 4)


# ---------------------------------------------------------------- fuse


def test_fuse_nested_loops_keeps_order():
    s = tiled()
    assert s.fuse("C.io", "C.jo") == "io_jo"
    assert s.tree.path("C")[0].n_dims == 2


def test_fuse_siblings_legal_and_backward_dependence_rejected():
    s = sched(STENCIL)
    assert s.fuse("T.i", "Y.i") == "i"  # Y(i) reads T(i - 1) and T(i): both earlier or in the same iteration
    text = """
const N = 16
kernel ahead(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 2.0
  Y[i : i < 15] = T[i + 1]
}
"""
    s = sched(text)
    with pytest.raises(DependenceViolation) as err:
        s.fuse("T.i", "Y.i")
    assert "T(i=1) must run before Y(i=0) (Y reads T[1]) but would run after" in str(err.value)


def test_fuse_rejects_unrelated_loops():
    s = sched(ROWS)
    with pytest.raises(ScheduleError, match=r"neither nested .* nor adjacent siblings"):
        s.fuse("s.j", "Y.i")


# ---------------------------------------------------------------- reverse


def test_reverse_a_reduction_is_reduction_order():
    s = sched()
    s.reverse("Y.j")  # Y has no carried dependence
    with pytest.raises(ReductionOrder) as err:
        s.reverse("C.k")
    assert err.value.rule == "reduction-order"
    assert "C(i=0, j=0, k=0) must run before C(i=0, j=0, k=1) (both update C[0, 0])" in str(err.value)


# ---------------------------------------------------------------- compute_at / reverse_compute_at


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


# ---------------------------------------------------------------- compute_inline


def test_compute_inline_keeps_the_rounding_as_a_cast():
    text = """
const N = 8
kernel chain(G: bf16[N], U: bf16[N]) -> (Z: bf16[N]) {
  T[i]: bf16 = silu(G[i])
  Z[i] = T[i] * U[i]
}
"""
    s = sched(text)
    s.compute_inline("T")
    from tdsl.frontend.printer import expr_text

    assert expr_text(s.model.stmt("Z").value) == "bf16(silu(G[i])) * U[i]"
    assert s.tree.leaves() == ["Z"]
    assert sorted(a.tensor for a in s.model.stmt("Z").reads) == ["G", "U"]


def test_compute_inline_misuse():
    s = sched()
    with pytest.raises(ScheduleError, match=r"compute_inline: C is a reduction"):
        s.compute_inline("C")
    with pytest.raises(ScheduleError, match=r"compute_inline: Y is a kernel result"):
        s.compute_inline("Y")


# ---------------------------------------------------------------- cache_read / cache_write


def test_cache_read_and_write_at_their_levels():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    s.cache_read("A", "shared", at="C.ko")
    s.cache_write("C", "register", at="C.jo")
    kinds = [(b.tensor, b.scope, b.at.name, b.kind) for b in s.tree.buffers]
    assert kinds == [("A", "shared", "ko", "read"), ("C", "register", "jo", "write")]


def test_cache_write_inside_the_reduction_loop_is_rejected():
    s = tiled()
    with pytest.raises(CacheConflict) as err:
        s.cache_write("C", "register", at="C.ko")
    assert err.value.rule == "cache-conflict"
    assert "C(i=0, j=0, k=0) and C(i=0, j=0, k=16) write the same element in different iterations of ko" in str(err.value)


def test_cache_read_of_a_tensor_written_in_scope_is_rejected():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    with pytest.raises(CacheConflict, match=r"C writes C inside loop jo"):
        s.cache_read("C", "shared", at="C.jo")


def test_cache_misuse():
    s = tiled()
    with pytest.raises(ScheduleError, match=r"unknown memory scope 'smem'"):
        s.cache_read("A", "smem", at="C.ko")
    with pytest.raises(ScheduleError, match=r"no statement under loop ko reads Y"):
        s.cache_read("Y", "shared", at="C.ko")
    with pytest.raises(ScheduleError, match=r"say where the buffer lives"):
        s.cache_read("A", "shared")


# ---------------------------------------------------------------- pipeline / bind


def test_pipeline_and_bind():
    s = tiled()
    s.pipeline("C.ko", stages=3)
    s.bind("C.io", "grid.x")
    s.bind("C.jo", "y")
    path = s.tree.path("C")
    assert (path[0].bind, path[1].bind, path[2].pipeline) == ("x", "y", 3)
    with pytest.raises(ScheduleError, match=r"grid.x is already bound to loop io"):
        s.bind("C.ii", "grid.x")
    with pytest.raises(ScheduleError, match=r"unknown grid axis 'w'"):
        s.bind("C.ii", "w")
    with pytest.raises(ScheduleError, match=r"stages must be a positive integer"):
        s.pipeline("C.kk", stages=0)
    with pytest.raises(ScheduleError, match=r"only a serial loop can be pipelined"):
        s.pipeline("C.io", stages=2)


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


# ---------------------------------------------------------------- trace


def test_trace_prints_and_replays():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    s.bind("C.io", "grid.x")
    text = str(s.trace)
    assert text.splitlines()[0] == "io, ii = split(C.i, 32)"
    assert "reverse_compute_at(Y, C.jo)" in text
    again = s.trace.replay(sched())
    assert str(again.trace) == text
    assert again.time_map().is_equal(s.time_map())


def test_every_legality_error_is_a_legality_error_with_exit_code_1():
    for cls in (DependenceViolation, ReductionIncomplete, ReductionOrder, ParallelDependence, ParallelReduction, CacheConflict):
        assert issubclass(cls, LegalityError) and cls.exit_code == 1
    assert ScheduleError.exit_code == 2


# ---------------------------------------------------------------- regressions from the documentation review


def test_a_later_step_cannot_break_an_earlier_bind():
    s = sched(STENCIL)
    s.bind("Y.i", "grid.x")
    with pytest.raises(ParallelDependence, match=r"loop i carries a dependence"):
        s.compute_at("T", "Y.i")  # T(i) would run in the iteration of Y(i+1), a dependence across programs


def test_a_later_step_cannot_make_a_cached_copy_stale():
    s = sched(ROWS)
    s.cache_read("X", "shared", at="Y.i")
    s.compute_at("s", "Y.i")  # s reads X too: the copy now also serves s
    assert s.tree.buffers[0].stmts == ["s", "Y"]
    t = sched(ROWS)
    t.cache_read("s", "shared", at="Y.i")
    with pytest.raises(CacheConflict, match=r"s writes s inside loop i"):
        t.compute_at("s", "Y.i")


def test_fuse_names_and_trace_replay():
    s = tiled()
    assert s.fuse("C.io", "C.jo", names="tile") == "tile"
    again = s.trace.replay(sched())
    assert [l.name for l in again.tree.path("C")][0] == "tile"


def test_sibling_fuse_that_would_repeat_a_loop_name():
    text = """
const N = 4
kernel k(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j]
  Y[j, i] = T[i, j]
}
"""
    s = sched(text)
    with pytest.raises(ScheduleError, match=r"statement Y would have two loops named i"):
        s.fuse("T.i", "Y.j")


def test_argument_errors_are_schedule_errors():
    s = sched(STENCIL)
    with pytest.raises(ScheduleError, match=r"split makes two loops \(outer, inner\); name two, not 3"):
        s.split("T.i", 4, names=("a", "b", "c"))
    with pytest.raises(ScheduleError, match=r"loop Y.i does not enclose statement T"):
        s.reorder("T.i", "Y.i")
    with pytest.raises(ScheduleError, match=r"name at least two loops"):
        s.reorder("T", "i")
    s.compute_at("T", at="Y.i")
    with pytest.raises(ScheduleError, match=r"tile the loops of one statement"):
        sched().tile("C.i", "Y.j", 4, 4)


def test_combine_reassoc_allows_regrouping():
    text = """
const N = 8, M = 2
kernel total(X: f32[M, N]) -> (s: f32[M]) {
  s[i] = sum(k) X[i, k] combine reassoc
}
"""
    s = sched(text)
    s.reverse("s.k")  # the program allows any order
    strict = sched(text.replace(" combine reassoc", ""))
    with pytest.raises(ReductionOrder):
        strict.reverse("s.k")


def test_launch_sets_the_kernel_warps_and_survives_reorder():
    s = tiled()
    s.launch("C", warps=8)
    s.reorder("C", "jo", "io")
    assert s.tree.path("C")[0].warps == 8 and s.tree.path("C")[0].name == "jo"
    with pytest.raises(ScheduleError, match=r"warps must be a power of two up to 32, got 6"):
        s.launch("C", warps=6)
    from tdsl.compiler.tile import lower

    s.bind("C.jo", "grid.x")
    s.bind("C.io", "grid.y")
    assert lower(s).kernels[0].num_warps == 8


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
