"""The f32 runtime of the reference interpreter: the functions the compiled statements call, and the
bookkeeping of a traced run.

The semantics are those of docs/interpreter.md#semantics: `max` / `min` are IEEE 754-2019 maximum /
minimum with one canonical NaN, `exp` / `exp2` / `log` / `tanh` the float64 libm result rounded to f32 (the same
bits on every machine), `fma` the correctly rounded a·b + c, `sqrt` and `fast_inverse` IEEE (a GPU's approximate reciprocal is compared with this), the
compositions (`rsqrt`, `sigmoid`, `silu`, `fast_sigmoid`, `fast_silu`) built from their one
definition in compiler/model/functions.py, casts the roundings of compiler/model/dtypes.py; an index out
of range raises `IndexError` (`_oob`).  `_runtime_namespace` is the namespace the statements' generated
Python runs in (compiler/reference/statements.py); with a `Trace`, reads of temporaries and outputs go
through `_traced_read`, which records the reads of elements that were not complete yet (`EarlyRead`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.model.functions import COMPOSITIONS, python_source
from tdsl.compiler.reference.order import _fmt_point


@dataclass
class EarlyRead:
    """A read of an element of a temp / output whose statement had not finished it."""

    reader: str
    point: tuple[int, ...]
    tensor: str
    index: tuple[int, ...]
    done: int  # instances of the element executed before the read
    expected: int  # instances of the element in the whole order


@dataclass
class Trace:
    """Optional bookkeeping filled by `run(..., trace=Trace())`.

    counts[t]: instances executed per element of the tensor written by a statement;
    expected[t]: instances per element in the executed order (so an element is complete
    when counts == expected); early_reads: the first `max_early_reads` reads of an
    element that was incomplete at the time (never written: done == 0), n_early_reads
    counts them all.
    """

    max_early_reads: int = 100
    counts: dict[str, np.ndarray] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    early_reads: list[EarlyRead] = field(default_factory=list)
    n_early_reads: int = 0
    n_instances: int = 0

    def complete(self, tensor: str) -> np.ndarray:
        return self.counts[tensor] == self.expected[tensor]


# =============================================================== runtime helpers

_f32 = np.float32
_ONE = np.float32(1.0)
_NAN32 = np.float32(np.nan)  # the canonical quiet NaN, 0x7FC00000
_copysign = math.copysign


# max and min are IEEE 754-2019 maximum / minimum with one NaN: -0.0 < +0.0, and a NaN operand gives the canonical
# quiet NaN whichever operand (and payload) it was.  So the result never depends on the order of the operands, and
# a `max` reduction gives the same bits in any order and grouping (docs/interpreter.md#semantics).


def _fmax(a, b):
    if a > b:
        return a
    if b > a:
        return b
    if a == b:  # the same value: the same bits, or +0.0 and -0.0
        return b if _negative(a) else a
    return _NAN32


def _fmin(a, b):
    if a < b:
        return a
    if b < a:
        return b
    if a == b:
        return a if _negative(a) else b
    return _NAN32


def _negative(x) -> bool:
    return _copysign(1.0, x) < 0.0


_INF32 = np.float32(np.inf)
_ZERO32 = np.float32(0.0)
_NEG_INF32 = np.float32(-np.inf)

# exp / log / tanh: the float64 libm result rounded to f32 (i.e. the correctly rounded f32
# result except in astronomically rare double-rounding cases), so the oracle gives the same
# bits on every machine (numpy's float32 SIMD ufuncs differ between CPUs by an ulp).
_mexp = math.exp
_mlog = math.log
_mtanh = math.tanh
_msqrt = math.sqrt


def _neg_inf_as_zero(x):
    """A `combine online` maximum read by its exponential (compiler/model/online.py `mark_exponent_reads`)."""
    return _ZERO32 if x == -math.inf else x


def _exp(x):
    if x > 89.0:  # e**89 > f32 max; also keeps math.exp from raising OverflowError
        return _INF32
    return _f32(_mexp(x))  # nan -> nan, -inf -> 0


def _exp2(x):
    if x >= 128.0:  # 2**128 > f32 max
        return _INF32
    return _f32(2.0 ** float(x)) if x == x else _NAN32  # in f64, as _exp; -inf -> 0


def _fma(a, b, c):
    """a·b + c rounded once to f32.  The f32 product is exact in f64 (24 + 24 bits); the sum is rounded to odd
    in f64 (round to nearest, then, if that was inexact and the last bit is even, the neighbour towards the
    exact value), and a value rounded to odd with at least 2 bits more than f32 rounds to nearest f32 correctly:
    no double rounding."""
    p = float(a) * float(b)
    s = p + float(c)
    if not math.isfinite(s):
        return _f32(s)
    err = _two_sum_error(p, float(c), s)
    if err != 0.0 and _even_f64(s):
        s = math.nextafter(s, math.inf if err > 0.0 else -math.inf)
    if abs(s) >= _F32_OVERFLOW:
        return _f32(math.copysign(math.inf, s))
    return _f32(s)


_F32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103  # halfway from the largest f32 to 2^128: from here on f32 rounds to inf


def _two_sum_error(a: float, b: float, s: float) -> float:
    """The exact a + b - s of s = fl(a + b) (Knuth's TwoSum)."""
    bv = s - a
    av = s - bv
    return (a - av) + (b - bv)


def _even_f64(x: float) -> bool:
    return int(np.float64(x).view(np.int64)) & 1 == 0


def _log(x):
    if x > 0.0:
        return _f32(_mlog(x))  # inf -> inf
    if x == 0.0:
        return _NEG_INF32
    return _NAN32  # negative or NaN


def _sqrt(x):
    if x >= 0.0:
        return _f32(_msqrt(x))  # correctly rounded (f64 sqrt then f32 rounding is exact)
    return _NAN32 if x != 0.0 else x


def _tanh(x):
    return _f32(_mtanh(x))


def _abs(x):
    return abs(x)


def _fast_inverse(x):
    return _ONE / x  # the IEEE f32 division: the value a GPU's approximate reciprocal is compared with


def _oob(info, indices, p):
    tensor, shape, node = info
    idx = indices()
    what = "read of" if node is not None else "store to"
    where = ""
    span = getattr(node, "span", None)
    if span is not None and span.line:
        where = f" (line {span.line}, column {span.column})"
    raise IndexError(
        f"{what} {tensor}{_fmt_point(idx)} out of bounds (shape {list(shape)}) "
        f"at instance {_fmt_point(p)}{where}"
    )


# How far a GPU's exponential may be from the correctly rounded one, relative: ex2.approx (2 units of f32,
# 2^-22) of x·log2(e) rounded to f32 first, which moves the exponent by up to 2^-24·|x·log2 e|, the result by
# 2^-24·|x| relative (tl.exp, TileLang's __expf); exp2 is ex2.approx alone.  And its results below the smallest
# normal f32 are 0 (ex2.approx.ftz: on an H100, Triton's and TileLang's exp2 of -140 gave +0, not 2^-140, so
# `(R * 0.5) * (0 - exp2(X))` kept R's zero sign where the interpreter's flipped it: GPU fuzz seed 52).
_EX2_ERROR = 2.0 ** -22
_SMALLEST_NORMAL = 2.0 ** -126


def _flushed(r):
    """An exponential's f32 result as the GPU's ex2.approx.ftz leaves it: a subnormal one is +0."""
    return _ZERO32 if 0.0 < float(r) < _SMALLEST_NORMAL else r


def _approximate_exponentials(variant: int) -> tuple:
    """exp and exp2 off by as much as the GPU's may be, one way for every call (up for variant 0, down for 1,
    a random sign per call from the seed after that), and a subnormal result 0 (`_flushed`): another result an
    allowed kernel could give (`variant` of compiler/reference/interpreter.py `interpret`)."""
    signs = np.random.default_rng(variant)

    def sign() -> float:
        return 1.0 if variant == 0 else -1.0 if variant == 1 else float(signs.choice((-1.0, 1.0)))

    def exp(x):  # exp(-inf) = 0 and NaN stay as they are: 0 and NaN times any factor
        if x > 89.0:
            return _exp(x)
        return _flushed(_f32(_mexp(x) * (1.0 + sign() * (_EX2_ERROR + 2.0 ** -24 * abs(float(x))))))

    def exp2(x):
        if x != x or x >= 128.0:
            return _exp2(x)
        return _flushed(_f32(2.0 ** float(x) * (1.0 + sign() * _EX2_ERROR)))

    return exp, exp2


def primitive_function(func: str):
    """The f32 function of the primitive `func` (compiler/model/functions.py PRIMITIVES) that the interpreter
    calls; also what the lowering folds a call of constants with (compiler/lower/loads.py `fold_constants`)."""
    return _plain_namespace()[f"_f{func}" if func in ("max", "min") else f"_{func}"]


@functools.lru_cache(maxsize=1)
def _plain_namespace() -> dict:
    return _runtime_namespace(None)


def _runtime_namespace(trace: Optional[Trace], variant: Optional[int] = None) -> dict:
    """The statements' namespace; with `variant`, exp and exp2 approximate (`_approximate_exponentials`)."""
    exp, exp2 = _approximate_exponentials(variant) if variant is not None else (_exp, _exp2)
    ns = {
        "_f32": _f32,
        "_fmax": _fmax,
        "_fmin": _fmin,
        "_exp": exp,
        "_exp2": exp2,
        "_fma": _fma,
        "_log": _log,
        "_sqrt": _sqrt,
        "_tanh": _tanh,
        "_abs": _abs,
        "_fast_inverse": _fast_inverse,
        "_neg_inf_as_zero": _neg_inf_as_zero,
        "_ONE": _ONE,
        "_oob": _oob,
    }
    for func in COMPOSITIONS:  # rsqrt, sigmoid, silu: built from their one definition (compiler/model/functions.py)
        ns[f"_{func}"] = eval(f"lambda x: {python_source(func, 'x')}", dict(ns))  # noqa: S307 - our own text
    for name in dt.NUMPY_DTYPES:
        ns[f"_round_{name}"] = dt.scalar_rounder(name)
    if trace is not None:

        def _traced_read(arr, cnt, exp, key, where, tensor, reader, p):
            done = int(cnt[key])
            if done < exp[key]:
                trace.n_early_reads += 1
                if len(trace.early_reads) < trace.max_early_reads:
                    trace.early_reads.append(
                        EarlyRead(reader, tuple(p), tensor, tuple(int(k) for k in key), done, int(exp[key]))
                    )
            return arr[where]  # the element's location: its index, folded where the tensor is (fold_storage)

        ns["_traced_read"] = _traced_read
    return ns
