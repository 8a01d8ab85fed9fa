"""`tdsl tune` on the GPU against the references of benchmarks/gpu/run.py, measured in the same run.

    python benchmarks/gpu/tune.py [--workloads gemm,softmax] [--trials 64] [--samples 256] [--log DIR]
                                  [--backend tilelang] [--rounds 5]

For each workload: the tuner's search (model), its measurement of the best `--trials` candidates (each
checked against the interpreter at small sizes first), the best hand-written schedule of the file, and the
reference (cuBLAS / torch.compile, CUDA-graph timed when short) -- all printed as one table with ratios.
Then the head-to-head (`--rounds`): the winner, the best hand-written schedule and the references timed again
in interleaved rounds, every one of them on the same rotation of input sets past the L2 (the tuner times its
candidates so; the references' first timing, `refs_us`, reads one input set that may stay in L2).
Prints JSON lines (one per workload) to stdout for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]

import tdsl  # noqa: E402
from tdsl.compiler.tune.executors import LocalExecutor  # noqa: E402
from tdsl.frontend.diagnostics import TdslError  # noqa: E402
from tdsl.compiler.tune.measure import Job, input_sets, rotating_launch, run_job, time_call  # noqa: E402
from tdsl.compiler.tune.tuner import tune  # noqa: E402

BF16, F16 = torch.bfloat16, torch.float16


def _gemm_ref(M, K, N):
    a, w = torch.randn(M, K, device="cuda", dtype=BF16), torch.randn(K, N, device="cuda", dtype=BF16)
    return {"cuBLAS": lambda: a @ w}


def _gemm_silu_ref(M, K, N):
    a, w = torch.randn(M, K, device="cuda", dtype=BF16), torch.randn(K, N, device="cuda", dtype=BF16)
    f = torch.compile(lambda a, w: F.silu((a @ w)))
    return {"torch.compile": lambda: f(a, w)}


def _swiglu_ref(M, N, quant=False):
    g, u = torch.randn(M, N, device="cuda", dtype=BF16), torch.randn(M, N, device="cuda", dtype=BF16)
    if quant:
        f = torch.compile(lambda g, u: ((F.silu(g.float()).to(BF16) * u) / 0.25).to(torch.float8_e4m3fn))
    else:
        f = torch.compile(lambda g, u: F.silu(g.float()).to(BF16) * u)
    nbytes = M * N * (2 + 2 + (1 if quant else 2))
    src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    return {"torch.compile": lambda: f(g, u), f"copy of {nbytes >> 20} MiB": lambda: dst.copy_(src)}


def _rmsnorm_ref(M, N):
    x, g = torch.randn(M, N, device="cuda", dtype=BF16), torch.randn(N, device="cuda", dtype=BF16)
    f = torch.compile(lambda x, g: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
                                    * g.float()).to(BF16))
    return {"torch.compile": lambda: f(x, g)}


def _softmax_ref(M, N):
    x = torch.randn(M, N, device="cuda", dtype=BF16)
    f = torch.compile(lambda x: torch.softmax(x.float(), -1).to(BF16))
    return {"torch.compile": lambda: f(x)}


def _quant_gemm_ref(M, K, N):
    """torch's eager path for quant_gemm (row amax, scale, cast, cuBLASLt's `_scaled_mm` with row-wise scales),
    and `_scaled_mm` alone on operands quantized beforehand (the FP8 product's anchor).  `_scaled_mm` takes its
    second operand column-major (K-major): made so beforehand, outside the timing (quant_gemm_fast_accum stores its
    Wt[N, K] so); `use_fast_accum=False` accumulates as quant_gemm_fast_accum's `fast_accum(128)` declares."""
    f8 = torch.float8_e4m3fn
    a = torch.randn(M, K, device="cuda", dtype=F16)
    w_cols = (torch.randn(N, K, device="cuda") / 8).to(f8).t()  # a [K, N] view, column-major
    ones = torch.ones(1, N, device="cuda")

    def eager():
        amax = a.float().abs().amax(-1, keepdim=True)
        q = (a.float() * 448.0 / amax).clamp(-448, 448).to(f8)
        return torch._scaled_mm(q, w_cols, scale_a=amax / 448.0, scale_b=ones, out_dtype=F16)

    amax = a.float().abs().amax(-1, keepdim=True)
    q = (a.float() * 448.0 / amax).clamp(-448, 448).to(f8)
    scale = amax / 448.0
    return {"eager quantize + _scaled_mm": eager,
            "_scaled_mm alone": lambda: torch._scaled_mm(q, w_cols, scale_a=scale, scale_b=ones, out_dtype=F16)}


def _fp8_gemm_ref(M, K, N, fast_accum=False):
    """cuBLASLt's FP8 product under the accumulation the program declares: benchmarks/programs/fp8_gemm.tdsl's
    `fast_accum(128)` is `use_fast_accum=False` (promoted at an interval of 128 terms, the same largest error),
    fp8_gemm_fast_accum.tdsl's `fast_accum` is `use_fast_accum=True` (never promoted)."""
    f8 = torch.float8_e4m3fn
    a = (torch.randn(M, K, device="cuda") / 4).to(f8)
    w_cols = (torch.randn(N, K, device="cuda") / 4).to(f8).t()  # Wt[N, K] seen as a column-major [K, N]
    one = torch.ones((), device="cuda")
    return {"_scaled_mm": lambda: torch._scaled_mm(a, w_cols, scale_a=one, scale_b=one, out_dtype=BF16,
                                                   use_fast_accum=fast_accum)}


WORKLOADS = {
    "gemm": ("benchmarks/programs/gemm_bf16.tdsl", {}, lambda: _gemm_ref(1024, 4096, 12288)),
    "gemm4096": ("benchmarks/programs/gemm_bf16.tdsl", {"M": 4096, "K": 4096, "N": 4096},
                 lambda: _gemm_ref(4096, 4096, 4096)),
    "gemm8192": ("benchmarks/programs/gemm_bf16.tdsl", {"M": 8192, "K": 1024, "N": 8192},
                 lambda: _gemm_ref(8192, 1024, 8192)),
    "gemm_silu": ("examples/gemm_silu.tdsl", {}, lambda: _gemm_silu_ref(1024, 4096, 12288)),
    "gemm_fast_silu": ("benchmarks/programs/gemm_fast_silu.tdsl", {}, lambda: _gemm_silu_ref(1024, 4096, 12288)),
    "swiglu": ("benchmarks/programs/swiglu.tdsl", {}, lambda: _swiglu_ref(1024, 12288)),
    "swiglu_quant": ("examples/swiglu_quant.tdsl", {}, lambda: _swiglu_ref(1024, 12288, quant=True)),
    "rmsnorm": ("examples/rmsnorm.tdsl", {}, lambda: _rmsnorm_ref(1024, 4096)),
    "softmax": ("examples/softmax.tdsl", {}, lambda: _softmax_ref(1024, 4096)),
    "quant_gemm": ("examples/quant_gemm.tdsl", {}, lambda: _quant_gemm_ref(4096, 4096, 1536)),
    "quant_gemm_fast_accum": ("benchmarks/programs/quant_gemm_fast_accum.tdsl", {},
                              lambda: _quant_gemm_ref(4096, 4096, 1536)),
    "fp8_gemm": ("benchmarks/programs/fp8_gemm.tdsl", {}, lambda: _fp8_gemm_ref(4096, 4096, 1536)),
    "fp8_gemm_fast_accum": ("benchmarks/programs/fp8_gemm_fast_accum.tdsl", {},
                            lambda: _fp8_gemm_ref(4096, 4096, 1536, fast_accum=True)),
}


def _maybe(measure):
    """A reference that fails (an API this torch lacks) is reported as such, not fatal."""
    try:
        return measure()
    except Exception as err:  # noqa: BLE001
        return f"not measured: {type(err).__name__}: {str(err)[:200]}"


def _warm(call) -> None:
    for _ in range(3):  # torch.compile compiles and autotunes on its first calls
        call()


def _warm_time(call) -> float:
    _warm(call)
    return time_call(call)[0]


def _cycle(calls):
    """One call that runs the next of `calls` (each on its own input set) every time."""
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


def rotated_references(make_ref, sets: int) -> dict:
    """The workload's references, each call on the next of `sets` input sets: the rotation the tdsl kernels
    are timed with (compiler/tune/measure.py), so that neither side reads inputs left in L2 by the last call."""
    made = [make_ref() for _ in range(sets)]
    return {name: _cycle([m[name] for m in made]) for name in made[0]}


def head_to_head(calls: dict, rounds: int) -> dict:
    """Microseconds per call of each entry, timed in `rounds` interleaved rounds (one `time_call` of every
    entry per round, so that a change of clock or temperature during the run touches every entry alike), the
    order turned by one each round: the median of the rounds, and the rounds themselves (in round order)."""
    failed = {}
    for name, call in calls.items():
        try:
            _warm(call)
        except Exception as err:  # noqa: BLE001 - a reference this torch lacks is reported, not fatal
            failed[name] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
    times = {name: [] for name in calls if name not in failed}
    names = list(times)
    for r in range(rounds):  # each round starts one entry later, so that no entry is always timed first
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(time_call(calls[name])[0])
    return {**failed, **{name: {"median_us": statistics.median(t), "rounds_us": [round(x, 2) for x in t]}
                         for name, t in times.items()}}


def final_comparison(prog, sizes: dict, steps: dict, make_ref, rounds: int, backend) -> dict:
    """The winner and the best hand-written schedule (`steps`: label -> schedule steps) against the references,
    all with the same input rotation, interleaved (`head_to_head`); each once more on one input set (warm L2:
    a kernel whose inputs the previous one of a model has just written; how the references of the tuning rows
    of 2026-12-01 .. 12-04 were timed)."""
    model = prog.schedule(None).model
    sets = input_sets(model)
    calls, stack = {}, contextlib.ExitStack()
    with stack:
        for label, text in steps.items():
            job = Job(prog.ast.source, prog.filename, None, sizes, text, "h200", backend)
            calls[label] = stack.enter_context(rotating_launch(job))[0]
            calls[f"{label} (warm L2)"] = stack.enter_context(rotating_launch(job, sets=1))[0]
        calls.update(rotated_references(make_ref, sets))
        calls.update({f"{name} (warm L2)": call for name, call in make_ref().items()})
        result = head_to_head(calls, rounds)
    result["input_sets"] = sets
    return result


def hand_written(prog, path: str, sizes: dict, target: str, backend=None) -> dict:
    """The best of the file's own schedule blocks, measured by the same worker code as the tuner's."""
    best = {}
    for name in prog.schedule_names:
        try:
            steps = "\n".join(str(s) for s in prog.schedule(name).trace.steps)
        except TdslError:  # the file's counterexample blocks (illegal on purpose)
            continue
        record = run_job(Job(prog.ast.source, prog.filename, None, sizes, steps, target, backend))
        if record.get("ok") and record.get("us") and (not best or record["us"] < best["us"]):
            best = {"schedule": name, "us": record["us"], "steps": steps}
    return best


def _head_to_head_row(prog, sizes, winner_steps: str, hand: dict, make_ref, args) -> dict:
    """`final_comparison` of the winner and the best hand-written schedule, with each entry's time over the
    tuned kernel's (`vs_tuned`, `paired_ratios`)."""
    steps = {"tuned": winner_steps}
    if hand:
        steps[f"hand-written {hand['schedule']}"] = hand["steps"]
    final = final_comparison(prog, sizes, steps, make_ref, args.rounds, args.backend)
    final["vs_tuned"] = paired_ratios(final)
    return final


def paired_ratios(final: dict) -> dict:
    """Each entry's time over the tuned kernel's timed the same way (rotated inputs, or warm L2) in the same
    round, the median over the rounds (above 1: the tuned kernel is faster).  Pairing within a round cancels the
    drift of the GPU's clock over the run, which moves whole rounds (2026-12-04: 133 to 159 µs in five)."""
    def tuned(name):
        return final["tuned (warm L2)" if name.endswith("(warm L2)") else "tuned"]["rounds_us"]

    return {name: statistics.median(x / t for x, t in zip(entry["rounds_us"], tuned(name)))
            for name, entry in final.items()
            if isinstance(entry, dict) and "rounds_us" in entry and not name.startswith("tuned")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--log", default="/tmp/tune-logs")
    ap.add_argument("--no-hand", action="store_true")
    ap.add_argument("--backend", default=None, help="triton (default) or tilelang")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved rounds of the final comparison (winner, best hand-written, references); 0: none")
    args = ap.parse_args()
    runner = LocalExecutor()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {torch.cuda.get_device_name()} torch {torch.__version__}; "
          f"{runner.describe()}", flush=True)
    for key in args.workloads.split(","):
        path, sizes, make_ref = WORKLOADS[key]
        prog = tdsl.load(ROOT / path, sizes=sizes)
        start = time.time()
        result = tune(prog, target="h200", trials=args.trials, samples=args.samples, runner=runner,
                      backend=args.backend, log_path=Path(args.log) / f"{key}.jsonl")
        took = time.time() - start
        refs = {name: _maybe(lambda call=call: _warm_time(call)) for name, call in make_ref().items()}
        hand = {} if args.no_hand else hand_written(prog, path, sizes, "h200", args.backend)
        failed = [r.get("detail", "")[:200] for r in result.measured if not r.get("ok")]
        row = {"workload": key, "backend": args.backend or "triton", "sizes": sizes, "tuned_us": result.winner_us,
               "tuning_s": round(took, 1),
               "measured": len(result.measured), "failed": len(failed), "screened": len(result.search.judged),
               "rejected": dict(result.search.rejected), "hand": hand, "refs_us": refs,
               "winner": result.winner_steps}
        if result.winner_us:
            row["vs_refs"] = {k: v / result.winner_us for k, v in refs.items() if isinstance(v, float)}
            if hand:
                row["vs_hand"] = hand["us"] / result.winner_us
        if result.winner_us and args.rounds:
            row["head_to_head"] = _head_to_head_row(prog, sizes, result.winner_steps, hand, make_ref, args)
        print(json.dumps(row), flush=True)
        for f in failed[:3]:
            print(f"#   failed: {f}", flush=True)
        model_vs = sorted((r["t_estimate"] * 1e6, r["us"]) for r in result.measured if r.get("us"))
        print(f"#   (model us, measured us) of the measured: {[(round(a, 1), round(b, 1)) for a, b in model_vs]}",
              flush=True)
    runner.close()


if __name__ == "__main__":
    sys.exit(main())
