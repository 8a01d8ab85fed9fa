"""Exact point counting (`card`, compiler/analysis/cost/count.py) on sets with existential variables, strides,
unions and fixed parameters, checked against closed forms and against enumerating the points with isl."""

from __future__ import annotations

import random

import islpy as isl
import numpy as np
import pytest

from tdsl.compiler.analysis.cost.count import card
from tdsl.compiler.errors import CountError
from tdsl.frontend.diagnostics import TdslError


def brute(s: isl.Set) -> int:
    """The number of points of a bounded parameter-free set, one `foreach_point` callback per point."""
    points = []
    s.foreach_point(points.append)
    return len(points)


def test_existential_over_two_dimensions():
    # j even, 0 <= j <= i < 10: for i = 0..9, floor(i/2) + 1 points (once a RecursionError: the set was
    # sliced along i again and again, since fixing i leaves a set that is neither a box nor free of `e`)
    s = isl.Set("{ [i, j] : 0 <= i < 10 and 0 <= j <= i and exists e : j = 2e }")
    assert card(s) == 30 == sum(i // 2 + 1 for i in range(10)) == brute(s)


def test_existential_over_two_dimensions_3d():
    s = isl.Set("{ [i, j, k] : 0 <= i < 6 and 0 <= j <= i and 0 <= k < 5 and exists e : i + j = 3e }")
    assert card(s) == 5 * sum(1 for i in range(6) for j in range(i + 1) if (i + j) % 3 == 0) == 35 == brute(s)
    s = isl.Set("{ [i, j, k] : 0 <= i < 8 and 0 <= j < 8 and 0 <= k <= i + j and exists e : j + k = 2e + 1 }")
    want = sum(1 for i in range(8) for j in range(8) for k in range(i + j + 1) if (j + k) % 2 == 1)
    assert card(s) == want == brute(s)


def test_large_strided_triangle_is_counted_exactly():
    # j = i (mod 2), 0 <= j <= i < 4096: floor(i/2) + 1 points per row, 2048 * 2049 in all (8M points: not
    # enumerated one by one)
    s = isl.Set("{ [i, j] : 0 <= j <= i < 4096 and exists e : i + j = 2e }")
    assert card(s) == 2048 * 2049
    assert card(isl.Set("{ [i, j] : 0 <= i < 4096 and 0 <= j < 4096 and exists e : j = 2e }")) == 4096 * 2048


def test_union_of_strided_sets():
    s = isl.Set("{ [i, j] : 0 <= i < 10 and 0 <= j < 10 and exists e : i = 2e; "
                "[i, j] : 0 <= i < 10 and 0 <= j < 10 and exists e : j = 3e }")
    assert card(s) == 100 - 5 * 6 == brute(s)  # all but (i odd, j not a multiple of 3)


def test_parameters_fixed_to_constants():
    s = isl.Set("[N, M] -> { [i, j] : N = 10 and M = N + 2 and 0 <= i < N and 0 <= j <= i + M and "
                "exists e : j = 2e }")
    assert card(s) == sum((i + 12) // 2 + 1 for i in range(10)) == 90
    assert card(isl.Set("[N] -> { [i] : N = 3 and N = 4 }")) == 0


@pytest.mark.parametrize("text", [
    "{ [i] : i >= 0 }",
    "{ [i, j] : 0 <= i < 10 and j >= i }",
    "{ [i, j] : 0 <= i < 10 and j >= i and exists e : j = 2e }",
    "{ [i] : 0 <= i < 4; [i] : i >= 10 and exists e : i = 3e }",
])
def test_unbounded_set_is_a_count_error(text):
    with pytest.raises(CountError, match="unbounded"):
        card(isl.Set(text))


@pytest.mark.parametrize("text", [
    "[N] -> { [i] : 0 <= i < N }",
    "[N] -> { [i] : 0 <= N <= 20 and 0 <= i < N }",
    "[N] -> { [i] : N = 10 and 0 <= i < N; [i] : N = 20 and 0 <= i < 5 }",
])
def test_free_parameters_are_a_count_error(text):
    with pytest.raises(CountError, match="parameters are not fixed") as err:
        card(isl.Set(text))
    assert isinstance(err.value, TdslError) and err.value.exit_code == 2


# ---------------------------------------------------------------- card == brute force on random small sets

DIMS = "ijk"


def random_piece(rng: random.Random, n: int, param: bool) -> str:
    """The constraints of one small set over the first n of i, j, k: a box, cut by triangles, half-spaces
    and existential variables (lattices over one or several dimensions, and bands `m e <= x + y <= m e + w`)."""
    xs = DIMS[:n]
    cons = []
    for d, x in enumerate(xs):
        lo = rng.randint(-3, 2)
        hi = lo + rng.randint(0, 7)
        cons.append(f"{lo} <= {x} <= {'N - ' + str(10 - hi) if param and d == n - 1 else hi}")
    for q in range(rng.randint(0, 3)):
        kind = rng.choice(["triangle", "halfspace", "lattice", "lattice", "band"])
        a, b = rng.sample(xs, 2) if n > 1 else (xs, xs)
        if kind == "triangle":
            cons.append(f"{a} <= {b} + {rng.randint(-1, 3)}")
        elif kind == "halfspace":
            cons.append(f"{rng.randint(-2, 2)}{a} + {rng.randint(-2, 2)}{b} <= {rng.randint(0, 8)}")
        elif kind == "lattice":
            terms = " + ".join(f"{rng.choice([1, 1, 2, -1])}{x}" for x in xs if rng.random() < 0.8) or xs[0]
            m = rng.randint(2, 4)
            cons.append(f"exists e{q} : {terms} = {m}e{q} + {rng.randint(0, m - 1)}")
        else:
            m = rng.randint(3, 5)
            cons.append(f"exists e{q} : {m}e{q} <= {a} + {b} <= {m}e{q} + {rng.randint(0, m - 2)}")
    return " and ".join(cons)


def random_set(seed: int) -> tuple[str, str]:
    """(the set, the same set with its parameter N replaced by its value) for one seed."""
    rng = random.Random(seed)
    n = rng.choice([1, 2, 2, 3, 3])
    param = rng.random() < 0.25
    pieces = [random_piece(rng, n, param) for _ in range(rng.choice([1, 1, 2, 3]))]
    tup = f"[{', '.join(DIMS[:n])}]"
    if not param:
        text = "{ " + "; ".join(f"{tup} : {p}" for p in pieces) + " }"
        return text, text
    return ("[N] -> { " + "; ".join(f"{tup} : N = 10 and {p}" for p in pieces) + " }",
            "{ " + "; ".join(f"{tup} : {p.replace('N - ', '10 - ')}" for p in pieces) + " }")


@pytest.mark.parametrize("seed", range(48))
def test_card_matches_enumeration(seed):
    text, plain = random_set(seed)
    assert card(isl.Set(text)) == brute(isl.Set(plain)), text


def test_random_sets_cover_the_hard_cases():
    """The random sets above include what used to recurse forever: non-box sets with existential variables
    over several dimensions, unions of them, and parameters."""
    sets = [isl.Set(random_set(seed)[0]) for seed in range(48)]
    hard = [s for s in sets if any(b.dim(isl.dim_type.div) and not isl.Set.from_basic_set(b).is_box()
                                   for b in s.get_basic_sets())]
    assert len(hard) >= 10
    assert sum(s.n_basic_set() > 1 for s in sets) >= 5 and sum(s.dim(isl.dim_type.param) > 0 for s in sets) >= 5


# ---------------------------------------------------------------- sum_products == brute force


def brute_sum(s: isl.Set, pwaffs: list) -> int:
    """The sum over the points of `s` of the product of the functions, one `foreach_point` callback per point."""
    total = [0]

    def visit(point):
        value = 1
        for pa in pwaffs:
            value *= pa.eval(point).to_python()
        total[0] += value

    s.foreach_point(visit)
    return total[0]


@pytest.mark.parametrize("seed", range(24))
def test_sum_products_matches_enumeration(seed):
    """Sums of products of affine functions (the bounding-box extents `box_sum` multiplies) over random small
    sets: boxes, summed in closed form with power sums, and the cut and strided sets, summed slice by slice."""
    from tdsl.compiler.analysis.cost.count import sum_products

    rng = random.Random(1000 + seed)
    _, plain = random_set(seed)
    s = isl.Set(plain)
    n = s.dim(isl.dim_type.set)
    tup = f"[{', '.join(DIMS[:n])}]"
    functions = []
    for _ in range(rng.randint(1, 3)):
        terms = " + ".join(f"{rng.randint(-3, 3)}{x}" for x in DIMS[:n])
        functions.append(isl.PwAff(f"{{ {tup} -> [({terms} + {rng.randint(0, 9)})] }}").intersect_domain(s))
    assert sum_products(s, functions) == brute_sum(s, functions), (plain, [str(f) for f in functions])


def test_a_large_box_is_summed_without_enumerating(monkeypatch):
    """A box is summed in closed form: with enumeration limited to 10 points, a walk over i would refuse."""
    from tdsl.compiler.analysis.cost import count

    monkeypatch.setattr(count, "MAX_ENUMERATION", 10)
    s = isl.Set("{ [b, i, c] : 0 <= b <= 7 and 0 <= i <= 4095 and -5 <= c <= 1023 }")
    f = isl.PwAff("{ [b, i, c] -> [(1 + i + 2c)] }").intersect_domain(s)
    i, c = np.arange(4096, dtype=np.int64)[:, None], np.arange(-5, 1024, dtype=np.int64)[None, :]
    assert count.sum_products(s, [f, f]) == 8 * int(((1 + i + 2 * c) ** 2).sum())
