"""Every example: its legal schedules are accepted (and bit-identical to program order in the interpreter at
small sizes, including sizes that are not multiples of the tiles); its illegal ones raise the expected rule."""

import numpy as np
import pytest

from tdsl.compiler.api import load
from tdsl.compiler.errors import LegalityError, StepError
from tdsl.compiler.interpreter import interpret, random_inputs

from conftest import EXAMPLES

# example -> {schedule: expected rule or None for legal}
EXPECTED = {
    "gemm": {"tiled": None, "gpu": None, "reversed_k": "reduction-order", "split_k": "parallel-reduction"},
    "gemm_silu": {"fused": None, "silu_in_ko": "reduction-incomplete", "fast": None},
    "swiglu_quant": {"fused": None, "inlined": None},
    "rmsnorm": {"row_per_program": None, "scale_before_sum": "reduction-incomplete"},
    "softmax": {"row_fused": None, "normalize_early": "reduction-incomplete", "exp_before_max": "reduction-incomplete"},
    "quant_gemm": {"separate": None, "quantize_before_rowmax": "reduction-incomplete"},
    "attention": {"unfused": None, "normalize_early": "reduction-incomplete"},
}

# Small sizes for the interpreter: deliberately not multiples of the tiles.
SMALL = {
    "gemm": {"M": 70, "N": 6, "K": 70},
    "gemm_silu": {"M": 66, "N": 65, "K": 33},
    "swiglu_quant": {"M": 5, "N": 1030},
    "rmsnorm": {"M": 3, "N": 600},
    "softmax": {"M": 3, "N": 1100},
    "quant_gemm": {"M": 130, "N": 3, "K": 70},
    "attention": {"L": 70, "D": 3},
}

CASES = [(ex, name, rule) for ex, schedules in EXPECTED.items() for name, rule in schedules.items()]


def test_every_schedule_of_every_example_is_listed():
    for ex, schedules in EXPECTED.items():
        assert load(EXAMPLES / f"{ex}.tdsl").schedule_names == list(schedules)
    assert sorted(p.stem for p in EXAMPLES.glob("*.tdsl")) == sorted(EXPECTED)


@pytest.mark.parametrize("example,name,rule", CASES, ids=[f"{e}-{n}" for e, n, _ in CASES])
def test_schedule_verdict_at_chapter_sizes(example, name, rule):
    prog = load(EXAMPLES / f"{example}.tdsl")
    if rule is None:
        prog.schedule(name)
        return
    with pytest.raises(StepError) as err:
        prog.schedule(name)
    assert isinstance(err.value.error, LegalityError)
    assert err.value.rule == rule
    text = str(err.value)
    assert f"examples/{example}.tdsl:" in text and "counterexample:" in text and f"[rule {rule}]" in text


LEGAL = [(ex, name) for ex, name, rule in CASES if rule is None]


@pytest.mark.parametrize("example,name", LEGAL, ids=[f"{e}-{n}" for e, n in LEGAL])
def test_legal_schedule_is_bit_identical_in_the_interpreter(example, name):
    prog = load(EXAMPLES / f"{example}.tdsl", sizes=SMALL[example])
    original = prog.schedule()
    sched = prog.schedule(name)
    inputs = random_inputs(original.model, seed=7)
    want = interpret(original.model, original.time_map(), inputs)
    got = interpret(sched.model, sched.time_map(), inputs)
    for tensor in original.model.outputs():
        a, b = want[tensor.name], got[tensor.name]
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"{example}/{name}: {tensor.name} differs"
        assert not np.isnan(a.astype(np.float32)).any()
