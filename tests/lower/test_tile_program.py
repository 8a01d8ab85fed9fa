"""The tile program is the contract between the middle end and the printers (compiler/lower/pipeline.py): its text,
for every legal example schedule and program order, on every backend, is a golden file.  A change in what the
middle end decides -- a tile, a mask, a buffer, a product's unit, an operand copy -- shows up here once.

`pytest tests/lower --update-golden` rewrites the files; review them with `git diff tests/golden/test_tile_program`.
"""

import pytest

from tdsl.compiler.driver.api import load, loads
from tdsl.compiler.lower.pipeline import BACKENDS, lower_for
from tdsl.compiler.analysis.placement import MATRIX, VECTOR
from tdsl.compiler.lower.build import lower
from tdsl.compiler.lower.tileir import AccUpdate, Dot, kernel_buffers, walk_ops
from tdsl.compiler.lower.tileir_text import program_text
from tdsl.frontend.diagnostics import TdslError

from catalog import CHAPTER_SIZES, EXAMPLES, KERNEL_SIZES, LEGAL, PROGRAM_ORDER

CASES = LEGAL + PROGRAM_ORDER
BACKEND_NAMES = sorted(set(BACKENDS.values()))


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("sizes", ["chapter", "ragged"])
@pytest.mark.parametrize("example,name", CASES, ids=[f"{e}-{n}" for e, n in CASES])
def test_tile_program_golden(example, name, sizes, backend, golden):
    """At the chapter's sizes and at the ragged sizes the kernels are run at (partial tiles: masks)."""
    sched = load(EXAMPLES / f"{example}.tdsl", sizes=KERNEL_SIZES[example] if sizes == "ragged" else CHAPTER_SIZES.get(example)).schedule(name)
    try:
        text = program_text(lower_for(sched, backend))
    except TdslError as err:  # a refusal is part of the contract too
        text = f"refused: {str(err).splitlines()[0]}\n"
    golden(text)


def test_lowering_is_target_neutral_and_passes_decide_units():
    """`lower` leaves every product's unit open; the backend passes decide it, each by its own matrix unit."""
    sched = load(EXAMPLES / "attention.tdsl").schedule("unfused")
    neutral = [op.partial for k in lower(sched).kernels for op in walk_ops(k.body)
               if isinstance(op, AccUpdate) and isinstance(op.partial, Dot)]
    assert neutral and all(d.unit == "" for d in neutral)
    units = {}
    for backend in BACKEND_NAMES:
        program = lower_for(sched, backend)
        units[backend] = [op.partial.unit for k in program.kernels for op in walk_ops(k.body)
                          if isinstance(op, AccUpdate) and isinstance(op.partial, Dot)]
    # S = Q K^T (bf16) runs on every matrix unit; U = P V multiplies f32 P by bf16 V: exact f32 on the vector unit
    assert all(u == [MATRIX, VECTOR] for u in units.values()), units


RENAMED_K = """
const M = 256, N = 256, K = 256
kernel gemm(A: bf16[M, K], B: bf16[K, N]) -> (C: f32[M, N]) {
  C[i, j] = sum(k) A[i, k] * B[k, j] accum f32
}
schedule gpu {
  io, jo, ii, jj = tile(C.i, C.j, 64, 64)
  k, kk = split(C.k, 32)
  reorder(C, io, jo, k, ii, jj, kk)
  cache_read(A, shared, at=C.k)
  cache_read(B, shared, at=C.k)
  pipeline(C.k, stages=2)
  bind(C.io, grid.x)
  bind(C.jo, grid.y)
}
"""


@pytest.mark.parametrize("backend", ["tilelang", "ascend-950", "ascend-910b"])
def test_buffers_belong_to_their_loop_by_identity_not_by_name(backend):
    """The outer k loop is named `k`, like the iterator, so the tile program calls its variable `l_k`; the
    cache_read buffers still belong to it (they used to be joined by name, and were lost)."""
    sched = loads(RENAMED_K, "renamed_k.tdsl").schedule("gpu")
    program = lower_for(sched, backend)
    (kernel,) = program.kernels
    loop = next(op for op in walk_ops(kernel.body) if hasattr(op, "buffers"))
    assert loop.var == "l_k"
    assert sorted((b.tensor, b.kind, b.loop, b.shape, b.stages) for b in loop.buffers) == [
        ("A", "read", "k", (64, 32), 2), ("B", "read", "k", (32, 64), 2)]
    update = next(op for op in walk_ops(kernel.body) if isinstance(op, AccUpdate))
    assert [(s.tensor, s.cache is not None, s.stages, s.loop) for s in update.staged] == [
        ("A", True, 2, "l_k"), ("B", True, 2, "l_k")]
    assert {b.tensor for b in kernel_buffers(kernel)} == {"A", "B"}


