"""Python files loaded by their path on the GPU machine: generated modules, and compiler/tune/measure.py (its
timing, `graph_us` and `time_call`) without the tdsl package, whose __init__ imports the search and islpy, which
that machine does not have."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_module(path: Path, name: str | None = None):
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def measure():
    """compiler/tune/measure.py, loaded once."""
    return sys.modules.get("tdsl_tune_measure") or load_module(ROOT / "compiler" / "tune" / "measure.py",
                                                               "tdsl_tune_measure")
