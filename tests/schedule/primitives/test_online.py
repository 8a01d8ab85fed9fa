"""online: readers of a row maximum use its running value, the sums built from them rescaled
(compiler/schedule/primitives/online.py, compiler/model/online.py, compiler/legality/online.py).

The rules' own cases are in tests/illegal/ (online-policy, online-rescale, online-order) and their pages in
docs/rules/; here: what the step finds in a program, that it composes with the other steps in either order, that
it replays, and that the interpreter's rescaled sums are what they should be.
"""

import math

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.errors import OnlineRescale, ScheduleError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.testing import assert_illegal, assert_legal

from primitive_helpers import assert_round_trip, tree_change

ATTENTION = """\
const L = 11, D = 4
const scale = 0.5

kernel attention(Q: bf16[L, D], K: bf16[L, D], V: bf16[L, D]) -> (O: bf16[L, D]) {
  S[i, j : j <= i] = sum(d) Q[i, d] * K[j, d] accum f32
  m[i] = max(j : j <= i) S[i, j] combine online
  P[i, j : j <= i] = exp((S[i, j] - m[i]) * scale)
  l[i] = sum(j : j <= i) P[i, j] accum f32
  U[i, c] = sum(j : j <= i) P[i, j] * V[j, c] accum f32
  O[i, c] = U[i, c] / l[i]
}
"""

FLASH = """
  qo, qi = split(l.i, 4)
  ko, kk = split(l.j, 4)
  reorder(l, qo, ko, qi, kk)
  compute_at(P, l.ko)
  reverse_compute_at(U, l.ko)
  compute_at(m, l.ko)
  compute_at(S, l.ko)
  reverse_compute_at(O, l.qo)
"""

SUMEXP = """\
const M = 2, N = 5

kernel sumexp(X: f32[M, N]) -> (s: f32[M]) {
  m[i] = max(j) X[i, j] combine online
  s[i] = sum(j) exp(X[i, j] - m[i]) accum f32
}
"""


def test_online_finds_the_exponential_and_the_sums():
    s = loads(ATTENTION).schedule()
    s.online("m")
    assert s.tree.online == ["m"]
    rescaled = {st.name: st.rescale for st in s.model.stmts if st.rescale is not None}
    assert set(rescaled) == {"l", "U"}
    assert {r.source for r in rescaled.values()} == {"P"} and {r.stat for r in rescaled.values()} == {"m"}
    assert {d.kind for d in s.deps if d.src == "m"} >= {"running", "final"}
    assert not any(d.kind == "flow" and d.src == "m" and d.dst == "P" for d in s.deps)


def test_online_alone_changes_no_bit():
    assert_legal(ATTENTION, "online(m)", run=True)


def test_flash_schedule_is_legal_and_within_the_bound():
    s = assert_legal(ATTENTION, "online(m)" + FLASH, run=True, seed=3)
    assert s.tree.online == ["m"]


def test_the_order_of_the_fusion_steps_matters():
    """m moved into the key loop while U still sums P after it: U's terms would go stale."""
    with pytest.raises(AssertionError, match="online-order"):
        assert_legal(ATTENTION, "online(m)" + FLASH.replace("  reverse_compute_at(U, l.ko)\n", ""))


@pytest.mark.parametrize("steps", ["online(m)\ncompute_inline(P)", "compute_inline(P)\nonline(m)",
                                   "compute_inline(P)\nonline(m)\njo, jj = split(l.j, 3)\ncompute_at(m, l.jo)"])
def test_composes_with_compute_inline_either_way(steps):
    s = assert_legal(ATTENTION, steps, run=True)
    assert {st.name for st in s.model.stmts if st.rescale is not None} == {"l", "U"}
    assert all(st.rescale.source is None for st in s.model.stmts if st.rescale is not None)


def test_tree_shows_the_running_maximum(golden):
    golden(tree_change(loads(SUMEXP).schedule(), lambda s: s.online("m")))


