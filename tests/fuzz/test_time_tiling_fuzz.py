"""A fixed-seed budget of benchmarks/fuzz_time_tiling.py: random stencils in time loops, random attempts at time
tiling (shift, fuse, skew, fold_storage, tile, distribute, wavefronts); every accepted schedule gives program
order's bits in the interpreter and in its Triton kernels.  The long runs are the script's (benchmarks/RESULTS.md)."""

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz_time_tiling as tt  # noqa: E402


def test_fixed_seed_time_tiling_budget_finds_nothing(tmp_path):
    rng = random.Random(11)
    outcomes = []
    for _ in range(16):
        text, names, dims = tt.program(rng)
        steps = tt.recipe(rng, names, dims)
        result = tt.check(text, steps, tmp_path)
        assert not result.startswith(("MISMATCH", "INTERNAL")), f"{result}\n{text}\n" + "\n".join(steps)
        outcomes.append(result)
    assert outcomes.count("legal: same") >= 3, outcomes  # the budget ran time-tiled kernels, not only refusals
