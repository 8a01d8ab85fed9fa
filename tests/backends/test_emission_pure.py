"""Emission is a pure function of the tile program: every backend, given one lowered program, prints the same
text however often and in whatever order the backends run, and none of them can change the program."""

import dataclasses

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.lower.build import lower

from catalog import CHAPTER_SIZES, EXAMPLES, KERNEL_SIZES, LEGAL, LEGAL_IDS
from fuzz.emission import emit_all
from fuzz.oracles import rebound_loop_variables

BACKENDS = ["triton", "tilelang", "ascend-950", "ascend-910b"]


@pytest.mark.parametrize("sizes", ["chapter", "ragged"])
@pytest.mark.parametrize("example,name", LEGAL, ids=LEGAL_IDS)
def test_emitting_twice_in_any_order_gives_the_same_text(example, name, sizes):
    prog = load(EXAMPLES / f"{example}.tdsl", sizes=KERNEL_SIZES[example] if sizes == "ragged" else CHAPTER_SIZES.get(example))
    sched = prog.schedule(name)
    program = lower(sched)
    fresh = lower(sched)
    first = emit_all(sched, BACKENDS, program=program)
    second = emit_all(sched, list(reversed(BACKENDS)), program=program)
    assert first.texts, "no backend emitted this schedule"
    for backend, text in first.texts.items():
        assert second.texts[backend] == text, f"{backend}: the second emission differs"
        rebound = rebound_loop_variables(text)
        assert not rebound, f"{backend}: loops rebind enclosing loops' variables: {rebound}"
    assert program == fresh, "emitting changed the tile program"


def test_tile_programs_cannot_be_changed_in_place():
    program = lower(load(EXAMPLES / "gemm_silu.tdsl").schedule("fused"))
    kernel = program.kernels[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        kernel.num_stages = 1
    with pytest.raises((TypeError, AttributeError)):
        kernel.body.append(kernel.body[0])
    with pytest.raises(TypeError):
        program.sizes["M"] = 1
