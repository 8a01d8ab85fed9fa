"""A store's mask comparisons that exclude lanes inside the tensor are a fact of the tile program
(`Compute.unclipped`, `AccFinish.unclipped`: compiler/lower/passes/store_masks.py), decided once for every
backend; the 910B printer reads it (read-modify-write, row-by-row stores, L0C straight to GM or not)."""

import dataclasses

import pytest

from tdsl.backends.ascend910b.emit import emit_module as emit_910b
from tdsl.compiler.driver.api import load, loads
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.pipeline import lower_for
from tdsl.compiler.lower.tileir_text import expr_text

from catalog import EXAMPLES, KERNEL_SIZES

BACKENDS = ["triton", "tilelang", "ascend-950", "ascend-910b"]


def stores(program) -> dict:
    """stmt -> the `unclipped` comparisons of its stores, as text."""
    out = {}
    for k in program.kernels:
        for op in T.walk_ops(k.body):
            if isinstance(op, (T.Compute, T.AccFinish)) and op.store:
                assert op.unclipped is not None, f"{op.stmt}: not marked"
                out.setdefault(op.stmt, set()).update(expr_text(a) for a in op.unclipped)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_causal_mask_is_inside_the_tensor_and_a_ragged_edge_is_not(backend):
    """attention at L = 70 with 32/64 tiles: P's tiles reach past row 70 (clipped) and above the diagonal
    (inside P: kept as they are); m, l and O only past the tensor's edge."""
    sched = load(EXAMPLES / "attention.tdsl", sizes=KERNEL_SIZES["attention"]).schedule("unfused")
    marked = stores(lower_for(sched, backend))
    assert marked["P"] == {"(i >= j)"}
    assert all(not atoms for stmt, atoms in marked.items() if stmt not in ("P", "S")), marked


TRIANGLE = """
const N = 70
kernel lower_part(A: f32[N, N]) -> (C: f32[N, N]) {
  C[i, j : j <= i] = A[i, j] * 2.0
}
schedule tiled {
  io, jo, ii, jj = tile(C.i, C.j, 32, 32)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""

SQUARE = TRIANGLE.replace(" : j <= i", "")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_domain_inside_the_tensor_is_unclipped_and_the_tensor_edge_is_not(backend):
    tri = stores(lower_for(loads(TRIANGLE).schedule("tiled"), backend))
    assert tri == {"C": {"(i >= j)"}}, tri
    square = stores(lower_for(loads(SQUARE).schedule("tiled"), backend))
    assert square == {"C": set()}, square  # i < 70, j < 70: a clipped copy stores exactly these lanes


def test_the_910b_printer_reads_the_fact():
    """The same program printed with the triangle's comparison dropped from `unclipped`: the read-modify-write
    goes (so the printer does not decide it again from the mask)."""
    program = lower_for(loads(TRIANGLE).schedule("tiled"), "ascend-910b")
    text = emit_910b(program)
    assert "as it is in GM" in text  # lanes above the diagonal keep their GM values

    def forget(op):
        return dataclasses.replace(op, unclipped=()) if isinstance(op, T.Compute) else op

    forgot = dataclasses.replace(program, kernels=[dataclasses.replace(k, body=T.map_ops(k.body, forget))
                                                   for k in program.kernels])
    assert "as it is in GM" not in emit_910b(forgot)


def test_a_part_that_is_not_an_affine_comparison_counts_as_unclipped():
    """A disjunction (overlapped tiles) or a comparison of a division of indices is not known to be the
    tensor's bounds: kept, so a backend that stores whole regions keeps those lanes too."""
    from tdsl.compiler.lower.passes.store_masks import unclipped_atoms

    i, j, n = T.Var("i"), T.Var("j"), T.Const(70)
    bound = T.Bin("<", i, n)
    either = T.Bin("or", T.Bin("<", j, i), T.Bin("==", j, T.Const(0)))
    parity = T.Bin("==", T.Bin("%", j, T.Const(2)), T.Const(0))
    tile = T.Tile(axes=[T.Axis("i", T.Const(0), 128), T.Axis("j", T.Const(0), 128)], scalars={},
                  mask=T.Bin("and", T.Bin("and", bound, either), parity))
    assert unclipped_atoms(tile, ("i", "j"), [70, 70]) == (either, parity)
    assert unclipped_atoms(tile, ("i", "j"), [None, 70]) == (bound, either, parity)  # a run-time extent
