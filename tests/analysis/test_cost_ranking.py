"""The ranking estimate (compiler/analysis/cost/estimate.py, l2.py, work.py) ranks schedules as the H200 does, and each of its
terms does what docs/cost.md says.

The measured times are frozen here as literal numbers, copied from benchmarks/gpu/results/2026-11-30-run2.json
(benchmarks/gpu/run.py on the lent H200, triton.testing.do_bench medians in microseconds, every output checked);
benchmarks/cost_vs_measured.py makes the same comparison over every run.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from tdsl.compiler.analysis.cost import analyze
from tdsl.compiler.analysis.cost.estimate import wave_factor
from tdsl.compiler.analysis.cost.l2 import wave_extent
from tdsl.compiler.analysis.cost.work import issue_efficiency, padding, product_unit, products, vector_slots
from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.driver.api import load, loads
from tdsl.compiler.targets import get_target

from catalog import EXAMPLES, ROOT

PROGRAMS = ROOT / "benchmarks" / "programs"
SIGNIFICANT = 1.10  # measurements closer than 10% are no ordering (as benchmarks/cost_vs_measured.py)

# benchmarks/gpu/results/2026-11-30-run2.json, "us" of each schedule
MEASURED = {
    "gemm_bf16": (PROGRAMS / "gemm_bf16.tdsl", {
        "t128x128x64_s3_w4": 152.555198204604, "t128x128x64_s4_w4": 159.58298239530177,
        "t128x256x64_s3_w8": 144.03847810392583, "t256x128x64_s3_w8": 157.0218619729938}),
    "gemm_silu": (EXAMPLES / "gemm_silu.tdsl", {"fused": 339.4480643854026, "fast": 161.39444136331684}),
    "swiglu_quant": (PROGRAMS / "swiglu_quant.tdsl", {
        "t1x4096_w4": 25.115073565603915, "t8x1024_w8": 31.08638703709177, "t2x2048_w4": 25.298171575657626,
        "t16x512_w4": 32.86112214867408, "t1x1024_w4": 23.507652675854704}),
}


def estimates(path, schedules) -> dict:
    prog = load(path)
    return {name: analyze(prog.schedule(name), "h200").t_estimate * 1e6 for name in schedules}


@pytest.mark.parametrize("workload", list(MEASURED))
def test_the_estimate_orders_measured_schedules(workload):
    """Of the pairs whose measured times differ by 10% or more, at least 80% are ordered the same way by the
    estimate (a tie is a miss); and the estimate is within a factor of 2 of every measured time."""
    path, measured = MEASURED[workload]
    estimated = estimates(path, measured)
    counted = agree = 0
    for a, b in combinations(measured, 2):
        fast, slow = sorted((a, b), key=measured.get)
        if measured[slow] >= SIGNIFICANT * measured[fast]:
            counted += 1
            agree += estimated[fast] < estimated[slow]
    assert counted and agree >= 0.8 * counted, (workload, estimated)
    for name, us in measured.items():
        assert 0.5 <= estimated[name] / us <= 2.0, (name, estimated[name], us)


def test_roofline_figures_are_unchanged_by_the_estimate():
    """The estimate is new terms beside the chapter's figures: bytes, FLOPs and the bound stay as they were."""
    c = analyze(load(PROGRAMS / "gemm_bf16.tdsl").schedule("t128x128x64_s3_w4"), "h200")
    assert c.global_bytes == 1_635_778_560 and c.flops == 103_079_215_104
    assert c.t_bound == pytest.approx(1_635_778_560 / 4.8e12)
    assert c.t_estimate == sum(k.estimate.t_estimate for k in c.kernels) and c.t_estimate != c.t_bound


# ---------------------------------------------------------------- the terms, one by one


def test_l2_reuse_reduces_dram_bytes_for_a_wide_grid():
    """A 128x128 GEMM tile loads its A row block once per column block: 1.6 GB counted.  The 264 programs of
    a wave share 8 A blocks and 33 W blocks through L2, so DRAM sees about what ncu measures (144 MB)."""
    c = analyze(load(PROGRAMS / "gemm_bf16.tdsl").schedule("t128x128x64_s3_w4"), "h200")
    k = c.kernels[0]
    assert k.estimate.wave == 264
    assert 130e6 < k.estimate.dram_bytes < 160e6 < k.global_bytes
    assert k.estimate.t_l2 == pytest.approx(k.global_bytes / get_target("h200").l2_bandwidth)


