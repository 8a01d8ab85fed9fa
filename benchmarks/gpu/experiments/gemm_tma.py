"""Experiment (not generated code): does loading the GEMM's operands through TMA tensor descriptors take tdsl's
generated Triton GEMM (benchmarks/programs/gemm_bf16.tdsl, schedule t128x256x64_s3_w8) to cuBLAS?

Two parts:
  generated   the module tdsl generates for the schedule, one per shape (sizes are constants in it), written
              here by `--generate` into benchmarks/gpu/experiments/generated/gemm_tma/ (ignored: carry it)
  hand        a hand copy of that kernel (same tiles, same unmasked pointer arithmetic, sizes as constexpr) with
              switches:
                DESC_A / DESC_W   A / W loaded through in-kernel tensor descriptors (tl.make_tensor_descriptor)
                DESC_C            C stored through a descriptor
                WS                the k loop warp-specialised by Triton (tl.range(..., warp_specialize=True))
              and num_stages 3 / 4.
Each is checked against an fp32 product (bf16 tolerance) and timed with triton.testing.do_bench (median) against
torch.matmul (cuBLAS) in the same run.

    .venv/bin/python benchmarks/gpu/experiments/gemm_tma.py --generate              # here (needs tdsl)
    python3 benchmarks/gpu/experiments/gemm_tma.py --out $OUT/gemm_tma.json           # on the device
    python3 benchmarks/gpu/experiments/gemm_tma.py --rounds 5 --out $OUT/gemm_tma_rounds.json  # second run
    python3 benchmarks/gpu/experiments/gemm_tma.py --rounds 5 --persistent --out $OUT/gemm_tma_persistent.json
    python3 benchmarks/gpu/experiments/gemm_tma.py --rounds 5 --split --out $OUT/gemm_tma_split.json
    python3 benchmarks/gpu/experiments/gemm_tma.py --rounds 7 --generated --out $OUT/gemm_tma_generated.json
    python3 benchmarks/gpu/experiments/gemm_tma.py --check-ragged --out $OUT/gemm_tma_ragged.json
    TRITON_INTERPRET=1 .venv/bin/python benchmarks/gpu/experiments/gemm_tma.py --smoke  # here: variants run
"""
import argparse
import importlib.util
import json
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

HERE = Path(__file__).resolve().parent
GENERATED = HERE / "generated" / "gemm_tma"
SHAPES = [(1024, 12288, 4096), (4096, 4096, 4096), (8192, 8192, 1024)]  # M, N, K
BM, BN, BK = 128, 256, 64


@triton.jit
def gemm(C, A, W, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
         BK: tl.constexpr, STAGES: tl.constexpr, DESC_A: tl.constexpr, DESC_W: tl.constexpr, DESC_C: tl.constexpr,
         WS: tl.constexpr, INTERPRET: tl.constexpr):
    io = tl.program_id(0)
    jo = tl.program_id(1)
    acc = tl.full([BM, BN], 0.0, tl.float32)
    if DESC_A:
        da = tl.make_tensor_descriptor(A, [M, K], [K, 1], [BM, BK])
    if DESC_W:
        dw = tl.make_tensor_descriptor(W, [K, N], [N, 1], [BK, BN])
    for ko in tl.range(0, K // BK, num_stages=STAGES, warp_specialize=WS):
        pi = (BM * io) + tl.arange(0, BM)
        pj = (BN * jo) + tl.arange(0, BN)
        pk = (BK * ko) + tl.arange(0, BK)
        if DESC_A:
            a = da.load([BM * io, BK * ko])
        else:
            a = tl.load(A + pi[:, None] * K + pk[None, :])
        if DESC_W:
            w = dw.load([BK * ko, BN * jo])
        else:
            w = tl.load(W + pk[:, None] * N + pj[None, :])
        if INTERPRET:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc)
    if DESC_C:
        dc = tl.make_tensor_descriptor(C, [M, N], [N, 1], [BM, BN])
        dc.store([BM * io, BN * jo], acc.to(tl.bfloat16))
    else:
        ci = (BM * io) + tl.arange(0, BM)
        cj = (BN * jo) + tl.arange(0, BN)
        tl.store(C + ci[:, None] * N + cj[None, :], acc.to(tl.bfloat16))


