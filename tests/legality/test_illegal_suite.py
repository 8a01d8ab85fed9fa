"""The illegal-fusion suite: every file in tests/illegal/ is a program whose one schedule must be rejected.

Each file states what it expects in `# expect:` comment lines:

    # expect: rule=reduction-incomplete            the rule (a refinement of it also matches, see tdsl.testing)
    # expect: primitive=reverse_compute_at          the rejected primitive
    # expect: statements=C, Y                       the statements the error names (as a set)
    # expect: message=SiLU(1) + SiLU(-1)            a fragment of the message (any number of these)
    # expect: changes=no (why)                      skip the differential run (default: the rejected step,
                                                    run in the interpreter, must change some output)

Every error must name its primitive, its statements, its rule and a counterexample, through the API and
through `tdsl check`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.driver.cli import main
from tdsl.testing import assert_illegal

from catalog import EXAMPLES as EXAMPLES_DIR
from catalog import RULES, TESTS

SUITE = TESTS / "illegal"
CASES = sorted(SUITE.glob("*.tdsl"))


def expectations(path: Path) -> dict:
    found: dict = {"message": []}
    for line in path.read_text().splitlines():
        m = re.match(r"#\s*expect:\s*(\w+)=(.*)$", line)
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip()
        if key == "message":
            found["message"].append(value)
        elif key == "statements":
            found["statements"] = [s.strip() for s in value.split(",")]
        elif key == "changes":
            found["changes"] = not value.startswith("no")
        else:
            found[key] = value
    return found


def test_the_suite_is_large_and_covers_every_rule():
    assert len(CASES) >= 20
    rules = {expectations(c)["rule"] for c in CASES}
    assert rules == RULES, f"rules without a case: {sorted(RULES - rules)}; unknown: {sorted(rules - RULES)}"


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_case_is_rejected_as_expected(path):
    want = expectations(path)
    assert {"rule", "primitive", "statements"} <= set(want), f"{path.name}: say rule, primitive and statements"
    prog = load(path)
    assert len(prog.schedule_names) == 1, f"{path.name}: one schedule per case"
    err = assert_illegal(
        prog, prog.schedule_names[0], rule=want["rule"], match=want["message"], primitive=want["primitive"],
        statements=want["statements"], changes_result=want.get("changes", True),
    )
    assert err.rule == want["rule"]  # the exact rule, not only a refinement of it
    text = str(err)
    assert f"{err.primitive} is illegal [rule {err.rule}]" in text
    assert all(s in text for s in err.statements)
    assert "counterexample: " in text and "why: " in text


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_case_through_the_command_line(path, capsys):
    want = expectations(path)
    status = main(["check", str(path)])
    err = capsys.readouterr().err
    assert status == 1
    assert re.search(rf"{re.escape(path.name)}:\d+:\d+: error: {want['primitive']} is illegal \[rule {want['rule']}\]", err)
    assert "counterexample: " in err


# ---------------------------------------------------------------- tdsl fuse: the fusion report of every example

# example -> the example whose fusion report covers it: the same statements and edges (mha_causal adds the mask,
# mha_fa_exp2 changes E's formula); a report of the attention family takes 15-25 s of CI
COVERED_BY = {"mha": "mha_causal", "mha_fa": "mha_fa_exp2"}
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*.tdsl") if p.stem not in COVERED_BY)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_fusion_report_of_every_example(path, capsys):
    status = main(["fuse", str(path), "--target", "nvidia"])
    out = capsys.readouterr().out
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"fusion report: {path}") and "evidence: interpreter and nvidia code generation" in out
    assert "MISMATCH" not in out and "cannot run it" not in out and "generation failed" not in out
    for n, line in enumerate(lines):
        if line.startswith("  rejected "):
            rule = re.search(r"\[([a-z-]+)\]", line).group(1)
            assert rule in RULES
            assert lines[n + 1].strip().startswith("counterexample: ")
            assert lines[n + 2].strip().startswith("interpreter: ")
            assert f"  {rule}: " in out  # explained once under "rules:"
        if line.startswith("  fused "):
            assert "bit-identical to program order" in "\n".join(lines[n : n + 3])
    edges = int(re.search(r"^(\d+) producer -> consumer edge", out, re.M).group(1))
    assert out.count("  => ") == edges


def test_fusion_report_names_every_edge_of_gemm_silu(capsys):
    main(["fuse", "examples/gemm_silu.tdsl" if Path("examples").exists() else str(EXAMPLES[0].parent / "gemm_silu.tdsl")])
    out = capsys.readouterr().out
    assert "C -> Y: Y reads C (C: sum over k, accum f32, store bf16)" in out
    assert re.search(r"rejected reverse_compute_at\(Y, C\.k\) +\[reduction-incomplete\]", out)
    assert "=> deepest fusion: reverse_compute_at(Y, C.j) (shares 2 loops)" in out