def test_wave_extent_counts_loop_values_in_launch_order():
    order = [("io", 8), ("jo", 96)]  # io on grid.x varies fastest
    assert wave_extent(order, "io", 264) == 8 and wave_extent(order, "jo", 264) == 33
    assert wave_extent(order, "jo", 4) == 1


ROWS = """
const M = {m}, N = 64
kernel scale(X: f32[M, N]) -> (Y: f32[M, N]) {{
  Y[i, j] = X[i, j] * 2.0
}}
schedule rows {{
  io, ii = split(Y.i, {rows})
  bind(Y.io, grid.x)
}}
"""


def test_wave_quantisation_charges_a_partial_last_wave():
    """133 programs on 132 SMs: one SM runs two, so the kernel takes two programs' time, not 133/132."""
    def factor(m):
        sched = loads(ROWS.format(m=m, rows=1)).schedule("rows")
        c = analyze(sched, "h200")
        return wave_factor(plan_kernels(sched, "h200")[0], c.kernels[0], get_target("h200"))

    assert factor(132) == pytest.approx(1.0)
    assert factor(133) == pytest.approx(2 / (133 / 132))
    assert factor(264) == pytest.approx(1.0)


def test_padding_of_a_96_wide_tile_to_128():
    assert padding((96,)) == pytest.approx(128 / 96)
    assert padding((8, 8, 8), minimum=16) == 8.0  # tl.dot takes no dimension under 16
    # the same rows in tiles of 96 and 128: the 96-wide tiles compute 128 lanes each
    def slots_per_row(rows):
        sched = loads(ROWS.format(m=rows * 264, rows=rows)).schedule("rows")
        return vector_slots(sched.model, plan_kernels(sched, "h200")[0], get_target("h200")) / (rows * 264)

    assert slots_per_row(96) / slots_per_row(128) == pytest.approx(128 / 96)


GEMM = """
const M = 1024, K = 1024, N = 1024
kernel mm(A: {a}[M, K], W: {w}[K, N]) -> (C: f32[M, N]) {{
  C[i, j] = sum(k) A[i, k] * W[k, j] accum f32
}}
schedule tiled {{
  io, jo, ii, jj = tile(C.i, C.j, 64, 64)
  ko, kk = split(C.k, 32)
  reorder(C, io, jo, ko, ii, jj, kk)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}}
"""


@pytest.mark.parametrize("a,w", [("f32", "f32"), ("bf16", "f32")])
def test_an_f32_or_mixed_product_is_priced_on_the_fma_units(a, w):
    """tl.dot runs f32 and mixed operands as exact multiply-adds (input_precision="ieee"), far below the
    tensor cores' bf16 rate that the roofline charges."""
    sched = loads(GEMM.format(a=a, w=w)).schedule("tiled")
    [p] = products(sched.model, plan_kernels(sched, "h200")[0])
    assert product_unit(p, get_target("h200")) == "ieee fma"
    slow = analyze(sched, "h200").kernels[0].estimate
    fast = analyze(loads(GEMM.format(a="bf16", w="bf16")).schedule("tiled"), "h200").kernels[0].estimate
    assert fast.units == ["tensor bf16"]
    assert slow.t_matrix > 10 * fast.t_matrix
    assert slow.t_matrix > p.flops / get_target("h200").vector_flops  # below even the FP32 datasheet rate


def test_fewer_resident_warps_issue_slower():
    tgt = get_target("h200")
    assert issue_efficiency(8, tgt) < issue_efficiency(16, tgt) < issue_efficiency(64, tgt) == 1.0
    assert issue_efficiency(4, tgt) == pytest.approx(0.39)


def test_launch_overhead_is_charged_per_kernel():
    c = analyze(load(EXAMPLES / "quant_gemm.tdsl").schedule("separate"), "h200")
    assert len(c.kernels) == 3
    assert all(k.estimate.t_launch == get_target("h200").launch_overhead_s for k in c.kernels)


def test_pipeline_stages_enter_the_time():
    """Without pipelining, each K step waits the memory latency; a loop pipelined over s stages keeps s - 1 steps
    in flight (the same tiles over 3 stages: half the waiting)."""
    prog = load(ROOT / "tests" / "cost" / "gemm_tiles.tdsl")
    one = analyze(prog.schedule("sm_block"), "h100", regs=128).kernels[0].estimate
    assert one.limit == "latency"
    three = analyze(load(PROGRAMS / "gemm_bf16.tdsl").schedule("t128x128x64_s3_w4"), "h100").kernels[0].estimate
    assert three.t_inflight == pytest.approx(one.t_inflight / 2, rel=0.01)