def test_trace_round_trip():
    s = loads(ATTENTION).schedule()
    s.online("m")
    s.split("l.i", 4, names=("qo", "qi"))
    assert str(s.trace).splitlines()[0] == "online(m)"
    assert_round_trip(ATTENTION, s)


def test_misuse():
    s = loads(ATTENTION).schedule()
    with pytest.raises(ScheduleError, match="not a max reduction"):
        s.online("l")
    s.online("m")
    with pytest.raises(ScheduleError, match="already a running maximum"):
        s.online("m")


def test_a_reader_that_cannot_be_rescaled_keeps_the_complete_maximum():
    """exp(X - m) / s reads m too: it is not rescaled, so it keeps its full dependence on m."""
    text = SUMEXP.replace("-> (s: f32[M])", "-> (s: f32[M], Y: f32[M, N])").replace(
        "accum f32\n}", "accum f32\n  Y[i, j] = exp(X[i, j] - m[i]) / s[i]\n}")
    s = loads(text).schedule()
    s.online("m")
    assert any(d.kind == "flow" and d.src == "m" and d.dst == "Y" for d in s.deps)
    normalised_only = """\
const M = 2, N = 5

kernel softmax(X: f32[M, N]) -> (Y: f32[M, N]) {
  m[i] = max(j) X[i, j] combine online
  Y[i, j] = exp(X[i, j] - m[i]) / 2.0
}
"""
    with pytest.raises(OnlineRescale, match="nothing sums Y"):
        loads(normalised_only).schedule().online("m")


def test_interpreter_rescales_exactly_as_the_kernel_would():
    """One row, blocks of 2: the one-pass sum is (e^(x0-m1) + e^(x1-m1)) * e^(m1-m2) + ..., each step in f32."""
    s = loads(SUMEXP).schedule()
    s.online("m")
    s.split("s.j", 2, names=("jo", "jj"))
    s.compute_at("m", "s.jo")
    x = np.array([[0.5, 1.0, 3.0, 2.0, 7.0], [1.0, 1.0, 1.0, 1.0, 1.0]], dtype=np.float32)
    got = interpret(s.model, s.time_map(), {"X": x})["s"]

    def f32exp(v):
        return np.float32(math.exp(float(np.float32(v))))

    acc, ref = np.float32(0), None
    for block in ((0, 1), (2, 3), (4,)):
        cur = np.float32(max(x[0, : block[-1] + 1]))
        if ref is not None and ref != cur:
            acc = np.float32(acc * f32exp(np.float32(ref - cur)))
        ref = cur
        for j in block:
            acc = np.float32(acc + f32exp(np.float32(x[0, j] - cur)))
    assert got[0] == acc
    assert got[1] == np.float32(5.0)


def test_random_inputs_agree_within_the_bound():
    s = loads(ATTENTION).schedule()
    s.online("m")
    inputs = random_inputs(s.model, 1)
    base = loads(ATTENTION).schedule()
    a = interpret(base.model, base.time_map(), inputs)["O"]
    b = interpret(s.model, s.time_map(), inputs)["O"]
    assert np.array_equal(a, b)  # online alone moves nothing


@pytest.mark.parametrize("backend", ["triton", "tilelang", "ascend-950", "ascend-910b"])
def test_a_maximum_complete_before_the_kernel_of_its_sums_needs_no_rescaling(backend):
    """online(m) with the statements left in program order: m is computed by an earlier kernel, complete before
    the sums' first term, so they are plain sums (the interpreter's rescaling never fires either); every backend
    generates it (probe J of the 25th session: refused on all four), and the kernels compute the program."""
    from tdsl.compiler.driver.cli import _run_in_ascend_model, _run_on_nvidia
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.lower.pipeline import lower_for
    from tdsl.compiler.verify import compare_outputs

    program = loads(ATTENTION + "schedule s {\n  online(m)\n}\n")
    lowered = lower_for(program.schedule("s"), backend)
    from tdsl.compiler.lower.tileir import walk_ops

    ops = [op for k in lowered.kernels for op in walk_ops(k.body)]
    assert not any(getattr(op, "follows", None) or getattr(op, "rescale", None) for op in ops)
    if backend == "tilelang":
        return  # runs on a GPU only
    model = program.schedule(None).model
    inputs = random_inputs(model, seed=6)
    target, name = ("nvidia", "triton") if backend == "triton" else (backend, None)
    text = generate(program, "s", target=target, backend=name)
    got = (_run_on_nvidia(text, model, inputs, "triton")[0] if backend == "triton"
           else _run_in_ascend_model(text, model, inputs, backend))
    reference = interpret(model, program.schedule(None).time_map(), inputs)
    assert all(c.ok for c in compare_outputs(model, reference, got).values())


