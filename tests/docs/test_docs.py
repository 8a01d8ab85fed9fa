"""The documentation cannot drift: its examples are run and their output compared.

Checked in docs/primitives.md, docs/legality.md, docs/interpreter.md, docs/schedule-trees.md, docs/pytorch.md, docs/target-ascend.md,
docs/flash-attention.md, docs/recurrences.md, docs/time-loops.md and docs/tuning.md: their programs, `$ tdsl ...` console blocks and pycon sessions, as docs_runner.py
describes (the same runner checks the rule pages, docs/test_rule_pages.py, and docs/cost.md and docs/targets.md,
analysis/test_cost.py).

Commands run in-process through ``tdsl.compiler.driver.cli.main`` (a subprocess per command would make this file
slow); `test_in_process_runner_matches_the_real_command` runs a sample through the installed entry point to
show the two agree.
"""

from __future__ import annotations

import pytest

from catalog import ROOT
from docs_runner import (blocks, check_command, commands, is_tdsl_console, matches, run_in_process, run_python_sessions,
                         run_subprocess, scratch_dir, split_status)

DOCS = [ROOT / "docs" / name
        for name in ("primitives.md", "legality.md", "interpreter.md", "schedule-trees.md", "pytorch.md",
                     "flash-attention.md", "recurrences.md", "time-loops.md", "tuning.md", "target-ascend.md")]


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="session")
def scratch(tmp_path_factory):
    base = tmp_path_factory.mktemp("docs")
    return {doc: scratch_dir(doc, base) for doc in DOCS if doc.exists()}


CONSOLE = [b for doc in DOCS if doc.exists() for b in blocks(doc) if is_tdsl_console(b)]
PYCON_DOCS = [doc for doc in DOCS if doc.exists() and any(b.lang == "pycon" for b in blocks(doc))]


def test_every_document_exists_and_has_checked_examples():
    for doc in DOCS:
        assert doc.exists(), doc
        assert any(is_tdsl_console(b) or b.lang == "pycon" for b in blocks(doc)), f"{doc.name} has no checked example"


@pytest.mark.parametrize("block", CONSOLE, ids=[b.id for b in CONSOLE])
def test_console_block(block, scratch):
    for cmd in commands(block):
        assert cmd.line.startswith("tdsl "), f"{block.id}: only `$ tdsl ...` commands are checked: {cmd.line}"
        lines, status = run_in_process(cmd.line, scratch[block.doc])
        check_command(cmd, block, lines, status)


@pytest.mark.parametrize("doc", PYCON_DOCS, ids=[d.name for d in PYCON_DOCS])
def test_python_sessions(doc, scratch):
    run_python_sessions(doc, scratch)


def test_in_process_runner_matches_the_real_command(scratch):
    """A legal and an illegal command through `python -m tdsl.compiler.driver.cli`: same output, same status."""
    every = [(block, cmd) for block in CONSOLE for cmd in commands(block)]
    legal = next(pair for pair in every if not split_status(pair[1].line)[1])
    failing = next(pair for pair in every if split_status(pair[1].line)[1])
    sample = [legal, failing]
    for block, cmd in sample:
        lines, status = run_subprocess(cmd.line, scratch[block.doc])
        check_command(cmd, block, lines, status)


# Excerpts of generated modules (doc, the first line of the excerpt, program, schedule, backend): each must be the
# module's text, line for line (probe Z of the 29th session found triton.md's excerpt three changes old).
EXCERPTS = [("triton.md", "@triton.jit", "examples/gemm_silu.tdsl", "fused", "triton"),
            ("target-nvidia-tilelang.md", "@T.prim_func", "examples/gemm_silu.tdsl", "fused", "tilelang")]


@pytest.mark.parametrize("doc, first, program, schedule, backend", EXCERPTS, ids=[e[0] for e in EXCERPTS])
def test_generated_code_excerpts_are_the_modules_text(doc, first, program, schedule, backend):
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate

    excerpt = next(b.body for b in blocks(ROOT / "docs" / doc) if b.lang == "python" and b.body.startswith(first))
    module = generate(load(ROOT / program), schedule, target="nvidia", backend=backend)
    assert excerpt.strip("\n") in module, f"docs/{doc}: the excerpt of {program} ({schedule}) is not the generated text"


def test_the_matcher():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "..."], ["a"])
    assert not matches(["a", "b"], ["a", "b", "c"])
    assert not matches(["a", "...", "x"], ["a", "b"])
