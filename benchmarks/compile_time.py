"""How long the front half of the compiler takes per example: parse + check, isl model, dependences,
and each schedule block replayed with its legality checks.  A benchmark, not a test.

    .venv/bin/python benchmarks/compile_time.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from tdsl.compiler.driver.api import Program
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.errors import StepError
from tdsl.frontend.check import load_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def measure(path: Path) -> dict:
    t0 = time.perf_counter()
    tree, kernels = load_file(path)
    t1 = time.perf_counter()
    prog = Program(tree, kernels)
    model = prog.model()
    t2 = time.perf_counter()
    deps = compute_dependences(model)
    t3 = time.perf_counter()
    per_schedule = {}
    for name in prog.schedule_names:
        s0 = time.perf_counter()
        try:
            prog.schedule(name)
            verdict = "legal"
        except StepError as err:
            verdict = err.rule or "error"
        per_schedule[name] = (time.perf_counter() - s0, verdict)
    return {"parse": t1 - t0, "model": t2 - t1, "deps": t3 - t2, "n_deps": len(deps), "schedules": per_schedule}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("| example | parse+check ms | model ms | deps ms (n) | schedule ms (verdict) | total ms |")
    print("|---|---|---|---|---|---|")
    for path in sorted(EXAMPLES.glob("*.tdsl")):
        runs = [measure(path) for _ in range(args.repeat)]
        med = lambda key: statistics.median(r[key] for r in runs) * 1e3  # noqa: E731
        sched_cells = []
        total = med("parse") + med("model") + med("deps")
        for name in runs[0]["schedules"]:
            ms = statistics.median(r["schedules"][name][0] for r in runs) * 1e3
            total += ms
            sched_cells.append(f"{name} {ms:.1f} ({runs[0]['schedules'][name][1]})")
        print(f"| {path.stem} | {med('parse'):.1f} | {med('model'):.1f} | {med('deps'):.1f} ({runs[0]['n_deps']}) "
              f"| {'; '.join(sched_cells)} | {total:.1f} |")


if __name__ == "__main__":
    main()