LATE = FLASH + "  online(m)\n"  # the flash steps, then online


@pytest.mark.parametrize("backend", ["triton", "ascend-950", "ascend-910b"])
def test_online_after_m_is_placed_whole_in_the_first_key_block(backend):
    """compute_at(m, l.ko) before online(m) puts all of m in the first iteration of ko (P there needs it
    complete): m never runs beside the sums.  The Triton and 950 kernels read its accumulator, started afresh in
    every iteration, as -inf in the others and returned NaN everywhere (probe of the 26th session); the sums
    are plain and P reads the complete m."""
    from tdsl.compiler.driver.cli import _run_in_ascend_model, _run_on_nvidia
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.verify import compare_outputs

    program = loads(ATTENTION.replace("-> (O: bf16[L, D])", "-> (O: f32[L, D])") + "schedule late {" + LATE + "}\n")
    model = program.schedule(None).model
    inputs = random_inputs(model, seed=8)
    target, name = ("nvidia", "triton") if backend == "triton" else (backend, None)
    text = generate(program, "late", target=target, backend=name)
    assert "alpha" not in text  # no rescaling
    got = (_run_on_nvidia(text, model, inputs, "triton")[0] if backend == "triton"
           else _run_in_ascend_model(text, model, inputs, backend))
    reference = interpret(model, program.schedule(None).time_map(), inputs)
    assert all(c.ok for c in compare_outputs(model, reference, got).values())


# ---------------------------------------------------------------- derived exponentials (FlashAttention's rounding)

# l sums the f32 exponentials E; P rounds them to bf16 for the product only (examples/mha_fa.tdsl)
ATTENTION_FA = ATTENTION.replace(
    "  P[i, j : j <= i] = exp((S[i, j] - m[i]) * scale)\n  l[i] = sum(j : j <= i) P[i, j] accum f32\n",
    "  E[i, j : j <= i] = exp((S[i, j] - m[i]) * scale)\n  l[i] = sum(j : j <= i) E[i, j] accum f32\n"
    "  P[i, j : j <= i]: bf16 = E[i, j]\n")
FLASH_FA = FLASH.replace("  compute_at(P, l.ko)\n", "  compute_at(E, l.ko)\n  reverse_compute_at(P, l.ko)\n")


def test_a_rounding_of_the_exponential_is_rescaled_like_the_exponential():
    s = loads(ATTENTION_FA).schedule()
    s.online("m")
    chains = {st.name: st.rescale.chain for st in s.model.stmts if st.rescale is not None}
    assert chains == {"l": ("E",), "U": ("P", "E")}
    assert {st.rescale.exponential for st in s.model.stmts if st.rescale is not None} == {"E"}
    # P reads no maximum: only E's dependence on m becomes a running one
    assert any(d.kind == "running" and d.dst == "E" for d in s.deps)
    assert not any(d.src == "m" and d.dst == "P" for d in s.deps)


@pytest.mark.parametrize("seed", [0, 5])
def test_flash_with_a_derived_exponential_is_legal_and_within_the_bound(seed):
    assert_legal(ATTENTION_FA, "online(m)" + FLASH_FA, run=True, seed=seed)