def _gemm_estimate(bm, bn, bk, stages, warps, persistent=False, sizes=None):
    from tdsl.compiler.tune.measure import block_source

    steps = (f"io, jo, ii, ji = tile(C.i, C.j, {bm}, {bn})\nko, ki = split(C.k, {bk})\n"
             "reorder(C, io, jo, ko, ii, ji, ki)\ncache_read(A, shared, at=C.ko)\ncache_read(W, shared, at=C.ko)\n"
             f"cache_write(C, register, at=C.jo)\npipeline(C.ko, stages={stages})\nbind(C.io, grid.x)\n"
             f"bind(C.jo, grid.y)\nlaunch(C, warps={warps}" + (", persistent=true)" if persistent else ")"))
    text = block_source((PROGRAMS / "gemm_bf16.tdsl").read_text(), "probe", steps, "gemm_bf16")
    prog = loads(text, "gemm_bf16.tdsl", sizes=sizes or {"M": 4096, "N": 4096, "K": 4096})
    return analyze(prog.schedule("probe"), "h200").kernels[0].estimate


def test_an_accumulator_too_large_for_the_registers_moves_whole_in_every_k_step():
    """256 x 256 tiles on 8 warps want 256 accumulator registers a thread: measured 15x slower than 128 x 256 on
    the H200 (tuning logs of 2026-12-02), twice as slow again with half the K step."""
    fits, spills = _gemm_estimate(128, 256, 32, 4, 8), _gemm_estimate(256, 256, 32, 4, 8)
    assert fits.t_spill == 0 and spills.t_spill > 5 * fits.t_estimate
    assert _gemm_estimate(256, 256, 16, 4, 8).t_spill == pytest.approx(2 * spills.t_spill, rel=0.01)


def test_k_step_stages_and_persistence_separate_tilings_the_estimate_used_to_tie():
    """The tuner's logs of 2026-12-02: with one 128 x 256 tiling, BK 16 < BK 32 < BK 64 in time, 3 stages of BK 32
    slower than 5, and a persistent launch hides the tile edges."""
    t = {bk: _gemm_estimate(128, 256, bk, 4, 8).t_estimate for bk in (16, 32, 64)}
    assert t[64] < t[32] < t[16]
    assert _gemm_estimate(128, 256, 32, 5, 8).t_estimate < _gemm_estimate(128, 256, 32, 3, 8).t_estimate
    plain, walk = _gemm_estimate(128, 256, 64, 3, 8), _gemm_estimate(128, 256, 64, 3, 8, persistent=True)
    assert walk.t_edges < plain.t_edges and walk.t_estimate < plain.t_estimate


def _fp8_estimate(bm, bn, warps, combine):
    from tdsl.compiler.tune.measure import block_source

    text = (PROGRAMS / "fp8_gemm.tdsl").read_text().replace("combine fast_accum(128)", combine)
    steps = (f"io, jo, ii, ji = tile(P.i, P.j, {bm}, {bn})\nko, ki = split(P.k, 128)\n"
             "reorder(P, io, jo, ko, ii, ji, ki)\ncache_read(Aq, shared, at=P.ko)\ncache_read(Wt, shared, at=P.ko)\n"
             f"cache_write(P, register, at=P.jo)\npipeline(P.ko, stages=3)\nbind(P.io, grid.x)\nbind(P.jo, grid.y)\n"
             f"launch(P, warps={warps})")
    prog = loads(block_source(text, "probe", steps, "fp8_gemm"), "fp8_gemm.tdsl")
    return analyze(prog.schedule("probe"), "h200").t_estimate


def test_promoting_fp8_partial_sums_more_often_costs_more():
    """128 x 128 x 128 on 8 warps (benchmarks/gpu/microbench_promotion.py, 2026-12-04): 377 ns a K step never
    promoted, 540 promoted every 128 terms, 768 after every instruction (32 terms)."""
    combines = ("", "combine fast_accum(128)", "combine fast_accum")
    exact, interval, fast = (_fp8_estimate(128, 128, 8, c) for c in combines)
    assert exact > interval > fast


