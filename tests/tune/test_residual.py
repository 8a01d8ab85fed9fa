"""The tuner's learned correction (compiler/tune/residual.py): it learns a knob's factor from the measurements,
says nothing from too few, and steers the later rounds of a tuning run away from what the model got wrong."""

import math

import tdsl
from catalog import ROOT
from tdsl.compiler.tune import residual
from tdsl.compiler.tune.tuner import tune


def record(persistent: bool, bk: int, us: float, t_estimate: float = 100e-6) -> dict:
    return {"choice": {"C.BK": bk, "C.persistent": persistent}, "t_estimate": t_estimate, "ok": True, "us": us}


def test_a_knob_the_estimate_misprices_gets_its_measured_factor():
    # persistent launches measure 1.5x their estimate, the rest as estimated; the K step does not matter
    records = [record(p, bk, 150.0 if p else 100.0) for p in (True, False) for bk in (32, 64, 128)]
    fit = residual.fit(records)
    ratio = fit.factor({"C.BK": 64, "C.persistent": True}) / fit.factor({"C.BK": 64, "C.persistent": False})
    assert 1.25 < ratio <= 1.5  # shrunk by the ridge term, never past the data
    assert math.isclose(fit.factor({"C.BK": 32, "C.persistent": False}),
                        fit.factor({"C.BK": 128, "C.persistent": False}), rel_tol=0.02)
    assert fit.strongest(1)[0][0].startswith("C.persistent=")


def test_an_untried_knob_value_counts_a_little_better_and_too_few_records_fit_nothing():
    records = [record(False, bk, 100.0 * bk / 32) for bk in (32, 64, 128, 32)]
    fit = residual.fit(records)
    assert math.isclose(fit.factor({"C.BK": 16, "C.persistent": False}), fit.factor({"C.persistent": False}) * 0.9)
    assert residual.fit(records[:3]) is None
    failed = [dict(r, ok=False, us=None) for r in records]
    assert residual.fit(failed) is None  # only timed, correct candidates teach anything


class Misprices:
    """A GPU on which 256-column tiles take twice the model's estimate, everything else exactly it."""

    gpus = 1

    def describe(self):
        return "a GPU that disagrees about wide tiles"

    def run(self, jobs):
        for job in jobs:
            slow = 2.0 if job.choice.get("C.BN") == 256 else 1.0
            yield {"choice": job.choice, "steps": job.steps, "t_estimate": job.t_estimate, "ok": True,
                   "us": job.t_estimate * 1e6 * slow}


def test_later_rounds_follow_what_the_measurements_taught():
    prog = tdsl.load(ROOT / "benchmarks/programs/gemm_bf16.tdsl", sizes={"M": 4096, "N": 4096, "K": 4096})
    result = tune(prog, target="h200", trials=32, samples=96, runner=Misprices(), blocks=False)
    first, later = result.measured[:8], result.measured[8:]
    wide = lambda rs: sum(r["choice"].get("C.BN") == 256 for r in rs) / len(rs)
    assert wide(first) > 0  # the model alone ranks a 256-column tile first here
    assert wide(later) < wide(first)
    assert ", 256)" not in result.winner_steps.splitlines()[0]


def test_tune_prints_what_the_measurements_corrected(capsys):
    from tdsl.compiler.driver.tune_command import _print_correction

    _print_correction([record(p, bk, 150.0 if p else 100.0) for p in (True, False) for bk in (32, 64)])
    line = capsys.readouterr().out
    assert line.startswith("measured / model, by knob value") and "C.persistent=True x1." in line
    _print_correction([record(False, 32, 100.0)])  # too few to fit: nothing said
    assert capsys.readouterr().out == ""
