"""rejoin_split_loops (compiler/lower/passes/rejoin.py): for TileLang, the key loop the lowering split at its
masked blocks is one loop again, pipelined, its masks guarded by `ko < split`.  Checked on the tile program, and
by execution: the same pass applied to the Triton program runs under the Triton interpreter against the
reference interpreter (TileLang kernels only lower on a CPU)."""

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.driver.generate import generate, load_module, run_generated
from tdsl.compiler.lower import pipeline
from tdsl.compiler.lower.passes.rejoin import rejoin_split_loops
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir import Bin, SerialLoop, Var, walk_ops
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.verify import compare

from catalog import EXAMPLES


def key_loops(program):
    return [op for op in walk_ops(program.kernels[0].body) if isinstance(op, SerialLoop)]


def guards(e):
    """The `ko < split` tests a mask starts with."""
    if isinstance(e, Bin) and e.op == "or" and isinstance(e.lhs, Bin) and e.lhs.op == "<" and e.lhs.lhs == Var("ko"):
        return [e.lhs]
    return []


def test_the_causal_key_loop_is_one_pipelined_loop_with_guarded_masks():
    sched = load(EXAMPLES / "mha_causal.tdsl", sizes={"B": 1, "H": 2, "L": 256, "D": 16}).schedule("flash")
    split = key_loops(lower_for(sched, "triton"))
    assert [loop.part for loop in split] == ["full", "rest"]  # Triton keeps FlashAttention's split
    (loop,) = key_loops(lower_for(sched, "tilelang"))
    assert loop.part == "" and loop.stages == 3 and loop.upper == split[1].upper and loop.lower == split[0].lower
    masks = [op.tile.mask for op in loop.body if op.tile.mask is not None]
    text = repr(loop.body)
    assert "Bin(op='or', lhs=Bin(op='<', lhs=Var(name='ko')" in text  # each mask of the diagonal block is guarded
    assert all(guards(m) for m in masks)


def test_a_ragged_end_keeps_the_split():
    """The last key block of a ragged length masks its loads: one loop would copy every block element-wise."""
    sched = load(EXAMPLES / "mha_causal.tdsl", sizes={"B": 1, "H": 2, "L": 300, "D": 16}).schedule("flash")
    assert [loop.part for loop in key_loops(lower_for(sched, "tilelang"))] == ["full", "rest"]


@pytest.mark.parametrize("example", ["mha_causal", "mha_fa"])
def test_the_rejoined_loop_computes_what_the_split_one_does(example, tmp_path, monkeypatch):
    """The pass is the same on every backend's tile program: run through the Triton printer and interpreter, the
    rejoined kernel agrees with the reference interpreter (NaN guards around the output)."""
    prog = load(EXAMPLES / f"{example}.tdsl", sizes={"B": 1, "H": 2, "L": 256, "D": 16})
    original = prog.schedule()
    inputs = random_inputs(original.model, seed=5)
    reference = interpret(original.model, original.time_map(), inputs)
    monkeypatch.setitem(pipeline.OPERAND_PASSES, "triton",
                        (rejoin_split_loops, *pipeline.OPERAND_PASSES["triton"]))
    text = generate(prog, "flash")
    rejoined = example == "mha_causal"  # the full kernel's loop has no masked block: nothing to rejoin
    assert ("one loop for the full and the masked blocks" in text) == rejoined
    module = load_module(text, tmp_path / f"{example}_rejoined.py")
    outputs = run_generated(module, original.model, inputs, guard=31)
    for t in original.model.outputs():
        result = compare(reference[t.name].astype("float32"), outputs[t.name], t.dtype)
        assert result.ok, f"{example} {t.name}: {result.summary()}"
