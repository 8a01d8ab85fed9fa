"""pipeline: software-pipeline a serial loop over `stages` copies of its cache_read buffers
(compiler/schedule/primitives/pipeline.py).

pipeline changes no execution order, so it breaks no rule; only its misuse is an error (a bound loop, stages
that are not a positive integer).  With warp_specialize=true it moves the first product of the next iteration
before the last group of this one: rule pipeline-overlap (compiler/legality/overlap.py).
"""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import PipelineOverlap, ScheduleError
from tdsl.compiler.schedule.tree_view import tree_text
from tdsl.testing import assert_illegal, assert_legal

from catalog import EXAMPLES
from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, TILED, assert_round_trip, tiled, tree_change


def test_pipeline_tree(golden):
    s = tiled()
    s.cache_read("A", "shared", at="C.ko")
    golden(tree_change(s, lambda s: s.pipeline("C.ko", stages=3)))


def test_pipeline_trace_round_trip():
    s = tiled()
    s.pipeline("C.ko", stages=3)
    s.pipeline("C.kk")
    assert_round_trip(GEMM_SILU, s)


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


def test_pipeline_breaks_no_rule():
    """Any serial loop, a reduction loop included, with any number of stages."""
    assert_legal(GEMM_SILU, TILED + "pipeline(C.ko, stages=4)\npipeline(C.kk, stages=1)\npipeline(Y.i, stages=2)")


def test_pipeline_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "reverse_compute_at(Y, C.jo)\ncache_read(A, shared, at=C.ko)\n"
                 "pipeline(C.ko, stages=3)", sizes=GEMM_SILU_SMALL, run=True)


# ---------------------------------------------------------------- warp_specialize=true (rule pipeline-overlap)

MHA = (EXAMPLES / "mha.tdsl").read_text()

# Each step's product Z reads the state H the step before ends with: the last group feeds the next first product.
RECURRENCE = """
const T = 8, N = 16
kernel rnn(X: bf16[T, N], W: bf16[N, N], H0: bf16[N]) -> (H: bf16[T, N]) {
  for t < T {
    Z[t, c] = sum(d) where(t == 0, H0[d], H[t - 1, d]) * W[d, c] accum f32
    H[t, c]: bf16 = Z[t, c] + X[t, c]
  }
}
"""


def test_warp_specialize_marks_the_loop_and_round_trips():
    s = loads(MHA).schedule("flash_ws")
    ko = next(l for l in s.tree.path("U") if l.name == "ko")
    assert (ko.pipeline, ko.warp_specialize) == (2, True)
    assert "pipeline(l.ko, stages=2, warp_specialize=true)" in str(s.trace)
    assert "Mark pipeline ko stages=2 warp_specialize" in tree_text(s.model, s.tree)
    assert_round_trip(MHA, s)


def test_warp_specialize_is_legal_for_flash_attention():
    """No dependence from U (the last group) of a key block to S (the first product) of the next: S reads Q and K."""
    for example in ("mha", "mha_causal"):
        assert_legal((EXAMPLES / f"{example}.tdsl").read_text(), "flash_ws", sizes={"L": 256})


def test_warp_specialize_refuses_a_dependence_into_the_next_first_product():
    err = assert_illegal(RECURRENCE, "pipeline(Z.t, stages=2, warp_specialize=true)", rule="pipeline-overlap",
                         primitive="pipeline", statements=["H", "Z"], changes_result=False,
                         match=["warp_specialize issues Z of iteration t + 1 before H of iteration t, but Z reads H "
                                "written by H",
                                "H(t=0, c=0) must run before Z(t=1, c=0, d=0) (Z reads H[0, 0]) but would run after"])
    assert isinstance(err, PipelineOverlap)
    s = loads(RECURRENCE).schedule()
    s.pipeline("Z.t", stages=2)  # without the arrangement nothing moves: legal
    assert not s.tree.path("Z")[0].warp_specialize


def test_warp_specialize_misuse():
    s = loads(RECURRENCE).schedule()
    with pytest.raises(ScheduleError, match=r"overlaps the first and the last statement group of loop c, which holds "
                                            r"one group"):
        s.pipeline("Z.c", warp_specialize=True)
    with pytest.raises(ScheduleError, match=r"warp_specialize must be true or false, got 'maybe'"):
        s.pipeline("Z.t", warp_specialize="maybe")


def test_a_later_pipeline_step_without_the_option_drops_the_arrangement():
    s = loads(MHA, sizes={"L": 256}).schedule("flash_ws")
    s.pipeline("l.ko", stages=3)
    assert not next(l for l in s.tree.path("U") if l.name == "ko").warp_specialize
