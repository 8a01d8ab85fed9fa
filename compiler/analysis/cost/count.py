"""Exact integer-point counting (no barvinok): how many points a bounded set has, and sums over a set.

`card` counts the iterations of a domain; `box_sum` sums, over the iterations p of a loop, the number of
elements in the bounding box of the region an access touches in p, which is what one movement of a tile costs.
A set that cannot be counted (unbounded, depending on free parameters, too many points) raises `CountError`.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from math import comb, prod

import islpy as isl

from tdsl.compiler.errors import CountError

MAX_ENUMERATION = 5_000_000


# Counts already made, by the text of what was counted: the cost of one schedule on several targets (and the
# statements of a kernel, which share domains) counts the same sets again.  Cleared when it grows past the limit.
_COUNTED: dict = {}
_COUNTED_LIMIT = 4096


def _remembered(key: tuple, count) -> int:
    if key not in _COUNTED:
        if len(_COUNTED) >= _COUNTED_LIMIT:
            _COUNTED.clear()
        _COUNTED[key] = count()
    return _COUNTED[key]


def card(s: isl.Set) -> int:
    """Exact number of integer points of a bounded set; parameters, if any, must be fixed to one value each.

    Boxes are counted by their extents; a convex set without existential variables is counted fibre by fibre
    along its last dimension (sum over the other dimensions of an affine extent); a set with existential
    variables is counted by isl (`count_val`: it makes the existentials explicit and scans the points, a whole
    range of the innermost dimension at a time)."""
    return _remembered(("card", str(s)), lambda: _card(_countable(s)))


def _card(s: isl.Set) -> int:
    """`card` of a set known to be bounded and parameter-free (the counts `sum_products` makes of its cells)."""
    s = s.coalesce()
    if s.is_empty():
        return 0
    if s.dim(isl.dim_type.set) == 0:
        return 1
    return sum(_card_convex(isl.Set.from_basic_set(b)) for b in s.make_disjoint().get_basic_sets())


def box_sum(rel: isl.Map) -> int:
    """Sum over the domain points p of the number of elements in the bounding box of rel(p)."""
    one = isl.Val.one(rel.get_ctx())
    exts = [rel.dim_max(d).sub(rel.dim_min(d)).add_constant_val(one) for d in range(rel.dim(isl.dim_type.out))]
    return sum_products(rel.domain(), exts)


def sum_products(dom: isl.Set, pwaffs: list) -> int:
    """Sum over the points p of `dom` of the product of piecewise quasi-affine functions at p."""
    return _remembered(("sum", str(dom), tuple(str(pa) for pa in pwaffs)), lambda: _sum_products(dom, pwaffs))


def _sum_products(dom: isl.Set, pwaffs: list) -> int:
    cells = [(dom, [])]
    for pa in pwaffs:
        new = []
        for cset, affs in cells:
            for pset, aff in pa.get_pieces():
                inter = cset.intersect(pset)
                if not inter.is_empty():
                    new.append((inter, affs + [aff]))
        cells = new
    total = 0
    for cset, affs in cells:
        lins = [_linear(a) for a in affs]
        if any(lin is None for lin in lins):
            total += _enumerate(cset, affs)
        else:
            total += _sum_linear(cset, lins)
    return int(total)


def _box(s: isl.Set):
    n = s.dim(isl.dim_type.set)
    return ([s.dim_min_val(d).to_python() for d in range(n)], [s.dim_max_val(d).to_python() for d in range(n)])


def _is_box(s: isl.Set, los, his) -> bool:
    box = isl.Set.universe(s.get_space())
    ctx = s.get_ctx()
    for d, (lo, hi) in enumerate(zip(los, his)):
        box = box.lower_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, lo))
        box = box.upper_bound_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, hi))
    return box.is_subset(s)


def _countable(s: isl.Set) -> isl.Set:
    """`s` without parameters (`_parameter_free`), checked to be bounded; CountError if it is not."""
    s = _parameter_free(s)
    if not s.is_bounded():
        free = [s.get_dim_name(isl.dim_type.set, d) or f"dimension {d}" for d in range(s.dim(isl.dim_type.set))
                if not s.dim_is_bounded(isl.dim_type.set, d)]
        raise CountError(f"cannot count the points of {s}: it is unbounded (in {', '.join(free)})")
    return s


def _parameter_free(s: isl.Set) -> isl.Set:
    """`s` without its parameters, each fixed to the one value `s` allows; CountError if one is not fixed."""
    n = s.dim(isl.dim_type.param)
    if n == 0:
        return s
    values = isl.Set.from_params(s.params()).move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
    if values.is_empty():
        return isl.Set.empty(s.get_space().drop_dims(isl.dim_type.param, 0, n))
    if not values.is_bounded() or not values.lexmin().is_equal(values.lexmax()):
        raise CountError(f"cannot count the points of {s}: its parameters are not fixed to one value "
                         f"(they range over {s.params()}), so the count depends on them")
    point = values.sample_point()
    for k in range(n):
        s = s.fix_val(isl.dim_type.param, k, point.get_coordinate_val(isl.dim_type.set, k))
    return s.project_out(isl.dim_type.param, 0, n)


def _card_convex(s: isl.Set) -> int:
    """Points of a bounded, parameter-free convex set.  Every recursive count (through `sum_products`) is of a
    set with fewer dimensions, and `count_val` does not recurse, so counting terminates."""
    if s.is_empty():
        return 0
    n = s.dim(isl.dim_type.set)
    if n == 0:
        return 1
    los, his = _box(s)
    if _is_box(s, los, his):
        return prod(h - l + 1 for l, h in zip(los, his))
    if not any(b.dim(isl.dim_type.div) for b in s.get_basic_sets()):
        # the fibres of a convex set without existentials along its last dimension are intervals
        m = isl.Map.from_range(s).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, n - 1)
        ext = m.dim_max(0).sub(m.dim_min(0)).add_constant_val(isl.Val.one(s.get_ctx()))
        return sum_products(m.domain(), [ext])
    # Existential variables (strides, a sum of dimensions in a lattice, ...): isl lifts them to explicit
    # dimensions, where each point of `s` has exactly one preimage, and counts those points.  `card` checked
    # its set, but `sum_products` is also called directly, and `count_val` answers 0 for an unbounded set.
    return _countable(s).count_val().to_python()


def _linear(aff: isl.Aff):
    """(coefficients, constant) as Fractions, or None when the function has integer divisions."""
    if aff.dim(isl.dim_type.div):
        return None

    def frac(v: isl.Val) -> Fraction:
        return Fraction(v.get_num_si(), v.get_den_val().to_python())

    n = aff.dim(isl.dim_type.in_)
    return [frac(aff.get_coefficient_val(isl.dim_type.in_, k)) for k in range(n)], frac(aff.get_constant_val())


def _sum_linear(s: isl.Set, lins) -> int:
    s = s.coalesce()
    if s.is_empty():
        return 0
    n = s.dim(isl.dim_type.set)
    used = [d for d in range(n) if any(c[d] != 0 for c, _ in lins)]
    if not used:
        return int(prod(k for _, k in lins)) * _card(s)
    los, his = _box(s)
    if _is_box(s, los, his):
        return int(_sum_over_box(los, his, lins))
    if n == 1:
        total = Fraction(0)
        for b in s.make_disjoint().get_basic_sets():
            bs = isl.Set.from_basic_set(b)
            (lo,), (hi,) = _box(bs)
            if _is_box(bs, [lo], [hi]):
                total += _sum_over_box([lo], [hi], lins)
                continue
            if hi - lo + 1 > MAX_ENUMERATION:
                raise CountError(f"cannot sum over {bs}: too many points")
            for x in range(lo, hi + 1):
                if not bs.fix_val(isl.dim_type.set, 0, isl.Val.int_from_si(s.get_ctx(), x)).is_empty():
                    total += prod(c[0] * x + k for c, k in lins)
        return int(total)
    d = used[0]
    lo, hi = s.dim_min_val(d).to_python(), s.dim_max_val(d).to_python()
    if hi - lo + 1 > MAX_ENUMERATION:
        raise CountError(f"cannot sum over {s}: too many points")
    total = 0
    for v in range(lo, hi + 1):
        sv = s.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(s.get_ctx(), v))
        if not sv.is_empty():
            total += _sum_linear(sv, [(c[:d] + [Fraction(0)] + c[d + 1:], k + c[d] * v) for c, k in lins])
    return total


def _sum_over_box(los, his, lins) -> Fraction:
    """Sum over the points of a box of a product of linear functions, in closed form: the product expanded into
    monomials, each summed dimension by dimension with power sums (no enumeration, whatever the extents)."""
    n = len(los)
    poly = {(0,) * n: Fraction(1)}
    for coeffs, const in lins:
        expanded: dict = {}
        for mono, c in poly.items():
            if const:
                expanded[mono] = expanded.get(mono, 0) + c * const
            for d, a in enumerate(coeffs):
                if a:
                    raised = mono[:d] + (mono[d] + 1,) + mono[d + 1:]
                    expanded[raised] = expanded.get(raised, 0) + c * a
        poly = expanded
    return sum((c * prod(_power_sum(k, lo, hi) for k, lo, hi in zip(mono, los, his)) for mono, c in poly.items()),
               Fraction(0))


def _power_sum(k: int, lo: int, hi: int) -> Fraction:
    """x^k summed over the integers lo .. hi."""
    return _power_prefix(k, hi) - _power_prefix(k, lo - 1)


@lru_cache(maxsize=4096)
def _power_prefix(k: int, n: int) -> Fraction:
    """The polynomial S_k(n) = 0^k + 1^k + ... + n^k, at any integer n (negative too: the same polynomial).

    From (n + 1)^(k + 1) = sum over j <= k of C(k + 1, j) S_j(n), which telescopes (x + 1)^(k + 1) - x^(k + 1)."""
    sums: list = []
    for j in range(k + 1):
        rest = sum((comb(j + 1, i) * sums[i] for i in range(j)), Fraction(0))
        sums.append((Fraction(n + 1) ** (j + 1) - rest) / (j + 1))
    return sums[k]


def _enumerate(s: isl.Set, affs) -> int:
    if _card(s) > MAX_ENUMERATION:
        raise CountError(f"cannot sum over {s}: too many points")
    pas = [isl.PwAff.from_aff(a) for a in affs]
    total = [0]

    def visit(point):
        total[0] += prod(pa.eval(point).to_python() for pa in pas)

    s.foreach_point(visit)
    return total[0]
