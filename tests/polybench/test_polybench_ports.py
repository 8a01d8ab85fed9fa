"""The PolyBench ports (benchmarks/polybench) stay expressible: every kernel loads at its SMALL sizes, its `tiled`
schedule is legal, and its `illegal` schedule is rejected with the rule the port names.  The interpreter runs
against the float64 references are `benchmarks/polybench/run.py` (minutes, not CI); here two small kernels run at
reduced sizes to keep the runner itself working."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "polybench"))

import run as polybench  # noqa: E402

PORTS = polybench.kernels()


def test_there_is_a_port_or_a_reason_for_every_kernel_of_polybench():
    assert len(PORTS) == 30
    for path in PORTS:
        port = polybench.load_port(path)
        assert port.UPSTREAM.endswith(".c"), path
        assert getattr(port, "BLOCKED", None) or path.with_suffix(".tdsl").exists(), path


@pytest.mark.parametrize("path", [p for p in PORTS if p.with_suffix(".tdsl").exists()], ids=lambda p: p.stem)
def test_the_tiled_schedule_is_legal_and_the_illegal_one_is_rejected_with_its_rule(path):
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.errors import LegalityError, StepError

    port = polybench.load_port(path)
    prog = loads(path.with_suffix(".tdsl").read_text(encoding="utf-8"), path.with_suffix(".tdsl").name)
    prog.schedule("tiled")
    rule = getattr(port, "ILLEGAL_RULE", None)
    if rule:
        with pytest.raises(StepError) as info:
            prog.schedule("illegal")
        assert isinstance(info.value.error, LegalityError) and rule in type(info.value.error).rules()


@pytest.mark.parametrize("stem", ["jacobi_1d", "atax"])
def test_the_runner_checks_a_kernel_against_its_float64_reference(stem):
    path = next(p for p in PORTS if p.stem == stem)
    row = polybench.check(path, triton=False)
    assert row.status == "ok", row.notes
    assert row.tiled == "same bits" and row.f64_error <= polybench.TOLERANCE
