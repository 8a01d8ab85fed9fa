"""Emit one lowered tile program with several backends (for the purity oracle)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tdsl.compiler.errors import BackendError
from tdsl.compiler.analysis.buffer_plan import CapacityError


@dataclass
class Emitted:
    program: object
    texts: dict = field(default_factory=dict)


def emit_all(sched, backends, program=None) -> Emitted:
    """Each backend's text of one tile program (`program`, or the schedule's lowered for each backend)."""
    from tdsl.compiler.lower.pipeline import prepare
    from tdsl.compiler.lower.build import lower

    program = program if program is not None else lower(sched)
    out = Emitted(program)
    for name in backends:
        try:
            out.texts[name] = _emit(name, prepare(program, sched, name))
        except (BackendError, CapacityError):
            continue
    return out


def _emit(name: str, program) -> str:
    from tdsl.backends import emit_module

    return emit_module(name, program)
