"""cache_read / cache_write: an on-chip copy of a tensor (shared memory, registers) for the iterations of one
loop; reads (or updates) of the statements under that loop go through it (compiler/schedule/primitives/cache.py).

Rules cache_read can break: cache-conflict (the cached tensor is written while the copy lives) and
rounding-added (a copy in a narrower dtype rounds what the readers read).
Rules cache_write can break: cache-conflict (the copy is placed inside the loop of its own reduction, so each
iteration would start from a fresh copy), rounding-added (an accumulator copy in a narrower dtype) and
rounding-removed (a reader inside the loop reads the copy in a wider dtype, skipping the program's rounding).
"""

import pytest

from tdsl.compiler.errors import CacheConflict, ScheduleError
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, ROWS, TILED, assert_round_trip, tiled, tree_change

# A GEMM with an f32 result (no rounding after the sum).
GEMM = """
const M = 4, N = 4, K = 32
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}
"""


def _fused():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    return s


def test_cache_read_tree(golden):
    golden(tree_change(_fused(), lambda s: s.cache_read("A", "shared", at="C.ko")))


def test_cache_write_tree(golden):
    golden(tree_change(_fused(), lambda s: s.cache_write("C", "register", at="C.jo")))


def test_cache_trace_round_trip():
    s = _fused()
    s.cache_read("A", "shared", at="C.ko")
    s.cache_read("W", "shared", at="C.ko", dtype="bf16")
    s.cache_write("C", "register", at="C.jo")
    assert_round_trip(GEMM_SILU, s)


def test_cache_read_and_write_at_their_levels():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    s.cache_read("A", "shared", at="C.ko")
    s.cache_write("C", "register", at="C.jo")
    kinds = [(b.tensor, b.scope, b.at.name, b.kind) for b in s.tree.buffers]
    assert kinds == [("A", "shared", "ko", "read"), ("C", "register", "jo", "write")]


def test_cache_misuse():
    s = tiled()
    with pytest.raises(ScheduleError, match=r"unknown memory scope 'smem'"):
        s.cache_read("A", "smem", at="C.ko")
    with pytest.raises(ScheduleError, match=r"no statement under loop ko reads Y"):
        s.cache_read("Y", "shared", at="C.ko")
    with pytest.raises(ScheduleError, match=r"say where the buffer lives"):
        s.cache_read("A", "shared")


# ---------------------------------------------------------------- cache_read's rules


def test_cache_read_of_a_tensor_written_in_scope_is_rejected():
    s = tiled()
    s.reverse_compute_at("Y", "C.jo")
    with pytest.raises(CacheConflict, match=r"C writes C inside loop jo"):
        s.cache_read("C", "shared", at="C.jo")


def test_cache_read_of_a_tensor_written_while_the_copy_lives_is_cache_conflict():
    assert_illegal(ROWS, "compute_at(s, Y.i)\ncache_read(s, shared, at=Y.i)", rule="cache-conflict",
                   primitive="cache_read", statements=["s", "Y"],
                   match="s writes s inside loop i, where Y would read a copy")


def test_cache_read_in_a_narrower_dtype_is_rounding_added():
    assert_illegal(GEMM, "ko, kk = split(C.k, 8)\nreorder(C, ko, i, j, kk)\n"
                         "cache_read(A, shared, at=C.ko, dtype=f8e4m3)",
                   rule="rounding-added", primitive="cache_read", statements=["C"],
                   match="a bf16 value such as 1.0625 becomes 1.0 in f8e4m3", changes_result=True)


# ---------------------------------------------------------------- cache_write's rules


def test_cache_write_inside_the_reduction_loop_is_rejected():
    s = tiled()
    with pytest.raises(CacheConflict) as err:
        s.cache_write("C", "register", at="C.ko")
    assert err.value.rule == "cache-conflict"
    assert "C(i=0, j=0, k=0) and C(i=0, j=0, k=16) write the same element in different iterations of ko" in str(err.value)


def test_cache_write_inside_the_reduction_loop_is_cache_conflict():
    assert_illegal(GEMM_SILU, TILED + "cache_write(C, register, at=C.ko)", rule="cache-conflict",
                   primitive="cache_write", statements=["C"],
                   match="write the same element in different iterations of ko")


def test_cache_write_of_an_accumulator_in_a_narrower_dtype_is_rounding_added():
    assert_illegal(GEMM, "io, ii = split(C.i, 2)\nreorder(C, io, ii, j, k)\n"
                         "cache_write(C, register, at=C.io, dtype=bf16)",
                   rule="rounding-added", primitive="cache_write", statements=["C"],
                   match="would hold the f32 accumulator of the reduction C and round it after every update",
                   changes_result=True)


def test_cache_write_read_unrounded_inside_its_loop_is_rounding_removed():
    assert_illegal(GEMM_SILU, TILED + "reverse_compute_at(Y, C.jo)\ncache_write(C, register, at=C.jo, dtype=f32)",
                   rule="rounding-removed", primitive="cache_write", statements=["C", "Y"],
                   match="Y would read C from the f32 register copy inside loop jo, skipping the rounding of C "
                         "to bf16",
                   sizes=GEMM_SILU_SMALL, changes_result=True)


def test_cache_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "reverse_compute_at(Y, C.jo)\ncache_read(A, shared, at=C.ko)\n"
                 "cache_read(W, shared, at=C.ko)\ncache_write(C, register, at=C.jo)", sizes=GEMM_SILU_SMALL, run=True)


@pytest.mark.parametrize("kind", ["read", "write"])
@pytest.mark.parametrize("bind_first", [False, True])
def test_a_copy_is_not_shared_by_the_programs_of_a_grid_loop_inside_its_loop(kind, bind_first):
    """A copy on chip belongs to one program: at io, with jo bound to the grid inside io, it would be shared by
    several programs (probe U of the 28th session: the cost report counted one fill per io, the kernel made one per
    program).  Refused whichever step comes second; at jo it is fine."""
    def cache(s, at):
        if kind == "read":
            s.cache_read("A", "shared", at=at)
        else:
            s.cache_write("C", "shared", at=at)

    s = tiled()
    if bind_first:
        s.bind("C.io", "grid.x")
        s.bind("C.jo", "grid.y")
        with pytest.raises(ScheduleError, match=r"cache_" + kind + r": the shared (copy|buffer) of [AC] at loop io "
                           r"\(cache_" + kind + r"\) would be shared by the programs of loop jo, bound to grid.y"):
            cache(s, "C.io")
    else:
        cache(s, "C.io")
        s.bind("C.io", "grid.x")
        with pytest.raises(ScheduleError, match=r"bind: .* would be shared by the programs of loop jo"):
            s.bind("C.jo", "grid.y")
    s = tiled()
    cache(s, "C.jo")
    s.bind("C.io", "grid.x")
    s.bind("C.jo", "grid.y")  # the copy at the grid loop itself: one per program
