"""What the tests share, defined once: the examples and their schedules, the sizes they run at, and the legality
rules.

A plain module (not a test module, not a conftest): test files import it as `from catalog import ...`
(tests/ is on sys.path, see conftest.py).  No test module imports another test module; what two test files
need goes here or into another plain helper module (docs_runner.py, primitive_helpers.py).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
EXAMPLES = ROOT / "examples"

# ---------------------------------------------------------------- the examples and their schedules

# example -> {schedule: the rule that rejects it, or None for a legal schedule}, in the order of the file
EXPECTED = {
    "gemm": {"tiled": None, "gpu": None, "reversed_k": "reduction-order", "split_k": "parallel-reduction"},
    "gemm_silu": {"fused": None, "silu_in_ko": "reduction-incomplete", "fast": None},
    "swiglu_quant": {"fused": None, "inlined": None},
    "rmsnorm": {"row_per_program": None, "scale_before_sum": "reduction-incomplete"},
    "softmax": {"row_fused": None, "normalize_early": "reduction-incomplete", "exp_before_max": "reduction-incomplete"},
    "quant_gemm": {"separate": None, "quantize_before_rowmax": "reduction-incomplete"},
    "attention": {"unfused": None, "normalize_early": "reduction-incomplete"},
    "mha": {"flash": None, "flash_ws": None, "flash_ascend": None, "unfused": None,
            "normalize_early": "reduction-incomplete"},
    "mha_causal": {"flash": None, "flash_ws": None, "flash_ascend": None, "unfused": None,
                   "normalize_early": "reduction-incomplete"},
    "mha_fa": {"flash": None, "flash_ws": None, "flash_ascend": None, "stale_sum": "online-order"},
    "mha_fa_exp2": {"flash": None, "flash_ws": None, "normalize_early": "reduction-incomplete"},
}

# (example, schedule, rule or None) for every schedule of every example
CASES = [(ex, name, rule) for ex, schedules in EXPECTED.items() for name, rule in schedules.items()]
CASE_IDS = [f"{e}-{n}" for e, n, _ in CASES]

# (example, schedule) for every legal schedule: what the backends compile
LEGAL = [(ex, name) for ex, name, rule in CASES if rule is None]
LEGAL_IDS = [f"{e}-{n}" for e, n in LEGAL]

# (example, None): every example in program order (no schedule)
PROGRAM_ORDER = [(ex, None) for ex in EXPECTED]


# Legal schedules a backend refuses, (example, schedule, backend) -> a part of its message: on both Ascend
# targets the 128-row flash blocks do not fit in UB (flash_ascend takes 64); the Ascend 950's printer has no
# exp2 (mha_fa_exp2 is for NVIDIA: its 910B refusal is the capacity, checked first).
REFUSED = {
    **{(ex, "flash", "ascend-910b"): "UB needs" for ex in ("mha", "mha_causal", "mha_fa", "mha_fa_exp2")},
    **{(ex, "flash", "ascend-950"): "the buffers in UB need" for ex in ("mha", "mha_causal", "mha_fa")},
    # flash_ws: the flash kernel with a warp-specialised key loop (TileLang's); elsewhere the flash kernel, refused alike
    **{(ex, "flash_ws", "ascend-910b"): "UB needs" for ex in ("mha", "mha_causal", "mha_fa", "mha_fa_exp2")},
    **{(ex, "flash_ws", "ascend-950"): "the buffers in UB need" for ex in ("mha", "mha_causal", "mha_fa")},
    **{("mha_fa_exp2", s, "ascend-950"): "exp2() has no spelling" for s in ("flash", "flash_ws")},
}

# ---------------------------------------------------------------- sizes to run the examples at

# The examples at the chapter's scale: their own sizes, with a value for each run-time `param` (the backends
# other than Triton plan memory for bound sizes only).  Empty for an example without params.
CHAPTER_SIZES = {"mha": {"L": 4096}, "mha_causal": {"L": 4096}, "mha_fa": {"L": 4096}, "mha_fa_exp2": {"L": 4096}}


def size_flags(example: str) -> list[str]:
    """`--size N=V` for the command line, one per CHAPTER_SIZES entry of the example."""
    return [f"--size={n}={v}" for n, v in CHAPTER_SIZES.get(example, {}).items()]


# For the reference interpreter (and the Ascend execution model): small, and deliberately not multiples of the
# tiles, so every schedule has partial tiles.  gemm's N = 6 and attention's D = 3 are below 16.
INTERPRETER_SIZES = {
    "gemm": {"M": 70, "N": 6, "K": 70},
    "gemm_silu": {"M": 66, "N": 65, "K": 33},
    "swiglu_quant": {"M": 5, "N": 1030},
    "rmsnorm": {"M": 3, "N": 600},
    "softmax": {"M": 3, "N": 1100},
    "quant_gemm": {"M": 130, "N": 3, "K": 70},
    "attention": {"L": 70, "D": 3},
    "mha": {"B": 2, "H": 3, "L": 33, "D": 3},
    "mha_causal": {"B": 2, "H": 3, "L": 70, "D": 3},
    "mha_fa": {"B": 2, "H": 3, "L": 33, "D": 3},
    "mha_fa_exp2": {"B": 2, "H": 3, "L": 33, "D": 3},
}

# For generated kernels (the Triton interpreter, emission of every backend): also not multiples of the tiles,
# but every matrix product keeps its dimensions at 16 or more (gemm N, quant_gemm N, attention D), the
# smallest tl.dot takes.
KERNEL_SIZES = {
    "gemm": {"M": 70, "N": 40, "K": 70},
    "gemm_silu": {"M": 66, "N": 65, "K": 33},
    "swiglu_quant": {"M": 5, "N": 1030},
    "rmsnorm": {"M": 3, "N": 600},
    "softmax": {"M": 3, "N": 1100},
    "quant_gemm": {"M": 130, "N": 20, "K": 70},
    "attention": {"L": 70, "D": 16},
    # program order makes one tile of (b, h, i, j, d), each padded to a power of two: at most 65,536 elements
    "mha": {"B": 2, "H": 2, "L": 30, "D": 16},
    "mha_causal": {"B": 2, "H": 2, "L": 29, "D": 16},
    "mha_fa": {"B": 2, "H": 2, "L": 30, "D": 16},
    "mha_fa_exp2": {"B": 2, "H": 2, "L": 30, "D": 16},
}

# ---------------------------------------------------------------- the legality rules (docs/rules/<rule>.md)

RULES = {
    "dependence", "reduction-incomplete", "reduction-order", "reduction-grouping", "segment-count",
    "atomic-combine", "parallel-dependence", "parallel-reduction", "cache-conflict", "rounding-removed",
    "rounding-added", "online-policy", "online-rescale", "online-order", "storage-overwrite",
    "pipeline-overlap",
}


def padded_tile_gemm(m: int, k: int, n: int) -> str:
    """A bf16 product in 48 × 96 tiles with a k step of 48: tiles that get 64 × 128 lanes and a 64-lane k step
    (compiler/lower/tile_rules.py), the lanes past the tile masked."""
    return f"""const M = {m}, K = {k}, N = {n}
kernel q(A: bf16[M, K], B: bf16[K, N]) -> (P: bf16[M, N]) {{
  P[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}}
schedule s {{
  io, jo, ii, jj = tile(P.i, P.j, 64, 96)
  ko, kk = split(P.k, 48)
  reorder(P, io, jo, ko, ii, jj, kk)
  cache_read(A, shared, at=P.ko)
  cache_read(B, shared, at=P.ko)
  launch(P, warps=4)
}}
"""
