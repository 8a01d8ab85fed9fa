"""Conditions that the lowering folds to a constant print as Python booleans.

isl gives the lane set of a tile that holds no instance at all (the masked part of a loop where one statement has
no lane) as the integer 0, and a whole one as 1.  Triton takes only a boolean as the mask of a load or store
(`Mask must have boolean scalar type`) and deprecates an integer condition of tl.where; the interpreter takes
both, so the CPU fuzzer passed such modules and the GPU did not compile them (GPU fuzz seed 38, saved finding
constant-false-mask-on-the-gpu)."""

import json
import sys
from pathlib import Path

import pytest

from tdsl.backends.triton.index import Frame, condition_code, mask_code
from tdsl.compiler.lower import tileir as T

ROOT = Path(__file__).resolve().parents[3]
FINDING = ROOT / "tests" / "fuzz" / "findings" / "constant-false-mask-on-the-gpu.json"

FRAME = Frame(axes=["i"], vectors={"i": "x_i"}, scalars={}, variables={"n": "n"})


@pytest.mark.parametrize("value, code", [(0, "False"), (1, "True"), (False, "False"), (True, "True")])
def test_a_constant_condition_prints_as_a_boolean(value, code):
    assert condition_code(T.Const(value), FRAME) == code
    assert mask_code(T.Const(value), FRAME, [T.Var("i")]) == code


def test_constants_inside_conditions_print_as_booleans():
    """`and` / `or` of a constant and a comparison, and a Select on a constant condition."""
    lanes = T.Bin("<", T.Var("i"), T.Var("n"))
    assert condition_code(T.Bin("and", T.Const(1), lanes), FRAME) == "(True) & ((x_i < n))"
    assert condition_code(T.Bin("or", lanes, T.Const(0)), FRAME) == "((x_i < n)) | (False)"
    assert condition_code(T.Select(T.Const(0), T.Var("i"), T.Const(3)), FRAME) == "tl.where(False, x_i, 3)"


def test_the_saved_case_compiles_for_sm90(tmp_path):
    """The seed-38 case: the masked part of its loop stores P under the mask False and sums l's terms under it;
    before the fix `tl.store(..., mask=0)` did not compile."""
    from tdsl.backends.triton.aot import compile_in_subprocess
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.lower.pipeline import lower_for

    sys.path.insert(0, str(ROOT / "tests"))
    from fuzz import oracles
    from fuzz.cases import Case

    case = Case.from_json(FINDING.read_text())
    _, sched, _ = oracles.apply_steps(case)
    case = case.but(trace_text=str(sched.trace))
    text, refusal = oracles.generate_text(case, "triton")
    assert refusal is None and "mask=False" in text and "tl.where(False" in text
    assert "mask=0)" not in text and "tl.where(0," not in text
    path = tmp_path / "constant_mask.py"
    path.write_text(text)
    prog = loads(case.with_schedule(case.trace_text), case.filename, sizes=oracles.generation_sizes(case))
    program = lower_for(prog.schedule(oracles.FUZZ_SCHEDULE, kernel=case.kernel), "triton")
    results = compile_in_subprocess(path, program.kernels, program=program)
    assert set(results) == {k.name for k in program.kernels} and all("shared" in r for r in results.values())
    assert "triton-sm90" in json.loads(FINDING.read_text())["backends"]  # its replay compiles it too
