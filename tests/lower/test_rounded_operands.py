"""A product operand that only rounds a register tile (`T: bf16 = E`) reads E, converted once
(compiler/lower/passes/rounded_operands.py): FlashAttention's P = bf16(E) in examples/mha_fa.tdsl.  Checked by the
tile program's form, and by running the Triton kernel under the interpreter against the reference interpreter at
f32 tolerance (O stored in f32): a product of the unrounded E differs by about 2^-9 of each term."""

from pathlib import Path

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import AccUpdate, Compute, RegOperand, walk_ops
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare_outputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIZES = {"B": 1, "H": 2, "L": 70, "D": 16}


def _program(example="mha_fa", output="bf16"):
    """An attention example at ragged sizes; `output` f32 keeps the product's rounding visible in O."""
    text = (EXAMPLES / f"{example}.tdsl").read_text()
    old = "-> (O: bf16[B, H, L, D])"
    assert old in text
    return loads(text.replace(old, f"-> (O: {output}[B, H, L, D])"), f"{example}.tdsl", sizes=SIZES)


def _product_operand(program, backend: str):
    kernel, = lower_for(program.schedule("flash"), backend).kernels
    dot = next(op.partial for op in walk_ops(kernel.body) if isinstance(op, AccUpdate) and op.stmt == "U")
    computes = {op.stmt for op in walk_ops(kernel.body) if isinstance(op, Compute)}
    return dot.lhs, computes


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
def test_the_product_reads_the_rounded_tile_and_the_rounding_is_gone(backend):
    lhs, computes = _product_operand(_program(), backend)
    assert isinstance(lhs, RegOperand) and (lhs.reg.stmt, lhs.rounds) == ("E", "P")
    assert "P" not in computes and "E" in computes


def test_a_rounding_with_its_own_value_is_left_alone():
    lhs, computes = _product_operand(_program("mha"), "triton")  # P: bf16 = exp(...), read by l and by U
    assert isinstance(lhs, RegOperand) and lhs.reg.stmt == "P" and not lhs.rounds and "P" in computes


def test_the_ascend_backends_keep_the_rounding():
    lhs, computes = _product_operand(_program(), "ascend-950")
    assert lhs.reg.stmt == "P" and not lhs.rounds and "P" in computes


def test_the_triton_kernel_rounds_the_operand_as_the_program_does(tmp_path):
    """Under the interpreter the operand is f32: rounded to bf16 where the program rounds P (a kernel that
    multiplied the unrounded E fails this comparison at f32 tolerance)."""
    program = _program(output="f32")
    schedule = program.schedule("flash")
    inputs = random_inputs(schedule.model, seed=3)
    module = load_module(generate(program, "flash", target="nvidia", backend="triton"), tmp_path / "k.py")
    got = run_generated(module, schedule.model, inputs, guard=9)
    reference = interpret(schedule.model, schedule.time_map(), inputs)
    assert all(c.ok for c in compare_outputs(schedule.model, reference, got).values())
    # tighter than the tolerance of bf16 products: the kernel computes the program's own rounding (P = bf16(E)),
    # up to the order of the f32 sums; with E unrounded the difference is ~1e-3
    assert np.abs(np.asarray(got["O"]) - np.asarray(reference["O"], dtype=np.float64)).max() < 1e-5
