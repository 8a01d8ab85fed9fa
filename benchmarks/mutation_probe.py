"""Mutated library programs through the whole front half: no user mistake may end in an internal error.

    python benchmarks/mutation_probe.py --mutations 3000 --seed 2

Takes the .tdsl files of the three libraries (examples, benchmarks/polybench, benchmarks/programs), changes one to
three tokens of each (mostly inside the schedule blocks: a replaced, deleted, inserted or swapped token; the
inserted ones are sizes, scopes, grid axes, keywords and operators), then loads the program, applies its first
four schedules and lowers each for Triton and TileLang.  Every step must either succeed or raise a TdslError (the
diagnostics a user sees); any other exception is printed with its mutated source, saved under --out, and makes
the exit status 1.  tests/frontend/test_frontend_fuzz.py does the same for the parser and checker alone.
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import sys
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = [ROOT / "examples", ROOT / "benchmarks" / "polybench", ROOT / "benchmarks" / "programs"]
TOKEN = re.compile(r"\s+|[A-Za-z_][A-Za-z0-9_]*|\d+\.?\d*(?:e-?\d+)?|->|<=|>=|==|!=|//|\S")
INSERTED = ["0", "1", "-1", "2", "3", "7", "64", "100000", "shared", "register", "global", "grid.x", "grid.y",
            "block.x", "stages=", "at=", "factor=", "i", "j", "k", "(", ")", ",", "=", "f32", "bf16", "*", "-", "+",
            "/"]
SECONDS_PER_CASE = 60


class _Slow(Exception):
    pass


def _too_slow(*_) -> None:
    raise _Slow()


def mutate(text: str, rng: random.Random) -> str:
    """`text` with one to three tokens changed, in the schedule blocks four times out of five."""
    tokens = TOKEN.findall(text)
    first_schedule = text.find("\nschedule")
    start = len(TOKEN.findall(text[:first_schedule])) if first_schedule > 0 and rng.random() < 0.8 else 0
    for _ in range(rng.randint(1, 3)):
        visible = [n for n in range(start, len(tokens)) if not tokens[n].isspace()]
        if not visible:
            break
        n, roll = rng.choice(visible), rng.random()
        if roll < 0.3:
            tokens[n] = rng.choice(INSERTED)
        elif roll < 0.5:
            tokens[n] = rng.choice([t for t in tokens if not t.isspace()])
        elif roll < 0.7:
            del tokens[n]
        elif roll < 0.85:
            tokens.insert(n, rng.choice(INSERTED) + " ")
        else:
            m = rng.choice(visible)
            tokens[n], tokens[m] = tokens[m], tokens[n]
    return "".join(tokens)


def run_through(source: str, filename: str, reached: Counter) -> None:
    """Load, schedule and lower `source`, counting in `reached` what got through (loaded programs, applied
    schedules, lowered kernels).  Raises what the compiler raises other than a TdslError."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.errors import TdslError
    from tdsl.compiler.lower.pipeline import lower_for

    try:
        prog = loads(source, filename)
    except TdslError:
        return
    reached["loaded"] += 1
    for name in list(prog.schedule_names)[:4]:
        try:
            sched = prog.schedule(name)
        except TdslError:
            continue
        reached["scheduled"] += 1
        for backend in ("triton", "tilelang"):
            try:
                lower_for(sched, backend)
                reached["lowered"] += 1
            except TdslError:
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutations", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("mutation_findings"))
    args = ap.parse_args()
    files = [p for lib in LIBRARIES for p in sorted(lib.rglob("*.tdsl"))]
    rng = random.Random(args.seed)
    signal.signal(signal.SIGALRM, _too_slow)
    internal = slow = 0
    reached: Counter = Counter()
    for n in range(args.mutations):
        path = rng.choice(files)
        source = mutate(path.read_text(encoding="utf-8"), rng)
        signal.alarm(SECONDS_PER_CASE)
        try:
            run_through(source, path.name, reached)
        except _Slow:
            slow += 1
            print(f"over {SECONDS_PER_CASE} s: {path.name} (mutation {n})", flush=True)
        except Exception as err:  # noqa: BLE001 -- what the probe looks for
            internal += 1
            args.out.mkdir(parents=True, exist_ok=True)
            saved = args.out / f"seed{args.seed}-{n}-{path.stem}.tdsl"
            saved.write_text(source, encoding="utf-8")
            print(f"internal error in {saved}: {type(err).__name__}: {err}", flush=True)
            print("    " + "\n    ".join(traceback.format_exc().splitlines()[-6:]), flush=True)
        finally:
            signal.alarm(0)
    print(f"{args.mutations} mutations of {len(files)} files: {reached['loaded']} loaded, {reached['scheduled']} "
          f"schedules applied, {reached['lowered']} lowerings; {internal} internal errors, {slow} over "
          f"{SECONDS_PER_CASE} s")
    sys.exit(1 if internal else 0)


if __name__ == "__main__":
    main()
