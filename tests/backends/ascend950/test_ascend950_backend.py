"""The ascend-950 backend: every legal schedule of every example compiles to mainline TileLang's Ascend dialect
(its text matches the golden file) and lowers to AscendC with `tilelang.lower(target="ascend")`, matrix
statements on the cube (AIC, asc_mmad), the rest on the vector cores (AIV, SIMT functions); a schedule whose
buffers exceed the target's capacities is a BackendError naming the scope."""

import os
import re
import subprocess
import sys

import pytest

from tdsl.compiler.analysis.buffer_plan import CapacityError

from catalog import CHAPTER_SIZES, EXAMPLES, LEGAL, LEGAL_IDS, REFUSED, ROOT

os.environ.setdefault("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang"))

from tdsl.compiler.driver.api import load  # noqa: E402
from tdsl.compiler.driver.generate import generate, load_module  # noqa: E402
from tdsl.compiler.errors import BackendError  # noqa: E402

# What the target refuses, and why (a substring of the error): the memory plan rejects schedules whose buffers
# do not fit the target (CapacityError, exit 1) before the backend runs; the backend refuses what it cannot express.
REFUSED_950 = {(ex, name): text for (ex, name, backend), text in REFUSED.items() if backend == "ascend-950"}
# statement -> expected core: matrix statements on the cube
CUBE = {"gemm": "C", "gemm_silu": "C", "quant_gemm": "P", "attention": "S"}


# schedule -> the schedule whose AscendC lowering covers it (the lowering takes 20-40 s per attention module)
LOWERED_AS = {("mha", "flash_ascend"): ("mha_causal", "flash_ascend")}


@pytest.mark.parametrize("example,name", LEGAL, ids=LEGAL_IDS)
def test_ascend950_lowers_to_ascendc(example, name, tmp_path, golden):
    pytest.importorskip("tilelang")
    from tdsl.backends.tilelang.lowering import lower_module

    prog = load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example))
    if (example, name) in REFUSED_950:
        with pytest.raises((BackendError, CapacityError), match=re.escape(REFUSED_950[example, name])):
            generate(prog, name, target="ascend-950")
        return
    text = generate(prog, name, target="ascend-950")
    golden(text, suffix=".py")
    if (example, name) in LOWERED_AS:
        return  # its kernel is another's without a mask: that one's lowering covers every call it makes
    module = load_module(text, tmp_path / f"{example}__{name}.py")
    sources = lower_module(module, "ascend")
    for kernel, src in sources.items():
        assert 'extern "C" __global__' in src
        if "asc_mmad" in src and "__cube__" not in src:  # mixed: the product on the AIC, its epilogue on the AIV
            aic, aiv = src.index("if ASC_IS_AIC"), src.index("if ASC_IS_AIV")
            assert aic < src.index("asc_mmad") < aiv and "asc_vf_call" in src[aiv:]
        if "asc_mmad" not in src:  # no cube statement: a vector-only kernel
            assert "__vector__" in src and "asc_vf_call" in src
    if example in CUBE:
        assert any("asc_mmad" in s for s in sources.values()), f"{CUBE[example]} should run on the cube"


def test_ascend950_chapter_gemm_buffers():
    text = generate(load(EXAMPLES / "gemm_silu.tdsl"), "fused", target="ascend-950")
    for line in ('A_l1 = T.alloc_l1((64, 32), "bfloat16")', 'A_l0a = T.alloc_l0a((64, 32), "bfloat16")',
                 'W_l0b = T.alloc_l0b((32, 64), "bfloat16")', 'acc_C = T.alloc_l0c((64, 64), "float32")',
                 "T.gemm(A_l0a, W_l0b, acc_C, clear_accum=ko == 0)", "T.copy(acc_C, C_ub)  # L0C -> UB",
                 "with T.SimtVF(threads=128):", "for ko in T.Pipelined(0, 128, num_stages=3):",
                 "with T.Kernel(16 * 192) as cid:"):
        assert line in text, line
    # 5.4.4's buffer sizes: A and W tiles of 4 KiB (x3 stages in L1), the 16 KiB FP32 accumulator in L0C
    assert "on-chip bytes: L0A 4096, L0B 4096, L0C 16384, L1 24576" in text


