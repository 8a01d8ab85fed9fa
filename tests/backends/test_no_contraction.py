"""`a * b + c` is two roundings in a program (docs/legality.md#rounding).  CUDA compilers contract it into one
fma by default (Triton unless a launch says enable_fp_fusion=False, nvcc unless --fmad=false), which removes a
rounding the program has: the GPU fuzz found PolyBench's solvers (lu, ludcmp, trisolv, durbin) off by that
(benchmarks/RESULTS.md).  Both NVIDIA backends turn it off; a program that wants one rounding writes `fma`."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module
from tdsl.compiler.lower.build import lower

SOURCE = """\
const N = 1000
kernel axpy(A: f32[N], B: f32[N], C: f32[N]) -> (Y: f32[N], Z: f32[N]) {
  Y[i] = A[i] * B[i] + C[i]
  Z[i] = fma(A[i], B[i], C[i])
}

schedule s {
  io, ii = split(Y.i, 256)
  bind(Y.io, grid.x)
  zo, zi = split(Z.i, 256)
  bind(Z.zo, grid.x)
}
"""
ONLY_PRODUCT_AND_SUM = SOURCE.replace("  Z[i] = fma(A[i], B[i], C[i])\n", "").replace(
    ", Z: f32[N]", "").replace("  zo, zi = split(Z.i, 256)\n  bind(Z.zo, grid.x)\n", "")


def test_triton_launches_say_no_fusion_and_the_ptx_keeps_both_roundings(tmp_path):
    from tdsl.backends.triton.aot import compile_in_subprocess

    counts = {}
    for name, source in (("both", SOURCE), ("product_and_sum", ONLY_PRODUCT_AND_SUM)):
        prog = loads(source, "axpy.tdsl")
        text = generate(prog, "s", target="h200", backend="triton")
        assert all("enable_fp_fusion=False" in line for line in text.splitlines() if "INTERPRET=_INTERPRET" in line)
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        counts[name] = sum(r["fma"] for r in compile_in_subprocess(path, lower(prog.schedule("s")).kernels).values())
    assert counts["product_and_sum"] == 0  # mul.rn + add.rn
    assert counts["both"] >= 1  # the program's own fma stays one (the check can see an fma)


def test_tilelang_compiles_every_kernel_without_fmad(tmp_path):
    prog = loads(SOURCE, "axpy.tdsl")
    module = load_module(generate(prog, "s", target="h200", backend="tilelang"), tmp_path / "axpy_tl.py")
    assert set(module.PASS_CONFIGS) == set(module.KERNELS)
    assert all(c["tl.device_compile_flags"] == ["--fmad=false"] for c in module.PASS_CONFIGS.values())


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_tilelang_kernel_source_under_its_flags_keeps_both_roundings(tmp_path):
    """The kernel's CUDA, compiled with the module's flags, has no fma but the program's own; without them nvcc
    contracts the product and the sum (so the flag is what keeps them apart)."""
    from tdsl.backends.tilelang.lowering import lower_module

    module = load_module(generate(loads(ONLY_PRODUCT_AND_SUM, "axpy.tdsl"), "s", target="h200", backend="tilelang"),
                         tmp_path / "axpy_tl.py")
    (name, source), = lower_module(module, "sm_90a").items()
    cu = tmp_path / "k.cu"
    cu.write_text("\n".join(line for line in source.splitlines() if "tl_templates" not in line))

    def fmas(flags: list) -> int:
        ptx = tmp_path / "k.ptx"
        subprocess.run(["nvcc", "-arch=sm_90a", "-O3", "-ptx", *flags, str(cu), "-o", str(ptx)], check=True)
        return ptx.read_text().count("fma.rn.f32")

    assert fmas(module.PASS_CONFIGS[name]["tl.device_compile_flags"]) == 0
    assert fmas([]) >= 1
