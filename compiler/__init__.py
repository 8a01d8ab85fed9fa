"""The compiler, in the order a program flows through it (docs/architecture.md):

    model/ -> schedule/ -> legality/ -> analysis/ -> lower/ -> (backends/)       reference/  verify/  driver/

`errors.py` holds every error class and `targets/` the hardware descriptions; both are read by every stage.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path

# Module paths of tdsl 0.1 (a flat compiler/) -> where the module lives now.  Code written against 0.1
# (`from tdsl.compiler.interpreter import interpret`) keeps working: the old name is the same module object.
# tdsl itself imports only the new paths (tests/driver/test_packaging.py checks it).
MOVED = {
    "dependences": "model.dependences",
    "dtypes": "model.dtypes",
    "functions": "model.functions",
    "isl_code": "model.isl_code",
    "tree": "schedule.tree",
    "tree_view": "schedule.tree_view",
    "primitives": "schedule.primitives",
    "grid": "legality.grids",
    "fusion_report": "legality.fusion_report",
    "memory": "analysis.buffer_plan",
    "cost": "analysis.cost",
    "placement": "analysis.placement",
    "tile": "lower.build",
    "tileir": "lower.tileir",
    "tileir_text": "lower.tileir_text",
    "lane_masks": "lower.lane_masks",
    "pipeline": "lower.pipeline",
    "passes": "lower.passes",
    "interpreter": "reference.interpreter",
    "codegen": "driver.generate",
    "api": "driver.api",
    "cli": "driver.cli",
    "testing": "driver.testing",
}


def moved_to(fullname: str):
    """The current dotted name of a 0.1 module path under tdsl.compiler, or None."""
    prefix = __name__ + "."
    if not fullname.startswith(prefix):
        return None
    rest = fullname[len(prefix):]
    for old, new in MOVED.items():
        if rest == old or rest.startswith(old + "."):
            return prefix + new + rest[len(old):]
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a 0.1 module path as the module that now holds it."""

    def find_spec(self, fullname, path=None, target=None):
        if moved_to(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(moved_to(spec.name))
        spec.loader_state = module.__spec__  # the import system is about to give the module the old name's spec
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # it ran when imported under its current name

if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())


def answers_for_old_module(package: str, module: str):
    """A `__getattr__` for a package that took the name of a 0.1 module (`tdsl.compiler.model` was the module
    now called `model/program.py`): the old module's names stay reachable from the package.  A submodule's
    name is left to the import system, which asks here first."""
    here = Path(sys.modules[package].__file__).parent

    def __getattr__(name):
        if name.startswith("__") or (here / f"{name}.py").exists() or (here / name).is_dir():
            raise AttributeError(name)
        try:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
