"""PolyBench/C 4.2.1 in tdsl: every kernel checked against a float64 port of its C code, a table and one line.

Each kernel is a pair in `benchmarks/polybench/<category>/`: `<name>.tdsl` (the port, SMALL_DATASET sizes as
`const`s, a legal `tiled` schedule and, where one exists, an `illegal` schedule) and `<name>.py` (`UPSTREAM`,
the C file it comes from; `init(sizes)`, its init_array in float64; `reference(inputs, sizes)`, the kernel's
loops in float64; `ILLEGAL_RULE`, the rule the illegal schedule breaks; `F64_UNREACHABLE`, why f32 cannot come
within the tolerance of the float64 result (an ill-conditioned kernel: its error is shown, not judged); or
`BLOCKED`, why the kernel cannot be written yet; `INTERPRETER_SIZES`, smaller sizes for the Triton interpreter
where the tiled kernels launch too often for it at SMALL, e.g. a wavefront per launch).  For every kernel:

* compile: parse + model + dependences + the `tiled` schedule with its legality checks, best of three (ms);
* f64: the interpreter in program order on the init_array inputs (rounded to the program's dtypes) against the
  float64 reference: the largest error relative to the output's largest magnitude;
* tiled: the interpreter under `tiled` gives the same bits as program order;
* illegal: the `illegal` schedule is rejected with `ILLEGAL_RULE`;
* triton (with --triton): the `tiled` kernels under the Triton interpreter (TRITON_INTERPRET=1; on a GPU with
  --device cuda) against the interpreter with the tolerance every kernel is held to (compiler/verify/compare.py:
  an element the program does not determine at these inputs, gramschmidt's rank-deficient columns, is counted
  and left out), or the backend's refusal (under the Triton interpreter at the port's `INTERPRETER_SIZES` where
  it has them, named in the column).

    python benchmarks/polybench/run.py                      # every kernel, no Triton
    python benchmarks/polybench/run.py --triton --kernels jacobi_1d,gemm
    python benchmarks/polybench/run.py --triton --device cuda --json rows.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

HERE = Path(__file__).resolve().parent
# f32 rounding of the float64 reference, relative to the output's largest magnitude: loose enough for sums of a
# few hundred terms and for time loops of tens of steps, tight enough to catch a wrong index or a missing term
TOLERANCE = 1e-3


@dataclass
class Row:
    kernel: str
    category: str
    upstream: str
    status: str = "ok"  # ok | f32 (ported, but f32 cannot reach the float64 result) | blocked | fail
    compile_ms: Optional[float] = None
    f64_error: Optional[float] = None
    tiled: str = "-"
    illegal: str = "-"
    triton: str = "-"
    notes: list = field(default_factory=list)


def kernels() -> list[Path]:
    return sorted(p for p in HERE.glob("*/*.py"))


def load_port(path: Path):
    spec = importlib.util.spec_from_file_location(f"polybench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(path: Path, triton: bool, device: str = "cpu") -> Row:
    port = load_port(path)
    row = Row(path.stem, path.parent.name, port.UPSTREAM)
    if getattr(port, "BLOCKED", None):
        row.status = "blocked"
        row.notes.append(port.BLOCKED)
        return row
    text = path.with_suffix(".tdsl").read_text(encoding="utf-8")
    try:
        _check(row, port, text, path.with_suffix(".tdsl").name, triton, device)
    except Exception as exc:  # noqa: BLE001 - a failure of one kernel is a row of the table, not the end of the run
        row.status = "fail"
        row.notes.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return row


def _check(row: Row, port, text: str, filename: str, triton: bool, device: str) -> None:
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.errors import LegalityError, StepError
    from tdsl.compiler.reference.interpreter import interpret

    row.compile_ms = _compile_ms(text, filename)
    prog = loads(text, filename)
    sched = prog.schedule()
    model = sched.model
    sizes = {k: v for k, v in model.sizes.items() if isinstance(v, int)}
    inputs = _rounded(port.init(sizes), model)
    got = interpret(model, sched.time_map(), inputs)
    want = port.reference({k: v.astype(np.float64) for k, v in inputs.items()}, sizes)
    row.f64_error = max(_relative_error(got[name], want[name]) for name in want)
    if getattr(port, "F64_UNREACHABLE", None):
        row.status = "f32"
        row.notes.append(port.F64_UNREACHABLE)
    elif not row.f64_error <= TOLERANCE:
        row.status = "fail"
        row.notes.append(f"interpreter vs float64 reference: relative error {row.f64_error:.2e} > {TOLERANCE}")
    tiled = interpret(model, prog.schedule("tiled").time_map(), inputs)
    same = all(np.array_equal(tiled[n], got[n], equal_nan=True) for n in got)
    row.tiled = "same bits" if same else "DIFFERS"
    if not same:
        row.status = "fail"
    rule = getattr(port, "ILLEGAL_RULE", None)
    if rule:
        try:
            prog.schedule("illegal")
            row.illegal, row.status = "ACCEPTED", "fail"
        except StepError as step:
            err = step.error
            rules = type(err).rules() if isinstance(err, LegalityError) else [type(err).__name__]
            row.illegal = rule if rule in rules else f"WRONG RULE {rules[0]}"
            if rule not in rules:
                row.status = "fail"
    if triton:
        smaller = getattr(port, "INTERPRETER_SIZES", None) if device == "cpu" else None
        if smaller:
            prog = loads(text, filename, sizes=smaller)
            model = prog.schedule().model
            sizes = {k: v for k, v in model.sizes.items() if isinstance(v, int)}
            inputs = _rounded(port.init(sizes), model)
            got = interpret(model, prog.schedule().time_map(), inputs)
        row.triton = _triton(prog, model, inputs, got, device)
        if smaller and not row.triton.startswith("refused"):
            row.triton += " at " + ", ".join(f"{k}={v}" for k, v in smaller.items())
        if row.triton.startswith("DIFFERS"):
            row.status = "fail"


def _compile_ms(text: str, filename: str) -> float:
    from tdsl.compiler.driver.api import loads

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        loads(text, filename).schedule("tiled")  # parse, model, dependences, the steps and their legality checks
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def _rounded(arrays: dict, model) -> dict:
    """The init_array values in the program's input dtypes (as the interpreter and the kernels take them)."""
    from tdsl.compiler.model.dtypes import to_storage

    return {name: to_storage(model.tensors[name].dtype, np.asarray(arrays[name], np.float64))
            for name in (t.name for t in model.inputs())}


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got - want))) / scale


