"""`tdsl cost --fit / --sweep` honour the code generator's tile rules (docs/cost.md, "Sweeps").

The three seams a user reported: `--fit` proposed tiles the backend pads past shared memory (82 rows of Q are
128 lanes in Triton), a 512 x 512 tile was marked as fitting although compile refuses tiles over 65,536
elements, and factors that make the same schedule were printed as several rows.
"""

from __future__ import annotations

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.analysis.cost import fit, sweep, sweep_table
from tdsl.compiler.lower.tile_rules import MAX_TILE_ELEMENTS, lanes, padded_shape

from catalog import EXAMPLES, ROOT

COST = ROOT / "tests" / "cost"


def run(argv, capsys):
    from tdsl.compiler.driver.cli import main

    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_the_tile_rules():
    assert [lanes(n) for n in (1, 2, 3, 53, 64, 82, 128)] == [1, 2, 4, 64, 64, 128, 128]
    assert padded_shape([82, 128]) == [128, 128]
    assert MAX_TILE_ELEMENTS == 65536


# ---------------------------------------------------------------- padding past shared memory


def test_fit_never_proposes_rows_that_triton_pads_past_shared_memory():
    """82 rows of Q fit 99 KiB exactly, but Triton gives them 128 lanes: with its rules the largest usable block
    of rows is 64 (the chapter's 82 stays the answer of the target's capacities alone)."""
    prog = load(COST / "flash_attention.tdsl")
    assert fit(prog, "blocks", "rtx-pro-6000", "io", {"jo": 64}, backend="triton") == 64
    assert fit(prog, "blocks", "rtx-pro-6000", "io", {"jo": 64}) == 82


def test_a_padded_tile_over_shared_memory_does_not_fit_and_says_why():
    rows = sweep(load(COST / "flash_attention.tdsl"), "blocks", "rtx-pro-6000", [(["io"], [64, 82])],
                 backend="triton")
    fits = {r.factors["io"]: r for r in rows}
    assert fits[64].fits and fits[64].reason is None
    assert not fits[82].fits and not fits[82].cost.violations  # the exact working set fits ...
    assert "padded to powers of two" in fits[82].reason and "Q 82x128 -> 128x128" in fits[82].reason  # ... padded not
    assert "rtx-pro-6000 has 99 KiB" in fits[82].reason


def test_cli_fit_shows_the_rules_it_used(capsys):
    status, out, _ = run(["cost", COST / "flash_attention.tdsl", "--target", "rtx-pro-6000", "--sweep", "jo=64",
                          "--fit", "io"], capsys)
    assert status == 0 and "tile rules of triton" in out.splitlines()[0]
    row = out.splitlines()[2].split()
    assert row[:2] == ["64", "64"] and row[-1] == "yes"
    status, out, _ = run(["cost", COST / "flash_attention.tdsl", "--target", "rtx-pro-6000", "--sweep", "jo=64",
                          "--fit", "io", "--backend", "none"], capsys)
    assert status == 0 and out.splitlines()[2].split()[:2] == ["64", "82"]


# ---------------------------------------------------------------- the element limit


def test_a_tile_over_the_element_limit_does_not_fit(capsys):
    """512 x 512 registers are a soft limit for the capacities, but compile refuses the 262,144-element tile."""
    status, out, _ = run(["cost", EXAMPLES / "gemm.tdsl", "--schedule", "gpu", "--sweep", "io,jo=64,512",
                          "--sweep", "ko=16"], capsys)
    lines = out.splitlines()
    assert status == 0
    assert lines[2].split()[:2] == ["64", "64"] and lines[2].split()[-1] == "yes"
    assert lines[3].split()[:2] == ["512", "512"] and lines[3].endswith("no [1]")
    assert lines[4].startswith("[1] the tile of C would hold 262144 elements")


def test_the_reason_is_the_one_compile_gives():
    from tdsl.compiler.analysis.cost import build_block, with_factors
    from tdsl.compiler.driver.generate import generate_schedule
    from tdsl.compiler.errors import BackendError

    prog = load(EXAMPLES / "gemm.tdsl")
    factors = {"io": 512, "jo": 512, "ko": 16}  # A and B tiles of 48 KiB each in shared memory: they fit
    (row,) = sweep(prog, "gpu", "h100", [([n], [v]) for n, v in factors.items()], backend="triton")
    assert not row.cost.violations
    with pytest.raises(BackendError) as refused:
        generate_schedule(prog, build_block(prog, with_factors(prog.block("gpu"), factors)))
    assert row.refusal == refused.value.reason


def test_fit_stays_within_the_element_limit():
    """Before: 2293 rows of A (a 2293 x 128 accumulator, 4.5 times the limit, not a power of two)."""
    prog = load(EXAMPLES / "gemm.tdsl")
    best = fit(prog, "gpu", "h100", "io", {"ko": 16}, backend="triton")
    assert best == 512 and lanes(best) * 128 <= MAX_TILE_ELEMENTS


