"""Triton's own copies of tensor-core operands (compiler/analysis/cost/staging.py): the shared memory, registers
and occupancy the cost model gives a kernel whose products read operands the schedule leaves in registers, and
the capacity judgement that refuses copies Triton (or TileLang) could not launch.

The shared bytes below are Triton's (`metadata.shared` of the modules compiled for sm_90, Triton 3.9), the same
figures tests/backends/triton/test_triton_backend.py checks by compiling every example schedule."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

import tdsl
from tdsl.compiler.analysis.buffer_plan import plan_kernels
from tdsl.compiler.analysis.cost import analyze
from tdsl.compiler.analysis.cost.backend_rules import refusal, staged_overflow
from tdsl.compiler.analysis.cost.staging import as_generated, copies
from tdsl.compiler.analysis.cost.work import products, vector_slots
from tdsl.compiler.driver.api import loads
from tdsl.compiler.targets import get_target
from tdsl.compiler.tune.screen import Screen
from tdsl.compiler.tune.sketches import sketch

from catalog import EXAMPLES, ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
from attention_mha import variant_source  # noqa: E402

KiB = 1 << 10
SIZES = {"B": 8, "H": 32, "L": 4096}


def flash(blocks: tuple, warps: int, stages) -> str:
    """examples/mha.tdsl with a schedule `v`: its flash schedule with other query / key blocks, warps and pipeline
    stages, as attention_mha.py times them (stages None: no `pipeline` step at all)."""
    text = (EXAMPLES / "mha.tdsl").read_text()
    if stages is None:
        text = text.replace("  pipeline(l.ko, stages=3)\n", "")
    return text + variant_source(text, "v", (*blocks, warps, stages))


def kernel(text: str, target: str = "h200"):
    sched = loads(text, "v.tdsl", sizes=SIZES).schedule("v")
    return sched, analyze(sched, target).kernels[0]


@pytest.mark.parametrize("blocks, warps, stages, shared, resident", [
    ((128, 128), 8, 3, 224 * KiB, 1),  # Q once, K and V three times each
    ((128, 64), 4, 2, 96 * KiB, 2),
    ((128, 64), 4, 3, 128 * KiB, 1),  # one program an SM, not two: its 4 warps run slower than the 2-stage kernel
    ((128, 128), 8, None, 160 * KiB, 1),  # no pipeline: the kernel's num_stages, 2
    ((128, 128), 8, 1, 64 * KiB, 1),  # one stage: K's and V's copies share memory, as Triton's do
])
def test_operands_left_in_registers_sit_in_shared_memory_as_triton_copies_them(blocks, warps, stages, shared,
                                                                                 resident):
    sched, k = kernel(flash(blocks, warps, stages))
    assert k.occupancy.shared_per_block == shared
    assert k.occupancy.resident_blocks == resident
    assert k.working_set.get("shared", 0) == 0  # the report's plan is the schedule's own


def test_a_block_of_128_x_64_on_4_warps_does_not_spill():
    """Without its operands the register tiles of 128 x 64 blocks on 4 warps fit (Triton: 255 registers, 16 bytes
    of stack); the plan's 328 registers a thread had priced 72 of them spilled every step, twice the kernel's
    measured time."""
    _, k = kernel(flash((128, 64), 4, 2))
    assert k.occupancy.regs_per_thread <= 255
    assert k.estimate.t_spill == 0


def test_operands_a_cache_read_stages_are_the_plans_own():
    sched = tdsl.load(EXAMPLES / "gemm.tdsl").schedule("gpu")
    tgt = get_target("h200")
    for kp in plan_kernels(sched, tgt):
        assert as_generated(sched.model, kp, tgt) is kp


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
@pytest.mark.parametrize("size", [2, 7])
def test_cache_read_copies_of_a_product_too_small_for_a_dot_take_no_shared_memory(backend, size):
    """examples/gemm.tdsl's gpu schedule at M = N = K = 7 (or 2): its 8 x 8 x 8 tile is a vector product of
    global loads, and neither code generator makes the cache_read copies of A and B (TileLang's kernel asks for 0
    bytes of shared memory; benchmarks/plan_sweep.py shared --sizes 2,7).  The plan keeps them."""
    sched = tdsl.load(EXAMPLES / "gemm.tdsl", sizes={"M": size, "N": size, "K": size}).schedule("gpu")
    tgt = get_target("h200")
    (kp,) = plan_kernels(sched, tgt)
    assert products(sched.model, kp) == []
    assert {b.tensor for b in kp.buffers if b.scope == "shared"} == {"A", "B"}
    generated = as_generated(sched.model, kp, tgt, backend)
    assert [b for b in generated.buffers if b.scope == "shared"] == []
    assert generated.working_set.get("shared", 0) == 0
    assert all(b.scope != "shared" for slot in generated.slots for b in slot)


def test_the_report_says_which_copies_the_code_generator_does_not_make():
    """The working set counted the copies of A and B in shared memory while the residency line, the generated
    kernel's, said 0 B, and nothing said why (probe NN)."""
    from tdsl.compiler.analysis.cost import report_text

    sched = tdsl.load(EXAMPLES / "gemm.tdsl", sizes={"M": 7, "N": 7, "K": 7}).schedule("gpu")
    cost = analyze(sched, "h200", backend="triton")
    assert [b.tensor for b in cost.kernels[0].unmade] == ["A", "B"]
    assert ("the code generator makes no copy of A, B in shared memory (only a matrix product's operands are "
            "copied there)") in report_text(cost)
    assert analyze(sched, "h200", backend="none").kernels[0].unmade == []  # the plan alone: no generator


