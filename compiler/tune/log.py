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
        return all(line.get(k) == v for k, v in self.fields().items())


def read(path: Path) -> list[dict]:
    """Every record of a log (a missing file is an empty log; a torn last line, from a run killed while
    writing, is skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            records.append(json.loads(text))
        except json.JSONDecodeError:
            if n < len(lines):
                raise TdslError(f"{path}:{n}: not a tuning log line (JSON expected)") from None
    return records


def append(path: Path, workload: Workload, record: dict, version: str) -> dict:
    line = {**workload.fields(), "version": version, **record,
            "logged": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    line.pop("trace", None)  # the worker's traceback stays out of the log; `detail` keeps the message
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    return line


def of_workload(records: list[dict], workload: Workload) -> list[dict]:
    return [r for r in records if workload.matches(r)]


def best(records: list[dict]) -> Optional[dict]:
    """The fastest correct timed record; without timed ones, the correct one the model ranked first."""
    ok = [r for r in records if r.get("ok")]
    timed = [r for r in ok if r.get("us") is not None]
    if timed:
        return min(timed, key=lambda r: (r["us"], r["steps"]))
    return min(ok, key=lambda r: (r.get("t_estimate", 0.0), r["steps"])) if ok else None
