"""launch: the number of warps each program of a kernel runs with (compiler/schedule/primitives/launch.py).

launch changes no execution order (the tree is the same before and after), so it breaks no rule; the
backends read it (Triton `num_warps`, TileLang `threads = 32 * warps`).
"""

import pytest

from tdsl.compiler.errors import ScheduleError
from tdsl.testing import assert_legal

from primitive_helpers import GEMM_SILU, GEMM_SILU_SMALL, TILED, assert_round_trip, tiled, tree_change


def test_launch_tree(golden):
    golden(tree_change(tiled(), lambda s: s.launch("C", warps=8)))


def test_launch_trace_round_trip():
    s = tiled()
    s.launch("C", warps=8)
    s.launch("Y", warps=2)
    assert_round_trip(GEMM_SILU, s)


def test_launch_sets_the_kernel_warps_and_survives_reorder():
    s = tiled()
    s.launch("C", warps=8)
    s.reorder("C", "jo", "io")
    assert s.tree.path("C")[0].warps == 8 and s.tree.path("C")[0].name == "jo"
    with pytest.raises(ScheduleError, match=r"warps must be a power of two up to 32, got 6"):
        s.launch("C", warps=6)
    from tdsl.compiler.lower.build import lower

    s.bind("C.jo", "grid.x")
    s.bind("C.io", "grid.y")
    assert lower(s).kernels[0].num_warps == 8


def test_launch_breaks_no_rule():
    assert_legal(GEMM_SILU, TILED + "bind(C.io, grid.x)\nlaunch(C, warps=32)\nlaunch(Y, warps=1)")


def test_launch_runs_like_program_order():
    assert_legal(GEMM_SILU, TILED + "launch(C, warps=8)", sizes=GEMM_SILU_SMALL, run=True)