def test_targets_whose_matrix_units_do_not_read_shared_memory_keep_the_plan():
    sched, k = kernel(flash((128, 64), 4, 2), target="ascend-950")
    tgt = get_target("ascend-950")
    for kp in plan_kernels(sched, tgt):
        assert as_generated(sched.model, kp, tgt) is kp


def test_copies_the_code_generator_could_not_launch_are_refused_with_what_to_change():
    sched, _ = kernel(flash((128, 128), 8, 4))
    tgt = get_target("h200")
    reason = refusal(sched, tgt, "triton")
    assert reason is not None
    assert "Triton copies the tensor-core operands into shared memory" in reason
    assert "K 1x1x128x128 x4" in reason and "288 KiB" in reason and "fewer pipeline stages" in reason
    # TileLang's printer copies them too, T.Pipelined keeping one per stage
    assert "TileLang copies" in refusal(sched, tgt, "tilelang") and "288 KiB" in refusal(sched, tgt, "tilelang")
    fits, _ = kernel(flash((128, 128), 8, 3))
    for backend in ("triton", "tilelang"):
        assert staged_overflow(fits.model, plan_kernels(fits, tgt), tgt, backend) is None  # 224 KiB


def test_the_tuners_screen_rejects_flash_blocks_whose_copies_overflow():
    """128 x 128 blocks with 4 stages (Q once, K and V 4 times: 288 KiB) are a point of the flash sketch; 3 stages
    (224 KiB) fit.  (tests/tune/test_search.py checks that no ranked candidate overflows.)"""
    prog = tdsl.load(EXAMPLES / "mha.tdsl", sizes={"B": 1, "H": 1, "L": 256})
    base = prog.schedule(None)
    sk = sketch(base.model)
    screen = Screen(base, "h200", "nvidia", "triton")
    knobs = {p.name.split(".")[-1]: p.name for p in sk.params}
    for stages, rule in ((4, "capacity:staged"), (3, None)):
        choice = {knobs["BQ"]: 128, knobs["BK"]: 128, knobs["warps"]: 8, knobs["stages"]: stages}
        verdict = screen.judge(choice, sk.steps(choice))
        assert verdict.rule == rule, verdict.message
    assert "288 KiB per block" in screen.examples["capacity:staged"]


def test_the_report_says_which_operands_the_code_generator_copies():
    text = analyze(loads(flash((128, 128), 8, 3), "v.tdsl", sizes=SIZES).schedule("v"), "h200").text()
    assert "shared 224 KiB + 1 KiB reserve per block" in text
    assert "the tensor cores read Q x1, K x3, V x3 from shared memory: copied there by the code generator" in text
    plain = analyze(tdsl.load(EXAMPLES / "gemm.tdsl").schedule("gpu"), "h200").text()
    assert "copied there by the code generator" not in plain


POLYBENCH = ROOT / "benchmarks" / "polybench"


def _generated(path, schedule: str, target: str = "h100", backend: str = "tilelang"):
    sched = tdsl.load(path).schedule(schedule)
    tgt = get_target(target)
    return sched, [(kp, as_generated(sched.model, kp, tgt, backend)) for kp in plan_kernels(sched, tgt)]


def test_a_tensor_multiplied_by_itself_is_copied_once_per_operand():
    """covariance's S = sum(k) D[k, i] * D[k, j] on 16 x 16 output tiles: the plan holds the hull of the two reads
    (100 x 80 at the last tile column), the code generators copy each operand's 100 x 16 tile, both live at once
    (TileLang: two 128 x 16 f32 buffers, 16 KiB; tests/backends/tilelang checks the lowered kernel)."""
    sched, kernels = _generated(POLYBENCH / "datamining" / "covariance.tdsl", "tiled")
    (kp, generated), = [(kp, g) for kp, g in kernels if "S" in kp.stmts]
    (product,) = products(sched.model, kp)
    assert (product.m, product.n, product.k) == (16, 16, 100)
    assert [b.shape for b in copies(generated)] == [[100, 16], [100, 16]]
    assert generated.working_set["shared"] == 2 * 100 * 16 * 4


