"""Every example: its legal schedules are accepted (and bit-identical to program order in the interpreter at
small sizes, including sizes that are not multiples of the tiles); its illegal ones raise the expected rule."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.errors import LegalityError, StepError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import online_bound

from catalog import CASES, CASE_IDS, CHAPTER_SIZES, EXAMPLES, EXPECTED, INTERPRETER_SIZES, LEGAL, LEGAL_IDS


def test_every_schedule_of_every_example_is_listed():
    for ex, schedules in EXPECTED.items():
        assert load(EXAMPLES / f"{ex}.tdsl", sizes=CHAPTER_SIZES.get(ex)).schedule_names == list(schedules)
    assert sorted(p.stem for p in EXAMPLES.glob("*.tdsl")) == sorted(EXPECTED)


@pytest.mark.parametrize("example,name,rule", CASES, ids=CASE_IDS)
def test_schedule_verdict_at_chapter_sizes(example, name, rule):
    prog = load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example))
    if rule is None:
        prog.schedule(name)
        return
    with pytest.raises(StepError) as err:
        prog.schedule(name)
    assert isinstance(err.value.error, LegalityError)
    assert err.value.rule == rule
    text = str(err.value)
    assert f"examples/{example}.tdsl:" in text and "counterexample:" in text and f"[rule {rule}]" in text


@pytest.mark.parametrize("example,name", LEGAL, ids=LEGAL_IDS)
def test_legal_schedule_is_bit_identical_in_the_interpreter(example, name):
    prog = load(EXAMPLES / f"{example}.tdsl", sizes=INTERPRETER_SIZES[example])
    original = prog.schedule()
    sched = prog.schedule(name)
    inputs = random_inputs(original.model, seed=7)
    want = interpret(original.model, original.time_map(), inputs)
    got = interpret(sched.model, sched.time_map(), inputs)
    for tensor in original.model.outputs():
        a, b = want[tensor.name], got[tensor.name]
        if sched.tree.online:  # the one-pass softmax moves roundings, within its documented bound
            c = online_bound(original.model, tensor.name, a, b)
            assert c.ok, f"{example}/{name}: {tensor.name}: {c.summary()}"
        else:
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"{example}/{name}: {tensor.name} differs"
        assert not np.isnan(a.astype(np.float32)).any()
