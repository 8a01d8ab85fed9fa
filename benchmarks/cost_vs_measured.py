"""The cost model against the H200 measurements: does the estimate rank schedules as the GPU does?

Reads every benchmarks/gpu/results/*.json written by benchmarks/gpu/run.py (a workload is a key with a
"schedules" list); for each (workload, schedule) takes **the latest run that measured it** with a correct
output (by the date the run recorded: the kernels the compiler generates changed between runs, so the latest
run is the one the current compiler's schedules match best).  Each measured schedule is rebuilt from its .tdsl
(benchmarks/gpu/build.py's WORKLOADS; the program's constants must be the sizes in the workload's name),
analysed for the H200, and printed with the measured time, the roofline bound and the estimate.  Then, per
workload and overall, the pairs of schedules whose measurements differ by at least 10% (closer pairs are no
ordering), how many the estimate orders the same way (a tie counts as a miss) and how many the roofline bound
does, and the range of estimate / measured.  `--attention` adds the runs of benchmarks/gpu/attention_mha.py,
each flash variant rebuilt as that script builds it.  `--tune-logs` adds every candidate the tuner measured
(benchmarks/gpu/results/*tune*.jsonl, one workload per kernel and sizes, the latest time of each schedule),
rebuilt from the steps the log holds on the program of benchmarks/gpu/tune.py's WORKLOADS.

    .venv/bin/python benchmarks/cost_vs_measured.py [--target h200] [--json OUT] [--attention] [--tune-logs]
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "gpu" / "results"
SIGNIFICANT = 1.10  # measurements closer than this are no ordering


def measurements(results: Path = RESULTS) -> dict:
    """(workload, schedule) -> (microseconds, file) of the latest run (by its recorded date) that measured the
    pair with a correct output."""
    latest: dict = {}
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            continue
        when = str(data.get("date", path.name))
        for workload, entry in data.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("schedules"), list):
                continue
            for row in entry["schedules"]:
                key = (workload, row["schedule"])
                if row.get("ok") and isinstance(row.get("us"), (int, float)) and when >= latest.get(key, ("",))[0]:
                    latest[key] = (when, row["us"], path.name)
    return {key: (us, name) for key, (_, us, name) in latest.items()}


def attention_measurements(results: Path = RESULTS) -> dict:
    """The rows of benchmarks/gpu/attention_mha.py (Triton backend): (workload, schedule) -> (microseconds,
    file) of the latest run, the workload named EXAMPLE_bBhHlL."""
    latest: dict = {}
    for path in sorted(results.glob("*mha*.json")):
        data = json.loads(path.read_text())
        when = str(data.get("date", path.name))
        for row in data.get("rows", []):
            if row.get("backend", "triton") != "triton" or not row.get("ok") or not row.get("us"):
                continue
            key = (f"{row['example']}_b{row['B']}h{row['H']}l{row['L']}", row.get("schedule", "unfused"))
            if when >= latest.get(key, ("",))[0]:
                latest[key] = (when, row["us"], path.name)
    return {key: (us, name) for key, (_, us, name) in latest.items()}


def attention_source(example: str) -> str:
    """The source of an attention example, or of the variant attention_mha.py derived from one (the causal twins
    of mha_fa and mha_fa_exp2: FlashAttention's rounding and exponential applied to examples/mha_causal.tdsl)."""
    from attention_mha import EXP2_EXAMPLES, ROUNDING_EXAMPLES, fa_exponential, fa_rounding

    path = ROOT / "examples" / f"{example}.tdsl"
    if path.exists():
        return path.read_text()
    for base, name in ROUNDING_EXAMPLES.items():
        if example == name:
            return fa_rounding(attention_source(base))
    for base, name in EXP2_EXAMPLES.items():
        if example == name:
            return fa_exponential(fa_rounding(attention_source(base)), base)
    raise FileNotFoundError(f"no attention example or variant named {example}")


def workload_source(workload: str, schedule: str):
    """The .tdsl file (benchmarks/gpu/build.py WORKLOADS) whose stem starts the workload's name and that has
    the schedule; the longest such stem wins (gemm_bf16 over gemm)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from build import WORKLOADS

    found = [path for path, schedules in WORKLOADS
             if schedule in schedules and workload.startswith(Path(path).stem + "_")]
    return max(found, key=lambda p: len(Path(p).stem)) if found else None


def sizes_in_name(workload: str) -> list:
    """The numbers of a workload's name (gemm_bf16_1024x4096x12288 -> [1024, 4096, 12288])."""
    last = workload.rsplit("_", 1)[-1]
    return [int(x) for x in last.split("x")] if all(x.isdigit() for x in last.split("x")) else []


def check_sizes(prog, workload: str) -> None:
    """The program's constants are the measured sizes: every number of the workload's name is one of them."""
    consts = {v for v in prog.model().sizes.values() if isinstance(v, int)}
    missing = [n for n in sizes_in_name(workload) if n not in consts]
    if missing:
        raise SystemExit(f"{workload}: sizes {missing} are not constants of {prog.filename}")


def rows(target: str) -> list:
    from tdsl.compiler.driver.api import load

    out, programs = [], {}
    for (workload, schedule), (us, run) in sorted(measurements().items()):
        source = workload_source(workload, schedule)
        if source is None:
            continue
        if source not in programs:
            programs[source] = load(ROOT / source)
            check_sizes(programs[source], workload)
        out.append(row(workload, source, schedule, us, run, programs[source].schedule(schedule), target))
    return out


def attention_rows(target: str) -> list:
    """The multi-head attention measurements, each schedule rebuilt as attention_mha.py builds it (the flash
    variants are the example's flash schedule with other numbers) at its B, H and L."""
    import tempfile

    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from attention_mha import VARIANTS, variant_source

    from tdsl.compiler.driver.api import load

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for (workload, schedule), (us, run) in sorted(attention_measurements().items()):
            example, shape = workload.split("_b")
            b, rest = shape.split("h")
            h, length = rest.split("l")
            text = attention_source(example)
            path = Path(tmp) / f"{example}.tdsl"
            path.write_text(text + "".join(variant_source(text, v, n) for v, n in VARIANTS.items() if n))
            prog = load(path, sizes={"B": int(b), "H": int(h), "L": int(length)})
            out.append(row(workload, f"examples/{example}.tdsl", schedule, us, run, prog.schedule(schedule), target))
    return out


def tune_log_measurements(results: Path = RESULTS) -> dict:
    """(kernel, sizes, steps) -> (microseconds, file) of the latest correct time of every candidate in the tuning
    logs (a log's lines are in the order they were measured), every workload's times taken by one method: the
    replays of a CUDA graph where any of its candidates was so timed, do_bench otherwise.  do_bench times a
    call from the host, and a chain of launches shorter than its host dispatch measures the dispatch
    (quant_gemm's three launches: 122-145 us under do_bench, 78-95 us in a graph, commit cbedbdf)."""
    latest: dict = {}
    for path in sorted(results.glob("*tune*.jsonl")):
        for text in path.read_text().splitlines():
            if not text.startswith("{"):
                continue
            line = json.loads(text)
            if line.get("ok") and isinstance(line.get("us"), (int, float)) and line.get("steps"):
                workload = (line["kernel"], tuple(sorted(line["sizes"].items())))
                key = (*workload, _timing_method(line), line["steps"])
                when = line.get("logged", path.name)
                if when >= latest.get(key, ("",))[0]:
                    latest[key] = (when, line["us"], path.name)
    graphed = {(kernel, sizes) for kernel, sizes, method, _ in latest if method == "graph"}
    return {
        (kernel, sizes, steps): (us, name)
        for (kernel, sizes, method, steps), (_, us, name) in latest.items()
        if method == ("graph" if (kernel, sizes) in graphed else "do_bench")
    }


def _timing_method(line: dict) -> str:
    """How a logged time was taken: 'graph' (the replays of a CUDA graph) or 'do_bench' (older logs say
    nothing, and were all timed by do_bench)."""
    return "graph" if line.get("timing", "").startswith("CUDA graph") else "do_bench"


def tune_log_rows(target: str, results: Path = RESULTS) -> list:
    """The tuners' measured candidates, each schedule rebuilt from its steps on the program of the workload
    (tune.py's WORKLOADS: the file whose kernel has the log's name)."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from tune import WORKLOADS

    from tdsl.compiler.driver.api import load, loads
    from tdsl.compiler.tune.measure import block_source

    files = {}
    for path, _, _ in WORKLOADS.values():
        for kernel in load(ROOT / path).kernels:
            files.setdefault(kernel, path)
    out = []
    for (kernel, sizes, steps), (us, run) in sorted(tune_log_measurements(results).items()):
        if kernel not in files:
            continue
        source = files[kernel]
        given = {k: v for k, v in sizes if isinstance(v, int)}  # a log's sizes hold the float constants too
        prog = loads(block_source((ROOT / source).read_text(), "logged", steps, kernel), source, sizes=given)
        workload = f"{kernel} " + ",".join(f"{k}={v}" for k, v in sizes)
        name = " ".join(_knobs(steps))
        out.append(row(workload, source, name, us, run, prog.schedule("logged"), target))
    return out


def _knobs(steps: str) -> list:
    """A short name of a logged schedule: its tile, split, stages, warps and launch options."""
    import re

    words = []
    for line in steps.splitlines():
        numbers = re.findall(r"\b(\d+)\b", line)
        if line.startswith(("io, jo", "tile(")) or " = tile(" in line:
            words.append("x".join(numbers))
        elif " = split(" in line:
            words.append("k" + numbers[-1])
        elif line.startswith("pipeline("):
            words.append("s" + numbers[-1])
        elif line.startswith("bind(") and "grid.x" in line:
            words.append(line.split("(")[1].split(",")[0].split(".")[-1])
        elif line.startswith("launch("):
            words.append(line[len("launch("):].rstrip(")").split(", ", 1)[-1].replace(" ", ""))
    return words


def row(workload, source, schedule, us, run, sched, target) -> dict:
    from tdsl.compiler.analysis.cost import analyze

    cost = analyze(sched, target)
    return {"workload": workload, "source": source, "schedule": schedule, "measured_us": us, "run": run,
            "t_bound_us": cost.t_bound * 1e6, "t_estimate_us": cost.t_estimate * 1e6,
            "limits": [k.estimate.limit for k in cost.kernels if k.estimate is not None]}


def pairs(group: list, key: str = "t_estimate_us") -> tuple:
    """(orderings, agreeing, ties) over the pairs of one workload whose measurements differ by >= 10%: how many
    the model's `key` orders as measured, and how many it ties (a tie is no agreement)."""
    counted = agree = ties = 0
    for a, b in combinations(group, 2):
        fast, slow = sorted((a, b), key=lambda r: r["measured_us"])
        if slow["measured_us"] < SIGNIFICANT * fast["measured_us"]:
            continue
        counted += 1
        agree += fast[key] < slow[key]
        ties += fast[key] == slow[key]
    return counted, agree, ties


def report(table: list) -> str:
    lines = []
    workloads = list(dict.fromkeys(r["workload"] for r in table))
    total_counted = total_agree = bound_agree = bound_ties = 0
    for w in workloads:
        group = [r for r in table if r["workload"] == w]
        counted, agree, _ = pairs(group)
        _, b_agree, b_ties = pairs(group, "t_bound_us")
        total_counted, total_agree = total_counted + counted, total_agree + agree
        bound_agree, bound_ties = bound_agree + b_agree, bound_ties + b_ties
        lines.append(f"{w} ({group[0]['source'] if len({r['source'] for r in group}) == 1 else 'several files'})")
        lines.append(f"  {'schedule':<20} {'measured us':>11} {'t_bound us':>10} {'t_estimate us':>13} "
                     f"{'est/meas':>8}  limit")
        for r in sorted(group, key=lambda r: r["measured_us"]):
            lines.append(f"  {r['schedule']:<20} {r['measured_us']:>11.1f} {r['t_bound_us']:>10.1f} "
                         f"{r['t_estimate_us']:>13.1f} {r['t_estimate_us'] / r['measured_us']:>8.2f}  "
                         f"{','.join(r['limits'])}")
        share = f"{agree}/{counted} = {agree / counted:.0%}" if counted else "no pair differs by 10%"
        lines.append(f"  pairs ordered as measured: {share}")
    ratios = [r["t_estimate_us"] / r["measured_us"] for r in table]
    bounds = [r["t_bound_us"] / r["measured_us"] for r in table]
    lines.append("")
    lines.append(f"overall: {total_agree}/{total_counted} pairs ordered as measured "
                 f"({total_agree / max(total_counted, 1):.0%}); estimate/measured {min(ratios):.2f}-{max(ratios):.2f} "
                 f"over {len(table)} kernels")
    lines.append(f"  (the roofline bound: {bound_agree}/{total_counted} pairs ordered, {bound_ties} tied; "
                 f"bound/measured {min(bounds):.2f}-{max(bounds):.2f})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="h200")
    parser.add_argument("--json", help="also write the table as JSON here")
    parser.add_argument("--attention", action="store_true", help="also the multi-head attention runs")
    parser.add_argument("--tune-logs", action="store_true", help="also the candidates the tuner measured")
    parser.add_argument("--tune-logs-from", type=Path, metavar="DIR",
                        help="only the tuning logs (*tune*.jsonl) in DIR, e.g. another card's, with --target its "
                             "target (benchmarks/gpu/results/2026-12-06-h100/logs --target h100)")
    args = parser.parse_args()
    if args.tune_logs_from:
        print(report(tune_log_rows(args.target, args.tune_logs_from)))
        return
    table = rows(args.target)
    print(report(table))
    if args.attention:
        print()
        print(report(attention_rows(args.target)))
    if args.tune_logs:
        print()
        print(report(tune_log_rows(args.target)))
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
