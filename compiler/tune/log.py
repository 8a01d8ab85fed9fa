"""The tuning log: one JSON line per measured candidate, appended as each finishes.

A line names its workload -- the program's source (by SHA-256), the kernel, the sizes, the target and the
backend -- and tdsl's version, so one file can hold several workloads and a run that stops half way resumes:
`tdsl tune --log F` skips candidates F already measured for the same workload, and counts them against
`--trials`.  `tdsl compile --tuned F` takes the fastest correct one of the workload it compiles.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tdsl.frontend.diagnostics import TdslError


@dataclass(frozen=True)
class Workload:
    source_sha256: str
    kernel: str
    sizes: tuple  # ((name, value), ...) sorted
    target: str
    backend: str

    @classmethod
    def of(cls, source: str, kernel: str, sizes: dict, target: str, backend: str) -> "Workload":
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        return cls(digest, kernel, tuple(sorted(sizes.items())), target, backend)

    def fields(self) -> dict:
        return {"source_sha256": self.source_sha256, "kernel": self.kernel, "sizes": dict(self.sizes),
                "target": self.target, "backend": self.backend}

    def matches(self, line: dict) -> bool:
        return all(_same(line.get(k), v) for k, v in self.fields().items())


def _same(a, b) -> bool:
    """Equal and of one JSON type, all the way down: a record's size 8.0 is not the program's size 8 (Python's
    == says it is), nor a float constant 1 the integer 1."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def kernels_text(prog) -> str:
    """The program's text without its schedule blocks and blank lines, which a workload's records are keyed by:
    a block the user adds or edits (`tune --append` writes one) changes no kernel, and it made the log unusable
    for the same program (probe of the 24th session)."""
    blocks = {n for b in prog.ast.schedules for n in range(b.span.line, (b.span.end_line or b.span.line) + 1)}
    kept = (line.rstrip() for n, line in enumerate(prog.ast.source.splitlines(), 1) if n not in blocks)
    return "\n".join(line for line in kept if line) + "\n"  # blank lines, as between blocks, change nothing


def read(path: Path) -> list[dict]:
    """Every record of a log (a missing file is an empty log; a torn last line, from a run killed while
    writing, is skipped).  Anything else that is not a log -- a folder, bytes that are not UTF-8, a line that is
    not a record -- is a TdslError that says where."""
    path = Path(path)
    if not path.exists():
        return []
    if path.is_dir():
        raise TdslError(f"{path} is a folder, not a tuning log (give the log's file)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TdslError(f"{path}: not a tuning log (byte {err.start} is not UTF-8 text)") from None
    except OSError as err:
        raise TdslError(f"{path}: cannot be read ({err.strerror})") from None
    lines = text.splitlines()
    torn = not text.endswith("\n")  # a record is written with its newline: only a last line without one is torn
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError, or an integer past Python's 4,300 digits
            if n < len(lines) or not torn:
                raise TdslError(f"{path}:{n}: not a tuning log line (JSON expected)") from None
            continue
        problem = _record_problem(record)
        if problem:
            raise TdslError(f"{path}:{n}: not a tuning log line ({problem})")
        records.append(record)
    return records


# The fields the tuner and `compile --tuned` read, and the JSON types each may have (exact: true is no number).
_FIELD_TYPES = {"steps": (str,), "ok": (bool,), "us": (int, float, type(None)), "t_estimate": (int, float),
                "sizes": (dict,), "kernel": (str,), "target": (str,), "backend": (str,),
                "source_sha256": (str,), "block": (str, type(None)), "choice": (dict,)}


def _record_problem(record) -> Optional[str]:
    if type(record) is not dict:
        return f"a JSON object expected, found {json.dumps(record)[:40]}"
    if "steps" not in record:
        return "no 'steps', the schedule's text"
    for key, types in _FIELD_TYPES.items():
        if key in record and type(record[key]) not in types:
            return f"its '{key}' is {json.dumps(record[key])[:40]}"
    us, estimate = record.get("us"), record.get("t_estimate")  # -5, NaN or Infinity would rank first
    if us is not None and not (_finite(us) and us > 0):
        return f"its 'us' is {json.dumps(us)[:40]}, not a measured time (a finite number of microseconds above zero)"
    if estimate is not None and not (_finite(estimate) and estimate >= 0):
        return (f"its 't_estimate' is {json.dumps(estimate)[:40]}, not an estimate (a finite number of seconds, at "
                f"least 0)")
    return None


def _finite(number) -> bool:
    """A JSON number a float holds (an integer of 400 digits is none: math.isfinite raises on it)."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def append(path: Path, workload: Workload, record: dict, version: str) -> dict:
    line = {**workload.fields(), "version": version, **record,
            "logged": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    line.pop("trace", None)  # the worker's traceback stays out of the log; `detail` keeps the message
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_line(path)
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")
    except OSError as err:
        raise TdslError(f"{path}: cannot write the tuning log ({err.strerror})") from None
    return line


def _drop_torn_line(path: Path) -> None:
    """Cut a last line without its newline (a run killed while writing it) off the log, so that the next record
    starts a line of its own: appended to the torn one, both would be lost, and `read` would refuse the log."""
    if not path.exists():
        return
    with path.open("rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def of_workload(records: list[dict], workload: Workload) -> list[dict]:
    return [r for r in records if workload.matches(r)]


def best(records: list[dict]) -> Optional[dict]:
    """The fastest correct timed record; without timed ones, the correct one the model ranked first."""
    return next(iter(fastest_first(records)), None)


def fastest_first(records: list[dict]) -> list[dict]:
    """The correct records: the timed ones by their time, then the others by the model's estimate."""
    ok = [r for r in records if r.get("ok")]
    timed = sorted((r for r in ok if r.get("us") is not None), key=lambda r: (r["us"], r["steps"]))
    return timed + sorted((r for r in ok if r.get("us") is None), key=lambda r: (r.get("t_estimate", 0.0), r["steps"]))