def test_a_promotion_costs_what_the_h200_measured_per_k_step():
    """The same 128 x 128 x 128 tile on 8 warps, one program an SM, 3 stages: fp8_gemm tuned on the H200 took
    44.9 us never promoted and 65.4-66.8 promoted every 128 terms, 20-22 us more for its 93 K steps an SM."""
    promoted, fast = (_fp8_estimate(128, 128, 8, c) for c in ("combine fast_accum(128)", "combine fast_accum"))
    assert 0.5 * 21e-6 < promoted - fast < 2 * 21e-6


def test_a_promoted_products_second_accumulator_limits_the_programs_an_sm_holds():
    """128 x 128 on 8 warps: 101 registers a thread unpromoted (two programs an SM fit), 165 promoted (one) on the
    H200 (microbench_promotion.py), so the promoted kernel cannot hide one program's promotions behind another's
    products."""
    from tdsl.compiler.tune.measure import block_source

    def resident(combine):
        text = (PROGRAMS / "fp8_gemm.tdsl").read_text().replace("combine fast_accum(128)", combine)
        steps = ("io, jo, ii, ji = tile(P.i, P.j, 128, 128)\nko, ki = split(P.k, 128)\n"
                 "reorder(P, io, jo, ko, ii, ji, ki)\ncache_read(Aq, shared, at=P.ko)\n"
                 "cache_read(Wt, shared, at=P.ko)\ncache_write(P, register, at=P.jo)\npipeline(P.ko, stages=3)\n"
                 "bind(P.io, grid.x)\nbind(P.jo, grid.y)\nlaunch(P, warps=8)")
        prog = loads(block_source(text, "probe", steps, "fp8_gemm"), "fp8_gemm.tdsl")
        return analyze(prog.schedule("probe"), "h200").kernels[0].occupancy.resident_blocks

    assert resident("combine fast_accum") == 2 and resident("combine fast_accum(128)") == 1


