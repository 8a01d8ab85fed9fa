"""The 910B's refusals of masks it has no form for: short enough to read, and naming what the schedule did
(probe II of the 32nd session: a 2,500-character condition before the hint; a hint about `reverse` and `skew`
for a triangular range split)."""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate
from tdsl.frontend.diagnostics import TdslError

CHAIN = """const N = 19, M = 13
kernel chain2d(A: f32[N, M]) -> (C: f32[N, M]) {
  B[i, j] = where(i == 0, A[i, j], where(i == N - 1, A[i, j], where(j == 0, A[i, j], where(j == M - 1, A[i, j],
      0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])))))
  C[i, j] = where(i == 0, B[i, j], where(i == N - 1, B[i, j], where(j == 0, B[i, j], where(j == M - 1, B[i, j],
      0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])))))
}
schedule overlapped {
  io, jo, ii, jj = tile(C.i, C.j, 4, 8)
  recompute_at(B, C.jo)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""

TRMM = """const M = 7, N = 13
kernel trmm(A: f32[M, M], B_in: f32[M, N]) -> (B: f32[M, N] in B_in) {
  S[i, j] = sum(k : k >= i) where(k > i, A[k, i] * B_in[k, j], -0.0) from B_in[i, j]
  B[i, j] = 1.5 * S[i, j]
}
schedule serial_fused {
  reverse_compute_at(B, S.i)
  ko, kk = split(S.k, 4)
}
"""


@pytest.mark.parametrize("source, name, says", [
    (CHAIN, "overlapped", "which is not a conjunction of comparisons"),
    (TRMM, "serial_fused", "a triangular range (`sum(k : k >= i)`)"),
])
def test_a_mask_refusal_is_short_and_names_its_cause(source, name, says):
    with pytest.raises(TdslError) as caught:
        generate(loads(source, "k.tdsl"), name, target="ascend-910b")
    text = str(caught.value)
    assert says in text and "compile for ascend-950 or nvidia" in text
    assert len(text.splitlines()[0]) < 1000, len(text.splitlines()[0])
