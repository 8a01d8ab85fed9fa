"""The differential fuzzer in CI: a short fixed-seed budget must find nothing, and the oracles must be able to fail.

The long runs (10,000 sequences and more) are `benchmarks/fuzz.py`; their figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import random

import pytest

from fuzz.engine import Fuzzer
from fuzz.programs import LIBRARIES, library_sources, parse_check, random_program
from fuzz.schedules import named_steps

# (seed, sequences, backends): under a minute of CI on two cores (the long runs: benchmarks/fuzz.py).
BUDGET = [
    (1, 16, ("triton",)),
    (2, 16, ("triton",)),
    (3, 12, ("ascend-950", "ascend-910b")),
]
# The PolyBench ports and the GPU programs, most sequences grown from one of the file's named schedules.
LIBRARY_BUDGET = (11, 6, ("triton", "ascend-950"))


def _report(result) -> str:
    return "\n\n".join(f"{case.source}\n{case.describe()}\n{finding}" for finding, case in result.findings)


@pytest.mark.parametrize("seed,sequences,backends", BUDGET, ids=[f"seed{s}-{'+'.join(b)}" for s, _, b in BUDGET])
def test_fixed_seed_budget_finds_nothing(seed, sequences, backends, tmp_path):
    result = Fuzzer(backends=backends, workdir=tmp_path).run(seed, sequences)
    assert not result.findings, _report(result)
    assert sum(result.steps_accepted.values()) > sequences  # the sequences did schedule something


def test_fixed_seed_budget_on_the_polybench_ports_and_programs_finds_nothing(tmp_path):
    seed, sequences, backends = LIBRARY_BUDGET
    fuzzer = Fuzzer(backends=backends, libraries=("polybench", "programs"), named_start=0.7, random_programs=0.0,
                    workdir=tmp_path)
    result = fuzzer.run(seed, sequences)
    assert not result.findings, _report(result)
    assert sum(result.steps_accepted.values()) > 0


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_named_steps_replay_every_named_schedule_of_a_library(library):
    """A sequence that starts from a file's schedule block starts from exactly the schedule the block builds."""
    from tdsl.compiler.driver.api import loads
    from tdsl.frontend.diagnostics import TdslError

    replayed = 0
    for name, source in library_sources(library):
        prog = loads(source, f"{name}.tdsl")
        for block in prog.schedule_names:
            try:
                want = str(prog.schedule(block).trace)
            except TdslError:
                continue  # a block the file shows being rejected
            sched = prog.schedule()
            for step in named_steps(prog, block):
                step.apply(sched)
            assert str(sched.trace) == want, f"{name}: {block}"
            replayed += 1
    assert replayed >= 5


def test_generated_programs_pass_the_frontend():
    rng = random.Random(5)
    problems = [(text, why) for text in (random_program(rng) for _ in range(200)) if (why := parse_check(text))]
    assert not problems, problems[:3]


@pytest.mark.parametrize("combine, reorders", [("", False), (" combine reassoc", True),
                                               (" combine deterministic", True), (" combine fast_accum", True),
                                               (" combine fast_accum(4)", True), (" combine segments(2)", False)])
def test_the_interpreter_oracle_allows_another_order_exactly_where_the_program_does(combine, reorders):
    """A legal reordering of a `fast_accum` sum was an interp-mismatch finding (probe LL): the oracle knew only
    reassoc and deterministic.  segments(N) fixes its result (the interpreter folds the segments in order)."""
    from fuzz.oracles import relaxed
    from tdsl.compiler.driver.api import loads

    source = f"const M = 2, N = 8\nkernel k(X: f32[M, N]) -> (Y: f32[M]) {{\n  Y[i] = sum(j) X[i, j]{combine}\n}}\n"
    assert relaxed(loads(source).model()) is reorders


def test_generated_programs_declare_every_combine_policy_of_a_sum():
    texts = [random_program(random.Random(seed)) for seed in range(300)]
    for policy in ("reassoc", "deterministic", "fast_accum", "fast_accum(4)", "segments("):
        assert any(f"combine {policy}" in text for text in texts), policy


