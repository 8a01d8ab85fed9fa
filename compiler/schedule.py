"""The scheduling API: a `Schedule` applies primitives one by one, checks each, and records a replayable trace.

    s = tdsl.load("examples/gemm_silu.tdsl").schedule()
    io, ii = s.split("C.i", 64)
    s.reorder("C", "io", "jo", "ko", "ii", "jj", "kk")
    s.reverse_compute_at("Y", "C.jo")
    print(s.trace)          # the same steps in .tdsl schedule syntax
    s.tree                  # the scheduled tree (see compiler/tree.py)

A step that raises leaves the schedule as it was before the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from tdsl.frontend import ast

from .dependences import compute_dependences
from .legality import check_invariants
from .errors import LegalityError, ScheduleError, StepError
from .model import KernelModel
from .primitives.bind import bind
from .primitives.cache import cache_read, cache_write
from .primitives.common import State, check_buffers_in_place
from .primitives.compute_at import compute_at, reverse_compute_at
from .primitives.compute_inline import compute_inline
from .primitives.fuse import fuse
from .primitives.launch import launch
from .primitives.pipeline import pipeline
from .primitives.reorder import reorder
from .primitives.reverse import reverse
from .primitives.rfactor import rfactor
from .primitives.split import split
from .primitives.tile import tile
from .tree import initial_tree

# primitive name -> (function, positional parameter names, keyword parameter names, takes result names)
PRIMITIVES = {
    "split": (split, ("loop", "factor"), ("factor",), True),
    "tile": (tile, None, (), True),
    "reorder": (reorder, None, (), False),
    "fuse": (fuse, ("first", "second"), (), True),
    "reverse": (reverse, ("loop",), (), False),
    "compute_at": (compute_at, ("stmt", "loop"), ("at",), False),
    "reverse_compute_at": (reverse_compute_at, ("stmt", "loop"), ("at",), False),
    "compute_inline": (compute_inline, ("stmt",), ("round",), False),
    "cache_read": (cache_read, ("tensor", "scope", "at"), ("at", "scope", "dtype"), False),
    "cache_write": (cache_write, ("tensor", "scope", "at"), ("at", "scope", "dtype"), False),
    "pipeline": (pipeline, ("loop", "stages"), ("stages",), False),
    "bind": (bind, ("loop", "axis"), ("axis",), False),
    "launch": (launch, ("stmt", "warps"), ("warps",), False),
    "rfactor": (rfactor, ("loop",), ("segments", "dtype"), False),
}


@dataclass
class Step:
    """One recorded primitive call, printable as a .tdsl schedule line."""

    primitive: str
    args: tuple
    kwargs: dict
    results: tuple = ()

    def __str__(self) -> str:
        parts = [_arg_text(a) for a in self.args] + [f"{k}={_arg_text(v)}" for k, v in self.kwargs.items()]
        call = f"{self.primitive}({', '.join(parts)})"
        return f"{', '.join(self.results)} = {call}" if self.results else call


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def replay(self, schedule: "Schedule") -> "Schedule":
        for step in self.steps:
            kwargs = dict(step.kwargs)
            if step.results and PRIMITIVES[step.primitive][3]:
                kwargs["names"] = step.results
            getattr(schedule, step.primitive)(*step.args, **kwargs)
        return schedule


def _arg_text(value) -> str:
    if isinstance(value, ast.LoopRef):
        return f"{value.stmt}.{value.loop}" if value.stmt else value.loop
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_arg_text(v) for v in value) + "]"
    return str(value)


class Schedule:
    def __init__(self, model: KernelModel, name: Optional[str] = None):
        self.name = name
        self.original = model
        self.state = State(model, initial_tree(model), compute_dependences(model))
        self.trace = Trace()

    # ------------------------------------------------------------ what the schedule has built

    @property
    def model(self) -> KernelModel:
        return self.state.model

    @property
    def tree(self):
        return self.state.tree

    @property
    def deps(self):
        return self.state.deps

    def time_map(self):
        """isl union map: statement instance -> time vector under this schedule."""
        return self.state.tree.union_map(self.state.model)

    # ------------------------------------------------------------ primitives

    def _apply(self, primitive: str, *args, names=None, **kwargs):
        fn = PRIMITIVES[primitive][0]
        trial = self.state.copy()
        call_kwargs = dict(kwargs)
        if names is not None:
            call_kwargs["names"] = _names(primitive, names)
        try:
            result = fn(trial, *args, **call_kwargs)
            check_buffers_in_place(trial, primitive)  # before the buffer checks, which assume it
            check_invariants(trial.model, trial.deps, trial.tree, primitive)
        except LegalityError as err:
            # What the rejected step would run: for a test to execute it in the interpreter (tdsl.testing).
            model = getattr(err, "rejected_model", None) or trial.model
            err.rejected = State(model, trial.tree, trial.deps)
            raise
        self.state = trial
        results = tuple(result) if isinstance(result, (list, tuple)) else ((result,) if isinstance(result, str) else ())
        self.trace.steps.append(Step(primitive, tuple(args), dict(kwargs), results))
        return result

    def split(self, loop, factor, names=None):
        return self._apply("split", loop, factor, names=names)

    def tile(self, *args, names=None):
        return self._apply("tile", *args, names=names)

    def reorder(self, *loops):
        return self._apply("reorder", *loops)

    def fuse(self, first, second, names=None):
        return self._apply("fuse", first, second, names=names)

    def reverse(self, loop):
        return self._apply("reverse", loop)

    def compute_at(self, stmt, loop=None, at=None):
        return self._apply("compute_at", stmt, _target(loop, at, "compute_at"))

    def reverse_compute_at(self, stmt, loop=None, at=None):
        return self._apply("reverse_compute_at", stmt, _target(loop, at, "reverse_compute_at"))

    def compute_inline(self, stmt, round=True):
        if round is True:
            return self._apply("compute_inline", stmt)
        return self._apply("compute_inline", stmt, round=round)

    def cache_read(self, tensor, scope, at=None, dtype=None):
        if dtype is None:
            return self._apply("cache_read", tensor, scope, at=at)
        return self._apply("cache_read", tensor, scope, at=at, dtype=dtype)

    def cache_write(self, tensor, scope, at=None, dtype=None):
        if dtype is None:
            return self._apply("cache_write", tensor, scope, at=at)
        return self._apply("cache_write", tensor, scope, at=at, dtype=dtype)

    def rfactor(self, loop, segments=None, dtype=None):
        kwargs = {k: v for k, v in (("segments", segments), ("dtype", dtype)) if v is not None}
        return self._apply("rfactor", loop, **kwargs)

    def pipeline(self, loop, stages=2):
        return self._apply("pipeline", loop, stages=stages)

    def bind(self, loop, axis):
        return self._apply("bind", loop, axis)

    def launch(self, stmt, warps=4):
        return self._apply("launch", stmt, warps=warps)


def _names(primitive: str, names) -> tuple:
    """`names=` of the Python API: one name or a sequence of them."""
    if isinstance(names, str):
        return (names,)
    if isinstance(names, (list, tuple)):
        return tuple(names)
    raise ScheduleError(primitive, f"names= takes a name or a list of names, got {names!r}")


def _target(loop, at, primitive):
    if (loop is None) == (at is None):
        raise ScheduleError(primitive, f"name the target loop once: {primitive}(STMT, TARGET.LOOP)")
    return loop if loop is not None else at


# ---------------------------------------------------------------- .tdsl schedule blocks


def apply_block(schedule: Schedule, block: ast.ScheduleBlock, source: str = "", filename: str = "<string>") -> Schedule:
    """Run every step of a `schedule NAME { ... }` block; errors point at the failing step."""
    for step in block.steps:
        try:
            apply_step(schedule, step)
        except StepError:
            raise
        except ScheduleError as err:
            raise StepError(err, step.span, source, filename) from None
        except Exception as err:  # noqa: BLE001 - user errors only reach here as TdslError subclasses
            from tdsl.frontend.diagnostics import TdslError

            if isinstance(err, TdslError):
                raise StepError(err, step.span, source, filename) from None
            raise
    return schedule


def apply_step(schedule: Schedule, step: ast.ScheduleStep):
    if step.primitive not in PRIMITIVES:
        import difflib

        close = difflib.get_close_matches(step.primitive, PRIMITIVES, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ScheduleError(step.primitive, f"unknown primitive{hint}; primitives: {', '.join(PRIMITIVES)}")
    args = [_plain(a.value) for a in step.args if a.keyword is None]
    kwargs = {a.keyword: _plain(a.value) for a in step.args if a.keyword is not None}
    _check_keywords(step.primitive, kwargs)
    names = [n.name for n in step.results] or None
    method = getattr(schedule, step.primitive)
    if not PRIMITIVES[step.primitive][3] and names:
        raise ScheduleError(step.primitive, "returns no loops; remove the names before '='")
    if step.primitive == "split" and "factor" in kwargs:
        args.append(kwargs.pop("factor"))
    if names:
        kwargs["names"] = names
    try:
        return method(*args, **kwargs)
    except TypeError:
        raise ScheduleError(step.primitive, f"wrong arguments; expected {_signature(step.primitive)}") from None


def _check_keywords(primitive: str, kwargs: dict) -> None:
    allowed = PRIMITIVES[primitive][2]
    for key in kwargs:
        if key not in allowed:
            raise ScheduleError(primitive, f"unknown keyword '{key}' ({_signature(primitive)})")


def _signature(primitive: str) -> str:
    return {
        "split": "split(STMT.LOOP, FACTOR)",
        "tile": "tile(STMT.L1, ..., STMT.Ln, F1, ..., Fn)",
        "reorder": "reorder(STMT, L1, L2, ...)",
        "fuse": "fuse(STMT.L1, STMT.L2)",
        "reverse": "reverse(STMT.LOOP)",
        "compute_at": "compute_at(STMT, TARGET.LOOP)",
        "reverse_compute_at": "reverse_compute_at(STMT, TARGET.LOOP)",
        "compute_inline": "compute_inline(STMT[, round=false])",
        "cache_read": "cache_read(TENSOR, SCOPE, at=STMT.LOOP[, dtype=DTYPE])",
        "cache_write": "cache_write(TENSOR, SCOPE, at=STMT.LOOP[, dtype=DTYPE])",
        "pipeline": "pipeline(STMT.LOOP, stages=N)",
        "bind": "bind(STMT.LOOP, grid.x)",
        "launch": "launch(STMT, warps=N)",
        "rfactor": "rfactor(STMT.LOOP[, segments=N][, dtype=DTYPE])",
    }[primitive]


def _plain(value):
    """AST argument values -> what the Python API takes (loop refs stay LoopRef; bare names are strings)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, ast.LoopRef) and value.stmt is None:
        return value.loop
    return value
