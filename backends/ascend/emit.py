"""Module text for the Ascend targets (templates/*.j2)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from tdsl.compiler import tileir as T

from ..names import ModuleNames

TEMPLATES = Path(__file__).parent / "templates"


def env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True)


def emit_950(program: T.TileProgram, source="", schedule_name="", statements=(), signature="") -> str:
    from .emit950 import Ascend950Printer

    names = ModuleNames(program)
    kernels = [Ascend950Printer(program, k, names).render() for k in program.kernels]
    return env().get_template("ascend950.py.j2").render(
        source=source, schedule_name=schedule_name, signature=signature or program.name,
        statements=list(statements), schedule_lines=[l for l in program.schedule.splitlines() if l.strip()],
        kernels=kernels, dynamic=[names.var(n) for n, v in program.sizes.items() if v is None],
        renamed=names.renamed_code())


def emit_910b(program: T.TileProgram, source="", schedule_name="", statements=(), signature="") -> str:
    from .emit910b import Ascend910BPrinter

    names = ModuleNames(program)
    kernels = [Ascend910BPrinter(program, k, names).render() for k in program.kernels]
    return env().get_template("ascend910b.py.j2").render(
        source=source, schedule_name=schedule_name, signature=signature or program.name,
        statements=list(statements), schedule_lines=[l for l in program.schedule.splitlines() if l.strip()],
        kernels=kernels, workspaces=sorted({w for k in kernels for w in k.get("workspaces", [])}),
        e4m3=sorted({n for k in kernels for n in k.get("e4m3", [])}), renamed=names.renamed_code())