@triton.jit
def gemm_host(C, da, dw, dc, DESC_C: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, STAGES: tl.constexpr, WS: tl.constexpr, INTERPRET: tl.constexpr):
    """A and W through descriptors made on the host (TensorDescriptor kernel arguments: no in-kernel tensormap)."""
    io = tl.program_id(0)
    jo = tl.program_id(1)
    acc = tl.full([BM, BN], 0.0, tl.float32)
    for ko in tl.range(0, K // BK, num_stages=STAGES, warp_specialize=WS):
        a = da.load([BM * io, BK * ko])
        w = dw.load([BK * ko, BN * jo])
        if INTERPRET:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc)
    if DESC_C:
        dc.store([BM * io, BN * jo], acc.to(tl.bfloat16))
    else:
        ci = (BM * io) + tl.arange(0, BM)
        cj = (BN * jo) + tl.arange(0, BN)
        tl.store(C + ci[:, None] * N + cj[None, :], acc.to(tl.bfloat16))


def run_host(a, w, stages, ws, interpret=False, descs=None, desc_c=False):
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = w.shape[1]
    if descs is None:
        descs = (TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(w, [BK, BN]))
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    dc = TensorDescriptor.from_tensor(c, [BM, BN]) if desc_c else None
    gemm_host[(m // BM, n // BN)](c, descs[0], descs[1], dc, desc_c, m, n, k, BM, BN, BK, stages, ws, interpret,
                                  num_warps=8, num_stages=stages)
    return c


@triton.jit
def gemm_persistent(C, A, W, da, dw, dc, DESC_AW: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr, NUM_SMS: tl.constexpr,
                    DESC_C: tl.constexpr, FLATTEN: tl.constexpr, INTERPRET: tl.constexpr):
    """Not what tdsl generates (a third run, for the next lever): one program per multiprocessor walking the
    tiles in groups of GROUP rows, A / W (and C) through host descriptors; stages at launch."""
    start = tl.program_id(0)
    num_m: tl.constexpr = M // BM
    num_n: tl.constexpr = N // BN
    in_group: tl.constexpr = GROUP * num_n
    for tile in tl.range(start, num_m * num_n, NUM_SMS, flatten=FLATTEN):
        first_m = (tile // in_group) * GROUP
        rows = min(num_m - first_m, GROUP)
        pm = first_m + (tile % rows)
        pn = (tile % in_group) // rows
        acc = tl.zeros([BM, BN], tl.float32)
        for ki in range(K // BK):
            if DESC_AW:
                a = da.load([pm * BM, ki * BK])
                w = dw.load([ki * BK, pn * BN])
            else:
                pi = (BM * pm) + tl.arange(0, BM)
                pj = (BN * pn) + tl.arange(0, BN)
                pk = (BK * ki) + tl.arange(0, BK)
                a = tl.load(A + pi[:, None] * K + pk[None, :])
                w = tl.load(W + pk[:, None] * N + pj[None, :])
            if INTERPRET:
                a = a.to(tl.float32)
                w = w.to(tl.float32)
            acc = tl.dot(a, w, acc)
        if DESC_C:
            dc.store([pm * BM, pn * BN], acc.to(tl.bfloat16))
        else:
            ci = (BM * pm) + tl.arange(0, BM)
            cj = (BN * pn) + tl.arange(0, BN)
            tl.store(C + ci[:, None] * N + cj[None, :], acc.to(tl.bfloat16))


def _sms(cache=[]):
    if not cache:
        cache.append(torch.cuda.get_device_properties("cuda").multi_processor_count)
    return cache[0]


def run_persistent(a, w, stages, desc_c, flatten, group=8, interpret=False, sms=None, desc_aw=True):
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = w.shape[1]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    da, dw = TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(w, [BK, BN])
    dc = TensorDescriptor.from_tensor(c, [BM, BN])
    if sms is None:
        sms = _sms()
    grid = (min(sms, (m // BM) * (n // BN)),)
    gemm_persistent[grid](c, a, w, da, dw, dc, desc_aw, m, n, k, BM, BN, BK, group, grid[0], desc_c, flatten, interpret,
                          num_warps=8, num_stages=stages)
    return c


# fourth run: which of the persistent kernel's changes gains (the program walk or the descriptors)
SPLIT_CASES = ["cublas", "ptr s3 (as generated)", "host desc A+W s3", "host desc A+W+C s3", "persistent ptr s3",
               "persistent ptr s3 flatten", "persistent s3 flatten", "persistent s3 flatten descC"]
PERSISTENT_CASES = ["cublas", "ptr s3 (as generated)", "host desc A+W s3", "persistent s3", "persistent s3 descC",
                    "persistent s3 flatten", "persistent s3 flatten descC", "persistent s4", "persistent s4 flatten"]


# Second run: interleaved rounds of the few that matter (host descriptors made once, outside the timing, and
# made in the timed call: the launcher would make them per call)
ROUND_CASES = ["cublas", "generated (tdsl module)", "ptr s3 (as generated)", "desc A+W s3", "desc A+W s4",
               "host desc A+W s3", "host desc A+W s4", "host desc A+W s3 (made per call)", "ptr s3 ws",
               "host desc A+W s3 ws"]

VARIANTS = {  # name -> (stages, warps, DESC_A, DESC_W, DESC_C, WS)
    "ptr s3 (as generated)": (3, 8, False, False, False, False),
    "desc A+W s3": (3, 8, True, True, False, False),
    "desc A+W+C s3": (3, 8, True, True, True, False),
    "desc A+W s4": (4, 8, True, True, False, False),
    "desc A+W+C s4": (4, 8, True, True, True, False),
    "desc A+W s3 ws": (3, 8, True, True, False, True),
    "desc A+W s4 ws": (4, 8, True, True, False, True),
    "desc A+W+C s3 ws": (3, 8, True, True, True, True),
    "ptr s3 ws": (3, 8, False, False, False, True),
}


def run_hand(a, w, cfg, interpret=False):
    stages, warps, da, dw, dc, ws = cfg
    m, k = a.shape
    n = w.shape[1]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    gemm[(m // BM, n // BN)](c, a, w, m, n, k, BM, BN, BK, stages, da, dw, dc, ws, interpret,
                             num_warps=warps, num_stages=stages)
    return c


def module_path(m, n, k, kind=""):
    return GENERATED / f"gemm_bf16__{m}x{n}x{k}{kind}.py"


def generate():
    """Write tdsl's module for t128x256x64_s3_w8 at each shape (needs tdsl: run here), and the same module with
    the Triton target passes left out (`__ptr`: every load and store through pointers, as before
    compiler/lower/passes/tma.py)."""
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate as gen
    from tdsl.compiler.lower import pipeline

    root = HERE.parents[2]
    GENERATED.mkdir(parents=True, exist_ok=True)
    for m, n, k in SHAPES:
        prog = load(root / "benchmarks/programs/gemm_bf16.tdsl", sizes={"M": m, "N": n, "K": k})
        module_path(m, n, k).write_text(gen(prog, "t128x256x64_s3_w8", target="nvidia", backend="triton"))
        passes = pipeline.TARGET_PASSES.pop("triton", ())
        try:
            module_path(m, n, k, "__ptr").write_text(gen(prog, "t128x256x64_s3_w8", target="nvidia",
                                                         backend="triton"))
        finally:
            pipeline.TARGET_PASSES["triton"] = passes
        print("wrote", module_path(m, n, k), module_path(m, n, k, "__ptr"))


def import_generated(m, n, k, kind="", text_edit=None):
    path = module_path(m, n, k, kind)
    if text_edit is not None:  # a changed copy beside it
        edited = path.with_name(path.stem + "__edited.py")
        edited.write_text(text_edit(path.read_text()))
        path = edited
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gemm_bf16


RAGGED = [(70, 56, 40), (130, 264, 72), (1000, 1000, 1000), (257, 520, 136), (70, 50, 40)]  # M, N, K
NT_PROGRAM = """
const M = 300, N = 200, K = 136
kernel nt(A: bf16[M, K], B: bf16[N, K]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[j, k] accum f32
}
schedule tiled {
  io, jo, ii, jj = tile(C.i, C.j, 128, 64)
  ko, kk = split(C.k, 64)
  reorder(C, io, jo, ko, ii, jj, kk)
  cache_read(A, shared, at=C.ko)
  cache_read(B, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
  pipeline(C.ko, stages=3)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""


def generate_ragged():
    """Modules at ragged sizes (tiles past the tensors' edges, some strides refused) and a product whose B is
    stored [N, K] (read by its box, transposed): run on the GPU by --check-ragged."""
    from tdsl.compiler.driver.api import load, loads
    from tdsl.compiler.driver.generate import generate as gen

    root = HERE.parents[2]
    GENERATED.mkdir(parents=True, exist_ok=True)
    for m, n, k in RAGGED:
        prog = load(root / "benchmarks/programs/gemm_bf16.tdsl", sizes={"M": m, "N": n, "K": k})
        module_path(m, n, k, "__ragged").write_text(gen(prog, "t128x256x64_s3_w8", target="nvidia",
                                                        backend="triton"))
    (GENERATED / "nt.py").write_text(gen(loads(NT_PROGRAM), "tiled", target="nvidia", backend="triton"))


def check_ragged(out):
    """Each ragged module against an f32 product on the GPU, with aligned and unaligned (offset view) inputs and
    outputs; the transposed-operand product too."""
    rows = []

    def module(path):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def shifted(t, elems=3):  # the same values, not 16-byte aligned
        room = torch.empty(t.numel() + elems, dtype=t.dtype, device=t.device)
        view = room[elems:].view(t.shape)
        view.copy_(t)
        return view

    cases = [(module_path(m, n, k, "__ragged"), "gemm_bf16", (m, k), (k, n), False) for m, n, k in RAGGED]
    cases.append((GENERATED / "nt.py", "nt", (300, 136), (200, 136), True))
    for path, entry, sa, sb, nt in cases:
        row = {"module": path.name}
        try:
            fn = getattr(module(path), entry)
            text = path.read_text()
            row["descriptor_loads"] = text.count("_desc.load(")
            row["descriptor_stores"] = text.count("_desc.store(")
            g = torch.Generator(device="cuda").manual_seed(1)
            a = torch.randn(*sa, device="cuda", generator=g).to(torch.bfloat16)
            b = torch.randn(*sb, device="cuda", generator=g).to(torch.bfloat16)
            ref = a.float() @ (b.float().T if nt else b.float())
            tol = 2 ** -7 * ref.abs().max().item() + 1e-3
            for how, args, kwargs in (("aligned", (a, b), {}), ("unaligned inputs", (shifted(a), shifted(b)), {})):
                c = fn(*args, **kwargs)
                row[how] = (c.float() - ref).abs().max().item()
            outbuf = torch.full((ref.numel() + 5,), float("nan"), device="cuda",
                                dtype=torch.float32 if nt else torch.bfloat16)
            c_out = outbuf[3:3 + ref.numel()].view(ref.shape)
            fn(a, b, **{"C": c_out})
            row["unaligned output"] = (c_out.float() - ref).abs().max().item()
            row["guards untouched"] = bool(torch.isnan(outbuf[:3]).all() and torch.isnan(outbuf[-2:]).all())
            row["ok"] = all(row[h] <= tol for h in ("aligned", "unaligned inputs", "unaligned output")) and \
                row["guards untouched"]
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:600]}"
        print(json.dumps(row), flush=True)
        rows.append(row)
    if out:
        Path(out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "triton": triton.__version__,
                                         "rows": rows}, indent=1))


def _unannotated(text):
    """The module without its descriptor parameters' type annotations (in case a Triton rejects them)."""
    import re

    return re.sub(r'(_desc\w*): "tensordesc<[^"]*>"', r"\1", text)


def generated_rounds(n_rounds, out):
    """Phase 2: tdsl's module as generated now (descriptors), the same without the Triton target passes (pointers)
    and cuBLAS, n_rounds interleaved rounds per shape."""
    rows = []
    for m, n, k in SHAPES:
        flops = 2 * m * n * k
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
        w = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
        ref = a.float() @ w.float()
        row = {"shape_MxNxK": [m, n, k], "us": {}, "max_err": {}, "errors": {}}
        calls = {"cublas": lambda: torch.matmul(a, w)}
        for name, kind, edit in (("tdsl pointers (before)", "__ptr", None), ("tdsl descriptors", "", None),
                                 ("tdsl descriptors (unannotated)", "", _unannotated)):
            try:
                fn = import_generated(m, n, k, kind, edit)
                c = fn(a, w)
                torch.cuda.synchronize()
                row["max_err"][name] = (c.float() - ref).abs().max().item()
                calls[name] = lambda fn=fn: fn(a, w)
            except Exception as e:  # noqa: BLE001
                row["errors"][name] = f"{type(e).__name__}: {str(e)[:600]}"
        if "tdsl descriptors" in calls:
            calls.pop("tdsl descriptors (unannotated)", None)
        row["max_err"]["cublas"] = (torch.matmul(a, w).float() - ref).abs().max().item()
        row["us"] = {c: [] for c in calls}
        for r in range(n_rounds):
            for c, call in calls.items():
                row["us"][c].append(triton.testing.do_bench(call) * 1e3)
        med = {c: sorted(v)[len(v) // 2] for c, v in row["us"].items()}
        row["median_us"] = med
        row["vs_cublas"] = {c: med["cublas"] / t for c, t in med.items()}
        row["tflops"] = {c: flops / t / 1e6 for c, t in med.items()}
        print(json.dumps({k_: row[k_] for k_ in ("shape_MxNxK", "median_us", "vs_cublas", "max_err", "errors")}),
              flush=True)
        rows.append(row)
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__, "triton": triton.__version__,
           "device": torch.cuda.get_device_name(), "rounds": n_rounds, "rows": rows}
    if out:
        Path(out).write_text(json.dumps(res, indent=1))


def smoke():
    """Under TRITON_INTERPRET=1 on the CPU: every variant at a small shape against torch (no timing)."""
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(128, 512, generator=g).to(torch.bfloat16)
    ref = a.float() @ w.float()
    for name, cfg in VARIANTS.items():
        c = run_hand(a, w, cfg, interpret=True)
        print(name, (c.float() - ref).abs().max().item())
    for stages, ws in ((3, False), (4, True)):
        c = run_host(a, w, stages, ws, interpret=True)
        print("host", stages, ws, (c.float() - ref).abs().max().item())
    for desc_c, flatten, desc_aw in ((False, False, True), (True, True, True), (False, True, False)):
        c = run_persistent(a, w, 3, desc_c, flatten, interpret=True, sms=3, desc_aw=desc_aw)
        print("persistent", desc_c, flatten, desc_aw, (c.float() - ref).abs().max().item())
    c = run_host(a, w, 3, False, interpret=True, desc_c=True)
    print("host desc C", (c.float() - ref).abs().max().item())


def rounds(n_rounds, out, cases=None):
    """Each shape: n_rounds rounds, each timing every case of ROUND_CASES once (do_bench median), in turn."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    rows = []
    for m, n, k in SHAPES:
        flops = 2 * m * n * k
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
        w = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
        ref = a.float() @ w.float()
        descs = (TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(w, [BK, BN]))
        gen = import_generated(m, n, k)
        calls = {
            "cublas": lambda: torch.matmul(a, w),
            "generated (tdsl module)": lambda: gen(a, w),
            "ptr s3 (as generated)": lambda: run_hand(a, w, VARIANTS["ptr s3 (as generated)"]),
            "desc A+W s3": lambda: run_hand(a, w, VARIANTS["desc A+W s3"]),
            "desc A+W s4": lambda: run_hand(a, w, VARIANTS["desc A+W s4"]),
            "host desc A+W s3": lambda: run_host(a, w, 3, False, descs=descs),
            "host desc A+W s4": lambda: run_host(a, w, 4, False, descs=descs),
            "host desc A+W s3 (made per call)": lambda: run_host(a, w, 3, False),
            "ptr s3 ws": lambda: run_hand(a, w, VARIANTS["ptr s3 ws"]),
            "host desc A+W s3 ws": lambda: run_host(a, w, 3, True, descs=descs),
            "persistent s3": lambda: run_persistent(a, w, 3, False, False),
            "host desc A+W+C s3": lambda: run_host(a, w, 3, False, descs=descs, desc_c=True),
            "persistent ptr s3": lambda: run_persistent(a, w, 3, False, False, desc_aw=False),
            "persistent ptr s3 flatten": lambda: run_persistent(a, w, 3, False, True, desc_aw=False),
            "persistent s3 descC": lambda: run_persistent(a, w, 3, True, False),
            "persistent s3 flatten": lambda: run_persistent(a, w, 3, False, True),
            "persistent s3 flatten descC": lambda: run_persistent(a, w, 3, True, True),
            "persistent s4": lambda: run_persistent(a, w, 4, False, False),
            "persistent s4 flatten": lambda: run_persistent(a, w, 4, False, True),
        }
        cases = cases or ROUND_CASES
        row = {"shape_MxNxK": [m, n, k], "us": {c: [] for c in cases}, "max_err": {}}
        for c in cases:
            try:
                row["max_err"][c] = (calls[c]().float() - ref).abs().max().item()
            except Exception as e:  # noqa: BLE001
                row["max_err"][c] = f"{type(e).__name__}: {str(e)[:300]}"
                calls.pop(c)
        for r in range(n_rounds):
            for c in cases:
                if c in calls:
                    row["us"][c].append(triton.testing.do_bench(calls[c]) * 1e3)
        med = {c: sorted(v)[len(v) // 2] for c, v in row["us"].items() if v}
        row["median_us"] = med
        row["vs_cublas"] = {c: med["cublas"] / t for c, t in med.items()}
        row["vs_ptr_s3"] = {c: med["ptr s3 (as generated)"] / t for c, t in med.items()}
        row["tflops"] = {c: flops / t / 1e6 for c, t in med.items()}
        print(json.dumps({"shape": [m, n, k], "median_us": med, "vs_cublas": row["vs_cublas"],
                          "max_err": row["max_err"]}), flush=True)
        rows.append(row)
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__, "triton": triton.__version__,
           "device": torch.cuda.get_device_name(), "tile": [BM, BN, BK], "rounds": n_rounds, "rows": rows}
    if out:
        Path(out).write_text(json.dumps(res, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--generate", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--rounds", type=int, default=0, help="the interleaved second run (ROUND_CASES), N rounds")
    ap.add_argument("--persistent", action="store_true", help="with --rounds: PERSISTENT_CASES (third run)")
    ap.add_argument("--split", action="store_true", help="with --rounds: SPLIT_CASES (fourth run)")
    ap.add_argument("--generated", action="store_true", help="with --rounds: tdsl's modules now and before")
    ap.add_argument("--check-ragged", action="store_true", help="ragged modules on the GPU against torch")
    args = ap.parse_args()
    if args.generate:
        generate_ragged()
        return generate()
    if args.check_ragged:
        return check_ragged(args.out)
    if args.smoke:
        return smoke()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    if args.rounds and args.generated:
        return generated_rounds(args.rounds, args.out)
    if args.rounds:
        return rounds(args.rounds, args.out,
                      PERSISTENT_CASES if args.persistent else SPLIT_CASES if args.split else None)
    rows = []
    for m, n, k in SHAPES:
        flops = 2 * m * n * k
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
        w = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
        ref = a.float() @ w.float()
        scale = ref.abs().max().item()
        cub = torch.matmul(a, w)
        cub_err = (cub.float() - ref).abs().max().item()
        t_cub = triton.testing.do_bench(lambda: torch.matmul(a, w))
        row = {"shape_MxNxK": [m, n, k], "cublas": {"us": t_cub * 1e3, "tflops": flops / t_cub / 1e9,
                                                  "max_err": cub_err}, "ref_max_abs": scale}
        tol = max(2 * cub_err, 2 ** -7 * scale)
        cases = [("generated (tdsl module)", None)] + list(VARIANTS.items())
        for name, cfg in cases:
            try:
                if cfg is None:
                    fn = import_generated(m, n, k)
                    call = lambda: fn(a, w)  # noqa: E731
                else:
                    call = lambda cfg=cfg: run_hand(a, w, cfg)  # noqa: E731
                c = call()
                torch.cuda.synchronize()
                err = (c.float() - ref).abs().max().item()
                t = triton.testing.do_bench(call)
                row[name] = {"us": t * 1e3, "tflops": flops / t / 1e9, "vs_cublas": t_cub / t, "max_err": err,
                             "ok": bool(err <= tol)}
            except Exception as e:  # noqa: BLE001 -- an experiment: record and go on
                row[name] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
            print(m, n, k, name, row[name], flush=True)
        # cuBLAS again at the end of the shape: drift between the two is the noise of the comparison
        row["cublas_again_us"] = triton.testing.do_bench(lambda: torch.matmul(a, w)) * 1e3
        print(m, n, k, "cublas", row["cublas"], "again", row["cublas_again_us"], flush=True)
        rows.append(row)
    out = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__, "triton": triton.__version__,
           "device": torch.cuda.get_device_name(), "tile": [BM, BN, BK], "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
