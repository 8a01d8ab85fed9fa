"""A finished score tile masked once (compiler/lower/passes/masked_scores.py): in the masked iterations of causal
FlashAttention S is set to -inf outside its mask once, and the row max, the row sum and the product P·V read S
and E without masks, because E = exp(...) of -inf is 0 there.  That needs the maximum E is computed with to be
finite on every row, also on a row that has met no key yet (a sliding window's, a ragged tile's padding rows):
an exponential reads its `combine online` maximum as 0 where it is -inf (`NegInfAsZero`).  The kernels are run
under the Triton interpreter against the reference interpreter with O in f32 and NaN guard regions."""

from pathlib import Path

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.lower.passes.masked_scores import FILL, FINITE, _outside, _unmasked
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import (AccFinish, AccUpdate, Bin, Call, Compute, Const, Neg, NegInfAsZero, Reduce,
                                        Reg, Running, Select, SerialLoop, walk_ops)
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"B": 1, "H": 2, "L": 300, "D": 16}  # 300 keys: full blocks, diagonal blocks, a ragged one
RUN_SIZES = {"B": 1, "H": 1, "L": 150, "D": 16}  # masked blocks only (the Triton interpreter is slow)
WINDOW = "j <= i and j >= i - 10"  # each row's keys: the 11 up to its own


def _program(example="mha_causal", keys=None, output="f32", sizes=SIZES):
    text = (EXAMPLES / f"{example}.tdsl").read_text()
    old = "-> (O: bf16[B, H, L, D])"
    assert old in text
    text = text.replace(old, f"-> (O: {output}[B, H, L, D])")
    if keys is not None:
        assert text.count("j <= i") >= 4
        text = text.replace("j <= i", keys)
    return loads(text, f"{example}.tdsl", sizes=sizes)


def _loops(program, schedule, backend):
    kernel, = lower_for(program.schedule(schedule), backend).kernels
    return [op for op in walk_ops(kernel.body) if isinstance(op, SerialLoop)]


def _finish(loop, stmt):
    return next(op for op in loop.body if isinstance(op, AccFinish) and op.stmt == stmt)


def _update(loop, stmt):
    return next(op.partial for op in loop.body if isinstance(op, AccUpdate) and op.stmt == stmt)


def _masked_reads(loop) -> list:
    """The statements whose reads in `loop` still carry a mask of their own."""
    masked = []
    for stmt in ("m", "l"):
        if isinstance(_update(loop, stmt).operand, Select):
            masked.append(stmt)
    if _update(loop, "U").lhs.mask is not None:
        masked.append("U")
    return masked


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
@pytest.mark.parametrize("schedule", ["flash", "flash_ws"])
def test_causal_scores_are_masked_once_in_the_masked_iterations(backend, schedule):
    full, rest = _loops(_program(), schedule, backend)
    assert _finish(full, "S").fill is None and _masked_reads(full) == []  # full tiles: nothing to mask
    assert _finish(rest, "S").fill == FILL and _finish(rest, "S").tile.mask is not None
    # P·V on the diagonal has absent terms (lanes j > i): P keeps its mask, which the printers need to tell a 0
    # the program reads from a lane it does not (tileir.Dot.absent_terms); the maximum and the sum drop theirs
    assert _masked_reads(rest) == ["U"] and _update(rest, "U").absent_terms
    assert not _update(full, "U").absent_terms


def test_the_ascend_backends_keep_their_masks():
    loops = _loops(_program(), "flash_ascend", "ascend-950")
    assert all(op.fill is None for loop in loops for op in loop.body if isinstance(op, AccFinish))


def test_a_sliding_window_is_masked_once_too():
    """Row 255 meets its first key (245) in block 1, after block 0: its running maximum is -inf in block 0, which
    E reads as 0, so E is 0 outside the mask there as well."""
    rest = _loops(_program(keys=WINDOW), "flash", "triton")[-1]  # no block is full: one masked loop
    assert _finish(rest, "S").fill == FILL and _masked_reads(rest) == ["U"]


