"""The cost model reproduces the chapter's worked numbers from .tdsl programs and schedules alone.

Every figure below is computed by tdsl from the schedule tree and the isl access relations (buffer plan,
traffic, FLOPs, occupancy); the tests only compare it with the number printed in the chapter, section by
section.  MiB = 2^20 bytes and KiB = 2^10 bytes, as in the chapter.  Where the model cannot reproduce a
figure, the test states the difference and docs/cost.md gives the reason.
"""

from __future__ import annotations

import json
import math

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.analysis.cost import analyze, box_sum, card, fit, sweep, sweep_table, with_factors
from tdsl.compiler.analysis.buffer_plan import CapacityError, check, plan, plan_kernels
from tdsl.compiler.targets import get_target

from catalog import CHAPTER_SIZES, EXAMPLES, ROOT

COST = ROOT / "tests" / "cost"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def cost(path, schedule, target="h100", sizes=None, regs=None):
    return analyze(load(path, sizes=sizes).schedule(schedule), target, regs=regs)


def trunc1(x: float) -> float:
    """The chapter prints intensities truncated to one decimal (31.75 -> 31.7)."""
    return math.floor(x * 10) / 10


# ---------------------------------------------------------------- 5.2.1 / 5.2.2: output tiles of C = A·W


@pytest.fixture(scope="module")
def output_tiles():
    """Example 5-3: m x n output tiles with k = 32, one set of input buffers, on the chapter's H100."""
    return sweep(load(COST / "gemm_tiles.tdsl"), "tiles", "h100", [(["io", "jo"], [32, 64, 128])])