def test_a_product_too_small_for_a_dot_is_vector_work_with_nothing_copied():
    """doitgen's sums, one (r, q) row a program: a 1 x 30 x 30 product is a broadcast multiply and a tile sum in
    the lowering (placement.makes_dot), so the cost model prices it on the vector units and stages nothing."""
    sched, kernels = _generated(POLYBENCH / "kernels" / "doitgen.tdsl", "tiled")
    (kp, generated), = kernels
    assert products(sched.model, kp) == [] and generated is kp
    assert vector_slots(sched.model, kp, get_target("h200")) > 0
    estimate = analyze(sched, "h200").kernels[0].estimate
    assert estimate.t_matrix == 0


def test_padded_copies_over_the_shared_memory_are_refused():
    """A ragged operand tile is allocated at its lanes: 100 x 16 f32 copies are 128 x 16 in shared memory."""
    sched, kernels = _generated(POLYBENCH / "datamining" / "covariance.tdsl", "tiled")
    tgt = get_target("h100")
    tight = replace(tgt, scopes={**tgt.scopes, "shared": replace(tgt.scopes["shared"], per_block=2 * 100 * 16 * 4)})
    reason = staged_overflow(sched.model, plan_kernels(sched, tight), tight, "tilelang")
    assert reason is not None and "16 KiB per block" in reason, reason


PROGRAMS = ROOT / "benchmarks" / "programs"


@pytest.mark.parametrize("path, name", [(PROGRAMS / "gemm_bf16.tdsl", "t128x256x64_s3_w8_g8_p"),
                                        (PROGRAMS / "gemm_fast_silu.tdsl", "fast_g8_p")])
def test_a_persistent_kernels_stored_tile_is_in_its_shared_memory(path, name):
    """`launch(persistent=true)`: Triton passes each stored 128 x 256 bf16 tile through 64 KiB of shared memory of
    its own, beside the operands' 144 KiB (the bytes the Triton lowering refuses by, tma.py `persistent_bytes`);
    TileLang launches one block per tile and keeps nothing more."""
    from tdsl.compiler.lower.passes.tma import persistent_bytes, planned_shared
    from tdsl.compiler.lower.pipeline import lower_for

    sched = tdsl.load(path).schedule(name)
    tgt = get_target("h100")
    (kp,) = plan_kernels(sched, tgt)
    (kernel,) = lower_for(sched, "triton").kernels
    generated = as_generated(sched.model, kp, tgt, "triton")
    assert generated.working_set["shared"] == planned_shared(kernel) + persistent_bytes(kernel) == 212992
    assert kp.working_set["shared"] == 147456  # the report's plan stays the schedule's own
    assert as_generated(sched.model, kp, tgt, "tilelang").working_set["shared"] == 147456
    assert analyze(sched, "h100").kernels[0].occupancy.shared_per_block == 212992


def test_a_persistent_kernel_whose_stored_tile_does_not_fit_is_refused_before_lowering():
    sys.path.insert(0, str(ROOT / "tests" / "backends"))
    from test_triton_descriptors import _persistent

    sched = loads(_persistent(256, 128, 64, 4)).schedule("p")
    reason = staged_overflow(sched.model, plan_kernels(sched, get_target("h200")), get_target("h200"), "triton")
    assert reason == ("g_0: launched persistently, Triton keeps each tile it stores in shared memory beside the "
                      "next tile's operands (C 256x128): 256 KiB per block, but h200 has 227 KiB; use fewer pipeline "
                      "stages or smaller tiles, or launch it without persistent=true")
    assert staged_overflow(sched.model, plan_kernels(sched, get_target("h200")), get_target("h200"), "tilelang") is None


def test_the_occupancy_counts_the_copies_of_the_backend_asked_for():
    """A persistent Triton kernel keeps the tile it stores in shared memory beside the operands: gemm_padded's
    128 x 256 tiles then fit no program an SM.  TileLang keeps no such tile: `cost --backend tilelang` (and its
    sweeps' `resident` column) counted Triton's all the same (probe EE of the 30th session)."""
    prog = tdsl.load(ROOT / "tests" / "cost" / "gemm_padded.tdsl")

    def resident(backend):
        return analyze(prog.schedule("persistent"), "h100", backend=backend).kernels[0].occupancy.resident_blocks

    assert resident("triton") == 0 and resident(None) == 0
    assert resident("tilelang") == 1


def test_no_backend_counts_no_code_generators_copies():
    """`cost --backend none` is the target's capacities alone: it counted Triton's operand copies all the same,
    and reported 0 resident blocks beside "fits yes" (probe GG of the 31st session)."""
    prog = tdsl.load(EXAMPLES / "mha.tdsl", sizes={"L": 1000})
    sched = prog.schedule("flash")
    none = analyze(sched, "rtx-pro-6000", backend="none").kernels[0]
    triton = analyze(sched, "rtx-pro-6000", backend="triton").kernels[0]
    assert not none.copied and none.occupancy.resident_blocks >= 1
    assert triton.copied and triton.occupancy.resident_blocks == 0
