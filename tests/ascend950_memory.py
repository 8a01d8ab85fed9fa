"""The check the tests of values passed through memory on the Ascend 950 share (recurrences, `for` blocks,
values read back): the module runs in the NumPy model against the interpreter, the model refuses it once its
barriers are taken out, and TileLang lowers it with `asc_sync()` (the barrier of every pipe) inside each kernel
that passes values through memory.

A plain helper module (tests/ is on sys.path, see conftest.py), not a test module.
"""

from __future__ import annotations

import numpy as np
import pytest

from tdsl.compiler.driver.generate import generate, load_module
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs
from tdsl.compiler.verify.ascend_sim import SimulationError, simulate

BARRIER = 'T.ascend_pipe_barrier("PIPE_ALL")'


def check_950_orders_memory(prog, schedule, exact: tuple, tmp_path, seed: int = 3) -> str:
    """Generate `schedule` for the 950; `exact`: the outputs that must match the interpreter bit for bit (the
    others within compare_outputs' tolerance).  Returns the module's text."""
    sched = prog.schedule(schedule)
    text = generate(prog, schedule, target="ascend-950")
    assert BARRIER in text
    inputs = random_inputs(sched.model, seed=seed)
    want = interpret(sched.model, sched.time_map(), inputs)
    got = simulate(text, inputs, "ascend-950").tensors
    assert all(np.array_equal(got[name], want[name]) for name in exact)
    assert all(c.ok for c in compare_outputs(sched.model, want, got).values())
    with pytest.raises(SimulationError, match=r"which it changed, without T.ascend_pipe_barrier\(\"PIPE_ALL\"\)"):
        simulate(text.replace(BARRIER, "pass"), inputs, "ascend-950")
    _lowers_with_barriers(text, tmp_path)
    return text


def _lowers_with_barriers(text: str, tmp_path) -> None:
    """TileLang's Ascend lowering keeps a barrier in every kernel that has one, inside a loop where the module's
    is (the dialect's scheduler may move it to the start of the loop's body, before the loop's reads)."""
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    sources = lower_module(load_module(text, tmp_path / "memory_950.py"), "ascend")
    for name, src in sources.items():
        body = text.split(f"def {name}(")[1].split("\n@T.prim_func")[0]
        if BARRIER in body:
            assert "asc_sync();" in src, name
        if any(line.strip() == BARRIER and line.startswith(" " * 12) for line in body.splitlines()):
            assert "for (" in src[:src.index("asc_sync();")], name  # inside a loop there too
