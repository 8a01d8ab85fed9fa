"""Scores that are -inf, fused with `online(m)`: a row whose first key block holds only -inf terms has a running
maximum of -inf there, and exp((S - m)·c) would be exp(-inf - (-inf)) = NaN where the complete maximum gives 0.
An exponential reads a `combine online` maximum as 0 where it is -inf (compiler/model/online.py
`mark_exponent_reads`), in program order and in every kernel, so the fused kernels compute the program's values
(probe of the 25th session: with the mask in an input, every row of the fused kernels came out NaN).

Each kernel is run against the reference interpreter in program order: Triton under its interpreter, the two
Ascend modules in their NumPy models; rows with no finite score at all are NaN in all of them (O = 0 / 0)."""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.cli import _run_in_ascend_model, _run_on_nvidia
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.driver.testing import assert_legal
from tdsl.compiler.reference.interpreter import interpret

L, D = 13, 8
FLASH = """
schedule flash {
  online(m)
  qo, qi = split(l.i, 4)
  ko, kk = split(l.j, 4)
  reorder(l, qo, ko, qi, kk)
  compute_at(E, l.ko)
  reverse_compute_at(U, l.ko)
  compute_at(m, l.ko)
  compute_at(S, l.ko)
  compute_at(T, l.ko)
  reverse_compute_at(O, l.qo)
}
"""
ATTENTION = """
  m[i] = max(j) S[i, j] combine online
  E[i, j] = exp((S[i, j] - m[i]) * scale)
  l[i] = sum(j) E[i, j] accum f32
  U[i, c] = sum(j) E[i, j] * V[j, c] accum f32
  O[i, c] = U[i, c] / l[i]
}
"""
# an additive mask held in an input: -inf where a query may not see a key
INPUT_MASK = f"""const L = {L}, D = {D}
const scale = 0.35
kernel attn(Q: bf16[L, D], K: bf16[L, D], V: bf16[L, D], Mk: f32[L, L]) -> (O: f32[L, D]) {{
  T[i, j] = sum(d) Q[i, d] * K[j, d] accum f32
  S[i, j] = T[i, j] + Mk[i, j]
""" + ATTENTION + FLASH
# a sliding window of 4 keys written as -inf scores (the program's own -inf; refused by a rule before the fix)
WINDOW = f"""const L = {L}, D = {D}, W = 4
const scale = 0.35
kernel attn(Q: bf16[L, D], K: bf16[L, D], V: bf16[L, D]) -> (O: f32[L, D]) {{
  T[i, j : j <= i and j > i - W] = sum(d) Q[i, d] * K[j, d] accum f32
  S[i, j : j <= i] = where(j > i - W, T[i, j], -inf)
  m[i] = max(j : j <= i) S[i, j] combine online
  E[i, j : j <= i] = exp((S[i, j] - m[i]) * scale)
  l[i] = sum(j : j <= i) E[i, j] accum f32
  U[i, c] = sum(j : j <= i) E[i, j] * V[j, c] accum f32
  O[i, c] = U[i, c] / l[i]
}}
""" + FLASH

TARGETS = [("nvidia", "triton"), ("ascend-950", None), ("ascend-910b", None)]


