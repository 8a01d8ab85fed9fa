"""Sketch rules: which statements are grouped under which rule, and the steps a choice of knobs builds."""

import pytest

import tdsl
from catalog import EXAMPLES, ROOT
from tdsl.compiler.driver.api import loads
from tdsl.compiler.tune import space
from tdsl.compiler.tune.sketches import NoSketch, sketch
from tdsl.testing import assert_legal


def groups(path, **sizes):
    model = tdsl.load(path, sizes=sizes or None).model()
    return [(g.rule, g.root, sorted(g.members)) for g in sketch(model).groups]


def test_roles_of_the_chapter_examples():
    assert groups(ROOT / "benchmarks/programs/gemm_bf16.tdsl") == [("product", "C", ["C"])]
    assert groups(EXAMPLES / "gemm_silu.tdsl") == [("product", "C", ["C", "Y"])]  # SiLU: the epilogue
    assert groups(EXAMPLES / "swiglu_quant.tdsl") == [("elementwise", "Q", ["Q", "T", "Z"])]
    assert groups(EXAMPLES / "rmsnorm.tdsl") == [("rows", "Y", ["Y", "r", "ss"])]
    assert groups(EXAMPLES / "softmax.tdsl") == [("rows", "Y", ["Y", "e", "m", "s"])]
    # amax feeds the quantization and the epilogue: a kernel of its own; Aq may be inlined into the product
    assert groups(EXAMPLES / "quant_gemm.tdsl") == [("single", "amax", ["amax"]), ("product", "P", ["Aq", "Out", "P"])]


def test_product_knobs_are_powers_of_two_within_the_padded_extent():
    model = tdsl.load(EXAMPLES / "gemm_silu.tdsl", sizes={"M": 40, "N": 300, "K": 20}).model()
    params = {p.name: p.values for p in sketch(model).params}
    assert params["C.BM"] == (16, 32, 64)  # 40 pads to 64
    assert params["C.BN"] == (16, 32, 64, 128, 256)
    assert params["C.BK"] == (16, 32)
    assert params["C.epilogue"] == ("fused", "separate")
    # the epilogue's own tile exists only when it runs as a kernel of its own
    assert dict((p.name, p.when) for p in sketch(model).params)["C.epilogue_TN"] == ("C.epilogue", "separate")


def test_a_choice_builds_the_steps_a_person_writes():
    model = tdsl.load(EXAMPLES / "gemm_silu.tdsl").model()
    sk = sketch(model)
    choice = {"C.BM": 128, "C.BN": 256, "C.BK": 64, "C.stages": 3, "C.warps": 8, "C.grid": "ij", "C.group": 8,
              "C.epilogue": "fused"}
    assert [str(s) for s in sk.steps(choice)] == [
        "io, jo, ii, ji = tile(C.i, C.j, 128, 256)",
        "ko, ki = split(C.k, 64)",
        "reorder(C, io, jo, ko, ii, ji, ki)",
        "reverse_compute_at(Y, C.jo)",
        "cache_read(A, shared, at=C.ko)",
        "cache_read(W, shared, at=C.ko)",
        "cache_write(C, register, at=C.jo)",
        "pipeline(C.ko, stages=3)",
        "bind(C.io, grid.x)",
        "bind(C.jo, grid.y)",
        "launch(C, warps=8, group=8)",
    ]


def test_space_size_counts_conditional_knobs_per_branch():
    # ragged sizes: the same knobs and branches as at the example's, in 234,240 choices instead of 1.9 million
    model = tdsl.load(EXAMPLES / "gemm_silu.tdsl", sizes={"M": 70, "N": 65, "K": 33}).model()
    sk = sketch(model)
    choices = list(space.enumerate_all(sk))
    assert sk.size() == len(choices)  # fused: 1, separate: its tile knobs
    keys = [space.key(c) for c in choices]
    assert len(keys) == len(set(keys))


