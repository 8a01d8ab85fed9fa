"""A statement reads an earlier statement's register tile when the tile's row is the reader's row wherever both
have instances, compared as functions of the loop variables (compiler/lower/registers.py `_same_function`).  The
producer may sit in fewer loops than the reader: trisolv's x is computed in loop j, P reads it inside j's loop i.
At N = 2 only j = 0 has a P instance, so P's row is the constant 0 beside x's row l_j; with `pipeline(P.i)` the
one-iteration loop i stays, and the two functions had different loop variables, which isl refuses to subtract:
x was read back from memory while the buffer plan kept it in registers (CPU fuzz seed 5465)."""

from __future__ import annotations

import islpy as isl
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.lower.build import lower
from tdsl.compiler.lower.registers import _same_function
from tdsl.compiler.lower.tileir_text import program_text

from catalog import ROOT

TRISOLV = ROOT / "benchmarks" / "polybench" / "solvers" / "trisolv.tdsl"


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("pipelined", [False, True])
def test_a_reader_inside_a_loop_the_producer_is_outside_reads_its_register_tile(n, pipelined):
    text = TRISOLV.read_text() + ("schedule p {\n  pipeline(P.i, stages=3)\n}\n" if pipelined else "")
    prog = loads(text, "trisolv.tdsl", sizes={"N": n})
    lowered = program_text(lower(prog.schedule("p" if pipelined else None)))
    assert "reg x[]" in lowered
    assert "barrier  # x pass through memory" not in lowered


def test_functions_of_nested_loops_are_compared_on_the_inner_loops_values():
    reader = isl.PwAff("{ [l_j, l_i] -> [(0)] : l_j = 0 and l_i = 1 }")
    assert _same_function(reader, isl.PwAff("{ [l_j] -> [(l_j)] : 0 <= l_j <= 1 }"))
    assert _same_function(isl.PwAff("{ [l_j] -> [(l_j)] : 0 <= l_j <= 1 }"), reader)
    assert not _same_function(reader, isl.PwAff("{ [l_j] -> [(l_j + 1)] : 0 <= l_j <= 1 }"))
    # loops that do not nest (another loop's variable first): not proved equal
    assert not _same_function(reader, isl.PwAff("{ [l_k] -> [(l_k)] : 0 <= l_k <= 1 }"))
