"""The wheel holds every module and data file the code needs.

pyproject.toml maps the package `tdsl` onto the repository root and lists its subpackages by hand (setuptools
cannot discover packages below a root mapped to "."); a folder missing from that list installs without its
modules, and only a non-editable install shows it (CI's editable one cannot).  These tests compare the list,
and a wheel built from a copy of the sources, with the files on disk.  `.ci/wheel-check` then installs such a
wheel and runs `tdsl compile` / `tdsl run` with it from outside the checkout.
"""

import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from catalog import ROOT

PACKAGE_FOLDERS = ("frontend", "compiler", "backends")  # tdsl.frontend, tdsl.compiler, tdsl.backends
ROOT_MODULES = ("__init__.py", "testing.py", "__main__.py")  # tdsl itself, tdsl.testing, python -m tdsl
SHIPPED_SUFFIXES = (".py", ".j2", ".lark")  # modules, Jinja templates, the Lark grammar


def _shipped_files(root) -> set[str]:
    """Every file the wheel must hold, as its path inside the wheel (tdsl/...)."""
    files = {f"tdsl/{name}" for name in ROOT_MODULES}
    for folder in PACKAGE_FOLDERS:
        for path in (root / folder).rglob("*"):
            if path.is_file() and path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
                files.add("tdsl/" + path.relative_to(root).as_posix())
    return files


def _python_packages(root) -> set[str]:
    """Every folder holding Python files under the package folders, as a dotted package name."""
    packages = {"tdsl"}
    for folder in PACKAGE_FOLDERS:
        for module in (root / folder).rglob("*.py"):
            if "__pycache__" not in module.parts:
                packages.add("tdsl." + ".".join(module.parent.relative_to(root).parts))
    return packages


def test_pyproject_lists_every_package_folder():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"tdsl": "."}
    listed, wanted = set(config["packages"]), _python_packages(ROOT)
    assert not wanted - listed, f"add these to [tool.setuptools] packages in pyproject.toml: {sorted(wanted - listed)}"
    assert not listed - wanted, f"pyproject.toml lists packages with no Python files: {sorted(listed - wanted)}"


def _copy_sources(dest):
    """The files a wheel is built from, without build outputs that could mask a missing file."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", *ROOT_MODULES):
        shutil.copy2(ROOT / name, dest / name)
    for folder in PACKAGE_FOLDERS:
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def test_wheel_holds_every_module_template_and_grammar(tmp_path):
    pytest.importorskip("setuptools", reason="building the wheel without network needs setuptools in this venv")
    src, dist = tmp_path / "src", tmp_path / "dist"
    _copy_sources(src)
    # An absolute path: a bare word would be looked up on the package index instead.
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(dist), str(src.resolve())], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dist.glob("tdsl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {n for n in archive.namelist() if n.startswith("tdsl/")}
    wanted = _shipped_files(src)
    assert not wanted - in_wheel, f"missing from the wheel: {sorted(wanted - in_wheel)}"
    assert not in_wheel - wanted, f"in the wheel but not a source file: {sorted(in_wheel - wanted)}"