def _triton(prog, model, inputs: dict, want: dict, device: str) -> str:
    """The tiled kernel against the interpreter's program order, judged as every kernel is
    (compiler/verify/compare.py, with the sums in other orders where an output fails: an ill-conditioned element
    is widened or, where the program does not determine it, left out and counted)."""
    from tdsl.compiler.driver.generate import generate, load_module, run_generated
    from tdsl.compiler.errors import BackendError
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, rounding_variants
    from tdsl.compiler.verify import compare_outputs

    try:
        text = generate(prog, "tiled")
    except BackendError as err:
        return "refused: " + str(err).splitlines()[0].split("error: ", 1)[-1]
    with tempfile.TemporaryDirectory() as tmp:
        got = run_generated(load_module(text, Path(tmp) / "kernel.py"), model, inputs, device=device, guard=3)
    order = prog.schedule().time_map()
    start = program_order_inputs(prog.schedule("tiled").model, inputs)  # an output kept in an input starts from it
    if start.keys() != inputs.keys():
        want = interpret(model, order, start)
    worst = max(_relative_error(got[n], want[n]) for n in got)
    results = compare_outputs(model, want, got, lambda: rounding_variants(model, order, start, want))
    left_out = sum(r.undetermined for r in results.values())
    note = f", {left_out} elements not determined" if left_out else ""
    return f"{'matches' if all(r.ok for r in results.values()) else 'DIFFERS'} ({worst:.1e}{note})"


def table(rows: list[Row]) -> str:
    head = ["kernel", "status", "compile ms", "vs f64", "tiled", "illegal", "triton"]
    body = [[r.kernel, r.status, f"{r.compile_ms:.0f}" if r.compile_ms is not None else "-",
             f"{r.f64_error:.1e}" if r.f64_error is not None else "-", r.tiled, r.illegal, r.triton] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body]]
    notes = [f"  {r.kernel}: {note}" for r in rows for note in r.notes]
    return "\n".join(lines + (["", "notes:"] + notes if notes else []))


def summary(rows: list[Row]) -> str:
    ok = sum(r.status == "ok" for r in rows)
    f32 = [r.kernel for r in rows if r.status == "f32"]
    blocked = sum(r.status == "blocked" for r in rows)
    failed = sum(r.status == "fail" for r in rows)
    times = [r.compile_ms for r in rows if r.compile_ms is not None]
    worst = f", compile time at most {max(times):.0f} ms" if times else ""
    beyond = f", {len(f32)} written but beyond f32's reach of float64 ({', '.join(f32)})" if f32 else ""
    return (f"PolyBench: {ok}/{len(rows)} kernels written and within f32 rounding of float64{beyond}, "
            f"{blocked} blocked, {failed} failing{worst}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", help="comma-separated names (default: all)")
    parser.add_argument("--triton", action="store_true", help="also run the tiled kernels under the Triton interpreter")
    parser.add_argument("--device", default="cpu", help="cpu (the Triton interpreter) or cuda (a GPU)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if args.triton and args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    chosen = set(args.kernels.split(",")) if args.kernels else None
    rows = [check(path, args.triton, args.device) for path in kernels() if chosen is None or path.stem in chosen]
    print(table(rows))
    print()
    print(summary(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    return 0 if all(r.status != "fail" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
