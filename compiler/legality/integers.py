"""Integer values computed from iterators: which dtype grids hold them (compiler/legality/grids.py asks).

`T[i]: f8e4m3 = i` over `i < 13` stores exactly what it computes: f8e4m3 holds every integer up to 16.  A value
built from iterators, integer constants and integer sizes with `+ - *`, unary minus, `abs`, `max`, `min`, `where`
(its branches) and casts is an integer at every instance, and it lies on the grid of every dtype that holds each
integer it takes.  Arithmetic on such integers is exact in f32 (the interpreter's evaluation) and in the
backends' int32 index arithmetic as long as every intermediate value stays within 2^24; beyond that, or with a
read, a division or a fraction anywhere, the value is not analysed here.

Which integers a value takes is found two ways:

* over the statement's whole domain, instance by instance (`integer_values`), when the domain is small enough
  to list: exact, and it names the first instance whose value a rounding changes (the counterexample);
* otherwise by interval arithmetic over the iterators' ranges (`integer_range`): sound, but it may include
  integers no instance takes (`i - i` spans -(N-1) .. N-1), so it can only reject more, never accept a value
  that changes.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import islpy as isl
import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.frontend import ast

# f32 (24 significant bits) holds every integer up to this magnitude, so f32 arithmetic on them is exact.
EXACT_LIMIT = 2 ** 24
# Domains listed instance by instance: a box (numpy builds it), or any other set (isl lists its points).
BOX_POINTS = 1 << 20
LISTED_POINTS = 1 << 14


class Iterators(Mapping):
    """A statement's iterators -> their (lowest, highest) value over its domain (None: unbounded), and the
    domain itself, for the instance-by-instance analysis."""

    def __init__(self, stmt):
        self.statement = stmt.name
        self.names = list(stmt.iters)
        self.domain = stmt.domain
        self._ranges: dict = {}  # computed when a value first uses the iterator

    def __getitem__(self, name):
        if name not in self.names:
            raise KeyError(name)
        if name not in self._ranges:
            self._ranges[name] = _dim_range(self.domain, self.names.index(name))
        return self._ranges[name]

    def __contains__(self, name):
        return name in self.names

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)


def iterator_ranges(stmt) -> Iterators:
    return Iterators(stmt)


@dataclass(frozen=True)
class Counterexample:
    """An instance whose integer value a rounding to `dtype` changes."""

    instance: str  # 'T(i=17)', or '' when only the range is known
    coords: tuple  # the instance's iterator values (empty when only the range is known)
    value: int
    rounded: float
    dtype: str

    def text(self) -> str:
        if self.instance:
            return f"{self.instance} computes {self.value}, which becomes {self.rounded!r} in {self.dtype}"
        return (f"its value may reach {self.value} (a bound from the iterators' ranges), which becomes "
                f"{self.rounded!r} in {self.dtype}")


def integer_range(model, expr, iters=()) -> Optional[tuple]:
    """(lowest, highest) bounds of an integer value from its iterators' ranges, or None (not an integer value,
    an iterator of unknown range, or an intermediate beyond 2^24)."""
    return _fold(model, expr, iters, _SPANS)


def integer_values(model, expr, iters) -> Optional[tuple]:
    """(points, values): every instance of the statement in lexicographic order and the integer value there, or
    None (not an integer value, a domain too large to list, an intermediate beyond 2^24)."""
    if not isinstance(iters, Iterators):
        return None
    points = _points(iters)
    if points is None:
        return None
    env = {name: points[:, k] for k, name in enumerate(iters.names)}
    values = _fold(model, expr, env, _ARRAYS)
    if values is None:
        return None
    return points, np.broadcast_to(values, (len(points),))


def integer_grids(model, expr, iters) -> Optional[frozenset]:
    """The dtypes whose grid holds every integer the value takes, or None when it is not such a value."""
    span = integer_range(model, expr, iters)
    if span is None:
        return None
    held = {d for d in dt.PRECISION_BITS if _span_witness(span, d) is None}
    if len(held) < len(dt.PRECISION_BITS):  # the bounds are not tight; the instances themselves may be held
        listed = integer_values(model, expr, iters)
        if listed is not None:
            held = {d for d in dt.PRECISION_BITS if _first_changed(listed[1], d) is None}
    return frozenset(held)


def integer_counterexample(model, expr, iters, dtype: str) -> Optional[Counterexample]:
    """The first instance whose integer value rounding to `dtype` changes (or, when the domain is too large to
    list, the bound that does), or None."""
    listed = integer_values(model, expr, iters)
    if listed is not None:
        points, values = listed
        at = _first_changed(values, dtype)
        if at is None:
            return None
        coords = tuple(int(c) for c in points[at])
        named = ", ".join(f"{n}={c}" for n, c in zip(iters.names, coords))
        return _counterexample(f"{iters.statement}({named})", coords, int(values[at]), dtype)
    span = integer_range(model, expr, iters)
    value = None if span is None else _span_witness(span, dtype)
    return None if value is None else _counterexample("", (), value, dtype)


def _counterexample(instance: str, coords: tuple, value: int, dtype: str) -> Counterexample:
    return Counterexample(instance, coords, value, float(dt.round_to(dtype, np.float32(value))), dtype)


def _first_changed(values: np.ndarray, dtype: str) -> Optional[int]:
    floats = values.astype(np.float32)
    changed = np.flatnonzero(dt.round_to(dtype, floats) != floats)
    return int(changed[0]) if changed.size else None


def _span_witness(span: tuple, dtype: str) -> Optional[int]:
    """An integer of the span that rounding to `dtype` changes, nearest zero, or None when the grid holds them all.

    Every integer up to 2^p in magnitude is exact with p significant bits; of two neighbours beyond that one is
    odd and needs p + 1 bits, so at most two integers on each side need a look."""
    limit = 2 ** dt.PRECISION_BITS[dtype]
    low, high = span
    candidates = []
    if high > limit:
        first = max(low, limit + 1)
        candidates += [first, first + 1]
    if low < -limit:
        first = min(high, -limit - 1)
        candidates += [first, first - 1]
    for v in sorted((v for v in candidates if low <= v <= high), key=abs):
        if float(dt.round_to(dtype, np.float32(v))) != v:
            return v
    return None


# ---------------------------------------------------------------- the domain


def _dim_range(domain: isl.Set, pos: int) -> Optional[tuple]:
    if domain.is_empty() or not (domain.dim_min(pos).is_cst() and domain.dim_max(pos).is_cst()):
        return None  # no instance, or a bound that depends on a size left a parameter
    low, high = domain.dim_min_val(pos), domain.dim_max_val(pos)
    if not (low.is_int() and high.is_int()):
        return None
    return low.to_python(), high.to_python()


def _points(iters: Iterators) -> Optional[np.ndarray]:
    """Every point of the domain, lexicographically, as an (n, depth) int64 array; None if too many or unbounded."""
    ranges = [iters[name] for name in iters.names]
    if any(r is None for r in ranges):
        return None
    domain = _without_params(iters.domain)
    if domain is None:
        return None
    extents = [high - low + 1 for low, high in ranges]
    volume = int(np.prod(extents, dtype=np.float64)) if extents else 1
    if volume <= BOX_POINTS and domain.is_equal(_box(domain, ranges)):
        grid = np.indices(extents, dtype=np.int64).reshape(len(extents), -1).T
        return grid + np.array([low for low, _ in ranges], dtype=np.int64)
    if volume > LISTED_POINTS * 64:  # isl would walk too far to find the points
        return None
    listed = []
    domain.foreach_point(lambda p: listed.append(
        [p.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(len(ranges))]))
    if len(listed) > LISTED_POINTS:
        return None
    listed.sort()
    return np.array(listed, dtype=np.int64).reshape(len(listed), len(ranges))


def _without_params(domain: isl.Set) -> Optional[isl.Set]:
    """The domain without its run-time sizes where they bound only themselves (`K > 0` beside `0 <= j <= 17`: the
    same points for every K), else None: isl cannot list the points of a set with parameters (fuzz seed 5564:
    "unexpected missing (bounded) solution", an internal error)."""
    n = domain.dim(isl.dim_type.param)
    if n == 0:
        return domain
    plain = domain.project_out(isl.dim_type.param, 0, n)
    apart = plain.align_params(domain.get_space()).intersect_params(domain.params())
    return plain if apart.is_equal(domain) else None


def _box(domain: isl.Set, ranges) -> isl.Set:
    box = isl.Set.universe(domain.get_space())
    for pos, (low, high) in enumerate(ranges):
        box = box.lower_bound_val(isl.dim_type.set, pos, low).upper_bound_val(isl.dim_type.set, pos, high)
    return box


# ---------------------------------------------------------------- the value, two ways


def _fold(model, expr, iters, alg):
    """The value of `expr` in the algebra `alg` (bounds or per-instance arrays), or None where it is not an
    integer computed exactly."""
    if isinstance(expr, (ast.IntLit, ast.FloatLit)):
        return _constant(expr.value, alg)
    if isinstance(expr, ast.Name):
        if expr.name in iters:
            return iters.get(expr.name) if isinstance(iters, Mapping) else None
        size = model.sizes.get(expr.name)
        return _constant(size, alg) if isinstance(size, numbers.Real) and not isinstance(size, bool) else None
    if isinstance(expr, ast.Neg):
        operand = _fold(model, expr.operand, iters, alg)
        return None if operand is None else alg.exact(alg.neg(operand))
    if isinstance(expr, ast.BinOp) and expr.op in ("+", "-", "*"):
        lhs, rhs = _fold(model, expr.lhs, iters, alg), _fold(model, expr.rhs, iters, alg)
        return None if lhs is None or rhs is None else alg.exact(alg.arith(expr.op, lhs, rhs))
    if isinstance(expr, ast.Call):
        return _fold_call(model, expr, iters, alg)
    return None  # a read, a division, a comparison


def _fold_call(model, call: ast.Call, iters, alg):
    f, args = call.func, call.args
    if f in dt.NUMPY_DTYPES and len(args) == 1:  # a cast keeps an integer its grid holds
        value = _fold(model, args[0], iters, alg)
        return value if value is not None and alg.held(f, value) else None
    if f == "abs" and len(args) == 1:
        value = _fold(model, args[0], iters, alg)
        return None if value is None else alg.abs(value)
    if f in ("max", "min") and args:
        operands = args
    elif f == "where" and len(args) == 3:
        operands = args[1:]  # the condition only chooses
    else:
        return None
    values = [_fold(model, a, iters, alg) for a in operands]
    if any(v is None for v in values):
        return None
    if f == "where":
        return alg.where(call.args[0], values, model, iters)
    return alg.select(f, values)


def _constant(value, alg):
    number = float(np.float32(value))
    if not np.isfinite(number) or number != int(number) or abs(number) > EXACT_LIMIT:
        return None
    return alg.constant(int(number))


class _Spans:
    """Bounds: (lowest, highest)."""

    @staticmethod
    def constant(c):
        return c, c

    @staticmethod
    def exact(span):
        return span if -EXACT_LIMIT <= span[0] and span[1] <= EXACT_LIMIT else None

    @staticmethod
    def neg(span):
        return -span[1], -span[0]

    @staticmethod
    def arith(op, a, b):
        if op == "+":
            return a[0] + b[0], a[1] + b[1]
        if op == "-":
            return a[0] - b[1], a[1] - b[0]
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)

    @staticmethod
    def abs(span):
        low, high = span
        if low >= 0:
            return span
        return (-high, -low) if high <= 0 else (0, max(-low, high))

    @staticmethod
    def select(f, spans):
        pick = max if f == "max" else min
        return pick(s[0] for s in spans), pick(s[1] for s in spans)

    @staticmethod
    def where(_condition, spans, _model, _iters):
        return min(s[0] for s in spans), max(s[1] for s in spans)

    @staticmethod
    def held(dtype, span):
        return _span_witness(span, dtype) is None


class _Arrays:
    """Per-instance values: int64 arrays over the listed points (or scalars)."""

    @staticmethod
    def constant(c):
        return np.int64(c)

    @staticmethod
    def exact(values):
        return values if np.all(np.abs(values) <= EXACT_LIMIT) else None

    @staticmethod
    def neg(values):
        return -values

    @staticmethod
    def arith(op, a, b):
        return a + b if op == "+" else a - b if op == "-" else a * b

    @staticmethod
    def abs(values):
        return np.abs(values)

    @staticmethod
    def select(f, values):
        pick = np.maximum if f == "max" else np.minimum
        out = values[0]
        for v in values[1:]:
            out = pick(out, v)
        return out

    @staticmethod
    def where(condition, values, model, env):
        chosen = _condition(model, condition, env)
        if chosen is None:  # a condition on data: either branch
            return None
        return np.where(chosen, values[0], values[1])

    @staticmethod
    def held(dtype, values):
        return _first_changed(np.atleast_1d(values), dtype) is None


_SPANS, _ARRAYS = _Spans(), _Arrays()

_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
            "!=": np.not_equal}


def _condition(model, cond, env):
    """A comparison of integer values at each instance (`where(i == 0, ...)`), or None."""
    if not isinstance(cond, ast.Compare) or cond.op not in _COMPARE:
        return None
    lhs, rhs = _fold(model, cond.lhs, env, _ARRAYS), _fold(model, cond.rhs, env, _ARRAYS)
    return None if lhs is None or rhs is None else _COMPARE[cond.op](lhs, rhs)