def test_cli_compile_for_ascend950(tmp_path):
    target = "ascend-950"
    out = tmp_path / "k.py"
    done = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", "compile", str(EXAMPLES / "gemm.tdsl"),
                           "--schedule", "gpu", "--target", target, "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"target {target}" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", "compile", str(EXAMPLES / "gemm_silu.tdsl"),
                           "--schedule", "fast", "--target", target, "-o", str(out)], capture_output=True, text=True)
    # The vector stage copies the 128x256 FP32 accumulator into UB (128 KiB), rounds it there and writes Y's
    # value over it (nothing reads C after Y), then a bf16 copy for the DMA: 196,608 B of 253,952 B.
    assert done.returncode == 0, done.stderr
    assert "on-chip bytes: L0A 16384, L0B 32768, L0C 131072, L1 147456, UB 196608" in out.read_text()


@pytest.mark.parametrize("example", ["mha", "mha_causal"])
def test_flash_attention_runs_both_products_on_the_cube(example):
    """The online softmax on the 950: QKᵀ and P·V on the cube, the statistics and the rescaling on the vector
    cores; P passes UB -> L1, each key block's P·V is formed alone in L0C (the vector cores cannot scale L0C) and
    added to the sum they keep in UB; Q is copied to L1 once per key loop; no L² tensor in GM."""
    text = generate(load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES[example]), "flash_ascend",
                    target="ascend-950")
    for line in ("T.copy(P_U_4, P_l1)  # UB -> L1 (vector cores to the cube)",
                 "T.gemm(P_l0a, V_l0b, part_U, clear_accum=True)  # cube core (AIC)",
                 "T.copy(part_U, part_U_ub)  # L0C -> UB",
                 "acc_U[l0, l1] = acc_U[l0, l1] + part_U_ub[l0, l1]",
                 "T.gemm(Q_l0a, K_l0b, acc_S, transpose_B=True, clear_accum=True)  # cube core (AIC)",
                 'acc_U = T.alloc_shared((64, 128), "float32")  # UB: vector accumulator',
                 "T.copy(Q_pre, Q_l0a)  # L1 -> L0A"):
        assert line in text, line
    assert "acc_U[l0, l1] = acc_U[l0, l1] * alpha_U" in text  # the rescaling, in UB
    head = next(line for line in text.splitlines() if line.startswith("def "))
    assert re.findall(r"(\w+): T\.Tensor", head) == ["Q", "K", "V", "O"]  # no workspace, no L x L tensor


ROW_SUM_PER_ROW = """
const M = 6, N = 8
kernel rows(X: f32[M, N]) -> (Y: f32[M, N]) {
  S[i]: f32 = sum(j) X[i, j] combine reassoc
  Y[i, j] = X[i, j] / S[i]
}
schedule per_row {
  compute_at(S, Y.i)
  bind(Y.i, grid.x)
}
"""


def test_a_reduction_to_one_value_per_program_keeps_its_lane_apart_from_the_reduced_ones(tmp_path):
    """S reduced to a rank-0 tile (one row per program): its one lane was named like the reduced axis's lane
    (`for l0 in T.Parallel(1): for l0 in T.serial(8)`), a loop rebinding the loop around it."""
    import numpy as np

    from fuzz.oracles import rebound_loop_variables
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.reference.interpreter import interpret, random_inputs
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(ROW_SUM_PER_ROW, "rows.tdsl")
    text = generate(prog, "per_row", target="ascend-950")
    assert "T.Parallel(1)" in text and rebound_loop_variables(text) == []
    order = prog.schedule()
    inputs = random_inputs(order.model, seed=3)
    want = interpret(order.model, order.time_map(), inputs)["Y"]
    np.testing.assert_allclose(simulate(text, inputs, "ascend-950").tensors["Y"], want, rtol=1e-6)
    if pytest.importorskip("tilelang"):
        from tdsl.backends.tilelang.lowering import lower_module

        assert lower_module(load_module(text, tmp_path / "rows.py"), "ascend")