def test_loop_names_never_collide_with_the_programs_iterators():
    # iterators named like the names the sketch would give its loops (io, jo, ...)
    text = """const M = 40, N = 24, K = 16
kernel g(A: bf16[M, K], W: bf16[K, N]) -> (C: bf16[M, N]) {
  C[io, jo] = sum(ko) A[io, ko] * W[ko, jo] accum f32
}
"""
    model = loads(text).model()
    sk = sketch(model)
    choice = space.draw(sk, __import__("random").Random(0))
    steps = [str(s) for s in sk.steps(choice)]
    assert steps[0].startswith("ioo, joo, ioi, joi = tile(C.io, C.jo,"), steps
    sched = loads(text).schedule()
    from tdsl.compiler.schedule.schedule import Trace

    Trace(sk.steps(choice)).replay(sched)  # every step accepted


@pytest.mark.parametrize("text", [
    # sizes named like the loops the sketches make (io, jo, ko, ...): a split naming its new loop after a size is
    # refused, which refused every candidate of these programs
    """const io = 40, jo = 24, ko = 16
kernel g(A: bf16[io, ko], W: bf16[ko, jo]) -> (C: bf16[io, jo]) {
  C[i, j] = sum(k) A[i, k] * W[k, j] accum f32
}
""",
    """const jo = 70, ji = 8, ii = 4
kernel s(X: f32[ii, jo]) -> (Y: f32[ii, jo]) {
  Y[i, j] = X[i, j] * 2.0
}
""",
    """const jo = 70, io = 4, ii = 2
kernel r(X: f32[io, jo]) -> (Y: f32[io, jo]) {
  m[i] = max(j) X[i, j]
  E[i, j] = exp(X[i, j] - m[i])
  l[i] = sum(j) E[i, j] accum f32
  Y[i, j] = E[i, j] / l[i]
}
""",
])
def test_loop_names_never_collide_with_the_programs_sizes(text):
    from tdsl.compiler.schedule.schedule import Trace

    sk = sketch(loads(text).model())
    for seed in range(4):
        Trace(sk.steps(space.draw(sk, __import__("random").Random(seed)))).replay(loads(text).schedule())


@pytest.mark.parametrize("text, says", [
    ("const M = 8\nkernel r(X: f32[M]) -> (Y: f32[M]) {\n  Y[i] = where(i == 0, X[i], Y[i - 1] + X[i])\n}\n",
     "reads its own tensor"),
    ("const T = 3, M = 8\nkernel s(X: f32[M]) -> (Y: f32[M]) {\n  for t < T {\n    P[t, i]: f32 = X[i] * 2.0\n  }\n"
     "  Y[i] = P[T - 1, i]\n}\n", "'for' block"),
])
def test_forms_without_a_rule_are_named(text, says):
    with pytest.raises(NoSketch, match=says):
        sketch(loads(text).model())


def test_rows_knobs_rows_per_program_and_segments():
    model = tdsl.load(EXAMPLES / "rmsnorm.tdsl").model()
    sk = sketch(model)
    params = {p.name: p.values for p in sk.params}
    assert params["Y.rows"] == (1, 2, 4, 8, 16) and params["Y.segment"] == ("whole", 512, 1024, 2048)
    choice = {"Y.rows": 4, "Y.rows_at": "block", "Y.segment": 1024, "Y.warps": 8}
    assert [str(s) for s in sk.steps(choice)] == [
        "io, ii = split(Y.i, 4)",
        "compute_at(r, Y.io)",
        "compute_at(ss, Y.io)",
        "jo, ji = split(Y.j, 1024)",
        "bind(Y.io, grid.x)",
        "launch(Y, warps=8)",
    ]
    one_row = {"Y.rows": 1, "Y.segment": "whole", "Y.warps": 4}  # the chapter's row_per_program
    assert [str(s) for s in sk.steps(one_row)] == [
        "compute_at(r, Y.i)", "compute_at(ss, Y.i)", "bind(Y.i, grid.x)", "launch(Y, warps=4)"]


