"""Measuring one candidate: compile it, check it against the interpreter, then time it on the GPU.

A `Job` carries everything a worker process (or a Ray task on another machine) needs, as plain data: the
program's source, the kernel, the sizes, the candidate's steps.  `run_job` returns a plain dict, the record
the tuning log keeps.

* **Check.** The same steps are replayed on the kernel at small ragged sizes (`check_sizes`), the generated
  kernel runs on random inputs with NaN guard regions around its outputs, and each output is compared with
  the reference interpreter's program order at the tolerance of its dtype (compiler/verify).  A candidate
  that fails is logged with the reason and never timed.
* **Time** (on a GPU only). Inputs at the tuned sizes, cycled through enough sets to exceed L2; outputs
  poisoned with NaN first, and any left after the run fails the candidate (an element no program wrote).
  The replays of a CUDA graph of 20 calls, so that launch overhead on the host does not hide the kernels'
  own time (`time_call`; the method is recorded).
"""

from __future__ import annotations

import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

SMALL = (67, 45, 33, 29, 23)  # ragged check sizes: none a multiple of a power-of-two tile
GRAPH_METHOD = "CUDA graph of 20 calls, median of 10 replays"


@dataclass
class Job:
    source: str
    filename: str
    kernel: Optional[str]
    sizes: dict
    steps: str  # the candidate's schedule steps, one per line
    target: str
    backend: Optional[str]
    choice: dict = field(default_factory=dict)
    t_estimate: float = 0.0
    seed: int = 0
    time_it: bool = True
    # what a worker does: "all" (check, then time), "check" (check, and on a GPU the first run at the tuned
    # sizes, which compiles the kernel into Triton's on-disk cache) or "time" (a checked job: time it)
    stage: str = "all"
    block: Optional[str] = None  # the program's schedule block these steps are, when they are one

    def to_dict(self) -> dict:
        return asdict(self)


def check_sizes(model) -> dict:
    """Each integer size of the kernel shrunk to a small ragged value (float constants are left alone)."""
    ints = [k for k, v in model.sizes.items() if isinstance(v, int) and not isinstance(v, bool)]
    return {k: min(model.sizes[k], SMALL[n % len(SMALL)]) for n, k in enumerate(ints)}


def block_source(source: str, name: str, steps: str, kernel: Optional[str] = None) -> str:
    """The program's source with the steps appended as `schedule NAME { ... }` (the block a user pastes)."""
    body = "\n".join(f"  {line}" for line in steps.splitlines())
    head = f"schedule {name} for {kernel} {{" if kernel else f"schedule {name} {{"
    return f"{source.rstrip()}\n\n{head}\n{body}\n}}\n"


def with_steps(prog, steps: str, kernel: Optional[str] = None, sizes: Optional[dict] = None):
    """(the program with a tuning log's steps appended as one more schedule block, its name, the schedule they
    make).  The steps come from a file, not from the program: text that is not one block of steps (one that closes
    the block and adds a kernel or another block) is a TdslError, as is a step that does not apply."""
    from tdsl.compiler.driver.api import loads
    from tdsl.frontend.diagnostics import TdslError

    name = "tuned"
    while name in prog.schedule_names:
        name += "_"
    program = loads(block_source(prog.ast.source, name, steps, kernel), prog.filename,
                    sizes={**prog.sizes, **(sizes or {})})
    if sorted(program.schedule_names) != sorted([*prog.schedule_names, name]) or \
            list(program.kernels) != list(prog.kernels):
        raise TdslError(f"{prog.filename}: error: the steps are not one schedule block")
    return program, name, program.schedule(name, kernel)


def run_job(job: Job) -> dict:
    """The log record of one candidate: its check, its time (None when not timed), and why if it failed."""
    record = {"choice": job.choice, "steps": job.steps, "t_estimate": job.t_estimate, "ok": job.stage == "time",
              "us": None}
    if job.block:
        record["block"] = job.block
    try:
        if job.stage != "time":
            record.update(_check(job))
        if record["ok"] and job.time_it:
            record.update(_time(job, bench=job.stage != "check"))
    except Exception as err:  # noqa: BLE001 - a worker reports every failure as data, never dies
        record["ok"] = False
        record["detail"] = f"{type(err).__name__}: {err}"[:2000]
        record["trace"] = traceback.format_exc()[-2000:]
    return record


def _program(job: Job, sizes: dict):
    from tdsl.compiler.driver.api import loads

    return loads(block_source(job.source, "__candidate", job.steps, job.kernel), job.filename, sizes=sizes)


