"""Malformed programs never crash the compiler, never hang it, and get clean located diagnostics.

Each candidate of `malformed.generate.candidates()` (about 620 mutations of examples/*.tdsl, fixed seeds)
is written to a file and run through the CLI in process (`tdsl.compiler.driver.cli.main`):
`check --all`, and, when the frontend accepts the program (exit 0 or 1), also `tree` and
`compile --target nvidia -o OUT`.  The oracle, for every command:

* no exception escapes `main` and nothing prints a traceback (an internal error is a failure);
* the exit code is 0, 1 or 2;
* every diagnostic of an exit 2 is located: `FILE:LINE:COL: error: ...`, then the source line, then a
  caret line.  The only exceptions are errors about the file as a whole, which name the file
  (`tdsl: error: FILE has no schedule to check`, `... defines no kernel`, `cannot read 'FILE'`);
* the candidate's commands together take under 2 s.

At least 300 candidates must be refused with exit 2.  Failures whose cause lies outside the frontend are
listed in KNOWN_INTERNAL_ERRORS (crashes) and KNOWN_UNLOCATED_DIAGNOSTICS (strict xfail: the test fails
once they are fixed, so that the entry is removed).
"""

from __future__ import annotations

import contextlib
import io
import re
import signal
import time
import traceback
from dataclasses import dataclass, field

import pytest

from catalog import EXAMPLES
from malformed.generate import Candidate, candidates
from tdsl.compiler.driver.cli import main

CANDIDATES = candidates()
# Every command a candidate gets, together (check --all, tree, and a compile per legal schedule), may take at most
# TIME_LIMIT_S or SLOWDOWN_LIMIT times what the same commands take on the well-formed example the candidate came
# from, whichever is larger.  The heaviest candidates are the attention examples (three legal schedules, the
# flash ones replaying 14 checked steps in each command: 2.5-3 s on 2 cores under the rest of the suite), so a
# fixed limit alone is as slow as a loaded CI machine; judged against its own example, a candidate fails only
# for a slowdown the mutation caused.  A candidate over its limit is run again and judged by the faster run.
TIME_LIMIT_S = 3.0
SLOWDOWN_LIMIT = 2.0
HANG_GUARD_S = 30  # a hung candidate fails the test instead of hanging the run
MIN_REFUSED = 300

# Known failures whose cause lies outside the frontend, name -> what fails.  Each is an xfail(strict=True):
# fixing the cause makes the test fail until the entry is removed here.
#
# Candidates that crash (an exception escapes main): none found so far.
KNOWN_INTERNAL_ERRORS: dict[str, str] = {}
# Candidates whose exit-2 diagnostic has no position although it is about the program.
KNOWN_UNLOCATED_DIAGNOSTICS: dict[str, str] = {}
KNOWN_FAILURES = {**KNOWN_INTERNAL_ERRORS, **KNOWN_UNLOCATED_DIAGNOSTICS}

# Errors about a file as a whole: they name the file instead of a line of it.
FILE_LEVEL = [
    re.compile(r"^tdsl: error: (?P<file>.+) has no schedule to check: it has no `schedule NAME \{ \.\.\. \}` block "
               r"\(check --schedule none checks program order\)$"),
    re.compile(r"^tdsl: error: (?P<file>.+) defines no kernel: "),
    re.compile(r"^tdsl: error: cannot read '(?P<file>.+)': "),
]
CARET_LINE = re.compile(r"^  [ \t]*\^+$")


@dataclass
class Run:
    argv: list[str]
    code: object = None  # exit code, or the exception that escaped main
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


class _Hung(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hung(f"still running after {HANG_GUARD_S} s")


def _run(argv: list[str]) -> Run:
    run = Run(argv)
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(HANG_GUARD_S)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            run.code = main(argv)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - an escaping exception is what this test looks for
        run.code = exc
        run.failures.append("exception escaped main:\n" + "".join(traceback.format_exception(exc)))
    finally:
        run.seconds = time.perf_counter() - start
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    run.out, run.err = out.getvalue(), err.getvalue()
    run.failures += _oracle(run)
    return run


def _oracle(run: Run) -> list[str]:
    failures = []
    if isinstance(run.code, BaseException):
        return failures
    if run.code not in (0, 1, 2):
        failures.append(f"exit code {run.code!r}")
    if "Traceback (most recent call last)" in run.out + run.err:
        failures.append("a traceback was printed")
    if run.code == 2:
        failures += _check_diagnostics(run, program=run.argv[1])
    return failures


def _diagnostics(run: Run) -> list[list[str]]:
    """Each diagnostic as its lines: stderr holds one; `check --all` prints one per failing schedule."""
    found = []
    for stream in (run.out, run.err):
        lines = stream.split("\n")
        for n, line in enumerate(lines):
            if ": error: " in line or line.startswith("tdsl: error: "):
                found.append(lines[n : n + 3])
    return found


def _check_diagnostics(run: Run, program: str) -> list[str]:
    found = _diagnostics(run)
    if not found:
        return ["exit 2 without a diagnostic"]
    failures = []
    located = re.compile(rf"^{re.escape(program)}:\d+:\d+: error: \S")
    for lines in found:
        head = lines[0]
        if located.match(head):
            if len(lines) < 3 or not lines[1].startswith("  ") or not CARET_LINE.match(lines[2]):
                failures.append(f"located diagnostic without its source line and caret line: {lines!r}")
        elif not any(p.match(head) and p.match(head).group("file") == program for p in FILE_LEVEL):
            failures.append(f"diagnostic without a position: {head!r}")
    return failures


@dataclass
class Outcome:
    runs: list[Run]

    @property
    def refused(self) -> bool:
        return self.runs[0].code == 2

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)


