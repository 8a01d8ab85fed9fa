"""Every finding of the differential fuzzer, kept as a regression case: each failed on the main branch it was
found on, and must now pass every oracle of tests/fuzz/oracles.py for the backends it names.

A case is a program (an example's name or source text), sizes, schedule steps (.tdsl syntax) and backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tdsl.compiler.driver.api import loads

from catalog import EXAMPLES
from fuzz.cases import Case
from fuzz.engine import Fuzzer, Result
from fuzz.schedules import Step, named_steps

ALL = ("triton", "ascend-950", "ascend-910b")

C4_BF16_ACCUM = """\
const K = 1, M = 1, N = 2
kernel fz(XMK: f32[M, K], XKN: f32[K, N]) -> (C4: f32[M, N]) {
  C4[i, j] = sum(k) XMK[i, k] * XKN[k, j] accum bf16
}
"""

TRIANGULAR = """\
const M = 8, N = 8, K = 8
kernel tri(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k : k <= i) A[i, k] * B[k, j] accum f32
}
"""

CAST_OF_CONSTANT = """\
const K = 8, N = 8
kernel fz(XKN: f32[K, N]) -> (T1: f32[K, N]) {
  T1[k, j] = (bf16(2.0) + (XKN[k, j] * XKN[k, j])) * (0.1 + 0.2) / -(3.0 * 1e-3)
}
"""

OPERAND_IN_KERNEL = """\
const M = 32, N = 32, K = 32
kernel f(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  T[i, k]: bf16 = A[i, k] * 2.0
  C[i, j] = sum(k) T[i, k] * B[k, j] accum f32
}
"""

# (id, program, sizes, steps, backends, what was wrong)
FINDINGS = [
    ("bf16-accumulator-rounding", C4_BF16_ACCUM, {"K": 1, "M": 1, "N": 2}, [], ("triton",),
     "the Triton interpreter converts f32 to bf16 by truncation: every bf16 rounding was off by one ulp"),
    ("fused-grid-axis-past-partial-tile", "gemm", {"M": 7, "N": 5, "K": 3},
     ["tile(C.i, 3)", "fuse(C.io, C.ii)", "bind(C.io_ii, grid.x)"], ALL,
     "a fused grid axis launches every combination of its loops; masks assumed only valid ones and the last "
     "programs wrote outside C"),
    ("row-sum-over-a-triangle-in-chunks", "attention", {"L": 4, "D": 1}, ["tile(l.i, l.j, 8, 3)"], ALL,
     "the partial row sums of each chunk of j were added at lanes shifted by 3*jo (the tile's start moved with "
     "the chunk loop)"),
    ("triangular-matmul-chunks-smaller-than-tile", TRIANGULAR, {"M": 40, "N": 33, "K": 40},
     ["tile(C.i, C.j, 32, 32)", "split(C.k, 16)", "reorder(C, io, jo, ko, ii, jj, kk)"], ALL,
     "as above, for a product over a triangle (k <= i): 4158 of 4800 elements wrong in the issue's symm"),
    ("serial-output-loop-inside-the-accumulation-loop", "gemm", {"M": 2, "N": 1, "K": 1},
     ["tile(C.i, C.j, 128, 128)", "split(C.k, 64)", "reorder(C, io, jo, ko, ii, jj, kk)",
      "pipeline(C.ii, stages=1)"], ALL,
     "a pipelined loop over rows inside the k loop added each row's partial sum into every row of the accumulator"),
    ("reduction-read-inside-its-accumulation-loop", "quant_gemm", {"M": 5, "N": 7, "K": 100},
     ["split(amax.k, 128)", "reverse_compute_at(Aq, amax.ko)", "bind(amax.i, grid.x)"], ALL,
     "Aq read amax from global memory before the kernel stored it (now refused: the value is an accumulator)"),
    ("cast-of-a-constant", CAST_OF_CONSTANT, {"K": 1, "N": 1}, [], ALL,
     "bf16(2.0) reached the Triton rounding helper as a Python float (now folded when lowering, in f32)"),
    ("rfactor-of-a-one-iteration-loop", "quant_gemm", {"M": 2, "K": 1, "N": 1}, ["rfactor(amax.k)"], ALL,
     "with K = 1 the loop k equals k mod 1, so rfactor named its segment and inner loops both k (an isl error)"),
    ("matrix-product-operand-computed-in-the-kernel", OPERAND_IN_KERNEL, {"M": 32, "N": 32, "K": 32},
     ["io, jo, ii, jj = tile(C.i, C.j, 16, 16)", "ko, kk = split(C.k, 16)", "reorder(C, io, jo, ko, ii, jj, kk)",
      "compute_at(T, C.ko)"], ALL,
     "a tile product loaded its operand T from a tensor that lives only in registers (StopIteration in the "
     "Triton printer); now read from registers or refused"),
    ("register-value-from-an-earlier-iteration", "attention", {"L": 1, "D": 2}, ["compute_at(l, O.c)"], ALL,
     "l is computed at c = 0 only, but O read its register tile at c = 1 too, where the empty reduction had "
     "reset it to 0 (now refused: a register tile holds one iteration's values)"),
]


def case_of(program: str, sizes: dict, steps: list) -> Case:
    source = (EXAMPLES / f"{program}.tdsl").read_text() if "\n" not in program else program
    parsed = [_step(s) for s in steps]
    return Case(program if "\n" not in program else "inline", source, sizes, parsed, seed=7)


def _step(text: str) -> Step:
    """A .tdsl schedule line -> a fuzzer Step (parsed by the real frontend, converted as a named schedule is)."""
    prog = loads(f"kernel k(A: f32[4]) -> (B: f32[4]) {{\n  B[i] = A[i]\n}}\nschedule s {{\n  {text}\n}}\n")
    (step,) = named_steps(prog, "s")
    return step


SAVED = sorted((Path(__file__).parent / "fuzz" / "findings").glob("*.json"))


@pytest.mark.parametrize("path", SAVED, ids=[p.stem for p in SAVED])
def test_saved_fuzz_finding_stays_fixed(path, tmp_path):
    """A case the fuzzer saved (benchmarks/fuzz.py writes them as JSON), with a `why` and the backends added."""
    data = json.loads(path.read_text())
    case = Case.from_json(path.read_text())
    backends = tuple(data["backends"])
    finding = Fuzzer(backends=backends, shrink=False).check(case, list(backends), tmp_path, Result())
    assert finding is None, f"{path.stem} ({data['why']}):\n{case.describe()}\n{finding}"


@pytest.mark.parametrize("ident,program,sizes,steps,backends,why", FINDINGS, ids=[f[0] for f in FINDINGS])
def test_fuzz_finding_stays_fixed(ident, program, sizes, steps, backends, why, tmp_path):
    case = case_of(program, sizes, steps)
    fuzzer = Fuzzer(backends=backends, shrink=False)
    finding = fuzzer.check(case, list(backends), tmp_path, Result())
    assert finding is None, f"{ident} ({why}):\n{case.describe()}\n{finding}"