def _check(job: Job) -> dict:
    from tdsl.compiler.driver.generate import generate, kernel_device, load_module, run_generated
    from tdsl.compiler.reference.interpreter import (interpret, program_order_inputs, random_inputs,
                                                     rounding_variants)
    from tdsl.compiler.verify import compare_outputs

    full = _program(job, job.sizes)
    small = check_sizes(full.model(job.kernel))
    prog = _program(job, {**job.sizes, **small})
    original = prog.schedule(None, kernel=job.kernel)
    model = original.model
    inputs = random_inputs(model, job.seed)
    start = program_order_inputs(prog.schedule("__candidate", kernel=job.kernel).model, inputs)
    reference = interpret(model, original.time_map(), start)
    text = generate(prog, "__candidate", target=job.target, backend=job.backend, kernel=job.kernel)
    device = kernel_device()
    with tempfile.TemporaryDirectory() as tmp:
        module = load_module(text, Path(tmp) / f"{model.name}_candidate.py")
        outputs = run_generated(module, model, inputs, device=device, guard=64)
    results = compare_outputs(model, reference, outputs, variants=lambda: rounding_variants(
        model, original.time_map(), start, reference))
    ok = all(r.ok for r in results.values())
    lines = [f"{name}: {r.summary()}" for name, r in results.items()]
    where = "GPU" if device == "cuda" else "Triton interpreter"
    sizes = ",".join(f"{k}={v}" for k, v in small.items())
    return {"ok": ok, "detail": f"{where} at {sizes} vs interpreter: " + "; ".join(lines)}


def _time(job: Job, bench: bool = True) -> dict:
    """The first run at the tuned sizes (compile time, unwritten elements), then, with `bench`, the timing."""
    import torch

    if not torch.cuda.is_available():
        return {"device": "cpu (not timed)"}
    with rotating_launch(job, sets=None if bench else 1) as (call, buffers):
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - start
        nan_left = sum(int(torch.isnan(b.float()).sum()) for b in buffers)
        us, method = time_call(call) if bench and not nan_left else (None, "")
    record = {"us": us, "timing": method, "first_run_s": first_s, "device": torch.cuda.get_device_name()}
    if nan_left:
        record.update(ok=False, detail=f"{nan_left} output elements left unwritten (NaN) at the tuned sizes")
    return record


@contextmanager
def rotating_launch(job: Job, sets: Optional[int] = None):
    """The job's kernel at the tuned sizes on the GPU, as (call, output buffers): each call reads the next of
    `sets` input sets (default `input_sets`, past the L2), so that the inputs are not all resident in L2.  The
    outputs start as NaN."""
    import torch

    from tdsl.backends.common.dtypes import TORCH_NAMES
    from tdsl.compiler.driver.generate import generate, load_module, python_name

    prog = _program(job, job.sizes)
    model = prog.schedule(None, kernel=job.kernel).model
    text = generate(prog, "__candidate", target=job.target, backend=job.backend, kernel=job.kernel)
    torch.manual_seed(job.seed)
    dtype = {t.name: getattr(torch, TORCH_NAMES[t.dtype]) for t in model.tensors.values()}
    sets = sets or input_sets(model)
    inputs = [[torch.randn(*t.shape, device="cuda").to(dtype[t.name]) for t in model.inputs()] for _ in range(sets)]
    buffers = [torch.full(t.shape, float("nan"), device="cuda").to(dtype[t.name]) for t in model.outputs()]
    turn = [0]
    with tempfile.TemporaryDirectory() as tmp:
        module = load_module(text, Path(tmp) / f"{model.name}_candidate.py")
        outs = {python_name(module, t.name): b for t, b in zip(model.outputs(), buffers)}
        launch = getattr(module, python_name(module, model.name))

        def call():
            turn[0] = (turn[0] + 1) % sets
            launch(*inputs[turn[0]], **outs)

        yield call, buffers


def input_sets(model) -> int:
    """Input sets to cycle through: enough that together they are twice an H100/H200 L2, at most 8."""
    from tdsl.compiler.model.dtypes import BYTES

    return rotation_sets(sum(BYTES[t.dtype] * _numel(t.shape) for t in model.inputs()))


def rotation_sets(input_bytes: int, l2_bytes: int = 64 << 20) -> int:
    """Input sets of `input_bytes` each that together are twice an L2 of `l2_bytes`, at most 8."""
    return max(1, min(8, -(-2 * l2_bytes // max(input_bytes, 1))))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def time_call(call) -> tuple[float, str]:
    """(microseconds per call, how they were taken): the replays of a CUDA graph of 20 calls, so that the host
    does not set the pace.  A call launching several kernels (each through Python) can take the host longer than
    the GPU: quant_gemm's three took 82 µs on the GPU and 122-145 µs under `do_bench`, by how busy the host was
    (benchmarks/RESULTS.md, 2026-12-04).  A call that cannot be captured in a graph: `do_bench`'s median."""
    import torch

    try:
        return graph_us([call]), GRAPH_METHOD
    except RuntimeError as err:  # torch's capture errors (CudaError among them)
        torch.cuda.synchronize()
        from triton.testing import do_bench

        return do_bench(call, warmup=25, rep=100) * 1e3, f"do_bench median (no CUDA graph: {str(err)[:80]})"


def graph_us(calls, repeat: int = 20) -> float:
    """Microseconds per call of `calls` (each on its own buffers, e.g. rotated past L2) captured `repeat`
    times in one CUDA graph: the median of 10 replays."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (and any lazy initialisation) outside the capture
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeat):
            for call in calls:
                call()
    graph.replay()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / (repeat * len(calls)))
    return sorted(times)[len(times) // 2]
