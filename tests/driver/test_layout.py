"""The package layout follows the flow (docs/architecture.md), and the module paths of tdsl 0.1 still import.

tdsl 0.1 had a flat compiler/ (`tdsl.compiler.interpreter`, `tdsl.compiler.codegen`, ...).  Code written
against it keeps working: `compiler/__init__.py` maps each old path to the module that now holds it (the same
module object), and the packages that took an old module's name (`model`, `schedule`, `legality`) answer for
its names.  tdsl itself must use only the current paths, or the old ones could never be dropped.
"""

import importlib
import re

import pytest

from catalog import ROOT

from tdsl.compiler import MOVED

STAGES = ("model", "schedule", "legality", "analysis", "lower", "reference", "driver")


def test_compiler_has_one_folder_per_stage():
    for stage in STAGES:
        assert (ROOT / "compiler" / stage / "__init__.py").is_file(), stage
    loose = sorted(p.name for p in (ROOT / "compiler").glob("*.py"))
    assert loose == ["__init__.py", "errors.py"], f"modules outside a stage folder: {loose}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_module_that_holds_it_now(old):
    before = importlib.import_module(f"tdsl.compiler.{old}")
    now = importlib.import_module(f"tdsl.compiler.{MOVED[old]}")
    assert before is now
    assert now.__spec__.name == f"tdsl.compiler.{MOVED[old]}"  # aliasing left the module's own spec alone


def test_names_of_old_modules_that_became_packages_still_import():
    from tdsl.compiler.legality import check_dependences
    from tdsl.compiler.model import KernelModel
    from tdsl.compiler.primitives.compute_at import reverse_compute_at
    from tdsl.compiler.schedule import Schedule

    assert Schedule.__module__ == "tdsl.compiler.schedule.schedule"
    assert KernelModel.__module__ == "tdsl.compiler.model.program"
    assert check_dependences.__module__ == "tdsl.compiler.legality.checks"
    assert reverse_compute_at.__module__ == "tdsl.compiler.schedule.primitives.compute_at"
    with pytest.raises(ImportError):
        from tdsl.compiler.model import no_such_name  # noqa: F401


def _old_paths_used(text: str) -> list[str]:
    found = []
    for old in MOVED:
        dotted = re.escape(f"tdsl.compiler.{old}")
        if re.search(rf"\b{dotted}\b(?!\.)", text) or re.search(rf"from tdsl\.compiler import [^\n]*\b{old}\b", text):
            found.append(old)
    return found


def test_tdsl_imports_only_current_paths():
    offenders = {}
    for folder in ("frontend", "compiler", "backends", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "test_layout.py" or path == ROOT / "compiler" / "__init__.py" or "__pycache__" in path.parts:
                continue
            if used := _old_paths_used(path.read_text()):
                offenders[str(path.relative_to(ROOT))] = used
    assert not offenders, offenders


def test_the_gpu_benchmarks_import_compare_without_tdsl(tmp_path):
    # benchmarks/gpu runs on a machine with torch and numpy only: `compiler.verify` from the repository root
    import subprocess
    import sys

    code = "import sys; sys.path.insert(0, sys.argv[1]); from compiler.verify import compare; print(compare.__module__)"
    done = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "compiler.verify.compare"
