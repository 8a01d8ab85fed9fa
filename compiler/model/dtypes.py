"""Storage dtypes of tdsl and exact rounding to them.

The language has four storage / accumulator types (`tdsl.frontend.ast.DTYPES`):

=========  ==========================  ==========================================
 name       numpy dtype                 overflow
=========  ==========================  ==========================================
 bf16       ``ml_dtypes.bfloat16``      IEEE: rounds to +-inf
 f16        ``numpy.float16``           IEEE: rounds to +-inf
 f32        ``numpy.float32``           IEEE: rounds to +-inf
 f8e4m3     ``ml_dtypes.float8_e4m3fn`` **saturates** to +-448 (also +-inf -> +-448);
                                        NaN stays NaN
=========  ==========================  ==========================================

Every rounding is round-to-nearest, ties-to-even, and it is a *single*
rounding from the exact input value: a float64 input is not first rounded to
float32 (ml_dtypes itself converts float64 -> bfloat16 / float8 through
float32, i.e. it rounds twice; we avoid that with a round-to-odd step, see
`_f64_to_f32_round_to_odd`).  Values in the language are float32, and for
float32 inputs all of this is just the plain cast.

`round_to` returns the rounded values as float32 (every value of the four
types is exactly representable in float32); `to_storage` returns them in
the storage numpy dtype.  `scalar_rounder` gives a fast function for one
`np.float32` scalar, used by the interpreter for every store.
"""

from __future__ import annotations

import math
from typing import Callable

import ml_dtypes
import numpy as np

F8E4M3_MAX = 448.0

NUMPY_DTYPES: dict[str, np.dtype] = {
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
}

# Bytes per element of each type.
BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f8e4m3": 1}

# Significand precision (bits, including the implicit one) of each type.
PRECISION_BITS = {"bf16": 8, "f16": 11, "f32": 24, "f8e4m3": 4}

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def power_of_two(value: float) -> bool:
    """+-2^e: multiplying or dividing by it changes only the exponent (exactly, while results stay normal)."""
    return abs(math.frexp(float(value))[0]) == 0.5


def numpy_dtype(dtype: str) -> np.dtype:
    try:
        return NUMPY_DTYPES[dtype]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {', '.join(NUMPY_DTYPES)}"
        ) from None


def _f64_to_f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 with round-to-odd (truncate, set the last bit if inexact).

    Rounding to odd at 24 bits followed by round-to-nearest-even at p <= 22
    bits equals a single round-to-nearest-even at p bits (the intermediate has
    at least p + 2 bits).  bf16 has the exponent range of f32, f8e4m3 lies well
    inside it, so the argument holds for subnormals too.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)  # RNE
        y64 = y.astype(np.float64)
        inexact = (y64 != x) & np.isfinite(x) & np.isfinite(y64)
        if not np.any(inexact):
            return y
        # truncate toward zero: step back where RNE rounded away from zero
        away = inexact & (np.abs(y64) > np.abs(x))
        y = np.where(away, np.nextafter(y, np.float32(0)), y).astype(np.float32)
        bits = y.view(np.uint32).copy()
        bits[inexact] |= np.uint32(1)
        return bits.view(np.float32)


def _as_float_array(x) -> np.ndarray:
    """x as a float array that can be rounded in one step: f32 or f64."""
    arr = np.asarray(x)
    if arr.dtype == _F32 or arr.dtype == _F64:
        return arr
    if arr.dtype in (NUMPY_DTYPES["bf16"], NUMPY_DTYPES["f16"], NUMPY_DTYPES["f8e4m3"]):
        return arr.astype(np.float32)  # exact
    if arr.dtype.kind in "biu" or arr.dtype.kind == "f":
        return arr.astype(np.float64)  # ints exact up to 2**53; long double: rounded
    raise TypeError(f"cannot round values of numpy dtype {arr.dtype} to a tdsl dtype")