@pytest.mark.parametrize("dtype", ["bf16", "f8e4m3"])
def test_k_steps_with_narrow_operand_rows_are_slower(dtype):
    """128 x 128 tiles on 8 warps, 2 programs an SM (microbench_promotion.py tiles, 2026-12-04): K steps whose
    operand rows are 128 / 64 / 32 bytes reach 655 / 561 / 299 TFLOP/s in bf16 and 1487 / 1156 / 594 in E4M3."""
    from tdsl.compiler.analysis.cost.work import Product, product_rate

    size = 2 if dtype == "bf16" else 1
    rates = [product_rate(Product("P", 1, (dtype, dtype), True, 128, 128, row // size), f"tensor {dtype}",
                          get_target("h200"), 8, 4) for row in (128, 64, 32)]
    assert rates[0] > rates[1] > rates[2] > 0.3 * rates[0]


# ---------------------------------------------------------------- the plan follows the lowering's serial loops

def _rows(name: str, level: str) -> str:
    """examples/rmsnorm.tdsl's kernel, 8 rows a program, its r and ss computed at `level` of Y's split rows:
    at ii (inside the point loop) ii holds three statements, so every program walks the rows one at a time;
    at io the 8 rows are one 8 x 4096 tile."""
    return (f"schedule {name} {{\n  io, ii = split(Y.i, 8)\n  compute_at(r, Y.{level})\n"
            f"  compute_at(ss, Y.{level})\n  bind(Y.io, grid.x)\n  launch(Y, warps=1)\n}}\n")


RMSNORM_ROWS = ((EXAMPLES / "rmsnorm.tdsl").read_text() + _rows("one_row_at_a_time", "ii")
                + _rows("block_of_rows", "io"))


def _tile(plan, tensor):
    return next(b for b in plan.buffers if b.kind == "tile" and b.tensor == tensor)


def test_a_point_loop_around_several_statements_is_a_tile_level_as_in_the_generated_kernel():
    prog = loads(RMSNORM_ROWS, "rows.tdsl")
    serial = plan_kernels(prog.schedule("one_row_at_a_time"), "h200")[0]
    block = plan_kernels(prog.schedule("block_of_rows"), "h200")[0]
    assert "ii" in serial.serial_loops and "ii" not in block.serial_loops
    assert _tile(serial, "X").shape == [1, 4096] and _tile(block, "X").shape == [8, 4096]
    assert serial.working_set["register"] < block.working_set["register"] / 4


def test_programs_of_a_launch_with_fewer_programs_than_sms_run_one_per_sm():
    prog = loads(RMSNORM_ROWS, "rows.tdsl")
    kernel = analyze(prog.schedule("one_row_at_a_time"), "h200").kernels[0]  # 128 programs on 132 SMs
    assert kernel.occupancy.resident_blocks > 1 and kernel.estimate.resident_warps == 1


def _copy_estimate(block: int):
    text = (f"const N = 25165824\nkernel copy(X: bf16[N]) -> (Y: bf16[N]) {{\n  Y[i] = X[i]\n}}\n"
            f"schedule t {{\n  io, ii = split(Y.i, {block})\n  bind(Y.io, grid.x)\n  launch(Y, warps=2)\n}}\n")
    return analyze(loads(text, "copy.tdsl").schedule("t"), "h200").kernels[0].estimate


def test_many_small_programs_are_bound_by_how_fast_an_sm_starts_them():
    small, large = _copy_estimate(256), _copy_estimate(2048)
    # 98,304 programs: 745 per SM, 80 ns each (benchmarks/gpu/microbench_launch.py), longer than the bytes take
    assert small.t_programs == pytest.approx(745 * 80e-9) and small.limit == "program starts"
    assert large.limit == "dram" and small.t_estimate > 1.3 * large.t_estimate


SOFTMAX_SEGMENTS = """const M = 1024, N = 4096
kernel softmax(X: bf16[M, N]) -> (Y: bf16[M, N]) {
  m[i] = max(j) X[i, j]
  e[i, j] = exp(X[i, j] - m[i])
  s[i] = sum(j) e[i, j] accum f32
  Y[i, j] = e[i, j] / s[i]
}
schedule whole_row {
  compute_at(s, Y.i)
  compute_at(e, Y.i)
  compute_at(m, Y.i)
  bind(Y.i, grid.x)
  launch(Y, warps=8)
}
schedule normalised_in_halves {
  compute_at(s, Y.i)
  compute_at(e, Y.i)
  compute_at(m, Y.i)
  jo, ji = split(Y.j, 2048)
  bind(Y.i, grid.x)
  launch(Y, warps=8)
}
"""


def test_an_intermediate_read_with_another_tile_is_stored_and_read_back_as_the_kernel_does():
    # e is computed a whole row at a time and read in halves: the kernel stores it and loads the halves back
    # (measured on the H200: 9.2 us against 6.8 for the whole row, tuning log 2026-12-04-tune-h2h-run2-softmax)
    prog = loads(SOFTMAX_SEGMENTS, "softmax.tdsl")
    whole = analyze(prog.schedule("whole_row"), "h200").kernels[0]
    halves = analyze(prog.schedule("normalised_in_halves"), "h200").kernels[0]
    assert plan_kernels(prog.schedule("whole_row"))[0].read_back == frozenset()
    assert plan_kernels(prog.schedule("normalised_in_halves"))[0].read_back == {"e"}
    moved = {(t.tensor, t.kind): t.bytes for t in halves.transfers if "global" in (t.src, t.dst)}
    assert moved[("e", "write")] == moved[("e", "read")] == 1024 * 4096 * 4
    assert ("e", "write") not in {(t.tensor, t.kind) for t in whole.transfers}
    # the read back hits L2 (the program that stored the row reads it); the store reaches DRAM
    assert halves.estimate.dram_bytes == whole.estimate.dram_bytes + 1024 * 4096 * 4
    assert halves.estimate.t_estimate > 1.2 * whole.estimate.t_estimate


def _swiglu_estimate(rows: int, cols: int, warps: int):
    text = (PROGRAMS / "swiglu.tdsl").read_text() + (
        f"\nschedule probe {{\n  compute_inline(T)\n  io, jo, ii, jj = tile(Z.i, Z.j, {rows}, {cols})\n"
        f"  bind(Z.io, grid.x)\n  bind(Z.jo, grid.y)\n  launch(Z, warps={warps})\n}}\n")
    return analyze(loads(text, "swiglu.tdsl").schedule("probe"), "h200").kernels[0].estimate


def test_kernels_at_the_dram_bandwidth_are_ordered_by_their_other_work():
    # every tiling moves the same bytes; the GPU still orders them (2026-12-04 logs: 1 x 1024 on 4 warps 18.7 us,
    # 16 x 1024 on 8 warps 25.4): DRAM and the SMs' work overlap imperfectly, so the work enters the estimate
    light, heavy = _swiglu_estimate(1, 1024, 4), _swiglu_estimate(16, 1024, 8)
    assert light.t_dram == heavy.t_dram and light.limit == "dram"
    assert heavy.t_compute > light.t_compute and heavy.t_estimate > light.t_estimate > light.t_launch + light.t_dram


def test_a_row_read_by_two_loops_is_read_from_dram_once():
    # RMSNorm's row walked in segments by the sum of squares and again by the scaling: two movements of X, one
    # read from DRAM while everything fits in L2
    text = (EXAMPLES / "rmsnorm.tdsl").read_text() + (
        "\nschedule segments {\n  compute_at(r, Y.i)\n  compute_at(ss, Y.i)\n  jo, ji = split(ss.j, 1024)\n"
        "  yo, yi = split(Y.j, 1024)\n  bind(Y.i, grid.x)\n}\n")
    prog = loads(text, "rmsnorm.tdsl")
    whole = analyze(prog.schedule("row_per_program"), "h200").kernels[0]
    segments = analyze(prog.schedule("segments"), "h200").kernels[0]
    assert len([t for t in segments.transfers if t.tensor == "X"]) == 2
    assert segments.estimate.dram_bytes == whole.estimate.dram_bytes


def test_a_step_reading_what_is_already_in_l2_waits_an_l2_hit():
    """softmax normalised in segments of 512 on 16 warps: each step loads back the exponentials its program
    stored, 10.6 us on the H200 (tuning log 2026-12-04-tune-readback-run1-softmax), estimated 22 us at the 600 ns
    a DRAM step waits; RMSNorm's scaling loop re-reads its row and the weights every program shares.  A GEMM's
    K loop loads new tiles: the memory latency."""
    from tdsl.compiler.analysis.cost.estimate import step_waits

    h200 = get_target("h200")

    def waits(sched):
        kernel = analyze(sched, "h200").kernels[0]
        steps = kernel.loop_iterations[kernel.step.loop]
        return kernel, step_waits(plan_kernels(sched, "h200")[0], kernel, h200) / steps

    segments = SOFTMAX_SEGMENTS.replace("split(Y.j, 2048)", "split(Y.j, 512)").replace("warps=8", "warps=16")
    kernel, per_step = waits(loads(segments, "softmax.tdsl").schedule("normalised_in_halves"))
    assert per_step == pytest.approx(h200.l2_latency_s)
    assert 0.5 * 10.6e-6 < kernel.t_estimate < 2 * 10.6e-6
    rms = loads((EXAMPLES / "rmsnorm.tdsl").read_text() + "schedule seg {\n  compute_at(r, Y.i)\n"
                "  compute_at(ss, Y.i)\n  jo, ji = split(Y.j, 512)\n  bind(Y.i, grid.x)\n}\n", "rmsnorm.tdsl")
    assert waits(rms.schedule("seg"))[1] == pytest.approx(h200.l2_latency_s)
    gemm = load(PROGRAMS / "gemm_bf16.tdsl")
    assert waits(gemm.schedule("t128x256x64_s3_w8"))[1] == pytest.approx(h200.memory_latency_s)


def test_each_statement_loop_of_a_row_waits_by_what_it_reads():
    """Softmax with 2 rows a program and row segments of 1024: the maximum's, the exponentials', the sum's and
    the normalisation's loops each walk 4 segments, one loop after another.  Only the maximum's reads X from
    DRAM; the exponentials re-read X, the sum and the normalisation read back the stored exponentials: L2 hits.
    One rule for all four (the first's: 600 ns) put these blocks at 1.5-3.5x their H100 times (tuning log of
    2026-12-07, 13.0-17.7 us); loop by loop the wait is a quarter DRAM, three quarters L2."""
    from tdsl.compiler.analysis.cost.estimate import step_waits

    h100 = get_target("h100")
    steps = ["io, ii = split(Y.i, 2)", "compute_at(s, Y.io)", "compute_at(e, Y.io)", "compute_at(m, Y.io)"]
    steps += [f"jo, ji = split({s}.j, 1024)" for s in ("Y", "m", "e", "s")] + ["bind(Y.io, grid.x)", "launch(Y, warps=16)"]
    text = SOFTMAX_SEGMENTS + "schedule rows {\n  " + "\n  ".join(steps) + "\n}\n"
    sched = loads(text, "softmax.tdsl").schedule("rows")
    kernel = analyze(sched, "h100").kernels[0]
    steps_per_loop = 1024 // 2 * 4
    assert kernel.loop_iterations[kernel.step.loop] == 4 * steps_per_loop
    expected = steps_per_loop * (h100.memory_latency_s + 3 * h100.l2_latency_s)
    assert step_waits(plan_kernels(sched, "h100")[0], kernel, h100) == pytest.approx(expected)
    assert 0.5 * 13.0e-6 < kernel.t_estimate < 2 * 13.0e-6


@pytest.mark.parametrize("rows, warps, measured_us", [(8, 2, 61.2), (16, 4, 93.6), (16, 2, 168.9)])
def test_a_block_of_rows_past_the_registers_waits_for_its_spilled_values(rows, warps, measured_us):
    """RMSNorm with a block of rows a program held whole in registers (tuning logs of 2026-12-04, H200): 8 rows
    on 2 warps, 16 on 4 and 16 on 2 spill 257-769 values a thread; the estimate was 0.21-0.42 of their measured
    times when spills only scaled the compute."""
    text = (EXAMPLES / "rmsnorm.tdsl").read_text() + (
        f"schedule block {{\n  io, ii = split(Y.i, {rows})\n  compute_at(r, Y.io)\n  compute_at(ss, Y.io)\n"
        f"  bind(Y.io, grid.x)\n  launch(Y, warps={warps})\n}}\n")
    kernel = analyze(loads(text, "rmsnorm.tdsl").schedule("block"), "h200").kernels[0]
    assert kernel.estimate.t_spill > 0
    assert 0.5 * measured_us * 1e-6 < kernel.t_estimate < 2 * measured_us * 1e-6


def test_the_longest_program_of_a_skew_under_a_tile():
    """A skewed loop tiled, split and tiled again: isl writes the span of the longest program's K loop with
    rational pieces (integral on their domain), and `max_val` refused them: `tdsl cost` crashed (probe FF of
    the 31st session).  The generated module was fine."""
    text = """const M = 8
param K, N
kernel fz(XMK: bf16[M, K], XMN: f32[M, N], XN: f16[N], XKN: f32[K, N]) -> (T1: bf16[M, N]) {
  T1[i, j] = where(XMN[i, j] > 0.0, M, XMN[i, j])
}
schedule s {
  z = skew(T1.j, T1.i, 1)
  tile(T1.i, T1.z, 5, 64)
  bind(T1.io, grid.x)
  reorder(T1, ii, zo, zz)
  split(T1.zo, 32)
  tile(T1.zoo, T1.zz, 8, 8)
}
"""
    sched = loads(text, "fz.tdsl", sizes={"M": 100, "K": 100, "N": 16}).schedule("s")
    kernel = analyze(sched, "h100").kernels[0]
    assert kernel.estimate.t_estimate > 0 and kernel.estimate.waves >= 1


WIDE_BLOCK = """\
const M = 256, N = 4096
kernel ew(X: f32[M, N], Y: f32[M, N]) -> (Z: f32[M, N]) {
  Z[i, j] = X[i, j] * Y[i, j] + 1.0
}
schedule t {
  io, jo, ii, jj = tile(Z.i, Z.j, 16, 1024)
  bind(Z.io, grid.x)
  bind(Z.jo, grid.y)
  launch(Z, warps=WARPS)
}
"""


@pytest.mark.parametrize("warps, regs, resident", [(32, 64, 1), (16, 128, 1), (8, 224, 1)])
def test_a_thread_has_no_more_registers_than_its_block_may_hold(warps, regs, resident):
    """1,024 threads were estimated at 80 registers each, more than the 65,536 a block may have: 0 resident
    blocks beside a finite time, and the tuner ranked such candidates (probe NN).  A thread of a block of 1,024
    has at most 64 (the compiler spills the rest), of 512 at most 128."""
    from tdsl.compiler.analysis.cost import analyze
    from tdsl.compiler.driver.api import loads

    sched = loads(WIDE_BLOCK.replace("WARPS", str(warps))).schedule("t")
    occupancy = analyze(sched, "h100").kernels[0].occupancy
    assert (occupancy.regs_per_thread, occupancy.resident_blocks) == (regs, resident)
