"""Emit one lowered tile program with several backends (for the purity oracle)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tdsl.compiler.errors import BackendError


@dataclass
class Emitted:
    program: object
    texts: dict = field(default_factory=dict)


def emit_all(sched, backends, program=None) -> Emitted:
    from tdsl.compiler.memory import plan
    from tdsl.compiler.tile import lower

    program = program if program is not None else lower(sched)
    buffers = plan(sched)
    out = Emitted(program)
    for name in backends:
        try:
            out.texts[name] = _emit(name, program, buffers)
        except BackendError:
            continue
    return out


def _emit(name: str, program, buffers) -> str:
    if name == "triton":
        from tdsl.backends.triton import emit_module

        return emit_module(program)
    if name == "tilelang":
        from tdsl.backends.tilelang import emit_module

        return emit_module(program, buffers=buffers)
    from tdsl.backends.ascend import emit_module

    return emit_module(program, target=name, buffers=buffers)