def test_5_2_1_each_matrix_once_and_flops():
    c = cost(COST / "gemm_tiles.tdsl", "tiles")
    assert c.compulsory_bytes == 128 * MiB  # 5.2.1: V_once = (8 + 96 + 24) MiB
    assert {t: c.tensor_sizes[t] // MiB for t in ("A", "W", "C")} == {"A": 8, "W": 96, "C": 24}
    assert c.flops == 2 * 1024 * 4096 * 12288  # 5.2.1: F = 2MKN
    assert round(c.flops / 1e9) == 103  # "≈ 103 GFLOPs"


def test_example_5_3_output_tile_table(output_tiles):
    """Example 5-3's table: local memory, bytes moved between the buffer and the next level, intensity."""
    chapter = {  # tile: (local memory, bytes moved, intensity FLOP/byte, matrix utilisation bound)
        32: (8 * KiB, 6168 * MiB, 15.9, 0.05),
        64: (24 * KiB, 3096 * MiB, 31.7, 0.11),
        128: (80 * KiB, 1560 * MiB, 63.0, 0.21),
    }
    for row in output_tiles:
        m = row.factors["io"]
        local, moved, intensity, mfu = chapter[m]
        c = row.cost
        assert c.kernels[0].working_set["shared"] == local
        assert c.global_bytes == moved
        assert trunc1(c.intensity) == intensity
        assert round(c.mfu_bound, 2) == mfu  # "5%, 11% and 21%" on the H100 (ridge 295 FLOP/byte)
    assert round(get_target("h100").peak("bf16") / get_target("h100").dram_bandwidth) == 295  # 5.1.5


def test_example_5_3_tile_parts(output_tiles):
    """5.2.2: for 64x64, A and W tiles of 4 KiB and a 16 KiB accumulator; A re-read 192 times, W 16 times."""
    c = next(r.cost for r in output_tiles if r.factors["io"] == 64)
    sizes = {b.tensor: b.bytes for b in c.kernels[0].buffers if b.kind in ("read", "write")}
    assert sizes == {"A": 4 * KiB, "W": 4 * KiB, "C": 16 * KiB}
    assert c.tensor_bytes("A") == 192 * 8 * MiB == 1536 * MiB
    assert c.tensor_bytes("W") == 16 * 96 * MiB == 1536 * MiB
    assert c.tensor_bytes("C") == 24 * MiB


def test_5_2_2_resident_working_sets_on_rtx_pro_6000():
    """Figure 5-9: four 24 KiB working sets (+1 KiB reserve each) fit 100 KB of shared memory, one of 80 KiB."""
    rows = sweep(load(COST / "gemm_tiles.tdsl"), "tiles", "rtx-pro-6000", [(["io", "jo"], [64, 128])])
    got = {r.factors["io"]: r.cost.kernels[0].occupancy.by_resource["shared"] for r in rows}
    assert got == {64: 4, 128: 1}


def test_5_4_6_double_buffered_candidates():
    """5.4.6: double buffering makes the working sets 32 KiB and 96 KiB; resident blocks go from 4, 1 to 3, 1."""
    rows = sweep(load(COST / "gemm_tiles.tdsl"), "double_buffered", "rtx-pro-6000", [(["io", "jo"], [64, 128])])
    got = {r.factors["io"]: (r.cost.kernels[0].working_set["shared"], r.cost.kernels[0].occupancy.resident_blocks)
           for r in rows}
    assert got == {64: (32 * KiB, 3), 128: (96 * KiB, 1)}


def test_sweep_table_has_the_chapter_columns(output_tiles):
    text = sweep_table(output_tiles, "h100")
    assert "6,168 MiB" in text and "8 KiB" in text and "15.9" in text


# ---------------------------------------------------------------- 5.1.5: one block on one H100 SM


def test_5_1_5_residency_table():
    """The residency table: 128x128x64 tile, 256 threads, 128 registers per thread, 96 KiB working set."""
    k = cost(COST / "gemm_tiles.tdsl", "sm_block", regs=128).kernels[0]
    o = k.occupancy
    assert k.working_set["shared"] == 96 * KiB  # A 16 KiB + W 16 KiB + FP32 accumulator 64 KiB
    assert o.threads == 256
    assert o.shared_per_block + o.reserved_per_block == 97 * KiB  # "96 KiB + 1 KiB reserve = 97 KiB"
    assert o.by_resource == {"threads": 8, "registers": 2, "shared": 2, "blocks": 32}
    assert o.resident_blocks == 2 and sorted(o.limiting) == ["registers", "shared"]
    assert o.resident_warps == 16 and o.occupancy == 0.25  # 16/64 = 25%
    assert o.shared_left == 34 * KiB  # Figure 5-4: "leaving only 34 KiB"


def test_5_1_5_bytes_in_flight():
    """Little's law: 3.35 TB/s x 600 ns / 132 SMs ≈ 15.2 KB needed; 16 warps x 4 x 512 B = 32 KiB in flight."""
    o = cost(COST / "gemm_tiles.tdsl", "sm_block", regs=128).kernels[0].occupancy
    assert round(o.inflight_need / 1e3, 1) == 15.2
    assert o.inflight_have == 32 * KiB
    assert round(o.inflight_have / o.inflight_need, 2) == 2.15


def test_5_1_5_k_step_times():
    """Per K step of the 128x128x64 block: 32 KiB copied in ≈1.29 µs, 2,097,152 FLOPs in ≈0.28 µs (1/132 of an H100)."""
    step = cost(COST / "gemm_tiles.tdsl", "sm_block", regs=128).kernels[0].step
    assert step.bytes == 32 * KiB and step.flops == 2_097_152
    assert round(step.t_move * 1e6, 2) == 1.29 and round(step.t_compute * 1e6, 2) == 0.28


def test_example_5_5_double_buffering():
    """Example 5-5: four K blocks, 4 x (1.29 + 0.28) ≈ 6.28 µs in sequence, 4 x 1.29 + 0.28 ≈ 5.44 µs with two slots."""
    serial = cost(COST / "gemm_tiles.tdsl", "sm_block", sizes={"K": 256}, regs=128).kernels[0].step
    piped = cost(COST / "gemm_tiles.tdsl", "sm_block_pipelined", sizes={"K": 256}, regs=128).kernels[0].step
    assert serial.per_program == piped.per_program == 4
    assert round(serial.t_pipeline * 1e6, 2) == 6.28
    assert round(piped.t_pipeline * 1e6, 2) == 5.44


# ---------------------------------------------------------------- 5.3.1: fusing the activation chain


def test_example_5_4_fusion_traffic():
    """Example 5-4: separate 48 + 72 = 120 MiB, fused 72 MiB; the 48 MiB saved is one write and one read of T."""
    separate = cost(COST / "swiglu.tdsl", "separate")
    fused = cost(COST / "swiglu.tdsl", "fused")
    assert [k.global_bytes // MiB for k in separate.kernels] == [48, 72]
    assert separate.global_bytes == 120 * MiB
    assert fused.global_bytes == 72 * MiB
    assert separate.tensor_bytes("T") == 48 * MiB and fused.tensor_bytes("T") == 0
    assert separate.global_bytes / fused.global_bytes == pytest.approx(1 / 0.6)  # "72/120 = 0.6"


def test_example_5_4_with_quantization():
    """5.3.1: adding the E4M3 step: all separate 156 MiB, first two fused 108 MiB, all three fused 24+24+12 = 60 MiB."""
    got = {name: cost(COST / "swiglu_quant.tdsl", name).global_bytes for name in ("separate", "first_two", "fused")}
    assert got == {"separate": 156 * MiB, "first_two": 108 * MiB, "fused": 60 * MiB}
    assert cost(EXAMPLES / "swiglu_quant.tdsl", "fused").global_bytes == 60 * MiB  # the example's own schedule


def test_5_3_1_peak_memory_remark():
    """Outputs allocated before a step, used inputs freed after it: separate SiLU holds G, U, T = 72 MiB at
    its peak, the fused chain G, U, Q = 60 MiB; traffic drops by 96 MiB but the peak only by 12 MiB."""
    separate = cost(COST / "swiglu_quant.tdsl", "separate")
    fused = cost(COST / "swiglu_quant.tdsl", "fused")
    assert separate.peak_global_memory == 72 * MiB and "swiglu_quant_0" in separate.peak_at
    assert fused.peak_global_memory == 60 * MiB
    assert separate.global_bytes - fused.global_bytes == 96 * MiB
    assert separate.peak_global_memory - fused.peak_global_memory == 12 * MiB


# ---------------------------------------------------------------- 5.2.4: RMSNorm, one group vs split rows


def test_5_2_4_rmsnorm_traffic():
    """One group per row: 8 (X) + 8 (g, once per row) + 8 (Y) = 24 MiB in one kernel of 1024 groups.  Split into
    8 segments: X is read again (+8 MiB), partial sums and scales add ≈0.1 MiB: 32.1 MiB in three kernels."""
    one = cost(EXAMPLES / "rmsnorm.tdsl", "row_per_program")
    assert one.global_bytes == 24 * MiB
    assert {t: one.tensor_bytes(t) // MiB for t in ("X", "g", "Y")} == {"X": 8, "g": 8, "Y": 8}
    assert [k.programs for k in one.kernels] == [1024]
    split = cost(COST / "rmsnorm_split.tdsl", "split")
    assert len(split.kernels) == 3 and split.kernels[0].programs == 8192  # 1024 -> 8192 groups
    assert split.tensor_bytes("X") == 16 * MiB
    assert split.tensor_bytes("ps", "write") == 32 * KiB and split.tensor_bytes("r", "write") == 4 * KiB
    scratch = split.global_bytes - 32 * MiB
    assert scratch == 2 * (32 + 4) * KiB  # write + read of the partial sums and the scales
    assert round(split.global_bytes / MiB, 1) == 32.1


# ---------------------------------------------------------------- 5.3.3: FlashAttention tiles


def test_5_3_3_stored_scores_and_probabilities():
    """Figure 5-18 (top): S and P in FP32 are 256 MiB each; writing and reading both once moves 1 GiB, against
    8 MiB for reading Q, K, V and writing O once."""
    c = cost(COST / "attention_full.tdsl", "operators")
    assert c.tensor_sizes["S"] == c.tensor_sizes["P"] == 256 * MiB
    assert c.tensor_bytes("S") + c.tensor_bytes("P") == 1 * GiB
    assert c.tensor_bytes("S", "write") == c.tensor_bytes("S", "read") == 256 * MiB
    assert c.compulsory_bytes == 8 * MiB


@pytest.fixture(scope="module")
def flash_rows():
    """Q rows that fit 99 KB of one RTX PRO 6000 block for K/V blocks of b rows (the chapter's buffer layout)."""
    return {r.factors["jo"]: r for r in sweep(load(COST / "flash_attention.tdsl"), "blocks", "rtx-pro-6000",
                                              [(["jo"], [1, 64, 128])], fit_loop="io")}


def test_5_3_3_flashattention_table(flash_rows):
    """5.3.3's table: b, rows of Q that fit a, full passes over K/V, bytes moved, online updates."""
    chapter = {  # b: (a, passes, MiB, updates)
        64: (82, 100, 404, 12800),
        128: (53, 155, 624, 9920),
        1: (128, 64, 260, 524288),
    }
    for b, (a, passes, mib, updates) in chapter.items():
        row = flash_rows[b]
        k = row.cost.kernels[0]
        assert k.loop_iterations["io"] == passes
        assert row.cost.global_bytes == mib * MiB
        assert k.loop_iterations["jo"] == updates
        assert row.factors["io"] == a  # the row state is the chapter's three FP32 vectors: m, l, the factor


def test_5_3_3_buffer_layout(flash_rows):
    """The layout: 2ad (Q) + 2bd (one K/V slot) + 4ab (scores, then probabilities) + 4ad (FP32 output accumulator)
    + 12a (the running maximum m, the row sum l and the factor that rescales l and U, 5.3.3)."""
    row = flash_rows[64]
    a, b, d = row.factors["io"], 64, 128
    k = row.cost.kernels[0]
    sizes = {x.tensor: x.bytes for x in k.buffers if x.scope == "shared"}
    assert sizes["Q"] == 2 * a * d and sizes["K"] == sizes["V"] == 2 * b * d
    assert sizes["S"] == sizes["P"] == 4 * a * b and sizes["U"] == 4 * a * d
    assert sizes["l"] == sizes["m"] == sizes["rescale(m)"] == 4 * a
    shares = {x.tensor: x.shares for x in k.buffers}
    assert shares["P"] == "S@jo"  # probabilities overwrite the scores in place
    assert k.working_set["shared"] == 2 * a * d + 2 * b * d + 4 * a * b + 4 * a * d + 12 * a  # K and V share a slot
    assert k.working_set["shared"] <= 101376 < k.working_set["shared"] + 2 * d + 4 * b + 4 * d + 12


def test_5_3_3_flash_fit_rejects_one_more_row():
    prog = load(COST / "flash_attention.tdsl")
    assert fit(prog, "blocks", "rtx-pro-6000", "io", {"jo": 64}) == 82
    too_big = prog.schedule("blocks")
    with pytest.raises(CapacityError):
        check(_build(prog, "blocks", {"io": 83, "jo": 64}), "rtx-pro-6000")
    check(too_big, "rtx-pro-6000")  # a = 82 fits


def _build(prog, name, factors):
    from tdsl.compiler.analysis.cost.tiling import build_block as build

    return build(prog, with_factors(prog.block(name), factors))


# ---------------------------------------------------------------- 5.4.4: AKG's tiled GEMM


def test_5_4_4_input_traffic_with_and_without_output_tiles():
    """C = AB, 4096^3: operands read per output element = 256 GiB; 64x64 output tiles with K tiles of 32 = 4 GiB
    (64x less); the FP32 result is written once, 64 MiB."""
    naive = cost(EXAMPLES / "gemm.tdsl", None)
    tiled = cost(EXAMPLES / "gemm.tdsl", "tiled")
    assert naive.tensor_bytes("A", "read") + naive.tensor_bytes("B", "read") == 256 * GiB
    assert tiled.tensor_bytes("A", "read") + tiled.tensor_bytes("B", "read") == 4 * GiB
    assert naive.tensor_bytes("C", "write") == tiled.tensor_bytes("C", "write") == 64 * MiB
    assert tiled.kernels[0].loop_iterations["jo"] == 4096  # 64 x 64 output tiles
    assert tiled.kernels[0].loop_iterations["ko"] == 4096 * 128  # 128 reduction tiles each
    assert round(tiled.flops / 1e9, 1) == 137.4


def test_5_4_4_on_chip_buffers_on_ascend():
    """A_L1 and B_L1 of 4 KiB each and C_L0 of 16 KiB; with double buffering the input slots take 8 KiB each."""
    single = {b.label: (b.scope, b.bytes) for b in plan(load(COST / "gemm_akg.tdsl").schedule("akg"), "ascend-910b")}
    assert single == {"A@ko": ("L1", 4 * KiB), "B@ko": ("L1", 4 * KiB), "C@jo": ("L0C", 16 * KiB)}
    double = {b.label: b.bytes for b in plan(load(COST / "gemm_akg.tdsl").schedule("akg_double"), "ascend-910b")}
    assert double == {"A@ko": 8 * KiB, "B@ko": 8 * KiB, "C@jo": 16 * KiB}


def test_5_4_5_two_level_k_tiles_move_data_l1_to_l0():
    """The TileLang-Ascend listing's two K levels: GM -> L1 per ko1, L1 -> L0A/L0B per ko0, L0C -> GM once per tile."""
    c = cost(COST / "gemm_akg.tdsl", "two_level", "ascend-910b")
    levels = c.level_bytes()
    assert levels["global->L1"] == 4 * GiB
    assert levels["L1->L0A"] == levels["L1->L0B"] == 2 * GiB
    assert levels["L0C->global"] == 64 * MiB
    ws = c.kernels[0].working_set
    assert ws == {"L1": 2 * 2 * 32 * KiB, "L0A": 2 * 4 * KiB, "L0B": 2 * 4 * KiB, "L0C": 16 * KiB}


# ---------------------------------------------------------------- 5.4.5: example 5-8, quantize then GEMM


def test_example_5_8_separate_vs_fused_quantization():
    """Separate: 32 + 16 + 192 = 240 MiB for the input, 32 x 6 + 12 = 204 MiB for weights and output: 444 MiB.
    Fused into the GEMM: 32 + 12 x 32 = 416 MiB and 620 MiB in all, about 40% more."""
    separate = cost(COST / "quant_gemm.tdsl", "separate")
    fused = cost(COST / "quant_gemm.tdsl", "fused")
    assert separate.tensor_bytes("A") == 32 * MiB
    assert separate.tensor_bytes("Aq", "write") == 16 * MiB and separate.tensor_bytes("Aq", "read") == 192 * MiB
    input_separate = separate.tensor_bytes("A") + separate.tensor_bytes("Aq")
    input_fused = fused.tensor_bytes("A") + fused.tensor_bytes("Aq")
    assert input_separate == 240 * MiB and input_fused == 416 * MiB
    for c in (separate, fused):
        assert c.tensor_bytes("W") + c.tensor_bytes("Out") == 204 * MiB
    # The chapter leaves out the 4096 FP32 row scales (written once, read by each of the 384 output tiles):
    scales = 16 * KiB + 384 * 128 * 4
    assert separate.tensor_bytes("amax") == fused.tensor_bytes("amax") == scales == 208 * KiB
    assert separate.global_bytes == 444 * MiB + scales
    assert fused.global_bytes == 620 * MiB + scales
    assert round(fused.global_bytes / separate.global_bytes - 1, 1) == 0.4


def test_example_5_8_eight_kib_per_row():
    """'Each row gets 8 KiB of local memory for its input' in the separate quantization."""
    k = plan_kernels(load(COST / "quant_gemm.tdsl").schedule("separate"), "h100")[0]
    assert {b.tensor: b.bytes for b in k.buffers if b.kind == "tile" and b.source == "global"} == {"A": 8 * KiB}


# ---------------------------------------------------------------- capacity, lifetimes, API


def test_capacity_violation_is_a_clear_error():
    sched = load(EXAMPLES / "gemm_silu.tdsl").schedule("fast")
    check(sched, "h100")  # 144 KiB of shared memory fits the H100's 227 KiB
    with pytest.raises(CapacityError) as err:
        check(sched, "rtx-pro-6000")
    text = str(err.value)
    assert "[rule capacity]" in text and "shared" in text and "46,080 B over" in text
    assert "A@ko 128x64 bf16 x 3 stages = 48 KiB" in text and "W@ko 64x256 bf16 x 3 stages = 96 KiB" in text
    assert err.value.exit_code == 1


def test_scope_must_exist_on_the_target():
    sched = load(COST / "gemm_akg.tdsl").schedule("akg")
    with pytest.raises(Exception, match="memory scope 'L1' does not exist on target h100"):
        plan(sched, "h100")
    on_ascend = {b.tensor: b.scope for b in plan(load(EXAMPLES / "gemm.tdsl").schedule("gpu"), "ascend-910b")}
    assert on_ascend == {"A": "L1", "B": "L1", "C": "L0C"}  # the cube's operands and accumulator (5.4.4: A_L1, C_L0)
    rows = {b.scope for b in plan(load(EXAMPLES / "softmax.tdsl").schedule("row_fused"), "ascend-910b")}
    assert rows <= {"UB"}  # vector work: TileLang-Ascend's shared allocations are UB


def test_plan_keeps_its_api():
    buffers = plan(load(EXAMPLES / "gemm_silu.tdsl").schedule("fused"))
    assert {b.tensor: (b.scope, b.loop, b.bytes_per_copy, b.stages) for b in buffers} == {
        "A": ("shared", "ko", 4096, 3), "W": ("shared", "ko", 4096, 3), "C": ("register", "jo", 16384, 1)}


def test_fused_intermediates_and_lifetimes():
    k = plan_kernels(load(EXAMPLES / "swiglu_quant.tdsl").schedule("fused"), "h100")[0]
    temps = {b.tensor: b for b in k.buffers if b.kind == "temp"}
    assert set(temps) == {"T", "Z"} and temps["T"].bytes == 4 * 1024 * 2 and temps["T"].loop == "jo"
    assert (temps["T"].first, temps["T"].last) == ("T", "Z")
    assert temps["Z"].shares == "T@jo[temp]"  # Z = T * U overwrites T (its last use) in place


def test_counting_is_exact():
    import islpy as isl

    assert card(isl.Set("{ [i, j] : 0 <= j <= i < 8192 }")) == 8192 * 8193 // 2
    # partial edge tiles: 70 rows in tiles of 64 touch 64 + 6 rows, not 2 x 64
    rel = isl.Map("{ [io] -> A[a] : 64io <= a < 64io + 64 and 0 <= a < 70 }")
    assert box_sum(rel) == 70


def test_partial_tiles_count_what_they_touch():
    c = cost(EXAMPLES / "gemm.tdsl", "gpu", sizes={"M": 70, "N": 40, "K": 70})
    assert c.tensor_bytes("A", "read") == 70 * 70 * 2 and c.tensor_bytes("B", "read") == 70 * 40 * 2


def test_every_example_costs_on_every_target():
    for path in sorted(EXAMPLES.glob("*.tdsl")):
        if path.name == "attention.tdsl":
            continue  # the causal program order takes seconds to count; its unfused schedule is below
        prog = load(path, sizes=CHAPTER_SIZES.get(path.stem))
        for name in prog.schedule_names:
            try:
                sched = prog.schedule(name)
            except Exception:
                continue  # the illegal schedules
            for target in ("h100", "h200", "rtx-pro-6000", "ascend-910b", "ascend-950"):
                c = analyze(sched, target)
                assert c.global_bytes > 0 and c.t_bound > 0
    c = cost(EXAMPLES / "attention.tdsl", "unfused")
    assert c.tensor_bytes("S", "write") > 0


# ---------------------------------------------------------------- the command line


def run(argv, capsys):
    from tdsl.compiler.driver.cli import main

    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_cli_report(capsys):
    status, out, _ = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "sm_block", "--target", "h100",
                          "--regs", "128"], capsys)
    assert status == 0
    assert "blocks allowed by threads 8, registers 2, shared 2, blocks 32 -> 2 resident blocks" in out
    assert "25.0% occupancy; limited by registers, shared" in out
    assert "global->shared" in out and "memory-bound" in out


def test_cli_json(capsys):
    status, out, _ = run(["cost", COST / "swiglu.tdsl", "--schedule", "fused", "--json"], capsys)
    data = json.loads(out)
    assert status == 0 and data["target"] == "h100"
    assert sum(k["global_bytes"] for k in data["kernels"]) == 72 * MiB


def test_cli_sweep(capsys):
    status, out, _ = run(["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--sweep", "io,jo=32,64,128"],
                         capsys)
    assert status == 0
    assert "6,168 MiB" in out and "3,096 MiB" in out and "1,560 MiB" in out


def test_cli_capacity_error_exits_1(capsys):
    status, out, err = run(["cost", EXAMPLES / "gemm_silu.tdsl", "--schedule", "fast", "--target", "rtx-pro-6000"],
                           capsys)
    assert status == 1 and "DOES NOT FIT" in out and "46,080 B over" in err


def test_cli_bad_arguments(capsys):
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--target", "h300"], capsys)
    assert status == 2 and "unknown target 'h300'" in err
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--sweep", "io=big"], capsys)
    assert status == 2 and "--sweep expects" in err
    status, _, err = run(["cost", COST / "gemm_tiles.tdsl", "--sweep", "xo=32"], capsys)
    assert status == 2 and "no split or tile producing loop(s) xo" in err


def test_cli_plot(tmp_path, capsys):
    argv = ["cost", COST / "gemm_tiles.tdsl", "--schedule", "tiles", "--sweep", "io,jo=32,64,128",
            "--plot", tmp_path / "fig5-8.png"]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        status, _, err = run(argv, capsys)
        assert status == 2 and "--plot needs matplotlib" in err
        return
    status, _, _ = run(argv, capsys)
    assert status == 0 and (tmp_path / "fig5-8.png").stat().st_size > 0


# ---------------------------------------------------------------- docs/cost.md and docs/targets.md stay true


def _doc_blocks():
    from docs_runner import blocks, is_tdsl_console

    docs = [ROOT / "docs" / "cost.md", ROOT / "docs" / "targets.md"]
    return [b for doc in docs if doc.exists() for b in blocks(doc) if is_tdsl_console(b)]


@pytest.mark.parametrize("block", _doc_blocks(), ids=lambda b: b.id)
def test_documented_commands(block, tmp_path):
    from docs_runner import check_command, commands, run_in_process, scratch_dir

    where = scratch_dir(block.doc, tmp_path)
    (where / "tests").mkdir(exist_ok=True)
    if not (where / "tests" / "cost").exists():
        (where / "tests" / "cost").symlink_to(COST, target_is_directory=True)
    for cmd in commands(block):
        lines, status = run_in_process(cmd.line, where)
        check_command(cmd, block, lines, status)
