"""Runs the examples of a Markdown document and compares their output: the helpers of docs/test_docs.py, also
used for the rule pages (docs/test_rule_pages.py) and docs/cost.md, docs/targets.md (analysis/test_cost.py).

* Programs: a fenced block whose info string is ``tdsl file=NAME.tdsl`` is written to ``NAME.tdsl`` in a
  scratch directory, one per document.  The directory also holds a link ``examples`` to the repository's
  ``examples/``, so commands may name ``rows.tdsl`` (defined in the document) or ``examples/gemm.tdsl``.
* Console blocks: a fenced block marked ``console`` whose first line starts with ``$ tdsl `` is a shell
  session.  Each ``$ tdsl ...`` line is a command, run in the scratch directory; the lines up to the next
  ``$`` line are its output, stdout and stderr together in the order they were written (as a terminal
  shows them).  A command ending in ``; echo $?`` also prints its exit status as a last line; a command
  without it must exit 0.  An output line that is exactly ``...`` stands for any number of lines, none
  included.  Trailing blanks are ignored.
* Python sessions: fenced blocks marked ``pycon`` are doctests (``>>>`` / ``...`` prompts, ELLIPSIS on);
  the blocks of one document share one namespace and run in order, in the same scratch directory.

Commands run in-process through ``tdsl.compiler.driver.cli.main`` (`run_in_process`; a subprocess per command would
be slow); `run_subprocess` runs one through the real entry point, to show the two agree.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from catalog import EXAMPLES

FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
ECHO_STATUS = "; echo $?"


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the first body line
    info: str
    body: str

    @property
    def lang(self) -> str:
        return self.info.split()[0] if self.info.split() else ""

    @property
    def file(self) -> str | None:
        m = re.search(r"\bfile=(\S+)", self.info)
        return m.group(1) if m else None

    @property
    def id(self) -> str:
        return f"{self.doc.name}:{self.line}"


@dataclass
class Command:
    line: str  # the command without the leading '$ '
    expected: list[str] = field(default_factory=list)


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("body")) + 1
        found.append(Block(doc, line, m.group("info").strip(), m.group("body")))
    return found


def is_tdsl_console(block: Block) -> bool:
    return block.lang == "console" and block.body.startswith("$ tdsl ")


def commands(block: Block) -> list[Command]:
    cmds: list[Command] = []
    for raw in block.body.splitlines():
        if raw.startswith("$ "):
            cmds.append(Command(raw[2:].strip()))
        else:
            cmds[-1].expected.append(raw.rstrip())
    return cmds


# ---------------------------------------------------------------- running


def scratch_dir(doc: Path, base: Path) -> Path:
    """The document's programs written out, next to a link to the repository's examples."""
    where = base / doc.stem
    where.mkdir(parents=True, exist_ok=True)
    link = where / "examples"
    if not link.exists():
        link.symlink_to(EXAMPLES, target_is_directory=True)
    seen = set()
    for block in blocks(doc):
        if block.file:
            assert block.file not in seen, f"{block.id}: {block.file} is defined twice in {doc.name}"
            seen.add(block.file)
            (where / block.file).write_text(block.body, encoding="utf-8")
    return where


def split_status(line: str) -> tuple[str, bool]:
    if line.endswith(ECHO_STATUS):
        return line[: -len(ECHO_STATUS)].rstrip(), True
    return line, False


def run_in_process(line: str, cwd: Path) -> tuple[list[str], int]:
    """Run `tdsl ARGS` through the CLI's main(); stdout and stderr interleaved as written."""
    from tdsl.compiler.driver.cli import main

    command, echo = split_status(line)
    argv = shlex.split(command)
    assert argv[0] == "tdsl", f"only tdsl commands can be checked: {line}"
    out = io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                status = main(argv[1:])
            except SystemExit as exit_:  # argparse: --help, usage errors
                status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        os.chdir(old)
    lines = trim([l.rstrip() for l in out.getvalue().splitlines()])
    if echo:
        lines.append(str(status))
    return lines, status


def run_subprocess(line: str, cwd: Path) -> tuple[list[str], int]:
    """The same through the real entry point (`python -m tdsl.compiler.driver.cli`)."""
    command, echo = split_status(line)
    argv = shlex.split(command)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "tdsl.compiler.driver.cli", *argv[1:]],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines = trim([l.rstrip() for l in proc.stdout.splitlines()])
    if echo:
        lines.append(str(proc.returncode))
    return lines, proc.returncode


def trim(lines: list[str]) -> list[str]:
    """Without trailing blank lines (a Markdown block cannot show them)."""
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line-by-line equality, where an expected line '...' matches any run of lines (also none)."""
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        if (i, j) in memo:
            return memo[i, j]
        if i == len(expected):
            result = j == len(actual)
        elif expected[i] == "...":
            result = go(i + 1, j) or (j < len(actual) and go(i, j + 1))
        else:
            result = j < len(actual) and expected[i] == actual[j] and go(i + 1, j + 1)
        memo[i, j] = result
        return result

    return go(0, 0)


def check_command(cmd: Command, block: Block, lines: list[str], status: int) -> None:
    _, echo = split_status(cmd.line)
    expected = trim(list(cmd.expected))
    if not echo:
        assert status == 0, f"{block.id}: `{cmd.line}` exited {status}; add '{ECHO_STATUS}' to show it\n" + "\n".join(lines)
    if not matches(expected, lines):
        pytest.fail(
            f"{block.id}: output of `{cmd.line}` differs from the documentation\n"
            f"--- documented\n" + "\n".join(expected) + "\n--- actual\n" + "\n".join(lines),
            pytrace=False,
        )


# ---------------------------------------------------------------- Python sessions


def run_python_sessions(doc: Path, scratch: dict) -> None:
    """Run the pycon blocks of `doc` as one doctest session in `scratch[doc]`; fail with the doctest report."""
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    globs: dict = {"__name__": "__docs__"}
    old = os.getcwd()
    os.chdir(scratch[doc])
    out = io.StringIO()
    try:
        for block in blocks(doc):
            if block.lang != "pycon":
                continue
            test = parser.get_doctest(block.body, globs, block.id, str(doc), block.line - 1)
            test.globs = globs  # get_doctest copies; the blocks of a document share one session
            runner.run(test, out=out.write, clear_globs=False)
    finally:
        os.chdir(old)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, out.getvalue()