def test_the_backend_oracle_catches_a_dropped_mask(tmp_path, monkeypatch):
    """A lowering that forgets every tile mask writes outside ragged tiles: the fuzzer must notice."""
    from tdsl.compiler.lower import build as tile

    monkeypatch.setattr(tile._KernelLowering, "_mask", lambda self, g: None)
    result = Fuzzer(backends=("triton",), shrink=False, random_programs=0.0, workdir=tmp_path).run(4, 15)
    assert any(f.kind in ("miscompile", "internal-error") for f, _ in result.findings)


def test_the_interpreter_oracle_catches_a_missing_dependence_check(tmp_path, monkeypatch):
    """With the dependence check switched off, illegal reorderings are accepted: bit-identity must fail."""
    from tdsl.compiler.schedule.primitives import compute_at
    from tdsl.compiler.schedule.primitives import reorder
    from tdsl.compiler.schedule.primitives import reverse

    for module in (compute_at, reorder, reverse):
        monkeypatch.setattr(module, "check_dependences", lambda *a, **k: None)
    result = Fuzzer(backends=(), shrink=False, workdir=tmp_path, max_steps=12).run(6, 40)
    assert any(f.kind == "interp-mismatch" for f, _ in result.findings)


def test_special_inputs_hold_infinities_nans_and_signed_zeros_and_replay():
    """The `special` distribution (fuzz.py --distributions): mostly standard normal, the rest ±inf, NaN, ±0;
    the same inputs for the same seed, and a case that uses it says so in its JSON (a replay checks the same)."""
    import numpy as np

    from fuzz.cases import Case, inputs_for
    from tdsl.compiler.driver.api import loads

    model = loads("const N = 4000\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  Y[i] = X[i]\n}\n").model()
    x = inputs_for(model, 5, "special")["X"]
    assert np.isposinf(x).any() and np.isneginf(x).any() and np.isnan(x).any()
    assert (np.signbit(x) & (x == 0)).any() and 0.01 < np.mean(~np.isfinite(x) | (x == 0)) < 0.05
    assert np.array_equal(x, inputs_for(model, 5, "special")["X"], equal_nan=True)
    case = Case("c", "src", {}, distributions=("normal", "special"))
    assert Case.from_json(case.to_json()).distributions == ("normal", "special")
    assert "distributions" not in Case("c", "src", {}).to_json()


def test_fixed_seed_budget_on_special_inputs_finds_nothing(tmp_path):
    """Generated programs (literal zeros, cancelling subtractions) on inputs with infinities and NaN."""
    result = Fuzzer(backends=("triton", "ascend-950"), random_programs=1.0, workdir=tmp_path,
                    distributions=("normal", "special")).run(5, 10)
    assert not result.findings, _report(result)
    assert sum(result.steps_accepted.values()) > 0


@pytest.mark.parametrize("script", ["benchmarks/fuzz.py", "benchmarks/gpu/fuzz_prepare.py"])
def test_an_unknown_distribution_is_a_usage_error(script, tmp_path):
    """`--distributions` names its three choices and exits 2, no traceback."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, str(root / script), "--distributions", "normal,gaussian", "--sequences", "1",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=root, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "normal, wide, special" in run.stderr and "Traceback" not in run.stderr


def test_the_sm90_oracle_compiles_every_fifth_sequence_and_catches_an_integer_mask(tmp_path, monkeypatch):
    """Backend triton-sm90: the Triton module compiled for sm_90 ahead of time (the interpreter takes an integer
    mask that the GPU compiler refuses: GPU fuzz seed 38).  A clean budget finds nothing; a printer that writes
    the masks of loads and stores as the integer 0 is caught."""
    import tdsl.backends.triton.emit as emit

    fuzzer = Fuzzer(backends=("triton-sm90",), shrink=False, random_programs=1.0, workdir=tmp_path)
    result = fuzzer.run(5, 5)  # sequence seeds 5_000_015 .. 19: one of them is a multiple of 5
    assert not result.findings, _report(result)
    assert sum(n for (backend, _), n in result.backend.items() if backend == "triton-sm90") >= 1

    monkeypatch.setattr(emit, "mask_code", lambda mask, frame, indices: "0")  # every masked lane off, as an int
    caught = Fuzzer(backends=("triton-sm90",), shrink=False, random_programs=1.0, workdir=tmp_path).run(5, 5)
    assert any(f.kind == "gpu-compile" for f, _ in caught.findings)
