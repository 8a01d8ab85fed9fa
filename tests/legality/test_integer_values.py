"""Integer values of the iterators and the dtype grids that hold them (compiler/legality/integers.py).

`compute_inline(T, round=false)` of `T[i]: f8e4m3 = i` is exact while i < 17 (f8e4m3 holds the integers up to
16) and changes the result from i = 17 on, at that instance.  The analysis is checked against brute force: every
integer value the interpreter computes, rounded to every dtype.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.legality import integers
from tdsl.compiler.legality.grids import value_grids
from tdsl.compiler.legality.integers import integer_counterexample, integer_grids, integer_range, iterator_ranges
from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.reference.interpreter import interpret
from tdsl.testing import assert_illegal, assert_legal

DTYPES = ("f8e4m3", "bf16", "f16", "f32")


def run(state_or_schedule, inputs: dict) -> dict:
    """Outputs of a Schedule, or of the State a rejected step carries (`err.rejected`), in the interpreter."""
    model, tree = state_or_schedule.model, state_or_schedule.tree
    return interpret(model, tree.union_map(model), inputs)


def program_order(prog, inputs: dict) -> dict:
    return run(prog.schedule(), inputs)

BLOCK = """
const N = EXTENT, M = 6
kernel k(X: f32[N]) -> (Y: f32[N]) {
  for i < N {
    T[i]: DTYPE = VALUE
  }
  Y[i] = T[i] * X[i]
}
"""


def block(value: str, extent: int = 13, dtype: str = "f8e4m3") -> str:
    return BLOCK.replace("EXTENT", str(extent)).replace("DTYPE", dtype).replace("VALUE", value)


def grids_of(text: str, stmt: str = "T") -> set:
    model = loads(text).model()
    target = model.stmt(stmt)
    return set(value_grids(model, target.value, iterator_ranges(target)))


def test_an_index_below_17_lies_on_every_grid():
    assert grids_of(block("i", 13)) == set(DTYPES)
    assert grids_of(block("i", 17)) == set(DTYPES)  # 0 .. 16
    assert grids_of(block("i", 18)) == {"bf16", "f16", "f32"}  # 17 needs five bits
    assert grids_of(block("i * 16", 17)) == set(DTYPES)  # 0, 16, ..., 256: four significant bits at most
    assert grids_of(block("i * 16", 18)) == {"bf16", "f16", "f32"}  # 17 * 16 needs five
    assert grids_of(block("i * 16 + 1", 17)) == {"f16", "f32"}  # 257 needs nine bits
    assert grids_of(block("i - M", 13)) == set(DTYPES)  # a size: -6 .. 6
    assert grids_of(block("0.5 * i", 13)) == {"f32"}  # a fraction: not an integer value
    assert grids_of(block("i / 1", 13)) == {"f32"}  # a division is not analysed


def test_the_instances_decide_where_the_bounds_do_not():
    # (i - 1) * (i - 1) - (i - 1) * (i - 1) is 0 everywhere; its bounds from the ranges reach +-144
    text = block("(i - 1) * (i - 1) - (i - 1) * (i - 1)", 13)
    model = loads(text).model()
    t = model.stmt("T")
    assert integer_range(model, t.value, iterator_ranges(t))[1] > 16
    assert grids_of(text) == set(DTYPES)
    # a where on integers picks per instance: 20 only where i == 0 ... and 20 is an f8e4m3 value, 21 is not
    assert grids_of(block("where(i == 0, 20, i)", 13)) == set(DTYPES)
    assert grids_of(block("where(i == 0, 21, i)", 13)) == {"bf16", "f16", "f32"}


def test_a_choice_on_data_falls_back_to_the_bounds():
    text = """
const N = 13
kernel k(X: f32[N]) -> (Y: f32[N]) {
  T[i]: f8e4m3 = where(X[i] > 0.0, i, 16 - i)
  Y[i] = T[i] * X[i]
}
"""
    assert grids_of(text) == set(DTYPES)  # 0 .. 16 either way
    assert grids_of(text.replace("16 - i", "17 - i")) == {"bf16", "f16", "f32"}


def test_a_large_domain_uses_the_bounds_and_says_so():
    text = block("i", 1 << 21)
    model = loads(text).model()
    t = model.stmt("T")
    assert integers.integer_values(model, t.value, iterator_ranges(t)) is None  # too many instances to list
    found = integer_counterexample(model, t.value, iterator_ranges(t), "f8e4m3")
    assert (found.instance, found.value, found.rounded) == ("", 17, 16.0)
    assert "may reach 17" in found.text()


def test_a_size_left_a_parameter_is_not_analysed():
    text = """
