"""`tdsl cost --plot`: a roofline whose points are the report's figures (docs/cost.md, "The roofline plot").

The data functions are tested, not pixels: each point's x is the report's intensity and its y the report's
FLOPs over its time; the PNG is only checked to be written.
"""

from __future__ import annotations

import json

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.analysis.cost import analyze, kernel_points, roofs, sweep, sweep_points
from tdsl.compiler.targets import get_target

from catalog import EXAMPLES, ROOT

COST = ROOT / "tests" / "cost"


def run(argv, capsys):
    from tdsl.compiler.driver.cli import main

    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_a_point_per_kernel_at_the_reports_intensity_and_rate(capsys):
    """The unfused attention has several kernels; every point is where the --json report puts it."""
    status, out, _ = run(["cost", EXAMPLES / "attention.tdsl", "--schedule", "unfused", "--json"], capsys)
    report = json.loads(out)
    points = kernel_points(analyze(load(EXAMPLES / "attention.tdsl").schedule("unfused"), "h100"))
    assert status == 0 and len(points) == len(report["kernels"]) > 1
    for p, k in zip(points, report["kernels"]):
        assert p.label.startswith(k["name"])
        assert p.intensity == pytest.approx(k["intensity"], rel=1e-12)
        assert p.flops_per_s == pytest.approx(k["flops"] / k["t_bound"], rel=1e-12)


def test_a_point_per_candidate_of_a_two_loop_sweep():
    """One labelled point per swept schedule, named by every factor; a candidate that does not fit says so."""
    rows = sweep(load(EXAMPLES / "gemm.tdsl"), "gpu", "h100", [(["io", "jo"], [64, 512]), (["ko"], [16, 32])],
                 backend="triton")
    points = sweep_points(rows)
    assert [p.label for p in points] == ["io=64 jo=64 ko=16", "io=64 jo=64 ko=32", "io=512 jo=512 ko=16",
                                         "io=512 jo=512 ko=32"]
    assert [p.fits for p in points] == [True, True, False, False]
    for p, r in zip(points, rows):
        assert p.intensity == r.cost.intensity and p.flops_per_s == r.cost.flops / r.cost.t_bound
        assert p.traffic == r.cost.global_bytes


def test_the_roofs_are_the_targets():
    h100 = get_target("h100")
    assert [(r.peak) for r in roofs(h100, ["bf16", "bf16"])] == [h100.peak("bf16"), h100.vector_flops]
    assert roofs(h100, [])[0].label.startswith("bf16 matrix peak")


def test_cli_plot_of_one_schedule_without_a_sweep(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "roofline.png"
    status, out, _ = run(["cost", EXAMPLES / "attention.tdsl", "--schedule", "unfused", "--plot", png], capsys)
    assert status == 0 and f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_of_a_two_loop_sweep(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "sweep.png"
    status, _, _ = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--sweep", "io,jo=32,64,128",
                        "--sweep", "ko=16,32", "--plot", png], capsys)
    assert status == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_to_a_path_that_cannot_be_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / "file").write_text("")
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--plot",
                          tmp_path / "file" / "x.png"], capsys)
    assert status == 2 and "cannot make its folder" in err and "Traceback" not in err  # before the costing


def test_without_matplotlib_the_error_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--plot", tmp_path / "x.png"],
                         capsys)
    assert status == 2 and "--plot needs matplotlib: pip install 'tdsl[plot]'" in err


def test_a_file_name_with_dollars_is_drawn_as_written(tmp_path, capsys):
    """matplotlib reads `$...$` as math; an odd `$` in the title would fail the drawing."""
    pytest.importorskip("matplotlib")
    prog = tmp_path / "gemm $\\frac{$ 2.tdsl"  # two dollars around invalid math
    prog.write_text((COST / "gemm_tiles.tdsl").read_text())
    status, _, err = run(["cost", prog, "--schedule", "tiles", "--plot", tmp_path / "r.png"], capsys)
    assert status == 0 and (tmp_path / "r.png").exists(), err


def test_cli_plot_names_a_picture_file_it_writes_exactly(tmp_path, capsys):
    """A folder, a name without a format's suffix, and the program itself are refused before any costing;
    the file reported is the file written."""
    pytest.importorskip("matplotlib")
    prog = tmp_path / "gemm.svg"
    prog.write_text((COST / "gemm_tiles.tdsl").read_text())
    base = ["cost", prog, "--schedule", "tiles", "--plot"]
    for out, says in [(tmp_path, "is a folder"), (tmp_path / "noext", "has no suffix"),
                      (tmp_path / "x.xyz", "ends in '.xyz'"), (prog, "is the same file as the input")]:
        status, _, err = run([*base, out], capsys)
        assert status == 2 and says in err, err
    assert prog.read_text() == (COST / "gemm_tiles.tdsl").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemm.svg"]
    status, out, _ = run([*base, tmp_path / "r.pdf"], capsys)
    assert status == 0 and f"wrote {tmp_path / 'r.pdf'}" in out and (tmp_path / "r.pdf").read_bytes()[:4] == b"%PDF"