def test_attention_with_an_online_maximum_gets_the_flash_rule():
    model = tdsl.load(EXAMPLES / "mha.tdsl", sizes={"L": 1000}).model()
    sk = sketch(model)
    assert [(g.rule, g.root, g.members) for g in sk.groups] == [("flash", "l", ["S", "m", "P", "l", "U", "O"])]
    steps = [str(s) for s in sk.steps({"l.BQ": 128, "l.BK": 64, "l.warps": 8, "l.stages": 3})]
    assert steps[:5] == ["online(m)", "bh = fuse(l.b, l.h)", "io, ii = split(l.i, 128)", "jo, ji = split(l.j, 64)",
                         "reorder(l, bh, io, jo, ii, ji)"]
    assert steps[-2:] == ["launch(l, warps=8)", "pipeline(l.jo, stages=3)"]
    # without the declared policy online(m) would be illegal: no flash rule, and its batched products have none
    plain = (EXAMPLES / "mha.tdsl").read_text().replace(" combine online", "")
    with pytest.raises(NoSketch, match="batched matrix product"):
        sketch(loads(plain, sizes={"L": 1000}).model())


def test_attention_with_flashattentions_rounding_gets_the_flash_rule_with_the_rounding_in_the_key_loop():
    """mha_fa.tdsl: l sums the f32 exponentials E, P = bf16(E) only feeds the product; P moves into the key loop
    after E (a derived exponential), and the candidates are legal."""
    model = tdsl.load(EXAMPLES / "mha_fa.tdsl", sizes={"L": 300}).model()
    sk = sketch(model)
    assert [(g.rule, g.members) for g in sk.groups] == [("flash", ["S", "m", "E", "P", "l", "U", "O"])]
    config = {"l.BQ": 64, "l.BK": 64, "l.warps": 4, "l.stages": 2}
    steps = [str(s) for s in sk.steps(config)]
    assert steps.index("compute_at(E, l.jo)") < steps.index("reverse_compute_at(P, l.jo)") \
        < steps.index("reverse_compute_at(U, l.jo)")
    assert_legal(tdsl.load(EXAMPLES / "mha_fa.tdsl", sizes={"L": 300}), "\n".join(steps))


def test_8_bit_products_get_no_k_step_too_short_for_the_matrix_unit():
    model = tdsl.load(EXAMPLES / "quant_gemm.tdsl").model()
    params = {p.name: p.values for p in sketch(model).params}
    assert params["P.BK"] == (32, 64, 128)  # E4M3 operands: wgmma takes k in steps of 32 (placement.smallest_dot_tile)
    model = tdsl.load(EXAMPLES / "gemm_silu.tdsl").model()
    assert {p.name: p.values for p in sketch(model).params}["C.BK"] == (16, 32, 64, 128)


def test_a_switch_that_flips_brings_its_new_knobs_at_each_of_their_values():
    """Flipping the epilogue to a kernel of its own: the move with the epilogue tile at its first values, and with
    each of its knobs in turn at every other value; every neighbour builds (no knob left unset)."""
    model = tdsl.load(EXAMPLES / "gemm_silu.tdsl", sizes={"M": 40, "N": 300, "K": 20}).model()
    sk = sketch(model)
    params = {p.name: p for p in sk.params}
    fused = {name: p.values[0] for name, p in params.items() if p.when is None}
    fused["C.epilogue"] = "fused"
    flips = [n for n in space.neighbours(sk, fused) if n["C.epilogue"] == "separate"]
    new = [p for p in sk.params if p.when == ("C.epilogue", "separate")]
    assert new and len(flips) == 1 + sum(len(p.values) - 1 for p in new)
    for q in new:
        assert {n[q.name] for n in flips} == set(q.values)
    for n in space.neighbours(sk, fused):
        sk.steps(n)  # raises on a knob left unset


def test_an_operand_read_twice_by_a_product_is_inlined_or_tiled_once():
    """covariance's `S[i, j] = sum(k) D[k, i] * D[k, j]`: D is both operands; it was inlined (or tiled) twice, so
    every candidate was refused (probe R, 27th session)."""
    model = tdsl.load(ROOT / "benchmarks/polybench/datamining/covariance.tdsl", sizes={"M": 5, "N": 7}).model()
    sk = sketch(model)
    product = next(g for g in sk.groups if g.rule == "product")
    assert product.members.count("D") == 1
    for value in ("inlined", "kernels"):
        choice = {p.name: (value if p.name.endswith(".operands") else p.values[0]) for p in sk.params}
        steps = [str(s) for s in product.build(choice)]
        assert sum(s.startswith("compute_inline(D") for s in steps) == (value == "inlined")
