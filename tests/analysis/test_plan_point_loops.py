"""The buffer plan sizes a tile as the lowering builds it when a point loop lies outside a serial loop.

`compute_at(ss, Y.io)` after `split(Y.i, 16)` leaves ss a point loop over its 16 rows around the serial loop
over its row segments; the lowering runs the serial loop around the tile and makes the 16 rows lanes of it
(compiler/lower/loops.py `_point_chain`): one [16, segment] tile per segment.  The plan took the point loop for
a level of its own and sized a [1, segment] tile, 16 times too small: 24 KiB of registers for RMSNorm's 16-row
blocks where the kernel holds 264 KiB, so neither the occupancy nor the spills of the cost model saw them (the
H100's tuning log measured these blocks at 75 and 164 us where the estimate said 10 and 18)."""

from __future__ import annotations

import math

import pytest

from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.driver.api import loads
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.build import lower

from catalog import EXAMPLES

RMSNORM = (EXAMPLES / "rmsnorm.tdsl").read_text()
SOFTMAX = (EXAMPLES / "softmax.tdsl").read_text()
SIZES = {"M": 64, "N": 4096}  # the examples' N, fewer rows


def _rows(rows: int, segment: int, stmts: list[str]) -> str:
    steps = [f"io, ii = split(Y.i, {rows})"]
    steps += [f"compute_at({s}, Y.io)" for s in stmts if s != "Y"]
    steps += [f"jo, ji = split({s}.j, {segment})" for s in stmts if s not in ("r",)]
    steps += ["bind(Y.io, grid.x)", "launch(Y, warps=4)"]
    return "\nschedule probe {\n  " + "\n  ".join(steps) + "\n}\n"


CASES = {
    "rmsnorm 16 rows, one segment": (RMSNORM, _rows(16, 4096, ["r", "ss", "Y"])),
    "rmsnorm 16 rows, 4 segments": (RMSNORM, _rows(16, 1024, ["r", "ss", "Y"])),
    "rmsnorm 2 rows, 2 segments": (RMSNORM, _rows(2, 2048, ["r", "ss", "Y"])),
    "softmax 4 rows, 4 segments": (SOFTMAX, _rows(4, 1024, ["s", "e", "m", "Y"])),
    "softmax 8 rows, one segment": (SOFTMAX, _rows(8, 4096, ["s", "e", "m", "Y"])),
}


def _lowered_tiles(program) -> dict:
    """(statement, tensor) -> the element count of the tile each load of the tensor reads: the statement tile's
    axes along the iterators the tensor is indexed by (these programs index by plain iterators)."""
    out: dict = {}
    for op in T.walk_ops(program.kernels[0].body):
        if not isinstance(op, (T.Compute, T.AccUpdate)):
            continue
        sizes = {a.iter: a.size for a in op.tile.axes}
        for expr in T.values_read(op):
            for load in T.nodes_in(expr, T.Load):
                iters = ["j"] if load.tensor == "g" else ["i", "j"]
                out[op.stmt, load.tensor] = math.prod(sizes.get(it, 1) for it in iters)
    return out


@pytest.mark.parametrize("case", CASES)
def test_plan_tiles_are_the_lowered_tiles(case):
    source, block = CASES[case]
    sched = loads(source + block, sizes=SIZES).schedule("probe")
    lowered = _lowered_tiles(lower(sched))
    plan = plan_kernels(sched)[0]
    tiles = [b for b in plan.buffers if b.kind == "tile" and b.source == "global"]
    assert lowered
    for (stmt, tensor), elements in lowered.items():
        held = [b for b in tiles if b.tensor == tensor and stmt in b.stmts]
        assert held, (stmt, tensor)
        assert [math.prod(b.shape) for b in held] == [elements], (stmt, tensor, [b.shape for b in held])


def test_register_working_set_holds_the_rows():
    """16 rows of 4096 bf16 values on 4 warps: the X tile alone is 128 KiB, more than a thread's registers."""
    sched = loads(RMSNORM + _rows(16, 4096, ["r", "ss", "Y"]), sizes=SIZES).schedule("probe")
    plan = plan_kernels(sched)[0]
    assert plan.working_set["register"] >= 2 * 16 * 4096 * 2
