"""The scheduling API across primitives (compiler/schedule/schedule.py): the trace prints and replays, misuse of any
primitive is a ScheduleError (exit code 2), every rule is a LegalityError (exit code 1).  Each primitive's
own tests are in schedule/primitives/test_<primitive>.py."""

import pytest

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

from primitive_helpers import STENCIL, sched, tiled


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


def test_argument_errors_are_schedule_errors():
    s = sched(STENCIL)
    with pytest.raises(ScheduleError, match=r"split makes two loops \(outer, inner\); name two, not 3"):
        s.split("T.i", 4, names=("a", "b", "c"))
    with pytest.raises(ScheduleError, match=r"loop Y.i does not enclose statement T"):
        s.reorder("T.i", "Y.i")
    with pytest.raises(ScheduleError, match=r"name at least two loops"):
        s.reorder("T", "i")
    with pytest.raises(ScheduleError, match=r"statement T has no loop 'q'"):  # the unknown loop first (probe S)
        s.reorder("T", "q")
    with pytest.raises(ScheduleError, match=r"tile: a loop is named twice"):  # not "no loop 'i'" after one split
        sched().tile("C.i", "C.i", 4, 4)
    s.compute_at("T", at="Y.i")
    with pytest.raises(ScheduleError, match=r"tile the loops of one statement"):
        sched().tile("C.i", "Y.j", 4, 4)
