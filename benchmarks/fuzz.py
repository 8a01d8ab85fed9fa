"""Long runs of tdsl's differential fuzzer (tests/fuzz), spread over processes.

    python benchmarks/fuzz.py --sequences 10000 --jobs 2                 # every backend, seeds 0..jobs-1
    python benchmarks/fuzz.py --sequences 200 --backends triton --seed 7
    python benchmarks/fuzz.py --libraries polybench,programs --named-start 0.5   # PolyBench and the GPU
                                            # programs, half of them grown from one of their named schedules
    python benchmarks/fuzz.py --replay findings/abc123.json              # run one saved case again

Every finding is shrunk to a minimal case, printed, and saved as JSON under --out (replayable with
--replay); the counts are printed at the end, with --json also as a JSON file.  Each worker process runs
its own seed; a worker is restarted every --per-process sequences so the generated modules it imports do
not pile up.  Exit status 1 when there is a finding.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TRITON_INTERPRET", "1")  # generated Triton kernels run under the Triton interpreter
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


def _chunk(args: tuple) -> dict:
    """One worker's share: `count` sequences starting at `first` of seed `seed`."""
    seed, first, count, backends, shrink, libraries, named_start, distributions = args
    from fuzz.engine import Fuzzer

    fuzzer = Fuzzer(backends=tuple(backends), shrink=shrink, libraries=tuple(libraries), named_start=named_start,
                    distributions=tuple(distributions),
                    workdir=Path(tempfile.mkdtemp(prefix="tdsl-fuzz-")))
    result = fuzzer.run_range(seed, first, count)
    return {
        "result": result,
        "findings": [(str(f), f.kind, f.where, case.to_json(), case.describe()) for f, case in result.findings],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sequences", type=int, default=200, help="sequences in all (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)), help="worker processes")
    ap.add_argument("--per-process", type=int, default=50, help="sequences per worker before it is restarted")
    ap.add_argument("--backends", default="triton,ascend-950,ascend-910b,tilelang",
                    help="comma-separated: triton, ascend-950, ascend-910b, tilelang, and triton-sm90 (the Triton "
                         "module compiled for sm_90, every 5th sequence: the interpreter takes code the GPU "
                         "compiler refuses)")
    ap.add_argument("--libraries", default="examples",
                    help="comma-separated files to start from: examples, polybench, programs (default examples)")
    ap.add_argument("--named-start", type=float, default=0.0,
                    help="share of the files' sequences that start from one of the file's named schedules")
    ap.add_argument("--distributions", default="normal,wide",
                    help="the inputs every case is checked on: normal, wide, special (infinities, NaN, signed "
                         "zeros among normal values; tests/fuzz/cases.py)")
    ap.add_argument("--no-shrink", action="store_true", help="report findings as found, unshrunk")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "fuzz-findings"), help="where findings are saved")
    ap.add_argument("--json", help="write the counts to this file")
    ap.add_argument("--replay", help="run one saved case (a JSON file written by an earlier run)")
    args = ap.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    if args.replay:
        return replay(Path(args.replay), backends)

    from fuzz.engine import Result

    libraries = [name for name in args.libraries.split(",") if name]
    from fuzz.cases import parse_distributions

    try:
        distributions = parse_distributions(args.distributions)
    except ValueError as err:
        ap.error(str(err))
    chunks = [(args.seed, first, min(args.per_process, args.sequences - first), backends, not args.no_shrink,
               libraries, args.named_start, distributions)
              for first in range(0, args.sequences, args.per_process)]
    total, saved, started = Result(), [], time.time()
    out = Path(args.out)
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        for n, part in enumerate(pool.imap_unordered(_chunk, chunks), 1):
            total.merge(part["result"])
            for text, kind, where, case_json, described in part["findings"]:
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"{kind}-{abs(hash(case_json)) % 10**10:010d}.json"
                path.write_text(case_json)
                saved.append(str(path))
                print(f"\n=== finding ({path})\n{described}\n{text}", flush=True)
            print(f"[{n}/{len(chunks)}] {total.sequences} sequences, {len(total.findings)} findings, "
                  f"{time.time() - started:.0f} s", flush=True)
    elapsed = time.time() - started
    print(f"\n{total.summary()}\nrefusals (most common):\n{total.refusal_summary()}\n"
          f"{elapsed:.0f} s, {total.sequences / max(elapsed, 1e-9):.1f} sequences/s")
    if args.json:
        Path(args.json).write_text(json.dumps(total.counts() | {"seconds": round(elapsed), "findings": saved,
                                                                "backends": backends, "seed": args.seed,
                                                                "libraries": libraries,
                                                                "named_start": args.named_start,
                                                                "distributions": args.distributions}, indent=1))
    return 1 if total.findings else 0


def replay(path: Path, backends) -> int:
    from fuzz.cases import Case
    from fuzz.engine import Fuzzer, Result

    case = Case.from_json(path.read_text())
    finding = Fuzzer(backends=tuple(backends), shrink=False).check(
        case, backends, Path(tempfile.mkdtemp(prefix="tdsl-fuzz-")), Result())
    print(case.source)
    print(case.describe())
    print(finding or "no finding")
    return 1 if finding else 0


if __name__ == "__main__":
    sys.exit(main())
