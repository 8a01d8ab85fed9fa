"""The module text every backend writes: its template (`templates/module.py.j2` of the backend's package)
filled with the printed kernels and what every template shows (source, schedule, statements, renamed names)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from tdsl.backends.common.names import ModuleNames
from tdsl.compiler.lower import tileir as T


def module_text(templates: Path, program: T.TileProgram, names: ModuleNames, kernels: list, source: str = "",
                schedule_name: str = "", statements=(), signature: str = "", **extra) -> str:
    """The rendered module; `extra` holds what only this backend's template reads."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), keep_trailing_newline=True)
    return env.get_template("module.py.j2").render(
        source=source,
        schedule_name=schedule_name,
        signature=signature or program.name,
        statements=list(statements),
        schedule_lines=[line for line in program.schedule.splitlines() if line.strip()],
        kernels=kernels,
        renamed=names.renamed_code(),
        in_place=_in_place(program),
        **extra,
    )


def _in_place(program: T.TileProgram) -> str:
    """The outputs stored in an input (`store_in`), program name -> the input's, as code ("" when none): what a
    caller of the launcher must not pass, and gets back as the updated input."""
    pairs = {t.name: t.stored_in for t in program.outputs if t.stored_in}
    return repr(pairs) if pairs else ""


def dynamic_sizes(program: T.TileProgram, names: ModuleNames) -> list[str]:
    """The identifiers of the run-time sizes (bound from the input shapes by the launcher)."""
    return [names.var(n) for n, v in program.sizes.items() if v is None]


def launcher_fields(program: T.TileProgram, names: ModuleNames, launcher_lines: list[str]) -> dict:
    """What the NVIDIA templates' torch launcher shows: its name, parameters, results, dtype table and body."""
    from tdsl.backends.common.dtypes import TORCH

    return dict(
        torch_dtypes="{" + ", ".join(f'"{k}": {v}' for k, v in TORCH.items()) + "}",
        entry=names.entry,
        inputs=[names.tensor(t.name) for t in program.inputs],
        outputs=[names.tensor(t.name) for t in program.outputs],
        returns=_returns(program, names),
        launcher=launcher_lines,
    )


def _returns(program: T.TileProgram, names: ModuleNames) -> str:
    """What the launcher's docstring says it returns: `C`, `C (the input C_in, updated in place)`, `A, B as a
    tuple`."""
    outs = [names.tensor(t.name) + (f" (the input {names.tensor(t.stored_in)}, updated in place)" if t.stored_in
                                     else "") for t in program.outputs]
    return ", ".join(outs) + (" as a tuple" if len(outs) > 1 else "")
