"""Golden text files for generated sources: tests/golden/<backend>/<example>__<schedule>.py.

`TDSL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_tilelang_backend.py tests/test_ascend_backend.py`
rewrites them; otherwise a difference fails with a unified diff.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def check_golden(kind: str, name: str, text: str) -> None:
    path = GOLDEN / kind / f"{name}.py"
    if os.environ.get("TDSL_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"missing golden file {path}; run the tests with TDSL_UPDATE_GOLDEN=1 to write it")
    want = path.read_text()
    if want != text:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True), str(path), "generated", n=2))
        raise AssertionError(f"generated source differs from {path} (TDSL_UPDATE_GOLDEN=1 to accept):\n{diff[:6000]}")