def test_generated_sources_name_the_cache_reads_of_a_renamed_loop():
    from tdsl.compiler.driver.generate import generate

    prog = loads(RENAMED_K, "renamed_k.tdsl")
    for target, backend in [("nvidia", "tilelang"), ("ascend-950", None), ("ascend-910b", None)]:
        text = generate(prog, "gpu", target=target, backend=backend)
        assert "cache_read A -> shared at k" in text, target
        assert "no cache_read in the schedule" not in text and "staged for the cube" not in text, target


def test_a_printer_given_an_unprepared_program_reports_an_internal_error_not_a_refusal():
    """Printing a program whose products have no unit is a bug of the caller inside tdsl, not a user's mistake."""
    from tdsl.backends.triton import emit_module
    from tdsl.compiler.errors import InternalError

    program = lower(load(EXAMPLES / "gemm_silu.tdsl").schedule("fused"))
    with pytest.raises(InternalError, match="has no unit"):
        emit_module(program)
    assert not issubclass(InternalError, TdslError)


def test_the_cli_exits_3_on_an_internal_error(monkeypatch, capsys, tmp_path):
    from tdsl.compiler.driver import cli
    from tdsl.compiler.driver import generate as codegen
    from tdsl.compiler.errors import InternalError

    def broken(*args, **kwargs):
        raise InternalError("an invariant broke")

    monkeypatch.setattr(codegen, "lower_for", broken)
    code = cli.main(["compile", str(EXAMPLES / "gemm_silu.tdsl"), "--schedule", "fused", "--target", "nvidia",
                     "-o", str(tmp_path / "out.py")])
    err = capsys.readouterr().err
    assert code == 3
    assert "tdsl: internal error: an invariant broke" in err and "please report" in err


def test_index_arithmetic_past_32_bits_is_refused_with_the_expression():
    """Huge tile factors make index coefficients past int32, which every backend computes indices in."""
    from tdsl.compiler.errors import BackendError

    prog = load(EXAMPLES / "gemm.tdsl", sizes={"M": 5, "N": 1, "K": 1})
    sched = prog.schedule()
    sched.tile("C.i", "C.j", "C.k", 2147483647, 16, 128, names=["a", "b", "c", "d", "e", "f"])
    sched.tile("C.d", "C.e", 4, 16)
    for backend in BACKEND_NAMES:
        with pytest.raises(BackendError, match=r"may reach \d+, past 32-bit integers.*smaller split or tile factors"):
            lower_for(sched, backend)
    fine = load(EXAMPLES / "gemm.tdsl").schedule("gpu")  # the chapter's sizes: 4096^2 elements, well inside
    assert lower_for(fine, "triton").kernels


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
def test_a_statement_tensor_past_32_bits_is_refused_only_where_a_kernel_keeps_it(backend):
    """Parameters past 2^31 - 1 elements are refused when the program is built (tests/model); a statement's tensor
    only where a kernel keeps it in global memory: attention's scores at B = 8, H = 32, L = 4096 (2^32 elements)
    are refused unfused and fine in the flash schedule, which never stores them."""
    from tdsl.compiler.errors import BackendError

    prog = load(EXAMPLES / "mha.tdsl", sizes={"B": 8, "H": 32, "L": 4096})
    with pytest.raises(BackendError, match=r"keeps S in global memory, 4294967296 elements \(8 x 32 x 4096 x 4096\); "
                                           r"generated kernels address at most 2147483647 .*fuse S into its readers"):
        lower_for(prog.schedule("unfused"), backend)
    assert len(lower_for(prog.schedule("flash"), backend).kernels) == 1


def test_a_reduction_read_after_compute_inline_stays_in_registers():
    # compute_inline copies (and re-indexes) the nodes it substitutes: the reader's read of s must still be
    # found, so that Y takes s from its register tile instead of storing it and loading it back (fuzz seed 5424)
    text = (EXAMPLES / "softmax.tdsl").read_text() + (
        "\nschedule inlined_normalised_at_the_sum {\n  compute_inline(e)\n  reverse_compute_at(Y, s.i)\n}\n")
    program = lower(loads(text, "softmax.tdsl", sizes={"M": 64, "N": 256}).schedule("inlined_normalised_at_the_sum"))
    assert "s" not in {t.name for t in program.temps}
