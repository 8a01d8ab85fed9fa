"""A loop whose body loads an array it also stores ends each iteration with a barrier, carried dependence or not.

A tile is a box around its instances.  A wavefront `w = skew(D.j, D.i, 1)` split along i runs, at each w, tiles
of 4 rows whose lanes off the diagonal compute nothing but load all the same: the tile at io = 1 loads D[3, 1],
which the tile at io = 0 has just stored.  No dependence is carried by io (the value is never used), so no
barrier ended its iterations, and on the Ascend cores such a load races the store it overlaps: the NumPy model
refused the module as a tdsl bug (probe Q of the 27th session; also an edit-distance DP, a 5-point Gauss-Seidel
wavefront and a two-plane wave equation).
"""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import SerialLoop, walk_ops
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs
from tdsl.compiler.verify.ascend_sim import output_arrays, simulate

DP = """const M = 7, N = 9
kernel dp(cost: f32[M, N]) -> (D: f32[M, N]) {
  D[i, j] = where(i == 0, cost[i, j] + j, where(j == 0, cost[i, j] + i,
    min(min(D[i - 1, j] + 1.0, D[i, j - 1] + 1.0), D[i - 1, j - 1] + abs(cost[i, j]))))
}
schedule antidiag_lanes {
  w = skew(D.j, D.i, 1)
  reorder(D, w, i)
  io, ii = split(D.i, 4)
}
"""


def test_the_split_wavefront_ends_each_tile_with_a_barrier():
    program = lower_for(loads(DP).schedule("antidiag_lanes"), "ascend-950")
    loops = {op.var: op for op in walk_ops(program.kernels[0].body) if isinstance(op, SerialLoop)}
    assert loops["w"].barrier  # w carries the wavefront's dependences
    assert loops["io"].barrier  # io carries none, but its tiles' lanes overlap the previous tile's stores


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
@pytest.mark.parametrize("sizes", [{}, {"M": 13, "N": 7}, {"M": 5, "N": 5}, {"M": 33, "N": 5}])
def test_the_split_wavefront_runs_on_the_ascend_models(target, sizes):
    prog = loads(DP, sizes=sizes)
    original = prog.schedule(None)
    inputs = random_inputs(original.model, seed=4)
    want = interpret(original.model, original.time_map(), inputs)
    got = output_arrays(simulate(generate(prog, "antidiag_lanes", target=target), inputs, target), original.model)
    assert all(r.ok for r in compare_outputs(original.model, want, got).values())
