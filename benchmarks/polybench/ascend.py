"""The PolyBench ports on the Ascend targets: which ones each backend generates, and whether the generated module
computes the program in the NumPy execution model of the device (compiler/verify/ascend_sim), or the reason it
is refused.  Not a test (minutes); the table goes to benchmarks/RESULTS.md.

    .venv/bin/python benchmarks/polybench/ascend.py --target ascend-910b [--schedule tiled] [--only gemver,atax]

For every port that is not BLOCKED: its sizes (INTERPRETER_SIZES where the port has them, else SMALL), the
interpreter in program order on the port's inputs, the module generated for the schedule, its execution in the
NumPy model, and every output compared with `compiler.verify.compare` (the tolerance of the output's dtype).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as polybench  # noqa: E402


def check(path: Path, target: str, schedule: str) -> tuple[str, str]:
    """(status, detail) of one port: "ok", "DIFFERS" (outputs named), "refused" (the first line of the reason),
    "error" (the simulation failed)."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.errors import TdslError
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs
    from tdsl.compiler.verify import compare_outputs
    from tdsl.compiler.verify.ascend_sim import simulate

    port = polybench.load_port(path)
    text = path.with_suffix(".tdsl").read_text(encoding="utf-8")
    prog = loads(text, path.with_suffix(".tdsl").name, sizes=getattr(port, "INTERPRETER_SIZES", None))
    model = prog.schedule().model
    sizes = {k: v for k, v in model.sizes.items() if isinstance(v, int)}
    inputs = polybench._rounded(port.init(sizes), model)
    try:
        start = program_order_inputs(prog.schedule(schedule).model, inputs)  # outputs kept in inputs start so
    except TdslError:
        start = inputs  # the schedule's own error is reported by `generate` below
    want = interpret(model, prog.schedule().time_map(), start)
    try:
        module = generate(prog, schedule, target=target)
    except TdslError as err:
        lines = [line for line in str(err).splitlines() if line.strip() and line.strip() != "^"]
        reason = next((line for line in lines if "error:" in line), lines[0] if lines else type(err).__name__)
        if "does not fit" in reason and len(lines) > 2:
            reason += " " + lines[2].strip()
        return "refused", reason.split("error: ", 1)[-1]
    try:
        got = simulate(module, inputs, target).tensors
    except Exception as err:  # noqa: BLE001 - a failure of one port is a row of the table
        return "error", f"{type(err).__name__}: {str(err).splitlines()[0]}"
    bad = [name for name, c in compare_outputs(model, want, got).items() if not c.ok]
    return ("DIFFERS", ", ".join(bad)) if bad else ("ok", "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="ascend-910b", choices=["ascend-950", "ascend-910b"])
    parser.add_argument("--schedule", default="tiled")
    parser.add_argument("--only", default="", help="comma-separated port names")
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    counts: dict = {}
    print(f"| kernel | {args.target}, schedule {args.schedule} | seconds |")
    print("|---|---|---|")
    for path in polybench.kernels():
        port = polybench.load_port(path)
        if getattr(port, "BLOCKED", None) or (only and path.stem not in only):
            continue
        start = time.time()
        status, detail = check(path, args.target, args.schedule)
        counts[status] = counts.get(status, 0) + 1
        shown = status if not detail else f"{status}: {detail[:160]}"
        print(f"| {path.stem} | {shown} | {time.time() - start:.1f} |", flush=True)
    print("\n" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 1 if counts.get("DIFFERS") or counts.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
