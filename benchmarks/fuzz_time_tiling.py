"""Random time-tiled stencils: the schedules skew, shift, distribute and fold_storage make, checked by execution.

Each case is a random stencil over a 1-D or 2-D space inside `for t < T` (2 or 3 statements a step, each reading
the statement before it at random offsets, the first reading the last one of the step before), at random sizes,
and a random attempt at the time tiling of docs/polybench.md: shifts, fusion of the space loops, a skew by time,
a tile of (t, space), fission of the point loop, wavefronts of tiles bound to the grid, folded storage, each with
random factors.  A step the legality checks refuse ends the attempt (an outcome, counted); an accepted schedule
must give the same bits as program order in the reference interpreter and, under the Triton interpreter, in the
generated kernels (which contract no `a * b + c` into an fma: docs/legality.md#rounding).  A mismatch or an internal error is a
finding, written to --out as the program and its steps.

    TRITON_INTERPRET=1 python benchmarks/fuzz_time_tiling.py --cases 100 --seed 1
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np


def program(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """(source, statement names, space iterators)."""
    dims = rng.choice([["i"], ["i"], ["i", "j"]])
    extents = {"i": "N", "j": "M"}
    n = rng.choice([2, 3])
    names = [f"S{k}" for k in range(n)]
    at = ", ".join(["t"] + dims)
    body = []
    for k, name in enumerate(names):
        src = names[k - 1] if k else None
        if src is None:  # the step's state: the input at t = 0, the last statement of the step before after
            body.append(f"    {name}[{at}] = where(t == 0, X[{', '.join(dims)}], {names[-1]}[t - 1, {', '.join(dims)}])")
            continue
        terms, guards = [f"{src}[{at}]"], []
        for _ in range(rng.randint(1, 2)):
            axis = rng.choice(dims)
            off = rng.choice([-2, -1, 1, 2])
            idx = ", ".join(["t"] + [f"{d} + {off}" if d == axis else d for d in dims]).replace("+ -", "- ")
            lo, hi = (f"{axis} >= {-off}", None) if off < 0 else (None, f"{axis} < {extents[axis]} - {off}")
            cond = lo or hi
            terms.append(f"where({cond}, {src}[{idx}], 0.0)")
        coef = rng.choice(["0.5", "0.25", "0.33333"])
        body.append(f"    {name}[{at}] = {coef} * ({' + '.join(terms)})")
    shape = ", ".join(extents[d] for d in dims)
    sizes = ", ".join(f"{extents[d]} = {rng.randint(1, 20)}" for d in dims)
    text = (f"const T = {rng.randint(1, 6)}, {sizes}\n\n"
            f"kernel stencil(X: f32[{shape}]) -> (Y: f32[{shape}]) {{\n  for t < T {{\n" + "\n".join(body) +
            f"\n  }}\n  Y[{', '.join(dims)}] = {names[-1]}[T - 1, {', '.join(dims)}]\n}}\n")
    return text, names, dims


def recipe(rng: random.Random, names: list[str], dims: list[str]) -> list[str]:
    """A random attempt at time tiling (each step may be refused)."""
    first, steps = names[0], []
    space = dims[0]
    for k, name in enumerate(names[1:], 1):
        shift = rng.choice([0, k, k, 2 * k, rng.randint(1, 4)])
        if shift:
            steps += [f"shift({name}.{d}, {shift})" for d in dims if rng.random() < 0.8 or d == space]
    steps += [f"fuse({first}.{space}, {name}.{space})" for name in names[1:]]
    if rng.random() < 0.7:
        steps.append(f"skew({first}.{space}, {first}.t, {rng.choice([1, 2, 2, 3, 4])})")
    if rng.random() < 0.3:
        steps.append(f"fold_storage({rng.choice(names)}, t, {rng.choice([1, 2])})")
    f_t, f_s = rng.choice([1, 2, 3, 4]), rng.choice([2, 4, 8, 16])
    steps.append(f"T0, I0, tt, ii = tile({first}.t, {first}.{space}, {f_t}, {f_s})")
    if rng.random() < 0.7:
        steps.append(f"distribute({first}.ii)")
    if rng.random() < 0.8:
        steps += [f"W = skew({first}.I0, {first}.T0, {rng.choice([1, 1, 2])})", f"reorder({first}, W, T0)",
                  f"host({first}.W)", f"bind({first}.T0, grid.x)"]
    if rng.random() < 0.2:
        steps.append(f"fold_storage({rng.choice(names)}, t, {rng.choice([1, 2, 3])})")
    return steps


def check(text: str, steps: list[str], tmp: Path) -> str:
    """'legal: same', 'illegal: RULE', 'refused: ...' or a finding ('MISMATCH ...', 'INTERNAL ...')."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate, load_module, run_generated
    from tdsl.compiler.errors import BackendError, LegalityError, StepError, TdslError
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, random_inputs

    source = text + "\nschedule s {\n  " + "\n  ".join(steps) + "\n}\n"
    prog = loads(source, "stencil.tdsl")
    try:
        sched = prog.schedule("s")
    except StepError as err:
        e = err.error
        return f"illegal: {e.rule}" if isinstance(e, LegalityError) else f"misused: {str(e).splitlines()[0][:80]}"
    original = loads(text, "stencil.tdsl").schedule()
    inputs = random_inputs(original.model, seed=1)
    want = interpret(original.model, original.time_map(), program_order_inputs(sched.model, inputs))
    got = interpret(sched.model, sched.time_map(), inputs)
    if not np.array_equal(want["Y"], got["Y"], equal_nan=True):
        return "MISMATCH interpreter: the schedule differs from program order"
    try:
        code = generate(prog, "s")
    except (BackendError, TdslError) as err:
        return "refused: " + str(err).splitlines()[0][-90:]
    # A file per module: Python could take a cached .pyc of an earlier module of the same size and second
    name = f"k{hashlib.sha1(code.encode()).hexdigest()[:16]}.py"
    out = run_generated(load_module(code, tmp / name), sched.model, inputs, guard=3)
    if not np.array_equal(out["Y"], want["Y"], equal_nan=True):
        return "MISMATCH triton: the kernels differ from the interpreter"
    return "legal: same"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/fuzz-findings/time-tiling")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRITON_INTERPRET", "1")
    rng = random.Random(args.seed)
    outcomes: Counter = Counter()
    findings = 0
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for case in range(args.cases):
            text, names, dims = program(rng)
            steps = recipe(rng, names, dims)
            try:
                result = check(text, steps, Path(tmp))
            except Exception:  # noqa: BLE001 - an internal error is a finding, recorded with its traceback
                result = "INTERNAL " + traceback.format_exc().strip().splitlines()[-1]
            outcomes[result if result.startswith(("illegal", "misused", "MISMATCH", "INTERNAL")) else result[:40]] += 1
            if result.startswith(("MISMATCH", "INTERNAL")):
                findings += 1
                out = Path(args.out)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"case-{args.seed}-{case}.tdsl").write_text(
                    f"# {result}\n" + text + "\nschedule s {\n  " + "\n  ".join(steps) + "\n}\n")
    for outcome, count in outcomes.most_common():
        print(f"{count:5d}  {outcome}")
    print(f"{args.cases} cases, {findings} findings, {time.time() - start:.0f} s")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
