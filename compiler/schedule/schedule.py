"""The scheduling API: a `Schedule` applies primitives one by one, checks each, and records a replayable trace.

    s = tdsl.load("examples/gemm_silu.tdsl").schedule()
    io, ii = s.split("C.i", 64)
    s.reorder("C", "io", "jo", "ko", "ii", "jj", "kk")
    s.reverse_compute_at("Y", "C.jo")
    print(s.trace)          # the same steps in .tdsl schedule syntax
    s.tree                  # the scheduled tree (see compiler/schedule/tree.py)
    s.can("bind", "C.k", "grid.x")   # False: would the step be accepted?  (nothing is applied)

A step that raises leaves the schedule as it was before the step.  The primitive methods are generated from the
declarations in compiler/schedule/primitives/ (`@primitive`, primitives/registry.py): `help(Schedule.split)` shows its
contract.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Optional

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.legality.checks import check_invariants
from tdsl.compiler.errors import LegalityError, ScheduleError, StepError
from tdsl.compiler.model.program import KernelModel
from tdsl.compiler.schedule.primitives import registry
from tdsl.compiler.schedule.primitives.common import State, check_buffers_in_place
from tdsl.compiler.schedule.primitives.registry import Primitive, primitives
from tdsl.compiler.schedule.tree import initial_tree

# The primitives are declared in their own modules (`@primitive` in compiler/schedule/primitives/*.py); the table, the
# `Schedule` methods, the usage texts and the trace form all come from those declarations (primitives/registry.py).


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
            if step.results and primitives()[step.primitive].new_loops:
                kwargs["names"] = step.results
            getattr(schedule, step.primitive)(*step.args, **kwargs)
        return schedule


def _arg_text(value) -> str:
    if isinstance(value, ast.LoopRef):
        return value.text
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_arg_text(v) for v in value) + "]"
    if isinstance(value, bool):  # as a schedule block writes it
        return "true" if value else "false"
    return str(value)


class Schedule:
    """A kernel's schedule: the primitives applied so far (`trace`) and what they built (`tree`, `model`).

    Each primitive is a method (`s.split("C.i", 64)`, `help(Schedule.split)` for its contract), generated from
    its declaration in compiler/schedule/primitives/; `s.can("split", "C.i", 64)` asks whether a step would be accepted
    without applying it.
    """

    def __init__(self, model: KernelModel, name: Optional[str] = None, program=None):
        self.name = name
        self.original = model
        self.state = State(model, initial_tree(model), compute_dependences(model))
        self.trace = Trace()
        self.program = program  # the `Program` it was made from (`compile` generates from its source)

    def compile(self, target: str = "nvidia", backend: Optional[str] = None):
        """This schedule compiled for `target`: a `Kernel` (compiler/driver/kernels.py) -- callable, a torch custom
        op, with the module text in `.text`."""
        if self.program is None:
            raise TdslError("compile needs the program the schedule was made from: use tdsl.load(path).schedule()")
        from tdsl.compiler.driver.kernels import compile_schedule  # the driver, at the end of the flow

        return compile_schedule(self.program, self, target, backend, self.name or "")

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

    def copy(self) -> "Schedule":
        """A schedule with the same steps, which primitives can change without touching this one."""
        other = copy.copy(self)
        other.state = self.state.copy()
        other.trace = Trace(list(self.trace.steps))
        return other

    # ------------------------------------------------------------ primitives

    def can(self, primitive: str, *args, **kwargs) -> bool:
        """Would `getattr(self, primitive)(*args, **kwargs)` be accepted?  The step runs on a trial state, through
        the same checks as the method, and nothing is committed: the tree and the trace stay as they are.

        False when the step raises a tdsl error (a `ScheduleError` for a misuse such as an unknown loop, a
        `LegalityError` when it would change the result).  A name that is no primitive (ValueError), arguments
        that do not fit its signature (TypeError) and internal errors (KeyError, ...) are raised: they are bugs
        of the caller or of tdsl, not answers.
        """
        table = primitives()
        if not isinstance(primitive, str):
            raise TypeError(f"can: name the primitive with a string, such as 'split'; got {primitive!r}")
        if primitive not in table:
            raise ValueError(f"{primitive}: {registry.unknown(primitive)}")
        prim = table[primitive]
        values = prim.bind(args, kwargs)
        try:
            self._trial(prim, values)
        except TdslError:
            return False
        return True

    def _apply(self, primitive: Primitive, values: dict):
        """What every primitive method runs (`values`: its arguments by name): the step on a trial state, then,
        if every check passed, the trial state and the trace step are committed."""
        trial, result, args, kwargs = self._trial(primitive, values)
        self.state = trial
        results = tuple(result) if isinstance(result, (list, tuple)) else ((result,) if isinstance(result, str) else ())
        self.trace.steps.append(Step(primitive.name, tuple(args), dict(kwargs), results))
        return result

    def _trial(self, primitive: Primitive, values: dict):
        """The step applied to a copy of the state and checked; this schedule is not changed."""
        args, kwargs = primitive.call(values)
        name = primitive.name
        trial = self.state.copy()
        call_kwargs = dict(kwargs)
        names = values.get("names")
        if names is not None:
            call_kwargs["names"] = _names(name, names)
        try:
            result = primitive.fn(trial, *args, **call_kwargs)
            check_buffers_in_place(trial, name)  # before the buffer checks, which assume it
            check_invariants(trial.model, trial.deps, trial.tree, name)
        except LegalityError as err:
            # What the rejected step would run: for a test to execute it in the interpreter (tdsl.testing).
            model = getattr(err, "rejected_model", None) or trial.model
            err.rejected = State(model, trial.tree, trial.deps)
            raise
        return trial, result, args, kwargs


def _install(name: str, primitive: Optional[Primitive]) -> None:
    """Keep `Schedule.<name>` the method of the registered primitive `name` (None: it was removed)."""
    current = Schedule.__dict__.get(name)
    if current is not None and not hasattr(current, "__primitive__"):
        raise ValueError(f"primitive {name} would replace Schedule.{name}; choose another name")
    if primitive is None:
        if current is not None:
            delattr(Schedule, name)
        return
    method = primitive.method()
    method.__module__ = __name__
    setattr(Schedule, name, method)


registry.on_change(_install)


def _names(primitive: str, names) -> tuple:
    """`names=` of the Python API: one name or a sequence of them."""
    if isinstance(names, str):
        return (names,)
    if isinstance(names, (list, tuple)):
        return tuple(names)
    raise ScheduleError(primitive, f"names= takes a name or a list of names, got {names!r}")


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
    table = primitives()
    if step.primitive not in table:
        raise ScheduleError(step.primitive, registry.unknown(step.primitive))
    primitive = table[step.primitive]
    for a in step.args:
        if isinstance(a.value, list):  # the language has lists, but no primitive's argument is one
            raise ScheduleError(primitive.name, f"{_arg_text(a.value)} is a list, and no argument of "
                                                f"{primitive.name} is one ({primitive.usage})")
    args = [_plain(a.value) for a in step.args if a.keyword is None]
    kwargs = {a.keyword: _plain(a.value) for a in step.args if a.keyword is not None}
    for key in kwargs:
        if key not in primitive.keywords:
            raise ScheduleError(primitive.name, f"unknown keyword '{key}' ({primitive.usage})")
    names = [n.name for n in step.results] or None
    method = getattr(schedule, step.primitive)
    if not primitive.new_loops and names:
        raise ScheduleError(step.primitive, "returns no loops; remove the names before '='")
    if names:
        kwargs["names"] = names
    try:
        return method(*args, **kwargs)
    except TypeError:
        raise ScheduleError(step.primitive, f"wrong arguments; expected {primitive.usage}") from None


def _plain(value):
    """AST argument values -> what the Python API takes (loop refs stay LoopRef; bare names are strings)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, ast.LoopRef) and value.stmt is None:
        return value.loop
    return value
