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
    s.bind("C.io", "grid.x")
    s.bind("C.jo", "grid.y")
    s.launch("C", warps=8, group=4)
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


# ---------------------------------------------------------------- the launch order (group=)

_GROUPED = """const M = 100, N = 80, K = 64
kernel g(A: bf16[M, K], W: bf16[K, N]) -> (C: bf16[M, N]) {
  C[i, j] = sum(k) A[i, k] * W[k, j] accum f32
}
schedule grouped {
  io, jo, ii, jj = tile(C.i, C.j, 32, 16)
  ko, kk = split(C.k, 16)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
  launch(C, warps=4, group=GROUP)
}
"""


def _matches_the_interpreter(sched, text: str, path, seed: int) -> bool:
    """The generated module `text`, run on random inputs with NaN guard regions around its outputs, agrees with
    the interpreter's program order on every output."""
    from tdsl.compiler.driver.generate import load_module, run_generated
    from tdsl.compiler.reference.interpreter import interpret, random_inputs
    from tdsl.compiler.verify import compare_outputs

    inputs = random_inputs(sched.model, seed=seed)
    got = run_generated(load_module(text, path), sched.model, inputs, guard=3)
    reference = interpret(sched.model, sched.time_map(), inputs)
    return all(c.ok for c in compare_outputs(sched.model, reference, got).values())


@pytest.mark.parametrize("group", [3, 8])
def test_a_grouped_launch_runs_every_program_once(group, tmp_path):
    """4 x 5 programs in groups of 3 and 8 values of grid.x (the last group ragged, or the only one): the
    output is NaN-poisoned, so a program the decoded order skipped would show; each program writes its own tile,
    so 20 launched programs that cover the output run once each."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate

    prog = loads(_GROUPED.replace("GROUP", str(group)))
    sched = prog.schedule("grouped")
    text = generate(prog, "grouped")
    assert "g_0[((4) * (5), 1,)]" in text and f"group_width = {group} * (5)" in text
    assert _matches_the_interpreter(sched, text, tmp_path / f"g{group}.py", seed=group)


def test_a_grouped_launch_is_shown_kept_and_priced():
    from tdsl.compiler.analysis.cost.program import analyze
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.schedule.tree_view import tree_text

    prog = loads(_GROUPED.replace("GROUP", "3"))
    s = prog.schedule("grouped")
    assert "Mark launch group=3 (programs start in groups of 3 along grid.x)" in tree_text(s.model, s.tree)
    assert "launch(C, warps=4, group=3)" in str(s.trace)
    s.reorder("C", "jo", "io")  # the launch configuration moves with the kernel's outer loop
    assert s.tree.path("C")[0].group == 3
    assert "T.use_swizzle(panel_size=3)" in generate(prog, "grouped", backend="tilelang")
    big = (_GROUPED.replace("const M = 100, N = 80, K = 64", "const M = 8192, N = 8192, K = 4096")
           .replace("32, 16)", "128, 128)").replace("GROUP", "8"))
    dram = [analyze(loads(text).schedule("grouped"), "h200").kernels[0].estimate.dram_bytes
            for text in (big.replace(", group=8", ""), big)]
    assert dram[1] < dram[0]  # a wave of 264 programs loads 16 + 32 operand tiles grouped, 64 + 5 in linear order


def test_a_grouped_launch_needs_two_grid_axes():
    s = tiled()
    s.bind("C.io", "grid.x")
    with pytest.raises(ScheduleError, match=r"group=4 orders the programs of grid.x x grid.y, but the kernel of C "
                                            r"binds grid.x; bind loops to grid.x and grid.y first"):
        s.launch("C", warps=4, group=4)


# ---------------------------------------------------------------- persistent programs (persistent=true)

_PERSISTENT = _GROUPED.replace("group=GROUP", "OPTIONS")

_THREE_AXES = """const B = 3, M = 40, N = 36, K = 32
kernel b(A: f32[B, M, K], W: f32[B, K, N]) -> (C: f32[B, M, N]) {
  C[z, i, j] = sum(k) A[z, i, k] * W[z, k, j] accum f32
}
schedule walk {
  io, jo, ii, jj = tile(C.i, C.j, 16, 16)
  reorder(C, z, io, jo, k, ii, jj)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
  bind(C.z, grid.z)
  launch(C, warps=4, OPTIONS)
}
"""


@pytest.mark.parametrize("source,options", [
    (_PERSISTENT, "persistent=true"),
    (_PERSISTENT, "group=3, persistent=true"),
    (_THREE_AXES, "persistent=true"),
    (_THREE_AXES, "group=2, persistent=true"),
], ids=["linear", "grouped", "three-axes", "three-axes-grouped"])
def test_a_persistent_launch_runs_every_program_once(source, options, tmp_path):
    """Three programs (the interpreter's count) walk 20 (4 x 5) or 36 (3 x 3 x 4) tiles, in linear or grouped
    order: the NaN-poisoned output shows a tile no program reached, and a tile written twice would still match,
    so the walk's stride is checked in the text."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate

    prog = loads(source.replace("OPTIONS", options))
    name = next(iter(prog.kernels[next(iter(prog.kernels))].schedules)).name
    sched = prog.schedule(name)
    text = generate(prog, name)
    assert "for tile in tl.range(tl.program_id(0), " in text and ", tl.num_programs(0), flatten=True):" in text
    assert ", _programs(C)),)" in text
    assert _matches_the_interpreter(sched, text, tmp_path / "p.py", seed=4)


def test_a_persistent_launch_is_shown_kept_and_needs_a_grid():
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.lower.pipeline import lower_for
    from tdsl.compiler.schedule.tree_view import tree_text

    prog = loads(_PERSISTENT.replace("OPTIONS", "persistent=true"))
    s = prog.schedule("grouped")
    assert "launch persistent (one program per multiprocessor walks the tiles)" in tree_text(s.model, s.tree)
    assert "launch(C, warps=4, persistent=true)" in str(s.trace)
    assert_round_trip(_PERSISTENT.replace("OPTIONS", "persistent=true").split("schedule")[0], s)
    s.reorder("C", "jo", "io")  # the launch configuration moves with the kernel's outer loop
    assert s.tree.path("C")[0].persistent
    assert lower_for(s, "triton").kernels[0].persistent
    for backend in ("tilelang",):  # one block per tile there, said in a comment
        assert "persistent" in generate(prog, "grouped", backend=backend)
    unbound = tiled()
    with pytest.raises(ScheduleError, match=r"persistent=true walks the programs of the kernel's grid, but the kernel "
                                            r"of C binds no loop to the grid; bind one first"):
        unbound.launch("C", warps=4, persistent=True)
    with pytest.raises(ScheduleError, match=r"persistent must be true or false, got 'yes'"):
        unbound.launch("C", warps=4, persistent="yes")
