"""What a launch and its programs cost, timed both ways the benchmarks time kernels (docs/cost.md, "launch").

An empty Triton kernel at 1 .. 49,152 programs of 1, 4 and 8 warps, and a copy kernel (one 16-byte load and
store a thread) over the same 96 MiB in programs of 256 to 8,192 elements:
* `do_bench`'s median (the L2 flushed before every call; the host launches each call);
* the replays of a CUDA graph of 20 calls (compiler/tune/measure.py `graph_us`, how `tdsl tune` times now).

Needs only torch and triton:
    python3 benchmarks/gpu/microbench_launch.py --out $OUT/launch.json
"""

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from by_path import measure


@triton.jit
def nop(x):
    pass


@triton.jit
def copy(x, y, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + offs, tl.load(x + offs))


def both(call) -> dict:
    return {"do_bench_us": do_bench(call, warmup=25, rep=100) * 1e3, "graph_us": measure().graph_us([call])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="launch.json")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    result = {"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
              "sms": sms, "empty": [], "copy": []}
    x = torch.zeros(1, device="cuda")
    for warps in (1, 4, 8):
        for programs in (1, sms, 8 * sms, 64 * sms, 49152):
            row = {"warps": warps, "programs": programs,
                   **both(lambda p=programs, w=warps: nop[(p,)](x, num_warps=w))}
            result["empty"].append(row)
            print(json.dumps(row), flush=True)
    n = 48 << 20  # bf16 elements: 96 MiB read, 96 MiB written
    src = torch.randn(n, device="cuda").to(torch.bfloat16)
    dst = torch.empty_like(src)
    for block, warps in ((256, 1), (256, 2), (512, 2), (1024, 4), (2048, 4), (8192, 8)):
        row = {"elements": block, "warps": warps, "programs": n // block,
               **both(lambda b=block, w=warps: copy[(n // b,)](src, dst, B=b, num_warps=w))}
        row["graph_tbs"] = 4 * n / row["graph_us"] / 1e6
        result["copy"].append(row)
        print(json.dumps(row), flush=True)
    assert torch.equal(src, dst)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
