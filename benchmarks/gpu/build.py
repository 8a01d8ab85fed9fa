"""Generate the Triton modules the H200 benchmark runs (the device has torch and triton, not islpy).

    .venv/bin/python benchmarks/gpu/build.py        # writes benchmarks/gpu/generated/*.py
"""

from __future__ import annotations

from pathlib import Path

from tdsl.compiler.driver.api import load
from tdsl.compiler.driver.generate import generate

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "generated"

WORKLOADS = [
    ("benchmarks/programs/gemm_bf16.tdsl", ["t128x128x64_s3_w4", "t128x128x64_s4_w4", "t128x256x64_s3_w8", "t256x128x64_s3_w8",
                                           "t128x256x64_s3_w8_g8"]),
    ("examples/gemm_silu.tdsl", ["fused", "fast"]),
    ("benchmarks/programs/swiglu.tdsl", ["fused", "fused_wide", "t1x4096_w4", "t8x1024_w8", "t1x1024_w4", "t2x1024_w4"]),
    ("examples/swiglu_quant.tdsl", ["fused", "inlined"]),
    ("benchmarks/programs/swiglu_quant.tdsl", ["t1x4096_w4", "t8x1024_w8", "t2x2048_w4", "t16x512_w4", "t1x1024_w4"]),
    ("examples/rmsnorm.tdsl", ["row_per_program"]),
    ("examples/softmax.tdsl", ["row_fused"]),
    ("examples/quant_gemm.tdsl", ["separate"]),
    ("examples/attention.tdsl", ["unfused"]),
    ("examples/gemm.tdsl", ["gpu"]),
]


def write_modules(workloads, out: Path, backend: str = "triton") -> None:
    """Generate one module per (program, schedule) into `out`, named PROGRAM__SCHEDULE.py."""
    out.mkdir(parents=True, exist_ok=True)
    for path, schedules in workloads:
        prog = load(ROOT / path)
        for name in schedules:
            target = out / f"{Path(path).stem}__{name}.py"
            target.write_text(generate(prog, name, target="nvidia", backend=backend))
            print(f"wrote {target.relative_to(ROOT)}")


def main() -> None:
    write_modules(WORKLOADS, OUT)


if __name__ == "__main__":
    main()