# ---------------------------------------------------------------- duplicate rows


def test_factors_that_make_one_schedule_are_one_row(capsys):
    """M = 1024: splitting i by 1024 or by 2048 is one tile of the whole loop; a value given twice is one row."""
    rows = sweep(load(COST / "gemm_tiles.tdsl"), "tiles", "h100", [(["io"], [512, 1024, 2048, 1024])])
    assert [r.factors["io"] for r in rows] == [512, 1024]
    assert rows[1].asked == [{"io": 1024}, {"io": 2048}, {"io": 1024}]
    status, out, _ = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--sweep", "io=1024,2048",
                          "--sweep", "jo=64,64"], capsys)
    assert status == 0 and "1 candidate(s)" in out
    assert "io=1024 jo=64: asked as io=1024 jo=64, io=1024 jo=64, io=2048 jo=64, io=2048 jo=64; one row (a factor " \
           "past its loop's extent is the whole loop)" in out


# ---------------------------------------------------------------- usage


def test_usage_errors(capsys):
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--sweep", "io=32,64", "--fit", "io"], capsys)
    assert status == 2 and "io is both swept and fitted" in err
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--target", "ascend-950", "--backend", "triton"], capsys)
    assert status == 2 and "target ascend-950 has no backend 'triton'" in err
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--sweep", "io=32",
                          "--target", "ascend-950", "--backend", "triton"], capsys)
    assert status == 2 and "target ascend-950 has no backend 'triton'" in err


def test_json_rows_say_whether_they_fit(capsys):
    import json

    status, out, _ = run(["cost", EXAMPLES / "gemm.tdsl", "--schedule", "gpu", "--sweep", "io,jo=64,512",
                          "--sweep", "ko=16", "--json"], capsys)
    data = json.loads(out)
    assert status == 0 and [r["fits"] for r in data] == [True, False]
    assert "262144 elements" in data[1]["reason"] and data[1]["cost"] is not None


def test_the_table_keeps_a_column_per_figure():
    rows = sweep(load(COST / "gemm_tiles.tdsl"), "tiles", "h100", [(["io", "jo"], [64])], backend="triton")
    header, row = sweep_table(rows, "h100").splitlines()
    assert header.split()[-1] == "fits" and row.split()[-1] == "yes"


def test_a_fit_that_finds_nothing_is_a_row_that_says_so(capsys):
    status, out, _ = run(["cost", COST / "flash_attention.tdsl", "--target", "rtx-pro-6000", "--sweep", "jo=64,8192",
                          "--fit", "io"], capsys)
    lines = out.splitlines()
    assert status == 0 and lines[3].split()[:3] == ["8192", "-", "-"] and lines[3].endswith("no [1]")
    assert lines[4] == "[1] no factor of io fits rtx-pro-6000 with the tile rules of triton"


ASCEND_GEMM = """\
const M = 2000, N = 3000, K = 1000
kernel g2(A: bf16[M, K], B: bf16[K, N]) -> (C: bf16[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}
schedule s {
  io, ii = split(C.i, 128)
  jo, jj = split(C.j, 128)
  ko, kk = split(C.k, 64)
  reorder(C, io, jo, ko, ii, jj, kk)
  cache_read(A, shared, at=C.ko)
  cache_read(B, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
  pipeline(C.ko, stages=4)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""


def test_a_fitted_ascend_950_factor_compiles_and_the_next_does_not(tmp_path):
    """The 950's printer sizes its UB buffers as it prints them: the fit once checked the lowering alone and
    proposed 512 rows, which `tdsl compile` refused for UB."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.errors import BackendError

    prog = loads(ASCEND_GEMM, "g2.tdsl")
    best = fit(prog, "s", "ascend-950", "io", backend="ascend-950")
    assert best is not None
    text = ASCEND_GEMM.replace("split(C.i, 128)", f"split(C.i, {best})")
    generate(loads(text, "g2.tdsl"), "s", target="ascend-950")
    with pytest.raises(BackendError, match="UB need"):
        generate(loads(ASCEND_GEMM.replace("split(C.i, 128)", f"split(C.i, {2 * best})"), "g2.tdsl"), "s",
                 target="ascend-950")


def test_fit_past_the_extent_is_the_extent(tmp_path):
    """Every factor of io fits at M = 100: `fit` says 100, as the sweep and `tdsl cost --fit` do, not the 128
    of its doubling (probe U of the 28th session)."""
    path = tmp_path / "gemm.tdsl"
    path.write_text("""const M = 100, N = 128, K = 64
kernel gemm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}
schedule s {
  io, jo, ii, jj = tile(C.i, C.j, 8, 64)
  ko, kk = split(C.k, 64)
  reorder(C, io, jo, ko, ii, jj, kk)
  cache_read(A, shared, at=C.ko)
  cache_read(B, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
}
""")
    prog = load(path)
    assert fit(prog, "s", "h100", "io", {"jo": 64}) == 100
    rows = sweep(prog, "s", "h100", [(["jo"], [64])], fit_loop="io")
    assert [r.factors["io"] for r in rows] == [100]


