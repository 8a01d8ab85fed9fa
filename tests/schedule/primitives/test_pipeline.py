"""pipeline: software-pipeline a serial loop over `stages` copies of its cache_read buffers
(compiler/schedule/primitives/pipeline.py).

pipeline changes no execution order, so it breaks no rule; only its misuse is an error (a bound loop, stages
that are not a positive integer).
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.testing import assert_legal

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
