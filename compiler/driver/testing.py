"""Test helpers for tdsl users: assert that a schedule is legal, or illegal for a given rule.

    from tdsl.testing import assert_legal, assert_illegal

    def test_my_fusion():
        assert_legal("kernels/mlp.tdsl", "fused", run=True)        # legal, and bit-identical in the interpreter

    def test_silu_waits_for_the_sum():
        err = assert_illegal("kernels/mlp.tdsl", '''
            ko, kk = split(C.k, 32)
            reverse_compute_at(Y, C.ko)
        ''', rule="reduction-incomplete", match="SiLU(1)")
        assert err.primitive == "reverse_compute_at"

A program is a `Program` (from `tdsl.load`), a path to a .tdsl file, or .tdsl source text.  A schedule is
the name of one of the program's schedule blocks, schedule steps in .tdsl syntax (one per line or separated
by `;`), a list of such steps, a function that applies primitives to a `Schedule`, or None (program order).

Both helpers raise `AssertionError` with the full diagnostic when the expectation fails, so pytest shows why.
See docs/testing.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.errors import LegalityError, StepError

ScheduleSpec = Union[None, str, list, tuple, Callable]


def assert_legal(prog, schedule: ScheduleSpec = None, *, kernel: Optional[str] = None, sizes: Optional[dict] = None,
                 run: bool = False, seed: int = 0):
    """The schedule is legal: every step passes its checks.  Returns the `Schedule`.

    With `run=True` the program (at `sizes`, which must bind every size to something small) is also run in the
    reference interpreter on random inputs, in program order and under the schedule, and every output must be
    bit-identical -- unless a reduction declares `combine reassoc` or `combine deterministic`, which allow a
    different grouping (then only the schedule's own run is checked to complete), or the schedule applies
    `online` (then every output must agree within the kernels' tolerance of its dtype).
    """
    program = _setup(prog, schedule, kernel, sizes)
    _check_seed(seed)
    try:
        sched = _build(program, schedule, kernel)
    except LegalityError as err:
        raise AssertionError(f"expected a legal schedule, but a step is illegal:\n{_text(err)}") from None
    except TdslError as err:
        raise AssertionError(f"expected a legal schedule, but it could not be built:\n{err}") from None
    if run:
        differences = run_differences(program, sched, kernel=kernel, seed=seed)
        if differences and not _relaxed(sched.model) and not _within_online_bound(program, sched, kernel, seed):
            raise AssertionError(
                "the schedule is legal but its result differs from program order in the interpreter "
                f"(seed {seed}):\n" + "\n".join(differences))
    return sched


def assert_illegal(prog, schedule: ScheduleSpec, rule: Optional[str] = None, *, match: Union[None, str, list] = None,
                   primitive: Optional[str] = None, statements: Optional[list] = None, kernel: Optional[str] = None,
                   sizes: Optional[dict] = None, changes_result: bool = False, seed: int = 0) -> LegalityError:
    """Some step of the schedule is illegal.  Returns the `LegalityError` (its `rule`, `primitive`, `statements`,
    `detail`, `counterexample`, `explanation`).

    * `rule`: the expected rule name (`reduction-incomplete`, `rounding-removed`, ...).  A refinement matches the
      rule it refines (`atomic-combine` and `segment-count` are `combine` rules; `reduction-incomplete` is a
      `dependence`), so tests can be as precise as they like.
    * `match`: text (or a list of texts) that must appear in the rendered message.
    * `primitive`, `statements`: the rejected primitive and the statements it names (compared as sets).
    * `changes_result=True`: also run what the rejected step would have executed in the interpreter (at `sizes`)
      and require that some output differs from program order on random inputs -- the differential evidence that
      the rule protects a real result.

    A misused primitive (a `ScheduleError`: unknown loop, bad factor) is not an illegal schedule and fails.
    """
    program = _setup(prog, schedule, kernel, sizes)
    _check_seed(seed)
    fragments = [] if match is None else [match] if isinstance(match, str) else match
    if not isinstance(fragments, (list, tuple)) or not all(isinstance(f, str) for f in fragments):
        raise TypeError(f"match must be a string or a list of strings, got {match!r}")  # 0 was taken for none
    try:
        sched = _build(program, schedule, kernel)
    except LegalityError as err:
        error = err
    except TdslError as err:
        raise AssertionError(f"expected an illegal schedule, but a step is malformed (not a legality error):\n{err}") \
            from None
    else:
        raise AssertionError(f"expected an illegal schedule{f' (rule {rule})' if rule else ''}, but every step is "
                             f"legal:\n{sched.trace}")
    text = _text(error)
    if rule is not None and rule not in error.rules():
        raise AssertionError(f"expected rule {rule}, got rule {error.rule}:\n{text}")
    for fragment in fragments:
        if fragment not in text:
            raise AssertionError(f"the message does not contain {fragment!r}:\n{text}")
    if primitive is not None and error.primitive != primitive:
        raise AssertionError(f"expected primitive {primitive}, got {error.primitive}:\n{text}")
    if statements is not None and set(statements) != set(error.statements):
        raise AssertionError(f"expected statements {sorted(statements)}, got {error.statements}:\n{text}")
    if not error.counterexample:
        raise AssertionError(f"the error gives no counterexample:\n{text}")
    if changes_result:
        if error.rejected is None:
            raise AssertionError(f"nothing to run: the error does not carry the rejected schedule:\n{text}")
        differences = run_differences(program, error.rejected, kernel=kernel, seed=seed, tries=5)
        if not differences:
            raise AssertionError(f"the rejected step gives the same outputs as program order on random inputs "
                                 f"(seeds {seed} and {seed + 1}, scales 1, 30 and 100):\n{text}")
    return error


# ---------------------------------------------------------------- helpers


def run_differences(prog, schedule, *, kernel: Optional[str] = None, seed: int = 0, tries: int = 1,
                    inputs: Optional[dict] = None) -> list[str]:
    """Run program order and `schedule` (a `Schedule`, the `State` a rejected step carries in `err.rejected`, or
    any schedule the helpers above take: a block's name, steps, a function) in the interpreter on the same random
    inputs; a line per output that differs (empty: bit-identical).  With `tries` > 1 (up to 5), more seeds and
    inputs scaled by 30 and 100 are tried until one differs."""
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, random_inputs

    _check_seed(seed)
    if isinstance(tries, bool) or not isinstance(tries, int) or not 1 <= tries <= 5:
        raise TypeError(f"tries must be a whole number from 1 to 5, got {tries!r}")
    program = _program(prog, None)
    original = program.schedule(None, kernel=kernel)
    if original.model.params:
        raise TdslError(f"running the interpreter needs a value for every run-time size: give sizes="
                        f"{{{', '.join(repr(p) + ': ...' for p in original.model.params)}}}")
    if not (hasattr(schedule, "model") and hasattr(schedule, "tree")):
        schedule = _build(program, schedule, kernel)
    model, tree = schedule.model, schedule.tree
    attempts = [(seed, 1.0), (seed + 1, 1.0), (seed, 30.0), (seed + 1, 30.0), (seed, 100.0)][: max(1, tries)]
    lines: list[str] = []
    for s, scale in attempts if inputs is None else [(seed, 1.0)]:
        data = inputs if inputs is not None else random_inputs(original.model, s, scale)
        want = interpret(original.model, original.time_map(), program_order_inputs(model, data))
        got = interpret(model, tree.union_map(model), data)
        lines = []
        for t in original.model.outputs():
            a, b = np.asarray(want[t.name]), np.asarray(got[t.name])
            if not np.array_equal(a.view(np.uint8), b.view(np.uint8)):
                fa, fb = a.astype(np.float32), b.astype(np.float32)
                bad = ~((fa == fb) | (np.isnan(fa) & np.isnan(fb)))
                first = tuple(int(x) for x in np.argwhere(bad)[0]) if bad.any() else ()
                lines.append(f"{t.name}: {int(bad.sum())} of {a.size} elements differ (first at {list(first)}: "
                             f"{fa[first]!r} in program order, {fb[first]!r} under the schedule; seed {s}, "
                             f"scale {scale:g})")
        if lines:
            return lines
    return lines


def _setup(prog, schedule: ScheduleSpec, kernel: Optional[str], sizes: Optional[dict]):
    """The program, its sizes and kernel checked, and a schedule given as one word checked to name a block:
    a mistake in the test's setup is raised as itself (a TdslError), not as a failed expectation (an unknown
    kernel, a size of -3, a block name misspelt were AssertionErrors or parse errors of steps: probe KK)."""
    program = _program(prog, sizes)
    block = None
    if isinstance(schedule, str) and re.fullmatch(r"\s*\w+\s*", schedule):  # a block's name: no step is one word
        block = program.block(schedule.strip())
    program.model(program.block_kernel(block, kernel) if block else kernel)  # the kernel, and the sizes' values
    return program


def load_program(prog, sizes: Optional[dict] = None):
    """`prog` as a `Program`: a Program, a path to a .tdsl file, or .tdsl source text."""
    return _program(prog, sizes)


def _program(prog, sizes):
    from tdsl.compiler.driver.api import Program, load, loads

    if isinstance(prog, Program):  # its own text, also where a file of its name holds another (probe KK)
        return Program(prog.ast, prog.kernels, {**prog.sizes, **sizes}) if sizes else prog
    if isinstance(prog, Path) or (isinstance(prog, str) and "\n" not in prog and prog.endswith(".tdsl")):
        return load(prog, sizes=sizes)
    if isinstance(prog, str):
        return loads(prog, sizes=sizes)
    raise TypeError(f"expected a Program, a .tdsl path or .tdsl source, got {type(prog).__name__}")


def _build(program, schedule: ScheduleSpec, kernel: Optional[str]):
    """The schedule built; a rejected step raises its LegalityError itself (with `location` for a .tdsl step)."""
    try:
        return _build_unwrapped(program, schedule, kernel)
    except StepError as err:
        if isinstance(err.error, LegalityError):
            err.error.location = str(err).splitlines()[0]
            raise err.error from None
        raise


def _check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TypeError(f"seed must be a whole number 0 or more, got {seed!r}")


def _build_unwrapped(program, schedule: ScheduleSpec, kernel: Optional[str]):
    if not (schedule is None or callable(schedule) or isinstance(schedule, str) or
            (isinstance(schedule, (list, tuple)) and all(isinstance(step, str) for step in schedule))):
        raise TypeError(f"a schedule is None (program order), a schedule block's name, steps in .tdsl syntax (a "
                        f"string, or a list of strings) or a function of a Schedule; got {schedule!r}")
    if schedule is None:
        return program.schedule(None, kernel=kernel)
    if callable(schedule):
        sched = program.schedule(None, kernel=kernel)
        schedule(sched)
        return sched
    if isinstance(schedule, str) and schedule.strip() in program.schedule_names:
        return program.schedule(schedule.strip(), kernel=kernel)
    steps = "\n".join(schedule) if isinstance(schedule, (list, tuple)) else schedule
    return _steps(program, steps, kernel)


def _steps(program, steps: str, kernel: Optional[str]):
    """Replay schedule steps written in .tdsl syntax on a fresh schedule of the program."""
    from tdsl.frontend.parser import parse

    from tdsl.compiler.schedule.schedule import apply_block

    # Lines as the lexer counts them: only '\n' ends one (str.splitlines would also split at \f, U+2028, ...).
    lines = [line.strip() for line in steps.strip().split("\n") if line.strip()]
    text = "schedule __steps {\n" + "\n".join(lines) + "\n}\n"
    block = parse(text, "<schedule steps>").schedules[0]
    return apply_block(program.schedule(None, kernel=kernel), block, text, "<schedule steps>")


def _text(err: LegalityError) -> str:
    where = getattr(err, "location", None)
    return f"{where}\n{err}" if where else str(err)


def _within_online_bound(program, sched, kernel, seed) -> bool:
    """A schedule with `online` agrees with program order within the kernels' tolerance of each output's dtype
    (docs/rules/online-policy.md: the rewrite moves roundings, by a few units in the last place)."""
    if not sched.tree.online:
        return False
    from tdsl.compiler.reference.interpreter import interpret, program_order_inputs, random_inputs
    from tdsl.compiler.verify import online_bound

    original = program.schedule(None, kernel=kernel)
    inputs = random_inputs(original.model, seed)
    reference = interpret(original.model, original.time_map(), program_order_inputs(sched.model, inputs))
    result = interpret(sched.model, sched.time_map(), inputs)
    return all(online_bound(original.model, t.name, reference[t.name], result[t.name]).ok
               for t in original.model.outputs())


def _relaxed(model) -> bool:
    from tdsl.compiler.model.dependences import reorders

    return any(map(reorders, model.stmts))