def test_a_sum_of_the_rounding_left_after_the_key_loop_goes_stale():
    """E and P of a key block are made with the maximum as it is then; U adding P after m moved on is refused."""
    steps = "online(m)" + FLASH_FA.replace("  reverse_compute_at(U, l.ko)\n", "")
    err = assert_illegal(ATTENTION_FA, steps, "online-order", statements=["E", "m", "U"])
    assert "U would add a term of E after the running maximum m has moved on" in str(err)


@pytest.mark.parametrize("derived,why", [
    ("E[i, j] * E[i, j]", "not a sum linear in E"),  # not linear: a square of the exponential
    ("E[i, j] + 1.0", "not a sum linear in E"),  # not linear: the constant would be rescaled too
])
def test_a_derived_value_that_is_not_linear_in_the_exponential_is_refused(derived, why):
    text = ATTENTION_FA.replace("  P[i, j : j <= i]: bf16 = E[i, j]\n", f"  P[i, j : j <= i]: bf16 = {derived}\n")
    with pytest.raises(OnlineRescale, match=why):
        loads(text).schedule().online("m")


def test_a_derived_value_read_by_a_normalisation_is_refused():
    """Y = P / l is no sum (and nothing sums it): it would keep P made with a partial maximum for good."""
    text = ATTENTION_FA.replace("-> (O: bf16[L, D])", "-> (O: bf16[L, D], Y: f32[L, L])").replace(
        "  O[i, c] = U[i, c] / l[i]\n", "  O[i, c] = U[i, c] / l[i]\n  Y[i, j : j <= i] = P[i, j] / l[i]\n")
    with pytest.raises(OnlineRescale, match="P is read by Y, which is not a sum linear in P"):
        loads(text).schedule().online("m")


def test_the_policy_counterexample_rounds_through_the_derived_exponential():
    """Without `combine online` the step is refused with a row whose sum differs, computed as the program rounds:
    the counterexample's sum is one whose terms are the exponential's values rounded by each store on the way."""
    text = ATTENTION_FA.replace(" combine online", "")
    err = assert_illegal(text, "online(m)", "online-policy")
    assert "the sum l is" in str(err.counterexample)


def test_a_product_of_two_values_carrying_the_exponential_is_refused():
    """U = sum(j) P * P2 * V with P and P2 both roundings of E: the factor exp(S - m) appears squared, which one
    rescaling by exp(m_old - m_new) would not follow."""
    text = ATTENTION_FA.replace("  P[i, j : j <= i]: bf16 = E[i, j]\n",
                                "  P[i, j : j <= i]: bf16 = E[i, j]\n  R[i, j : j <= i]: f16 = E[i, j]\n").replace(
        "sum(j : j <= i) P[i, j] * V[j, c]", "sum(j : j <= i) P[i, j] * R[i, j] * V[j, c]")
    assert "R[i, j] * V[j, c]" in text
    with pytest.raises(OnlineRescale, match="U multiplies 2 values that carry exp"):
        loads(text).schedule().online("m")


# ---------------------------------------------------------------- FlashAttention's exponential: exp2 of one fma

C2 = "0.7213475204444817"  # scale 0.5 times log2(e)
EXP = "exp((S[i, j] - m[i]) * scale)"


@pytest.mark.parametrize("written", [
    f"exp2(fma(S[i, j], {C2}, -(m[i] * {C2})))",
    f"exp2(fma({C2}, S[i, j], -({C2} * m[i])))",
    f"exp2(S[i, j] * {C2} - m[i] * {C2})",
    f"exp2((S[i, j] - m[i]) * {C2})",
    "exp(S[i, j] * scale - scale * m[i])",
    "exp(fma(S[i, j], scale, -(m[i] * scale)))",
])
def test_the_exponential_may_be_written_as_flashattention_computes_it(written):
    """2^((S - m)·c), however the difference and the scaling are arranged, is a factor the sums can follow: the
    factor that rescales them is the exponential as written, S read as the old maximum and m as the new one."""
    text = ATTENTION_FA.replace(EXP, written)
    assert written in text
    s = loads(text).schedule()
    s.online("m")
    factors = {st.name: st.rescale.factor for st in s.model.stmts if st.rescale is not None}
    assert set(factors) == {"l", "U"} and {f.func for f in factors.values()} == {written.split("(")[0]}
    assert_legal(text, "online(m)" + FLASH_FA, run=True, seed=3)


