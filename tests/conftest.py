import os
from pathlib import Path

# Generated Triton kernels run under the interpreter in tests (no GPU here). The variable is read when
# @triton.jit decorates a function, so it is set before anything imports a generated module.
# AOT compilation for sm_90 runs in a subprocess without it (backends/triton/aot.py).
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture
def examples_dir():
    return EXAMPLES