@pytest.mark.parametrize("keys", [None, WINDOW], ids=["causal", "window"])
def test_every_exponential_reads_the_running_maximum_as_0_where_it_is_minus_infinity(keys):
    for loop in _loops(_program(keys=keys), "flash", "triton"):
        reads = [e for op in loop.body if isinstance(op, Compute) for e in _maxima(op.value)]
        assert reads and all(isinstance(e, NegInfAsZero) and isinstance(e.operand, Running) for e in reads)


def _maxima(e):
    """The reads of the running maximum in a value, with the NegInfAsZero around them."""
    if isinstance(e, (Running, NegInfAsZero)):
        return [e]
    parts = [getattr(e, name) for name in ("lhs", "rhs", "operand", "then", "other") if hasattr(e, name)]
    parts += list(getattr(e, "args", ()))
    return [r for p in parts for r in _maxima(p)]


@pytest.mark.parametrize("example, keys, once", [
    ("mha_causal", None, True), ("mha_causal", WINDOW, True), ("mha_causal", "j >= i", True),
    ("mha_fa", None, True),  # not causal: its masked block is the ragged last one
], ids=["causal", "window", "anticausal", "ragged"])
def test_the_kernel_computes_the_program(tmp_path, example, keys, once):
    program = _program(example, keys, sizes=RUN_SIZES)
    schedule = program.schedule("flash")
    inputs = random_inputs(schedule.model, seed=5)
    text = generate(program, "flash", target="nvidia", backend="triton")
    assert ("outside its mask set once" in text) == once
    module = load_module(text, tmp_path / "k.py")
    got = run_generated(module, schedule.model, inputs, guard=9)
    reference = interpret(schedule.model, schedule.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(schedule.model, reference, got).values())
    assert not np.isnan(np.asarray(got["O"])).any()


# ---------------------------------------------------------------- the values outside the mask, op by op

S, M = Reg("S", (0, 1)), NegInfAsZero(Running("m", (0,)))


@pytest.mark.parametrize("value, outside", [
    (Call("exp2", (Call("fma", (S, Const(0.125), Neg(Bin("*", M, Const(0.125))))),)), 0.0),  # FlashAttention's
    (Call("exp", (Bin("*", Bin("-", S, M), Const(0.088)),)), 0.0),  # (S - m)·scale
    (Call("exp", (Bin("-", Bin("*", S, Const(0.5)), Bin("*", M, Const(0.5))),)), 0.0),  # S·c - m·c
    (Call("exp", (Bin("*", Bin("-", S, M), Const(-0.5)),)), None),  # a negative factor: exp(+inf)
    (Call("exp", (Bin("-", S, Running("m", (0,))),)), None),  # a maximum that may be -inf: -inf - -inf
    (Call("exp", (Bin("-", M, S),)), None),  # m - S = +inf
    (Bin("-", S, M), FILL),
    (Call("tanh", (S,)), None),
])
def test_the_value_outside_the_mask(value, outside):
    found = _outside(value, {"S": FILL})
    assert (found if found != FINITE else None) == outside


def test_a_read_without_the_mask_leaves_the_body_alone():
    """A sum over E's lanes with no mask of its own would add what E now holds outside the mask: not followed."""
    rest = _loops(_program(), "flash", "triton")[1]
    update = next(op for op in rest.body if isinstance(op, AccUpdate) and op.stmt == "l")
    mask = _finish(rest, "S").tile.mask
    unmasked = AccUpdate("l", update.tile, Reduce("sum", Reg("E", (0, 1)), (1,)), "sum", "f32")
    assert _unmasked(unmasked, mask, {"E": 0.0}) is None
    masked = AccUpdate("l", update.tile, Reduce("sum", Select(mask, Reg("E", (0, 1)), Const(0.0)), (1,)), "sum", "f32")
    assert _unmasked(masked, mask, {"E": 0.0}).operand == Reg("E", (0, 1))
    # E is 0 outside the mask on every row (its padding rows too): summed along its rows, the mask goes as well
    across = AccUpdate("l", update.tile, Reduce("sum", Select(mask, Reg("E", (0, 1)), Const(0.0)), (0,)), "sum", "f32")
    assert _unmasked(across, mask, {"E": 0.0}).operand == Reg("E", (0, 1))
