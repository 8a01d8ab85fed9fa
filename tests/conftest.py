"""pytest setup for tdsl's tests: the environment generated kernels need, tests/ on sys.path (for the plain
helper modules catalog.py, primitive_helpers.py, ascend950_memory.py and docs_runner.py), and the `golden` fixture with its
`--update-golden` option (docs/testing.md, "Golden files")."""

import os
import sys
import tempfile
from pathlib import Path

# Generated Triton kernels run under the interpreter in tests (no GPU here). The variable is read when
# @triton.jit decorates a function, so it is set before anything imports a generated module.
# AOT compilation for sm_90 runs in a subprocess without it (backends/triton/aot.py).
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# generated modules compiled through tdsl.compile are cached here, not in the user's ~/.cache/tdsl
os.environ.setdefault("TDSL_CACHE_DIR", tempfile.mkdtemp(prefix="tdsl-test-cache-"))

# numpy asks the kernel for huge pages on every array of 4 MiB or more (madvise).  Where the kernel then compacts
# memory on the page fault (transparent_hugepage/defrag = madvise, the default, and this CI machine's), one such
# allocation can stall for a second: the interpreter's instance arrays spent 30 s of system time that way in
# tests/verify/test_ascend_simulate.py alone.  Off for the tests and for the processes they start.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
try:  # numpy read the variable when it was imported, which a pytest plugin may have done before us
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _set_madvise_hugepage
_set_madvise_hugepage(os.environ["NUMPY_MADVISE_HUGEPAGE"] != "0")

# Test files in every subfolder import the helper modules of tests/ by their plain names (`from catalog import
# EXPECTED`).  pytest's default import mode (prepend) already puts this folder first on sys.path when it loads
# this conftest; saying it here keeps that true under other import modes too.
TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import difflib  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

from catalog import EXAMPLES, ROOT  # noqa: E402,F401  (ROOT and EXAMPLES: also for `from conftest import ...`)

GOLDEN = TESTS / "golden"

# The golden files are text; some are Python modules (generated sources), which pytest must not collect.
collect_ignore = ["golden"]


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden", action="store_true", default=False,
        help="write the text each `golden` check receives into its file under tests/golden/ instead of comparing",
    )


@pytest.fixture
def examples_dir():
    return EXAMPLES


# ---------------------------------------------------------------- golden files named by the test


class Golden:
    """Compares text with the golden file of the running test; `golden(text)` in a test.

    The file is tests/golden/<test file stem>/<test function>.txt, or, for a parametrized test,
    tests/golden/<test file stem>/<test function>/<parameter id>.txt (characters other than letters, digits,
    `_`, `-` and `.` in the id become `_`).  `golden(text, suffix=".py")` names a generated Python module.
    A difference fails with a unified diff; `pytest --update-golden` writes the text instead (review the
    change with `git diff tests/golden`).  One test checks one file: a second check in the same test fails.
    """

    def __init__(self, request):
        node = request.node
        self.nodeid = node.nodeid
        self.base = GOLDEN / Path(str(node.path)).stem / (getattr(node, "originalname", None) or node.name)
        callspec = getattr(node, "callspec", None)
        self.param = _sanitized(callspec.id) if callspec is not None else None
        self.update = request.config.getoption("--update-golden")
        self.checked = None

    def path(self, suffix: str = ".txt") -> Path:
        if self.param is None:
            return self.base.with_name(self.base.name + suffix)
        return self.base / f"{self.param}{suffix}"

    def __call__(self, text: str, suffix: str = ".txt") -> None:
        __tracebackhide__ = True  # a failure shows the test's line and the diff, not this method
        path = self.path(suffix)
        if self.checked is not None:
            raise AssertionError(f"{self.nodeid}: the golden file {self.checked} is already checked; one per test")
        self.checked = path
        shown = path.relative_to(ROOT)
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            raise AssertionError(f"missing golden file {shown}; run `pytest --update-golden '{self.nodeid}'` to "
                                 f"write it")
        want = path.read_text(encoding="utf-8")
        if want != text:
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), str(shown), "actual",
                                                n=2))
            if len(diff) > 12000:
                diff = diff[:12000] + f"\n... ({len(diff) - 12000} more characters of diff)\n"
            raise AssertionError(f"the text differs from the golden file {shown} (run pytest with --update-golden "
                                 f"to accept it):\n{diff}")


def _sanitized(param_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", param_id)


@pytest.fixture
def golden(request) -> Golden:
    """The golden file of this test (see `Golden`)."""
    return Golden(request)