def to_storage(dtype: str, x) -> np.ndarray:
    """`x` rounded (RNE, single rounding) to `dtype`, as an array of the storage numpy dtype.

    f8e4m3 saturates: finite values beyond +-448 and +-inf become +-448, NaN stays NaN.
    bf16 / f16 / f32 overflow to +-inf as IEEE casts do.  A scalar gives a 0-d array.
    """
    target = numpy_dtype(dtype)
    arr = _as_float_array(x)
    if dtype == "f8e4m3":
        arr = np.clip(arr, -F8E4M3_MAX, F8E4M3_MAX)  # NaN propagates through clip
    if arr.dtype == _F64 and dtype in ("bf16", "f8e4m3"):
        # ml_dtypes casts f64 through f32 (double rounding); go through round-to-odd.
        arr = _f64_to_f32_round_to_odd(arr)
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(target)


def round_to(dtype: str, x):
    """`x` rounded to `dtype` (RNE, f8e4m3 saturating), returned as float32 values.

    A scalar (Python number or numpy scalar) gives an `np.float32`; an array gives a
    float32 ndarray of the same shape.
    """
    out = to_storage(dtype, x).astype(np.float32)
    if out.ndim == 0 and not isinstance(x, np.ndarray):
        return np.float32(out[()])
    return out


def scalar_rounder(dtype: str) -> Callable[[np.float32], np.float32]:
    """A fast `np.float32 -> np.float32` rounding of one f32 value to `dtype`.

    Only for float32 inputs (the interpreter's values); same result as `round_to`.
    """
    f32 = np.float32
    if dtype == "f32":
        return lambda v: v
    if dtype == "f16":
        f16 = np.float16

        def r_f16(v):
            return f32(f16(v))

        return r_f16
    if dtype == "bf16":
        bf16 = ml_dtypes.bfloat16

        def r_bf16(v):
            return f32(bf16(v))

        return r_bf16
    if dtype == "f8e4m3":
        f8 = ml_dtypes.float8_e4m3fn
        hi = f32(F8E4M3_MAX)
        lo = f32(-F8E4M3_MAX)

        def r_f8(v):
            if v > hi:
                return hi
            if v < lo:
                return lo
            return f32(f8(v))  # NaN passes both tests and stays NaN

        return r_f8
    numpy_dtype(dtype)  # raises the unknown-dtype error
    raise AssertionError(dtype)


def random_array(dtype: str, shape, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    """Standard-normal values times `scale`, rounded to `dtype`, in the storage numpy dtype."""
    if isinstance(shape, (tuple, list)):
        shape = tuple(int(s) for s in shape)
    else:
        shape = (int(shape),)
    vals = rng.standard_normal(shape) * float(scale)
    return to_storage(dtype, vals)


def describe_difference(a, b) -> str:
    """A one-line summary of how arrays `a` and `b` differ (compared as float64).

    NaN matches NaN, inf matches an inf of the same sign.  Reports the number of
    differing elements, the largest absolute and relative errors (and where), and the
    first differing index with both values.
    """
    a = np.asarray(_as_float_array(a), dtype=np.float64)
    b = np.asarray(_as_float_array(b), dtype=np.float64)
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    n = a.size
    both_nan = np.isnan(a) & np.isnan(b)
    same = (a == b) | both_nan
    diff = ~same
    nd = int(np.count_nonzero(diff))
    if nd == 0:
        return f"identical ({n} elements)"
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_err = np.where(diff, np.abs(a - b), 0.0)
        abs_err = np.where(diff & np.isnan(abs_err), np.inf, abs_err)  # NaN vs number, inf vs -inf
        denom = np.maximum(np.abs(a), np.abs(b))
        rel_err = np.where(diff, abs_err / np.where(denom == 0, 1.0, denom), 0.0)
        rel_err = np.where(diff & np.isnan(rel_err), np.inf, rel_err)
    ia = np.unravel_index(int(np.argmax(abs_err)), a.shape)
    ir = np.unravel_index(int(np.argmax(rel_err)), a.shape)
    first = np.unravel_index(int(np.argmax(diff)), a.shape)

    def idx(t):
        return "[" + ", ".join(str(int(v)) for v in t) + "]"

    return (
        f"{nd} of {n} elements differ; max abs error {abs_err[ia]:.6g} at {idx(ia)}"
        f" ({float(a[ia])!r} vs {float(b[ia])!r}); max rel error {rel_err[ir]:.6g} at {idx(ir)};"
        f" first difference at {idx(first)}: {float(a[first])!r} vs {float(b[first])!r}"
    )
