"""An output stored in an input's array (`store_in`) overwrites elements that other threads of the program read
in an earlier statement: the lowering puts a barrier between (`Barrier.overwrites`).  Found on the H200 (GPU fuzz,
seed 32, case 77): doitgen in place, each (r, q) row summed across threads and then stored by other threads over
the row another warp had not read yet.  Cases where the reads are the storing lanes' own elements need none."""

from __future__ import annotations

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.lower.build import lower
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import Barrier, Compute, walk_ops

DOITGEN = """\
const NR = 6, NQ = 5, NP = 7
kernel doitgen(A_in: f32[NR, NQ, NP], C4: f32[NP, NP]) -> (A: f32[NR, NQ, NP]) {
  Sm[r, q, p] = sum(s) A_in[r, q, s] * C4[s, p]
  A[r, q, p] = Sm[r, q, p]
}

schedule rows_in_place {
  bind(Sm.r, grid.x)
  reverse_compute_at(A, Sm.q)
  store_in(A, A_in)
}

schedule rows_apart {
  bind(Sm.r, grid.x)
  reverse_compute_at(A, Sm.q)
}
"""

SCALE = """\
const M = 6, N = 9
kernel scale(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 0.5
}

schedule in_place {
  store_in(Y, X)
  bind(Y.i, grid.x)
}
"""


def _barriers(source: str, schedule: str) -> list:
    return [op for k in lower(loads(source).schedule(schedule)).kernels for op in walk_ops(k.body)
            if isinstance(op, Barrier)]


def test_a_row_read_by_some_threads_and_overwritten_by_others_waits_for_every_read():
    barriers = _barriers(DOITGEN, "rows_in_place")
    assert [b.overwrites for b in barriers] == [("A_in",)]


def test_no_barrier_without_an_overwrite():
    assert _barriers(DOITGEN, "rows_apart") == []
    assert _barriers(SCALE, "in_place") == []  # one statement: each lane reads the element it replaces


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
def test_the_ascend_targets_keep_the_barrier_and_match_the_interpreter(target):
    """Both order their vector cores' loads before the stores over them with a barrier of every pipe; in the
    NumPy model, the interpreter's bits on the 950 (it adds a tile's terms in order), within the tolerance on the
    910B (it adds them as a tree of pairs)."""
    from tdsl.compiler.verify.ascend_sim import check_schedule

    program = lower_for(loads(DOITGEN).schedule("rows_in_place"), target)
    assert any(isinstance(op, Barrier) and op.overwrites for k in program.kernels for op in walk_ops(k.body))
    results = check_schedule(loads(DOITGEN), "rows_in_place", target, seed=4)
    assert all(r.ok and (r.max_abs == 0 or target == "ascend-910b") for r in results.values()), results


SHIFTED = """\
const M = 6, N = 40
kernel shift(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = where(j + 1 < N, X[i, j + 1], 0.0) * 0.5
}

schedule in_place {
  store_in(Y, X)
  jo, ji = split(Y.j, 16)
  bind(Y.i, grid.x)
}

schedule apart {
  jo, ji = split(Y.j, 16)
  bind(Y.i, grid.x)
}
"""


def _computes(source: str, schedule: str) -> list:
    return [op for k in lower(loads(source).schedule(schedule)).kernels for op in walk_ops(k.body)
            if isinstance(op, Compute)]


def test_one_statement_reading_what_its_next_lane_overwrites_walks_those_lanes_one_at_a_time():
    """Y[i, j] = X[i, j + 1] stored over X: instance j reads the element instance j + 1 replaces.  As lanes of one
    tile, one warp could store X[i, j + 1] before another warp loaded it.  The loop carries that
    read-before-overwrite dependence, so it runs serially (compiler/analysis/serial_loops.py): the tile is one
    element, the order is the program's, and no barrier is needed inside the statement."""
    assert all(not c.tile.axes for c in _computes(SHIFTED, "in_place"))
    assert [a.iter for c in _computes(SHIFTED, "apart") for a in c.tile.axes] == ["j"]  # out of place: lanes
