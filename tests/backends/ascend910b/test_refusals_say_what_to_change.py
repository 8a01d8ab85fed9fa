"""The 910B's refusals name what to change (a step, a tile size, a layout, another target), for schedules a
probe found refused with only the 910B's own reason, or with a wrong one: an E4M3 reason in a kernel without
E4M3, an internal `where` mask.  Each program runs on ascend-950 (tests of that backend)."""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.errors import BackendError

GEMM = """\
const M = 13, N = 70, K = 33
kernel g(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32 combine %s
}
schedule s {
%s
}
"""
TRANSPOSED_READ = """\
const M = 40, N = 40, K = 33
kernel t(A: bf16[M, K], B: bf16[K, N]) -> (Y: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
  Y[i, j] = C[j, i] + C[i, j]
}
schedule s {
  io, jo, ii, jj = tile(Y.i, Y.j, 16, 16)
  compute_at(C, Y.jo)
}
"""
TRANSPOSED_OPERAND = """\
const M = 13, N = 70, K = 33
kernel tg(At: bf16[K, M], W: bf16[K, N]) -> (D: f32[M, N]) {
  D[i, j] = sum(k) At[k, i] * W[k, j] accum f32
}
schedule s {
  io, jo, ii, jj = tile(D.i, D.j, 16, 16)
  ko, kk = split(D.k, 16)
  reorder(D, io, jo, ko, ii, jj, kk)
  bind(D.io, grid.x)
  bind(D.jo, grid.y)
}
"""
DECODE = """\
const H = 4, Lq = 1, Lk = 256, D = 64
const scale = 0.125
kernel dec(Q: bf16[H, Lq, D], K: bf16[H, Lk, D], V: bf16[H, Lk, D]) -> (O: bf16[H, Lq, D]) {
  S[h, i, j] = sum(d) Q[h, i, d] * K[h, j, d] accum f32
  m[h, i] = max(j) S[h, i, j] combine online
  P[h, i, j]: bf16 = exp((S[h, i, j] - m[h, i]) * scale)
  l[h, i] = sum(j) P[h, i, j] accum f32
  U[h, i, c] = sum(j) P[h, i, j] * V[h, j, c] accum f32
  O[h, i, c] = U[h, i, c] / l[h, i]
}
schedule s {
  online(m)
  ko, kk = split(l.j, 64)
  reorder(l, h, i, ko, kk)
  bind(l.h, grid.x)
  compute_at(P, l.ko)
  reverse_compute_at(U, l.ko)
  compute_at(m, l.ko)
  compute_at(S, l.ko)
  reverse_compute_at(O, l.i)
}
"""
TANH = """\
const M = 8, N = 64
kernel t(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = tanh(X[i, j])
}
schedule s {
  io, jo, ii, jj = tile(Y.i, Y.j, 8, 64)
}
"""
CASES = {
    "attention-with-one-query-per-program": (DECODE, ["l's tile has no row axis", "split the query loop",
                                                      "compile for ascend-950 or nvidia"]),
    "tanh": (TANH, ["tanh() has no T.tile form", "tanh(x) = 1 - 2 / (exp(2 * x) + 1)",
                    "compile for ascend-950 or nvidia"]),
    "split-k-operands-at-an-offset": (GEMM % ("segments(8)", "  rfactor(C.k, segments=8)\n  reorder(C_rf, ko, i, j, kk)\n"
                                                            "  bind(C_rf.ko, grid.x)"),
                                      ["keep the reduction whole in one tile", "compile for ascend-950 or nvidia"]),
    "reverse-then-split": (GEMM % ("reassoc", "  reverse(C.k)\n  ko, kk = split(C.k, 8)"),
                           ["split a loop before reversing or skewing it", "compile for ascend-950 or nvidia"]),
    "width-from-another-statement": (TRANSPOSED_READ, ["another statement of the kernel needs this axis 64 lanes "
                                                       "wide", "use tiles of at least 64 along i"]),
    "transposed-cube-operand": (TRANSPOSED_OPERAND, ["store At as [M, K]", "compile for ascend-950 or nvidia"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_910b_refusal_says_what_to_change(case):
    text, says = CASES[case]
    with pytest.raises(BackendError) as info:
        generate(loads(text, "p.tdsl"), "s", target="ascend-910b")
    message = str(info.value)
    assert "E4M3" not in message
    for part in says:
        assert part in message, message
    generate(loads(text, "p.tdsl"), "s", target="ascend-950")  # another target takes it
