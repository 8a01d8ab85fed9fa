"""NVIDIA H200 SXM (Hopper, compute capability 9.0): the H100's SMs with faster, larger HBM3e.

Sources: [design] /work/shared/design.md targets table and its measured H200 figures (2026-11-29);
[ds] NVIDIA H200 Tensor Core GPU datasheet, SXM column (dense = half of "with sparsity");
every per-SM limit is the H100's (same GH100 SM, compute capability 9.0), see h100.py for those sources;
the ranking estimate's rates were measured on this part ([mb] in h100.py).
"""

from dataclasses import replace

from tdsl.compiler.targets import KiB
from tdsl.compiler.targets.h100 import TARGET as H100

TARGET = replace(
    H100,
    name="h200",
    description="NVIDIA H200 SXM",
    dram_bandwidth=4.8e12,  # HBM3e, 4.8 TB/s [ds] [design]
    dram_bandwidth_measured=4.27e12,  # device-to-device copy on the lent H200, read + write [design]
    dram_bytes=141 * 10**9,  # 141 GB [ds]
    l2_bytes=60 * 1024 * KiB,  # 62,914,560 B: torch.cuda.get_device_properties().L2_cache_size on the lent H200 [mb]
    # peak_flops, vector_flops: as H100 (989.4 TFLOP/s dense bf16, 1,979 with sparsity [ds])
    sources={**H100.sources, "design": "design.md targets table, measured H200 figures",
             "ds": "NVIDIA H200 Tensor Core GPU datasheet, SXM"},
)
