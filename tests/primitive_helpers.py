"""What the tests of tests/schedule/primitives/ share: the small kernels they schedule, and the two checks every
primitive's file makes -- the tree before and after the primitive (the text of its golden file) and the trace
round trip.

A plain helper module (tests/ is on sys.path, see conftest.py), not a test module.
"""

from __future__ import annotations

from typing import Callable

from tdsl.compiler.driver.api import loads
from tdsl.compiler.schedule.tree import walk_loops
from tdsl.compiler.schedule.tree_view import tree_text

# ---------------------------------------------------------------- kernels

# The chapter's GEMM + SiLU at 128 x 64 x 128: a reduction C (bf16 store, f32 accumulator) and its reader Y.
GEMM_SILU = """
const M = 128, K = 64, N = 128
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
"""

# Sizes of GEMM_SILU for the interpreter, not multiples of the tiles of `tiled()` (32 x 32 x 16).
GEMM_SILU_SMALL = {"M": 40, "N": 36, "K": 20}

# The steps of `tiled()`, in .tdsl syntax.
TILED = """
io, ii = split(C.i, 32)
jo, jj = split(C.j, 32)
ko, kk = split(C.k, 16)
reorder(C, io, jo, ko, ii, jj, kk)
"""

# A producer T and a consumer Y that reads T(i - 1) and T(i): fusable forward, not parallel once fused.
STENCIL = """
const N = 16
kernel stencil(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 2.0
  Y[i : i >= 1] = T[i - 1] + T[i]
}
"""

# A row sum s and a consumer Y that divides every element of the row by it.
ROWS = """
const M = 8, N = 16
kernel rows(X: f32[M, N]) -> (Y: f32[M, N]) {
  s[i] = sum(j) X[i, j]
  Y[i, j] = X[i, j] / s[i]
}
"""

# Each step U reads the previous step's T around i; T is then rewritten from U.  One plane of T suffices in
# program order (the U sweep reads the old plane before the T sweep replaces it).
SWEEPS = """
const S = 6, N = 17
kernel sweeps(X: f32[N]) -> (Y: f32[N]) {
  for t < S {
    U[t, i] = where(t == 0, X[i], where(i == 0, T[t - 1, i], where(i == N - 1, T[t - 1, i],
      0.5 * T[t - 1, i] + 0.25 * (T[t - 1, i - 1] + T[t - 1, i + 1]))))
    T[t, i] = 2.0 * U[t, i] - 1.0
  }
  Y[i] = T[S - 1, i]
}
"""


def sched(text: str = GEMM_SILU):
    """A fresh schedule (program order) of the kernel in `text`."""
    return loads(text).schedule()


def tiled():
    """GEMM_SILU with C tiled 32 x 32 x 16, loops io, jo, ko, ii, jj, kk (the steps of TILED); Y untouched."""
    s = sched()
    s.split("C.i", 32)
    s.split("C.j", 32)
    s.split("C.k", 16)
    s.reorder("C", "io", "jo", "ko", "ii", "jj", "kk")
    return s


# ---------------------------------------------------------------- before / after


def tree_change(s, step: Callable) -> str:
    """Apply `step` to schedule `s`; the golden text: the tree before, the steps `step` recorded, the tree after."""
    before = tree_text(s.model, s.tree)
    done = len(s.trace)
    step(s)
    steps = "\n".join(f"# {line}" for line in str(s.trace).splitlines()[done:])
    return f"# before\n{before}\n\n{steps}\n\n# after\n{tree_text(s.model, s.tree)}\n"


# ---------------------------------------------------------------- trace round trip


def _shape(s) -> tuple:
    loops = [(l.name, l.kind, l.bind, l.pipeline, l.warp_specialize, l.warps, l.host, l.group, l.persistent)
             for l in walk_loops(s.tree.body)]
    buffers = [(b.tensor, b.scope, b.kind, b.at.name, b.dtype) for b in s.tree.buffers]
    return tree_text(s.model, s.tree), loops, buffers


def assert_round_trip(text: str, s) -> None:
    """The trace of `s` (a schedule of the kernel in `text`) rebuilds `s`: replayed onto a fresh schedule, and
    printed as a `schedule` block of the program and loaded back, it gives the same trace, the same tree
    (loops, marks, buffers, launch warps) and the same time map."""
    again = s.trace.replay(sched(text))
    assert str(again.trace) == str(s.trace)
    assert _shape(again) == _shape(s)
    assert again.time_map().is_equal(s.time_map())

    steps = "".join(f"  {line}\n" for line in str(s.trace).splitlines())
    loaded = loads(f"{text}\nschedule replayed {{\n{steps}}}\n").schedule("replayed")
    assert str(loaded.trace) == str(s.trace)
    assert _shape(loaded) == _shape(s)
    assert loaded.time_map().is_equal(s.time_map())