@pytest.mark.parametrize("written", [
    f"exp2(fma(S[i, j], {C2}, -(m[i] * 0.5)))",  # two different constants: not a difference of S and m
    f"exp2(fma(S[i, j], {C2}, m[i] * {C2}))",  # S·c + m·c
    f"exp2(S[i, j] * {C2} - m[i] * -{C2})",  # a negative scale on m
    f"exp2(fma(S[i, j], -{C2}, -(m[i] * -{C2})))",  # c < 0: the maximum would be the smallest exponent
    f"exp2(S[i, j] * S[i, j] - m[i] * {C2})",  # not a constant scale
])
def test_an_exponent_that_is_not_a_scaled_difference_is_refused(written):
    text = ATTENTION_FA.replace(EXP, written)
    assert written in text
    with pytest.raises(OnlineRescale, match=r"does not read m only inside one factor"):
        loads(text).schedule().online("m")


def test_the_interpreter_rescales_with_exp2_of_the_fma_as_written():
    """One row, blocks of 2: s = sum 2^(fma(x, c, -(m·c))), rescaled by 2^(fma(m_old, c, -(m_new·c))), each f32."""
    from tdsl.compiler.reference.runtime import _exp2, _fma

    c = np.float32(1.4426950408889634)
    text = SUMEXP.replace("exp(X[i, j] - m[i])", f"exp2(fma(X[i, j], {float(c)!r}, -(m[i] * {float(c)!r})))")
    s = loads(text).schedule()
    s.online("m")
    s.split("s.j", 2, names=("jo", "jj"))
    s.compute_at("m", "s.jo")
    x = np.array([[0.5, 1.0, 3.0, 2.0, 7.0], [1.0, 1.0, 1.0, 1.0, 1.0]], dtype=np.float32)
    got = interpret(s.model, s.time_map(), {"X": x})["s"]
    acc, ref = np.float32(0), None
    for block in ((0, 1), (2, 3), (4,)):
        cur = np.float32(max(x[0, : block[-1] + 1]))
        if ref is not None and ref != cur:
            acc = np.float32(acc * _exp2(_fma(ref, c, -np.float32(cur * c))))
        ref = cur
        for j in block:
            acc = np.float32(acc + _exp2(_fma(x[0, j], c, -np.float32(cur * c))))
    assert got[0] == acc
    assert got[1] == np.float32(5.0)


def test_the_policy_counterexample_computes_exp2_of_the_fma():
    text = ATTENTION_FA.replace(" combine online", "").replace(EXP, f"exp2(fma(S[i, j], {C2}, -(m[i] * {C2})))")
    err = assert_illegal(text, "online(m)", "online-policy")
    assert "the sum l is" in str(err.counterexample) and "rescaled by exp2(fma(" in str(err.counterexample)


MASKED_BY_WHERE = """\
const L = 11, D = 4
const scale = 0.5

kernel attention(Q: bf16[L, D], K: bf16[L, D], V: bf16[L, D]) -> (O: f32[L, D]) {
  S[i, j] = sum(d) Q[i, d] * K[j, d] accum f32
  m[i] = max(j) S[i, j] combine online
  P[i, j] = EXPONENTIAL
  l[i] = sum(j) P[i, j] accum f32
  U[i, c] = sum(j) P[i, j] * V[j, c] accum f32
  O[i, c] = U[i, c] / l[i]
}
"""


