"""The printers: one package per backend, each turning a prepared tile program into module text.

A backend reads facts from the tile program (compiler/lower/tileir.py) and decides none of them; the passes
that prepare a program for it are listed in compiler/lower/pipeline.py.
"""

from __future__ import annotations

import importlib

# backend (a key of compiler.lower.pipeline.BACKENDS' values) -> the package whose `emit_module` prints it
PACKAGES = {
    "triton": "tdsl.backends.triton",
    "tilelang": "tdsl.backends.tilelang",
    "ascend-950": "tdsl.backends.ascend950",
    "ascend-910b": "tdsl.backends.ascend910b",
}


def emit_module(backend: str, program, **common) -> str:
    """The module text `backend` prints for a prepared tile program."""
    return importlib.import_module(PACKAGES[backend]).emit_module(program, **common)
