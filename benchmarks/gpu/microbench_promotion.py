"""The tensor cores' rate by product tile on the H200 (docs/cost.md, "Compute"), and what a promoted FP8 product
costs: the time each promotion of the tensor core's partial sums into the f32 sum (Triton's
`max_num_imprecise_acc`, tdsl's `combine fast_accum(N)`) adds to a program, and how much of it the other programs
resident on the SM hide.

One FP8 product kernel (E4M3 operands, A [rows, K] and B [cols, K] both K-major, f32 accumulation), the shape of
what the Triton printer generates: a BM x BN tile, K steps of BK, `stages` pipeline stages.  Every program walks
K = 16384 over a block of A and of B that stays in L2 (8 blocks of each), so the time is the products' and the
promotions', not DRAM's.  The grid is `resident` programs per SM (one wave: each SM runs its programs together
when they fit, which the script checks from the compiled kernel's registers and shared memory).  For each tile
and residency, the interval is None (never promoted: `combine fast_accum`), 128, 64 and 32 terms; the stall of
one promotion is (time - time without promotion) / promotions of one program, at one program an SM.

Three more tiles, promoted every 128 terms and not, at one program an SM, have promoted accumulators that
do not fit a thread's registers (what their spills cost).

`tiles` measures the same kernel unpromoted, bf16 (K steps of 64) and E4M3 (of 128), over tile shapes, warps and
programs an SM, and K steps with narrower operand rows (bf16 32 and 16, E4M3 64 and 32).

    python3 benchmarks/gpu/microbench_promotion.py [promotion|tiles] > out.json
"""
import json
import sys

import torch
import triton
import triton.language as tl

SMS = torch.cuda.get_device_properties(0).multi_processor_count
K = 16384
BLOCKS = 8  # blocks of A and of B the programs share (L2-resident)


@triton.jit
def product(a, b, c, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            BLOCKS: tl.constexpr, STAGES: tl.constexpr, INTERVAL: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid % BLOCKS) * BM + tl.arange(0, BM)
    cols = (pid // BLOCKS % BLOCKS) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in tl.range(0, K, BK, num_stages=STAGES):
        x = tl.load(a + rows[:, None] * K + (k + ks)[None, :])
        y = tl.load(b + cols[:, None] * K + (k + ks)[None, :])
        if INTERVAL == 0:
            acc = tl.dot(x, y.T, acc)
        else:
            acc = tl.dot(x, y.T, acc, max_num_imprecise_acc=INTERVAL)
    out = pid * BM * BN + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(c + out, acc.to(tl.bfloat16))


def graph_time(fn, calls: int = 10, replays: int = 10) -> float:
    """Seconds of one call: the median over replays of a CUDA graph of `calls` calls."""
    fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / calls)
    return sorted(times)[len(times) // 2]


def measure(bm: int, bn: int, bk: int, stages: int, warps: int, resident: int, interval: int,
            dtype=torch.float8_e4m3fn) -> dict:
    a = torch.randn(BLOCKS * bm, K, device="cuda").to(dtype)
    b = torch.randn(BLOCKS * bn, K, device="cuda").to(dtype)
    programs = SMS * resident
    c = torch.empty(programs * bm * bn, device="cuda", dtype=torch.bfloat16)

    def call():
        return product[(programs,)](a, b, c, K=K, BM=bm, BN=bn, BK=bk, BLOCKS=BLOCKS, STAGES=stages,
                                    INTERVAL=interval, num_warps=warps)

    kernel = call()
    t = graph_time(call)
    fits = fitting(kernel, warps)
    return {"dtype": str(dtype).split(".")[-1], "bm": bm, "bn": bn, "bk": bk, "stages": stages, "warps": warps,
            "resident": resident,
            "interval": interval or None, "us": t * 1e6, "regs": kernel.n_regs, "spills": kernel.n_spills,
            "shared": kernel.metadata.shared, "fit_per_sm": fits,
            "tflops": 2 * bm * bn * K * programs / t / 1e12}


def fitting(kernel, warps: int) -> int:
    """Programs of this kernel one SM holds at once (registers, shared memory, threads)."""
    props = torch.cuda.get_device_properties(0)
    regs = -(-kernel.n_regs * 32 // 256) * 256 * warps
    by_regs = props.regs_per_multiprocessor // regs if regs else 32
    by_shared = (props.shared_memory_per_multiprocessor // (kernel.metadata.shared + 1024)
                 if kernel.metadata.shared else 32)
    return min(by_regs, by_shared, props.max_threads_per_multi_processor // (32 * warps))


def promotion() -> dict:
    tiles = [(128, 128, 128, 4, 8), (64, 128, 128, 3, 4), (128, 128, 64, 4, 8)]
    rows = []
    for bm, bn, bk, stages, warps in tiles:
        for resident in (1, 2, 3):
            for interval in (0, 128, 64, 32):
                if interval and interval > bk:
                    continue
                rows.append(measure(bm, bn, bk, stages, warps, resident, interval))
    # tiles whose promoted second accumulator does not fit a thread's registers: what its spills cost
    spilling = [(128, 128, 128, 4, 4), (64, 256, 128, 3, 4), (256, 128, 128, 3, 8)]
    for bm, bn, bk, stages, warps in spilling:
        for interval in (0, 128):
            rows.append(measure(bm, bn, bk, stages, warps, 1, interval))
    tiles += spilling
    stalls = {}
    for bm, bn, bk, stages, warps in tiles:
        key = (bm, bn, bk, warps, 1, None)
        base = next(r for r in rows if (r["bm"], r["bn"], r["bk"], r["warps"], r["resident"], r["interval"]) == key)
        for r in rows:
            if (r["bm"], r["bn"], r["bk"], r["warps"], r["resident"]) == (bm, bn, bk, warps, 1) and r["interval"]:
                promotions = K // r["interval"]
                stalls[f"{bm}x{bn}x{bk}_w{warps}_every{r['interval']}"] = (r["us"] - base["us"]) / promotions * 1e3
    return {"rows": rows, "stall_ns_per_promotion_one_program_per_sm": stalls}


def tiles() -> dict:
    shapes = [(64, 64), (64, 128), (128, 64), (128, 128), (64, 256), (128, 256), (256, 128)]
    rows = []
    for dtype, bk, narrow in ((torch.bfloat16, 64, (32, 16)), (torch.float8_e4m3fn, 128, (64, 32))):
        for bm, bn in shapes:
            for warps in (4, 8):
                for resident in (1, 2, 3, 4):
                    rows.append(measure(bm, bn, bk, 3, warps, resident, 0, dtype))
        for step in narrow:
            for resident in (1, 2):
                rows.append(measure(128, 128, step, 4, 8, resident, 0, dtype))
    return {"rows": rows}


SWEEPS = {"promotion": promotion, "tiles": tiles}
which = sys.argv[1] if len(sys.argv) > 1 else "promotion"
print(json.dumps({"device": torch.cuda.get_device_name(), "sms": SMS, "K": K, "sweep": which, **SWEEPS[which]()},
                 indent=1))