@pytest.mark.parametrize("block, says", [
    ("padded", "shared needs 256 KiB per block with its tiles padded to powers of two (A 192x64 -> 256x64"),
    ("persistent", "launched persistently, Triton keeps each tile it stores in shared memory"),
])
def test_cost_compile_and_the_tuner_judge_a_generated_kernel_alike(block, says, capsys, tmp_path):
    """`cost` reported these as fitting (0 resident blocks, a finite estimate) and `compile` wrote the padded
    one, which Triton could not launch, while the tuner's screen refused both (probe CC of the 30th session)."""
    from tdsl.compiler.tune.search import search

    prog = COST / "gemm_padded.tdsl"
    status, out, err = run(["cost", prog, "--schedule", block, "--target", "h100"], capsys)
    assert status == 1 and "[rule capacity]" in err and says in err
    status, out, err = run(["compile", prog, "--schedule", block, "--target", "h100", "-o", tmp_path / "g.py"],
                           capsys)
    assert status == 1 and "[rule capacity]" in err and says in err
    assert not (tmp_path / "g.py").exists()
    screen = search(load(prog), None, None, "h100", "triton", samples=1).screen
    steps = list(load(prog).schedule(block).trace.steps)
    assert screen.judge({}, steps, counted=False).rule in ("capacity:padded", "capacity:staged")


def test_a_padded_kernel_that_fits_is_taken_by_all_three(capsys, tmp_path):
    from tdsl.compiler.tune.search import search

    prog = COST / "gemm_padded.tdsl"
    assert run(["cost", prog, "--schedule", "padded_fits", "--target", "h100"], capsys)[0] == 0
    assert run(["compile", prog, "--schedule", "padded_fits", "--target", "h100", "-o", tmp_path / "g.py"],
               capsys)[0] == 0
    screen = search(load(prog), None, None, "h100", "triton", samples=1).screen
    assert screen.judge({}, list(load(prog).schedule("padded_fits").trace.steps), counted=False).accepted


def test_the_as_generated_violation_is_in_the_report_and_its_json_and_follows_backend(capsys):
    """The padded overflow reached stderr but not the report's DOES NOT FIT line or its JSON, and plain `cost`
    refused --backend, so a TileLang kernel was judged by Triton's rules (probe EE, 30th session)."""
    import json

    prog = COST / "gemm_padded.tdsl"
    status, out, _ = run(["cost", prog, "--schedule", "padded", "--json"], capsys)
    assert status == 1 and "padded to powers of two" in json.loads(out)["kernels"][0]["violations"][0]["reason"]
    status, out, _ = run(["cost", prog, "--schedule", "padded"], capsys)
    assert status == 1 and "DOES NOT FIT: shared 262,144 B > 232,448 B" in out
    # Triton keeps a persistent kernel's stored tile beside its operands; TileLang does not
    assert run(["cost", prog, "--schedule", "persistent"], capsys)[0] == 1
    assert run(["cost", prog, "--schedule", "persistent", "--backend", "tilelang"], capsys)[0] == 0
    assert run(["cost", prog, "--schedule", "padded", "--backend", "none"], capsys)[0] == 0  # the exact footprints


def test_triton_copies_the_operands_on_the_rtx_pro_6000_too(capsys, tmp_path):
    """sm_120's mma reads registers, yet Triton's pipeliner stages a dot's operands in shared memory: this GEMM
    asked 131,072 B (AOT for sm_120), which cost and compile took as fitting the block's 99 KB (probe EE)."""
    prog = tmp_path / "g.tdsl"
    prog.write_text("const M = 1024, N = 1024, K = 1024\n"
                    "kernel g(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {\n"
                    "  Y[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32\n}\n"
                    "schedule s {\n  io, jo, ii, ji = tile(Y.i, Y.j, 256, 256)\n  ko, ki = split(Y.k, 64)\n"
                    "  reorder(Y, io, jo, ko, ii, ji, ki)\n  cache_write(Y, register, at=Y.jo)\n"
                    "  pipeline(Y.ko, stages=2)\n  bind(Y.io, grid.x)\n  bind(Y.jo, grid.y)\n  launch(Y, warps=8)\n}\n")
    for command in (["cost"], ["compile", "-o", tmp_path / "g.py"]):
        status, _, err = run([command[0], prog, "--target", "rtx-pro-6000", *command[1:]], capsys)
        assert status == 1 and "Triton copies the tensor-core operands into shared memory itself" in err
        assert "128 KiB per block, but rtx-pro-6000 has 99 KiB" in err