param N
kernel k(X: f32[N]) -> (Y: f32[N]) {
  T[i]: f8e4m3 = where(X[i] > 0.0, i, 0)
  Y[i] = T[i] * X[i]
}
"""
    assert grids_of(text) == {"f32"}


def test_intermediates_beyond_2_24_are_not_analysed():
    model = loads(block("i * 4194304 * 8 - i * 4194304 * 8", 13)).model()  # 12 * 2^25: f32 no longer exact
    t = model.stmt("T")
    assert integer_grids(model, t.value, iterator_ranges(t)) is None


# ---------------------------------------------------------------- the steps


def test_inlining_an_index_without_its_rounding_is_legal_while_f8e4m3_holds_it():
    prog = loads(block("i", 13))
    assert_legal(prog, "compute_inline(T, round=false)", run=True)


def test_the_first_index_f8e4m3_rounds_is_the_counterexample():
    prog = loads(block("i - 2", 20))
    err = assert_illegal(prog, "compute_inline(T, round=false)", rule="rounding-removed", changes_result=True,
                         match="Y(i=19) reads T[19], which the program rounds to f8e4m3: T(i=19) computes 17, "
                               "which becomes 16.0 in f8e4m3")
    X = {"X": np.ones(20, np.float32)}
    assert program_order(prog, X)["Y"][19] == 16.0  # the store rounds 17 to 16 ...
    assert run(err.rejected, X)["Y"][19] == 17.0  # ... which the inlined value would not


def test_a_wider_copy_that_skips_the_rounding_names_the_instance():
    text = """
const N = 20
kernel k(X: f32[N]) -> (Y: f32[N]) {
  for i < N {
    T[i]: f8e4m3 = i + 1
  }
  Y[i] = T[i] * X[i]
}
"""
    prog = loads(text)
    assert_illegal(prog, "reverse_compute_at(Y, T.i)\ncache_write(T, register, at=T.i, dtype=bf16)",
                   rule="rounding-removed", changes_result=True,
                   match="Y(i=16) reads T[16]: the program rounds it to f8e4m3 first; T(i=16) computes 17")
    assert_legal(prog, "reverse_compute_at(Y, T.i)\ncache_write(T, register, at=T.i, dtype=bf16)", sizes={"N": 16},
                 run=True)  # 1 .. 16: the rounding skipped is the identity


# ---------------------------------------------------------------- against brute force


def _random_integer_expr(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth >= 3 or roll < 0.3:
        return rng.choice(["i", "j", "i", "j", "1", "3", "17", "M", "(-5)"])
    if roll < 0.7:
        return f"({_random_integer_expr(rng, depth + 1)} {rng.choice('+-*')} {_random_integer_expr(rng, depth + 1)})"
    if roll < 0.8:
        return f"abs({_random_integer_expr(rng, depth + 1)})"
    a, b = _random_integer_expr(rng, depth + 1), _random_integer_expr(rng, depth + 1)
    if roll < 0.9:
        return f"{rng.choice(['max', 'min'])}({a}, {b})"
    return f"where(i {rng.choice(['<', '==', '>='])} j, {a}, {b})"


PAIRS = """
const N = 7, M = 5
kernel k(X: f32[N, N]) -> (T: f32[N, N]) {
  T[i, j COND] = where(X[i, j] > 2.0, 0.0, VALUE)
}
"""


@pytest.mark.parametrize("cond", ["", " : j <= i"], ids=["box", "triangle"])
@pytest.mark.parametrize("seed", range(3))
def test_grids_against_every_value_the_interpreter_computes(seed, cond):
    """Exact on a domain small enough to list, a box (numpy lists it) or not (isl does)."""
    rng = random.Random(seed)
    written = np.tril(np.ones((7, 7), bool)) if cond else np.ones((7, 7), bool)
    for _ in range(40):
        text = PAIRS.replace("COND", cond).replace("VALUE", _random_integer_expr(rng))
        model = loads(text).model()
        t = model.stmt("T")
        value = t.value.args[2]  # the integer value under the where (X only keeps i and j in range)
        claimed = integer_grids(model, value, iterator_ranges(t))
        if claimed is None:  # an intermediate beyond 2^24
            continue
        computed = program_order(loads(text), {"X": np.zeros((7, 7), np.float32)})["T"][written]
        held = {d for d in DTYPES if np.array_equal(dt.round_to(d, computed), computed)}
        assert claimed == held, text
