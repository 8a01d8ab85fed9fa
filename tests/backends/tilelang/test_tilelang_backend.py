"""The TileLang backend for NVIDIA: every legal schedule of every example compiles to a TileLang module whose
kernels lower with `tilelang.lower` for sm_90a (TMA + wgmma for the matrix kernels), its text matches the golden
file, and one kernel goes through nvcc to a cubin where nvcc exists.  Numerics need a GPU: benchmarks/gpu/
run_tilelang.py on the H200."""

import os
import shutil
import subprocess
import re
import sys

import pytest

from catalog import CHAPTER_SIZES, EXAMPLES, EXPECTED, LEGAL, LEGAL_IDS, REFUSED, ROOT, size_flags

os.environ.setdefault("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang"))
tilelang = pytest.importorskip("tilelang")

from tdsl.backends.tilelang.lowering import compile_cubin, lower_module  # noqa: E402
from tdsl.compiler.driver.api import load, loads  # noqa: E402
from tdsl.compiler.driver.generate import generate, load_module  # noqa: E402
from tdsl.compiler.errors import BackendError  # noqa: E402


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    out = tmp_path_factory.mktemp("tilelang")
    cache = {}

    def get(example, name):
        if (example, name) not in cache:
            text = generate(load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example)), name, target="nvidia", backend="tilelang")
            cache[example, name] = (text, load_module(text, out / f"{example}__{name}.py"))
        return cache[example, name]

    return get


@pytest.mark.parametrize("example,name", LEGAL, ids=LEGAL_IDS)
def test_every_legal_schedule_lowers_for_sm90a(example, name, modules, golden):
    if (example, name, "tilelang") in REFUSED:
        prog = load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example))
        with pytest.raises(BackendError, match=re.escape(REFUSED[example, name, "tilelang"])):
            generate(prog, name, target="nvidia", backend="tilelang")
        return
    text, module = modules(example, name)
    golden(text, suffix=".py")
    sources = lower_module(module, "sm_90a")
    assert set(sources) == set(module.KERNELS)
    for kernel, src in sources.items():
        assert f"{kernel}_kernel" in src and "__global__" in src


def test_chapter_gemm_silu_uses_shared_fragment_pipeline_and_wgmma(modules):
    text, module = modules("gemm_silu", "fused")
    for line in ('A_s_1 = T.alloc_shared((64, 32), "bfloat16")  # cache_read A -> shared at ko (plan [64, 32] bf16)',
                 'acc_C = T.alloc_fragment((64, 64), "float32")  # cache_write C -> register',
                 "for ko in T.Pipelined(0, 128, num_stages=3):",
                 "T.copy(A[(64 * io), (32 * ko)], A_s_1)",
                 "T.gemm(A_s_1, W_s_2, acc_C)",
                 "with T.Kernel(16, 192, threads=128) as (bx, by):",
                 'acc_C[l0, l1] = T.Cast("float32", T.Cast("bfloat16", acc_C[l0, l1]))'):
        assert line in text, line
    src = lower_module(module, "sm_90a")["gemm_silu_0"]
    assert "wgmma" in src and "tma_load" in src  # Hopper: TMA copies into shared memory, wgmma from it


def test_reductions_are_tile_reduces_and_elementwise_tiles_are_parallel(modules):
    text, _ = modules("softmax", "row_fused")
    assert "T.reduce_max(p_m, acc_m, dim=0, clear=False)" in text
    assert "T.reduce_sum(p_s, acc_s, dim=0, clear=False)" in text
    assert "for l0 in T.Parallel(4096):" in text


def test_f32_and_mixed_operands_use_exact_multiply_add(modules):
    text, _ = modules("attention", "unfused")
    assert "T.gemm(Q_s_1, K_s_2, acc_S, transpose_B=True)" in text  # bf16 x bf16: tensor cores
    assert "for kk in T.serial(64):" in text  # P (f32) x V (bf16): no tf32 rounding


def test_launcher_checks_its_arguments_before_compiling(modules):
    import torch

    _, module = modules("gemm_silu", "fused")
    a = torch.zeros(1024, 4096, dtype=torch.float32)
    w = torch.zeros(4096, 12288, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="A must have dtype torch.bfloat16"):
        module.gemm_silu(a, w)


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="no nvcc here")
def test_gemm_silu_compiles_to_a_cubin_with_nvcc(modules):
    _, module = modules("gemm_silu", "fused")
    kernel = compile_cubin(module, "gemm_silu_0")
    assert "gemm_silu_0_kernel" in kernel.get_kernel_source()


def test_a_grid_with_a_gap_is_a_clear_error():
    text = """
const M = 64, N = 64
kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 2.0
}
schedule only_y {
  io, ii = split(Y.i, 16)
  bind(Y.io, grid.y)
}
"""
    with pytest.raises(BackendError, match=r"grid axes y leave a gap; TileLang's T.Kernel takes x, y, z in order"):
        generate(loads(text), "only_y", target="nvidia", backend="tilelang")


def test_cli_compiles_every_example_for_the_tilelang_backend(tmp_path):
    for example in EXPECTED:
        if (example, next(iter(EXPECTED[example])), "tilelang") in REFUSED:
            continue  # its first schedule is refused by this backend (tests above check the message)
        out = tmp_path / f"{example}.py"
        done = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", "compile", str(EXAMPLES / f"{example}.tdsl"),
                               "--target", "nvidia", "--backend", "tilelang", "-o", str(out), *size_flags(example)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "target nvidia" in done.stdout and out.exists()
