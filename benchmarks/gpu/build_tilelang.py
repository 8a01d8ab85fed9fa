"""Generate the TileLang (NVIDIA) modules the H200 run uses; the device has torch + tilelang, not islpy.

    .venv/bin/python benchmarks/gpu/build.py            # the Triton modules (benchmarks/gpu/generated/*.py)
    .venv/bin/python benchmarks/gpu/build_tilelang.py   # the TileLang modules (benchmarks/gpu/generated/tilelang/*.py)

Both folders are ignored build outputs; carry `benchmarks/gpu/generated` to the device.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import write_modules  # noqa: E402

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
    write_modules(WORKLOADS, OUT, backend="tilelang")


if __name__ == "__main__":
    main()