@pytest.mark.parametrize("written", [
    "where(j <= i, exp((S[i, j] - m[i]) * scale), 0.0)",
    "where(j > i, 0.0, exp((S[i, j] - m[i]) * scale))",
    "where(S[i, j] > -4.0, exp((S[i, j] - m[i]) * scale), 0)",  # a condition on the scores, not on m
    "where(j <= i, exp((S[i, j] - m[i]) * scale), -0.0)",  # any constant 0 (probe of the 26th session)
    "where(j <= i, exp((S[i, j] - m[i]) * scale), 0.0 * scale)",
])
def test_an_exponential_kept_where_a_condition_holds_and_0_elsewhere_is_followed(written):
    """where(c, exp((S - m)·c), 0) is linear in the exponential (0 rescales to 0), so its sums can follow the
    running maximum (probe of the 25th session: refused as not linear)."""
    text = MASKED_BY_WHERE.replace("EXPONENTIAL", written)
    s = loads(text).schedule()
    s.online("m")
    assert {st.name for st in s.model.stmts if st.rescale is not None} == {"l", "U"}
    assert_legal(text, "online(m)" + FLASH, run=True, seed=2)
    # and the Triton kernel (under its interpreter) computes the program
    from tdsl.compiler.driver.cli import _run_on_nvidia
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.verify import compare_outputs

    program = loads(text + "schedule flash {\n  online(m)" + FLASH + "}\n")
    model = program.schedule(None).model
    inputs = random_inputs(model, seed=4)
    got, _ = _run_on_nvidia(generate(program, "flash", target="nvidia", backend="triton"), model, inputs, "triton")
    reference = interpret(model, program.schedule(None).time_map(), inputs)
    assert all(c.ok for c in compare_outputs(model, reference, got).values())


def test_a_condition_that_reads_the_maximum_is_not_linear_in_the_exponential():
    text = MASKED_BY_WHERE.replace("EXPONENTIAL", "where(S[i, j] > m[i] - 4.0, exp((S[i, j] - m[i]) * scale), 0.0)")
    with pytest.raises(OnlineRescale, match=r"does not read m only inside one factor"):
        loads(text).schedule().online("m")


def test_a_where_whose_other_branch_is_not_0_is_refused_saying_so():
    text = MASKED_BY_WHERE.replace("EXPONENTIAL", "where(j <= i, exp((S[i, j] - m[i]) * scale), 1e-30)")
    with pytest.raises(OnlineRescale, match=r"P is not linear in exp\(\(S - m\)·c\) \(a where around it must give 0 "
                                            r"in its other branch, on a condition that does not read m\)"):
        loads(text).schedule().online("m")


def test_a_temporary_holding_part_of_the_exponent_is_refused_saying_to_inline_it():
    text = MASKED_BY_WHERE.replace("  P[i, j] = EXPONENTIAL\n",
                                   "  Z[i, j] = S[i, j] - m[i]\n  P[i, j] = exp(Z[i, j] * scale)\n")
    with pytest.raises(OnlineRescale, match=r"Z does not read m only inside one factor exp\(\(S - m\)·c\) of its value "
                                            r"\(if Z is part of an exponent, compute_inline\(Z\) before online\(m\)\)"):
        loads(text).schedule().online("m")
    s = loads(text).schedule()
    s.compute_inline("Z")
    s.online("m")  # then it is one factor


@pytest.mark.parametrize("steps", ["rfactor(m.j, segments=3)\n  online(m)", "online(m)\n  rfactor(m.j, segments=3)"])
def test_a_maximum_split_into_partial_maxima_is_refused_in_the_programs_terms(steps):
    """Its terms become m_rf, which no exponential subtracts: the message says so and what to do, where it used to
    show exp((m_rf - m)·c), a form the program never wrote (probe of the 26th session)."""
    assert_illegal(SUMEXP, steps, "online-rescale",
                   match=["the terms of m are the partial maxima m_rf (an rfactor of m)",
                          "leave m whole (the sums that follow it may be rfactored)"])
