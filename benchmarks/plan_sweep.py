"""The buffer plan (what the cost model counts) against what the compiler generates, on every file of the three
libraries (benchmarks/polybench, examples, benchmarks/programs): each named schedule and program order, at the
file's own sizes and with every integer size set to 1, 2 and 7.

    python benchmarks/plan_sweep.py read-back     # the fuzz oracle "plan": per kernel, the tensors read back
    python benchmarks/plan_sweep.py shared        # TileLang's dyn_shared_memory_buf against the cost model's
                                                  # plan as generated (named schedules at their own sizes;
                                                  # --sizes own,2,7 adds every integer size set to 2 and 7)

`shared` leaves program order out: with no tile-level loop the plan takes each loop nest one element at a time
(the chapter's unscheduled baseline), while the lowering makes the whole nest one tile, which TileLang stages
for its products (covariance, correlation and 3mm in program order ask for 32-128 KiB the plan does not hold).

Prints each disagreement and a count; exit status 1 when there is one.  Minutes, not CI: the tests keep the
cases that once disagreed (tests/fuzz/findings/plan-*.json, tests/backends/tilelang/test_tilelang_backend.py).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
LIBRARIES = [ROOT / "benchmarks" / "polybench", ROOT / "examples", ROOT / "benchmarks" / "programs"]
REDUCTION_WORKSPACE = 512  # TileLang's own buffer for a cross-warp reduction


def integer_sizes(text: str, value: int) -> dict:
    """Every `const` with an integer value and every `param` of a file, set to `value`."""
    sizes = {}
    for line in re.finditer(r"^(?:const|param)\s+([^\n#]+)", text, re.M):
        for part in line.group(1).split(","):
            name, _, given = (x.strip() for x in part.partition("="))
            if not given or re.fullmatch(r"\d+", given):
                sizes[name] = value
    return sizes


def schedules(size_sets, program_order: bool = True):
    """(label, program, name, schedule) for every file, size set and schedule that loads."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.errors import TdslError

    for path in (p for lib in LIBRARIES for p in sorted(lib.rglob("*.tdsl"))):
        text = path.read_text(encoding="utf-8")
        for value in size_sets:
            sizes = integer_sizes(text, value) if value else None
            try:
                prog = loads(text, path.name, sizes=sizes)
            except TdslError:
                continue  # sizes the program's own checks refuse
            for name in [None] * program_order + list(prog.schedule_names):
                try:
                    yield f"{path.stem} {sizes or ''} {name or '(program order)'}", prog, name, prog.schedule(name)
                except TdslError:
                    continue  # an `illegal` block


def read_back() -> int:
    from fuzz.oracles import check_plan_matches_lowering

    checked = apart = 0
    for label, _, _, sched in schedules((None, 1, 2, 7)):
        checked += 1
        finding = check_plan_matches_lowering(sched)
        if finding is not None:
            apart += 1
            print(label, finding, flush=True)
    print(f"{checked} schedules, {apart} where the plan and the lowering read back different tensors")
    return apart


def shared(size_sets=(None,)) -> int:
    from tdsl.backends.tilelang.lowering import dynamic_shared_bytes, lower_kernels
    from tdsl.compiler.analysis.buffer_plan import plan_kernels
    from tdsl.compiler.analysis.buffer_sharing import working_sets
    from tdsl.compiler.analysis.cost.backend_rules import padded_bytes
    from tdsl.compiler.analysis.cost.staging import as_generated
    from tdsl.compiler.driver.generate import generate_schedule, load_module
    from tdsl.compiler.errors import TdslError
    from tdsl.compiler.targets import get_target

    tgt, out = get_target("h100"), Path(tempfile.mkdtemp(prefix="tdsl-shared-"))
    checked = apart = 0
    for n, (label, prog, name, sched) in enumerate(schedules(size_sets, program_order=False)):
        try:
            module = load_module(generate_schedule(prog, sched, "nvidia", "tilelang", name or ""), out / f"m{n}.py")
        except TdslError:
            continue  # a schedule TileLang refuses, with its reason
        artifacts = lower_kernels(module, "sm_90a")
        for kp in plan_kernels(sched, tgt):
            generated = as_generated(sched.model, kp, tgt, "tilelang")
            planned = working_sets(generated.buffers, generated.slots, len(kp.stmts), padded_bytes)[0].get("shared", 0)
            asked = dynamic_shared_bytes(artifacts[kp.name])
            checked += 1
            if asked - planned not in (0, REDUCTION_WORKSPACE):
                apart += 1
                print(f"{label} {kp.name}: TileLang {asked} B, the cost model {planned} B", flush=True)
    print(f"{checked} kernels, {apart} whose shared memory the cost model does not give")
    return apart


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("check", choices=("read-back", "shared"))
    ap.add_argument("--sizes", default="own", help="shared: comma-separated size sets, `own` the file's own "
                    "sizes, a number every integer size set to it (e.g. own,2,7)")
    args = ap.parse_args()
    size_sets = tuple(None if v == "own" else int(v) for v in args.sizes.split(","))
    sys.exit(1 if (read_back() if args.check == "read-back" else shared(size_sets)) else 0)


if __name__ == "__main__":
    main()
