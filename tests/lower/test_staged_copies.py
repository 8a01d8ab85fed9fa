"""A product operand's on-chip copy is made where the backend makes it, or the schedule is refused
(compiler/analysis/placement.py `_check_no_outer_copy`).

TileLang (NVIDIA) and the Ascend backends copy a product's operands from global memory in each iteration of the
innermost loop around the product.  A `cache_read` of an operand at a loop further out (the chapter's 5.4.5:
L1 filled once per `ko1`, L0A per `ko0` from it) was silently not made, while `tdsl cost` counted its buffer
and its traffic (probe of the 24th session: 256 KiB of L1 in the plan, 64 KiB in the 910B kernel)."""

import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.errors import BackendError

PRODUCT = """
const M = 256, K = 1024, N = 256
kernel mm(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N]) {{
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}}
schedule s {{
  io, ii = split(C.i, 128)
  jo, jj = split(C.j, 128)
  ko1, kr = split(C.k, 256)
  ko0, kk = split(C.kr, 64)
  reorder(C, io, jo, ko1, ko0, ii, jj, kk)
  {caches}
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}}
"""

TARGETS = [("nvidia", "tilelang", "shared", "shared"), ("ascend-910b", None, "L1", "L0A"),
           ("ascend-950", None, "L1", "L0A")]


@pytest.mark.parametrize("target, backend, outer, inner", TARGETS, ids=[t[1] or t[0] for t in TARGETS])
def test_a_copy_planned_outside_the_loop_the_backend_copies_in_is_refused(target, backend, outer, inner):
    caches = f"cache_read(A, {outer}, at=C.ko1)"
    if inner != outer:
        caches += f"\n  cache_read(A, {inner}, at=C.ko0)"
    with pytest.raises(BackendError, match=r"C: the schedule copies A to (shared|L1) at loop ko1 \(cache_read\), but "
                                           r".* \(loop ko0\), so that copy would not be made .*put the cache_read "
                                           r"at C.ko0 instead"):
        generate(loads(PRODUCT.format(caches=caches)), "s", target=target, backend=backend)


@pytest.mark.parametrize("target, backend, outer, inner", TARGETS, ids=[t[1] or t[0] for t in TARGETS])
def test_the_copy_at_the_loop_the_backend_copies_in_is_made(target, backend, outer, inner):
    caches = f"cache_read(A, {outer}, at=C.ko0)"
    text = generate(loads(PRODUCT.format(caches=caches)), "s", target=target, backend=backend)
    assert f"cache_read A -> {outer} at ko0" in text  # the planned buffer is the one allocated
    lines = [line.strip() for line in text.splitlines()]
    inner_loop = next(n for n, line in enumerate(lines) if line.startswith("for ko0 in"))
    copy = next(n for n, line in enumerate(lines) if line.startswith("T.copy(A[") and "64 * ko0" in line)
    assert copy > inner_loop  # the copy from global memory is made in each iteration of ko0
