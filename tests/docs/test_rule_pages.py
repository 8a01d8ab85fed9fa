"""The rule pages in docs/rules/ (one per legality rule) and docs/testing.md: every rule has a page, and the
examples of each page run as documented (the runner of docs_runner.py, as for the other documents)."""

from __future__ import annotations

import pytest

from catalog import ROOT, RULES
from docs_runner import (blocks, check_command, commands, is_tdsl_console, run_in_process, run_python_sessions,
                         scratch_dir)

DOCS_DIR = ROOT / "docs"
RULE_PAGES = sorted((DOCS_DIR / "rules").glob("*.md"))
RULE_DOCS = RULE_PAGES + [DOCS_DIR / "testing.md"]  # checked like docs/test_docs.py checks the other pages
RULE_CONSOLE = [b for doc in RULE_DOCS for b in blocks(doc) if is_tdsl_console(b)]


def test_every_rule_has_a_page_with_a_checked_example():
    assert {d.stem for d in RULE_PAGES} >= RULES
    for doc in RULE_DOCS:
        assert any(is_tdsl_console(b) or b.lang == "pycon" for b in blocks(doc)), doc.name


@pytest.fixture(scope="module")
def rule_scratch(tmp_path_factory):
    base = tmp_path_factory.mktemp("rules")
    return {doc: scratch_dir(doc, base) for doc in RULE_DOCS}


@pytest.mark.parametrize("block", RULE_CONSOLE, ids=[b.id for b in RULE_CONSOLE])
def test_rule_page_console_block(block, rule_scratch):
    for cmd in commands(block):
        lines, status = run_in_process(cmd.line, rule_scratch[block.doc])
        check_command(cmd, block, lines, status)


@pytest.mark.parametrize("doc", RULE_DOCS, ids=[d.name for d in RULE_DOCS])
def test_rule_page_python_session(doc, rule_scratch):
    if not any(b.lang == "pycon" for b in blocks(doc)):
        pytest.skip("no Python session")
    run_python_sessions(doc, rule_scratch)