def _inputs(seed: int = 0, mask: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    inputs = {name: rng.standard_normal((L, D)).astype(np.float32) for name in ("Q", "K", "V")}
    if mask:
        mk = np.zeros((L, L), np.float32)
        mk[:, :6] = -np.inf  # every row's first key block and a half: -inf
        mk[3, :] = -np.inf  # row 3 sees no key at all
        inputs["Mk"] = mk
    return inputs


def _program_order(program, inputs: dict) -> np.ndarray:
    original = program.schedule(None)
    return interpret(original.model, original.time_map(), inputs)["O"]


def _assert_same(reference: np.ndarray, got: np.ndarray, nan_rows: list) -> None:
    assert np.isnan(got).any(axis=1).nonzero()[0].tolist() == nan_rows
    finite = [r for r in range(L) if r not in nan_rows]
    np.testing.assert_allclose(got[finite], reference[finite], rtol=1e-5, atol=1e-6)


def test_the_interpreter_agrees_in_program_order_and_after_online():
    program = loads(INPUT_MASK, "mask.tdsl")
    inputs = _inputs()
    reference = _program_order(program, inputs)
    _assert_same(reference, reference, [3])  # only the row with no key is NaN
    fused = program.schedule("flash")
    _assert_same(reference, interpret(fused.model, fused.time_map(), inputs)["O"], [3])


def test_a_row_with_no_finite_term_sums_to_0_not_nan():
    """In program order too: its exponentials read the maximum -inf as 0, exp(-inf - 0) = 0."""
    program = loads(INPUT_MASK, "mask.tdsl")
    original = program.schedule(None)
    results = interpret(original.model, original.time_map(), _inputs())
    assert results["m"][3] == -np.inf and results["l"][3] == 0.0 and np.isfinite(results["l"]).all()


@pytest.mark.parametrize("target, backend", TARGETS, ids=[t for t, _ in TARGETS])
def test_an_input_mask_of_minus_infinity_in_the_fused_kernel(target, backend):
    program = loads(INPUT_MASK, "mask.tdsl")
    inputs = _inputs()
    text = generate(program, "flash", target=target, backend=backend)
    model = program.schedule(None).model
    if target == "nvidia":
        got, _ = _run_on_nvidia(text, model, inputs, backend)
    else:
        got = _run_in_ascend_model(text, model, inputs, target)
    _assert_same(_program_order(program, inputs), np.asarray(got["O"]), [3])


def test_a_window_written_as_minus_infinity_is_legal_and_exact():
    assert_legal(loads(WINDOW, "window.tdsl"), "flash")
    program = loads(WINDOW, "window.tdsl")
    inputs = _inputs(seed=3, mask=False)
    reference = _program_order(program, inputs)
    text = generate(program, "flash", target="nvidia", backend="triton")
    got, _ = _run_on_nvidia(text, program.schedule(None).model, inputs, "triton")
    _assert_same(reference, np.asarray(got["O"]), [])


# The exponent split over a temporary that compute_inline removes before online(m): the mark is found with the
# temporaries substituted, so the read of m in the temporary carries it (probe of the 26th session: the fused
# kernels were NaN on every row whose first key block is -inf).
SPLIT_FORMS = {
    "difference": ("  Z[i, j : j <= i] = S[i, j] - m[i]\n  E[i, j : j <= i] = exp(Z[i, j] * scale)\n", "Z"),
    "copy": ("  mm[i] = m[i]\n  E[i, j : j <= i] = exp((S[i, j] - mm[i]) * scale)\n", "mm"),
    "scaled-once-per-row": ("  nmc[i] = -(m[i] * 0.5)\n  E[i, j : j <= i] = exp2(fma(S[i, j], 0.5, nmc[i]))\n", "nmc"),
}


@pytest.mark.parametrize("form", list(SPLIT_FORMS))
def test_an_exponent_split_over_a_temporary_inlined_before_online(form):
    lines, temp = SPLIT_FORMS[form]
    plain = "  E[i, j : j <= i] = exp((S[i, j] - m[i]) * scale)\n"
    assert plain in WINDOW
    text = WINDOW.replace(plain, lines).replace("schedule flash {\n", f"schedule flash {{\n  compute_inline({temp})\n")
    program = loads(text, "split.tdsl")
    inputs = _inputs(seed=3, mask=False)
    reference = _program_order(program, inputs)
    fused = program.schedule("flash")
    _assert_same(reference, interpret(fused.model, fused.time_map(), inputs)["O"], [])
    got, _ = _run_on_nvidia(generate(program, "flash", target="nvidia", backend="triton"),
                            program.schedule(None).model, inputs, "triton")
    _assert_same(reference, np.asarray(got["O"]), [])


# A prefix-LM mask (every query sees the first Pf keys and those up to its own) as a nested where of -inf: a
# mask no domain condition can write (no `or`), fused with online(m).  QKᵀ stays in its own kernel: compute_at
# refuses to place the scores no reader takes (T at j >= Pf, j > i) under the key loop.
PREFIX = f"""const L = {L}, D = {D}, Pf = 5
const scale = 0.35
kernel attn(Q: bf16[L, D], K: bf16[L, D], V: bf16[L, D]) -> (O: f32[L, D]) {{
  T[i, j] = sum(d) Q[i, d] * K[j, d] accum f32
  S[i, j] = where(j < Pf, T[i, j], where(j <= i, T[i, j], -inf))
""" + ATTENTION + FLASH.replace("  compute_at(T, l.ko)\n", "")


@pytest.mark.parametrize("target, backend", TARGETS, ids=[t for t, _ in TARGETS])
def test_a_prefix_lm_mask_as_a_nested_where(target, backend):
    program = loads(PREFIX, "prefix.tdsl")
    inputs = _inputs(seed=5, mask=False)
    reference = _program_order(program, inputs)
    fused = program.schedule("flash")
    _assert_same(reference, interpret(fused.model, fused.time_map(), inputs)["O"], [])
    text = generate(program, "flash", target=target, backend=backend)
    model = program.schedule(None).model
    got = (_run_on_nvidia(text, model, inputs, backend)[0] if target == "nvidia"
           else _run_in_ascend_model(text, model, inputs, target))
    _assert_same(reference, np.asarray(got["O"]), [])