_OUTCOMES: dict[str, Outcome] = {}


def _outcome(candidate: Candidate, tmp_dir) -> Outcome:
    if candidate.name not in _OUTCOMES:
        path = tmp_dir / f"{candidate.name}.tdsl"
        path.write_bytes(candidate.data)
        runs = [_run(["check", str(path), "--all"])]
        if runs[0].code in (0, 1):  # the frontend accepted it: the later stages get it too
            runs.append(_run(["tree", str(path)]))
            runs.append(_run(["compile", str(path), "--target", "nvidia", "-o", str(tmp_dir / "out.py")]))
            for name in _legal_schedules(runs[0].out)[1:]:  # the first one is the default, compiled above
                runs.append(_run(["compile", str(path), "--target", "nvidia", "--schedule", name,
                                  "-o", str(tmp_dir / "out.py")]))
        _OUTCOMES[candidate.name] = Outcome(runs)
    return _OUTCOMES[candidate.name]


def _time_limit(candidate: Candidate, tmp_dir) -> float:
    """TIME_LIMIT_S, or SLOWDOWN_LIMIT times the well-formed example's own commands (measured now, under the
    same load) when that is larger."""
    parts = candidate.name.split(".")
    source = EXAMPLES / f"{parts[1]}.tdsl" if len(parts) == 3 else None
    if source is None or not source.is_file():
        return TIME_LIMIT_S
    original = _outcome(Candidate(f"original.{parts[1]}", source.read_bytes()), tmp_dir)
    return max(TIME_LIMIT_S, SLOWDOWN_LIMIT * original.seconds)


def _legal_schedules(check_output: str) -> list[str]:
    return re.findall(r"^schedule (\S+): legal", check_output, re.M)


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("malformed")
    # Warm up (grammar, isl, code generator imports) so that no candidate pays for them.
    for argv in (["check", "--all"], ["tree"], ["compile", "--target", "nvidia", "-o", str(path / "warm.py")]):
        _run([argv[0], str(EXAMPLES / "gemm_silu.tdsl"), *argv[1:]])
    return path


def _report(candidate: Candidate, outcome: Outcome, problems: list[str]) -> str:
    text = candidate.text
    shown = ascii(text if len(text) <= 3000 else text[:1500] + " ... " + text[-1500:])
    parts = [f"candidate {candidate.name}: " + "; ".join(problems), f"program text: {shown}"]
    for run in outcome.runs:
        parts.append(f"$ tdsl {' '.join(run.argv)}  -> {run.code!r} in {run.seconds:.2f} s")
        parts.append((run.out + run.err)[-3000:])
        parts += run.failures
    return "\n".join(parts)


def _params():
    for c in CANDIDATES:
        marks = []
        if c.name in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[c.name]))
        yield pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("candidate", list(_params()))
def test_malformed_program_gets_a_clean_answer(candidate, tmp_dir):
    outcome = _outcome(candidate, tmp_dir)
    problems = [f for run in outcome.runs for f in run.failures]
    # only past TIME_LIMIT_S is the well-formed example timed (the limit's other half), and only past that is the
    # candidate run again
    if outcome.seconds >= TIME_LIMIT_S and outcome.seconds >= (limit := _time_limit(candidate, tmp_dir)):
        del _OUTCOMES[candidate.name]
        outcome = min(outcome, _outcome(candidate, tmp_dir), key=lambda o: o.seconds)
        if outcome.seconds >= limit:
            problems.append(f"took {outcome.seconds:.2f} s (limit {limit:.2f} s)")
    assert not problems, _report(candidate, outcome, problems)


def _refused(candidate: Candidate, tmp_dir) -> bool:
    """Does `check --all` exit 2?  From the candidate's outcome when this worker ran its test; else that command
    alone (its test, on another pytest-xdist worker, runs the rest)."""
    if candidate.name in _OUTCOMES:
        return _OUTCOMES[candidate.name].refused
    path = tmp_dir / f"{candidate.name}.tdsl"
    path.write_bytes(candidate.data)
    return _run(["check", str(path), "--all"]).code == 2


def test_at_least_300_candidates_are_refused(tmp_dir):
    """Stops at the 300th (about half of the 626 candidates; the whole walk took 45 s on the CI machine)."""
    refused = 0
    for candidate in CANDIDATES:
        refused += _refused(candidate, tmp_dir)
        if refused >= MIN_REFUSED:
            return
    pytest.fail(f"only {refused} of {len(CANDIDATES)} candidates exit with 2")


def test_known_failures_name_existing_candidates():
    assert set(KNOWN_FAILURES) <= {c.name for c in CANDIDATES}


def test_candidates_are_deterministic():
    again = candidates()
    assert [(c.name, c.data) for c in again] == [(c.name, c.data) for c in CANDIDATES]
