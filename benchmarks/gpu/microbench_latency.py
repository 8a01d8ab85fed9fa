"""How long a load waits on the H200, by where it hits (docs/cost.md, "in flight").

A pointer chase: one thread follows a random cycle of 8-byte indices, one per 128-byte line, so every load waits
for the one before and no two share a line.  Footprints from 64 KiB (L1) through 1-16 MiB (L2, walked whole
before timing) to 256 MiB-4 GiB (DRAM: each chase starts at a new random slot, so its lines are not in L2);
the time per load is the latency.  Needs only torch and triton:

    python3 benchmarks/gpu/microbench_latency.py --out $OUT/latency.json
"""

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

LINE = 128  # bytes: one index per cache line
FOOTPRINTS = [64 << 10, 1 << 20, 4 << 20, 16 << 20, 256 << 20, 1 << 30, 4 << 30]


@triton.jit
def chase(nxt, out, start, steps):
    i = tl.full([], 0, tl.int64) + start
    for _ in range(steps):
        i = tl.load(nxt + i)
    tl.store(out, i)


def cycle(footprint: int, generator: torch.Generator) -> torch.Tensor:
    """Indices (int64) over `footprint` bytes: slot k * 16 holds the slot that follows it in a random cycle."""
    stride = LINE // 8
    slots = footprint // LINE
    order = torch.randperm(slots, generator=generator)
    nxt = torch.zeros(slots * stride, dtype=torch.int64)
    nxt[order * stride] = torch.roll(order, -1) * stride
    return nxt.cuda()


def latency_ns(nxt: torch.Tensor, steps: int, generator: torch.Generator) -> float:
    """Median time per load of 5 chases.  A footprint that fits in L2 is walked whole first, so that every load
    hits; a larger one is chased from a new random slot each time, over lines no earlier chase touched (mostly)."""
    out = torch.empty(1, dtype=torch.int64, device="cuda")
    slots = nxt.numel() // (LINE // 8)
    fits = nxt.numel() * 8 <= torch.cuda.get_device_properties(nxt.device).L2_cache_size // 2
    if fits:
        chase[(1,)](nxt, out, 0, slots, num_warps=1)
    else:
        chase[(1,)](nxt, out, 0, 16, num_warps=1)  # compile only
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        first = 0 if fits else int(torch.randint(slots, (1,), generator=generator)) * (LINE // 8)
        start.record()
        chase[(1,)](nxt, out, first, steps, num_warps=1)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e6 / steps)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=100000)
    args = ap.parse_args()
    generator = torch.Generator().manual_seed(0)
    rows = []
    for footprint in FOOTPRINTS:
        ns = latency_ns(cycle(footprint, generator), args.steps, generator)
        rows.append({"footprint_bytes": footprint, "ns_per_load": ns})
        print(f"{footprint / 2**20:10.3f} MiB  {ns:7.1f} ns per dependent load", flush=True)
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "steps": args.steps, "rows": rows}
    Path(args.out).write_text(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
