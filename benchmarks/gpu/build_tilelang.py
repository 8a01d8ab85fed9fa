"""Generate the TileLang (NVIDIA) modules the H200 run uses; the device has torch + tilelang, not islpy.

    .venv/bin/python benchmarks/gpu/build.py            # the Triton modules (benchmarks/gpu/generated/*.py)
    .venv/bin/python benchmarks/gpu/build_tilelang.py   # the TileLang modules (benchmarks/gpu/generated/tilelang/*.py)

Both folders are ignored build outputs; carry `benchmarks/gpu/generated` to the device.
"""

from __future__ import annotations

from pathlib import Path

from tdsl.compiler.api import load
from tdsl.compiler.codegen import generate

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "generated" / "tilelang"

WORKLOADS = [
    ("benchmarks/programs/gemm_bf16.tdsl", ["t128x128x64_s3_w4", "t128x256x64_s3_w8"]),
    ("examples/gemm.tdsl", ["gpu"]),
    ("examples/gemm_silu.tdsl", ["fused", "fast"]),
    ("examples/swiglu_quant.tdsl", ["fused", "inlined"]),
    ("examples/rmsnorm.tdsl", ["row_per_program"]),
    ("examples/softmax.tdsl", ["row_fused"]),
    ("examples/quant_gemm.tdsl", ["separate"]),
    ("examples/attention.tdsl", ["unfused"]),
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for path, schedules in WORKLOADS:
        prog = load(ROOT / path)
        for name in schedules:
            target = OUT / f"{Path(path).stem}__{name}.py"
            target.write_text(generate(prog, name, target="nvidia", backend="tilelang"))
            print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
