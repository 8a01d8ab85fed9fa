"""Exact rounding to the tdsl storage dtypes (compiler/model/dtypes.py)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tdsl.compiler.model import dtypes as dt

F32 = np.float32


# ------------------------------------------------------------------ a brute-force reference
# All finite values of a type (from every bit pattern), then nearest / ties-to-even-code,
# computed with Fractions.


def _table(dtype: str):
    nd = dt.NUMPY_DTYPES[dtype]
    bits = {1: np.uint8, 2: np.uint16}[nd.itemsize]
    codes = np.arange(2 ** (8 * nd.itemsize), dtype=np.uint64).astype(bits)
    with np.errstate(invalid="ignore"):
        vals = codes.view(nd).astype(np.float64)
    ok = np.isfinite(vals)
    pairs = sorted(
        {(float(v), int(c)) for v, c in zip(vals[ok], codes[ok]) if not (v == 0 and c != 0)}
    )
    return [Fraction(v) for v, _ in pairs], [c for _, c in pairs], pairs


_TABLES = {d: _table(d) for d in ("bf16", "f16", "f8e4m3")}


def ref_round(dtype: str, x: float) -> float:
    """Round the exact value x (a float) to dtype: RNE; IEEE overflow, f8e4m3 saturation."""
    if x != x:
        return float("nan")
    fr, codes, _ = _TABLES[dtype]
    if dtype == "f8e4m3":
        x = min(max(x, -448.0), 448.0)
    elif x in (float("inf"), float("-inf")):
        return x
    X = Fraction(x)
    top = fr[-1]
    ulp_top = fr[-1] - fr[-2]
    if dtype != "f8e4m3" and abs(X) >= top + ulp_top / 2:
        return float("inf") if X > 0 else float("-inf")
    import bisect

    i = bisect.bisect_left(fr, X)
    if i < len(fr) and fr[i] == X:
        res = fr[i]
    else:
        lo, hi = fr[i - 1], fr[i]
        dlo, dhi = X - lo, hi - X
        if dlo < dhi:
            res = lo
        elif dhi < dlo:
            res = hi
        else:  # tie: the even code (last bit 0)
            res = lo if codes[i - 1] % 2 == 0 else hi
    out = float(res)
    if out == 0.0:
        out = -0.0 if x < 0 or (x == 0 and np.signbit(x)) else 0.0
    return out


def _same(a: float, b: float) -> bool:
    if a != a or b != b:
        return a != a and b != b
    return a == b and np.signbit(a) == np.signbit(b)


def _test_values(dtype: str, rng: np.random.Generator, as_f64: bool = False) -> list[float]:
    fr, _, pairs = _TABLES[dtype]
    vals = np.array([v for v, _ in pairs])
    out = []
    # exact midpoints between neighbours (ties), and one f32 ulp either side
    idx = rng.integers(0, len(vals) - 1, size=400)
    for i in idx:
        mid = (vals[i] + vals[i + 1]) / 2
        m32 = F32(mid)
        assert float(m32) == mid
        out += [float(m32), float(np.nextafter(m32, F32(np.inf))), float(np.nextafter(m32, F32(-np.inf)))]
        if as_f64:
            out += [float(np.nextafter(mid, np.inf)), float(np.nextafter(mid, -np.inf)), mid * (1 + 2.0**-40)]
    out += list(vals[rng.integers(0, len(vals), size=200)])
    # random magnitudes across (and beyond) the range, incl. subnormals
    e = rng.uniform(-30, 20, size=400) if dtype == "f8e4m3" else rng.uniform(-150, 130, size=400)
    r = rng.choice([-1, 1], size=400) * 2.0**e
    with np.errstate(over="ignore"):
        out += [float(F32(v)) if not as_f64 else float(v) for v in r]
    out += [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 448.0, 449.0, 464.0, 480.0, 1e30, -1e30]
    return out


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f8e4m3"])
def test_round_to_matches_brute_force_reference_f32_inputs(dtype):
    rng = np.random.default_rng(1)
    xs = [x for x in _test_values(dtype, rng) if abs(x) < 3.4e38 or x != x or abs(x) == float("inf")]
    arr = np.array(xs, dtype=np.float32)
    got = dt.round_to(dtype, arr)
    assert got.dtype == np.float32
    fast = dt.scalar_rounder(dtype)
    with np.errstate(over="ignore"):
        _check_all(dtype, arr, got, fast)


def _check_all(dtype, arr, got, fast):
    for x, g in zip(arr, got):
        want = ref_round(dtype, float(x))
        assert _same(float(g), want), (dtype, float(x), float(g), want)
        assert _same(float(fast(x)), want), (dtype, float(x), float(fast(x)), want)
        assert _same(float(dt.round_to(dtype, x)), want)


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f8e4m3"])
def test_round_to_is_a_single_rounding_from_f64(dtype):
    rng = np.random.default_rng(2)
    xs = np.array(_test_values(dtype, rng, as_f64=True), dtype=np.float64)
    got = dt.to_storage(dtype, xs)
    assert got.dtype == dt.NUMPY_DTYPES[dtype]
    for x, g in zip(xs, got.astype(np.float64)):
        assert _same(float(g), ref_round(dtype, float(x))), (dtype, float(x), float(g))


def test_double_rounding_case_from_f64():
    # 1 + 2^-8 is a bf16 tie (-> 1.0); the extra 2^-30 must push it up to 1 + 2^-7.
    # ml_dtypes alone goes through f32 and gets 1.0.
    x = 1 + 2.0**-8 + 2.0**-30
    assert float(dt.round_to("bf16", x)) == 1 + 2.0**-7
    assert float(dt.round_to("bf16", F32(1 + 2.0**-8))) == 1.0
    x8 = 1 + 2.0**-4 + 2.0**-40
    assert float(dt.round_to("f8e4m3", x8)) == 1.125


def test_rne_ties_examples():
    # bf16: 8 significant bits -> spacing 2^-7 on [1, 2)
    assert dt.round_to("bf16", F32(1 + 2.0**-8)) == F32(1.0)  # tie -> even (1.0)
    assert dt.round_to("bf16", F32(1 + 3 * 2.0**-8)) == F32(1 + 2 * 2.0**-7)  # tie -> even (up)
    assert dt.round_to("bf16", F32(1 + 2.0**-8 + 2.0**-20)) == F32(1 + 2.0**-7)
    # f16: 11 bits -> spacing 2^-10 on [1, 2)
    assert dt.round_to("f16", F32(1 + 2.0**-11)) == F32(1.0)
    assert dt.round_to("f16", F32(1 + 3 * 2.0**-11)) == F32(1 + 2.0**-9)
    assert dt.round_to("f16", F32(65520.0)) == F32(np.inf)  # IEEE overflow (tie at max+ulp/2)
    assert dt.round_to("f16", F32(65519.0)) == F32(65504.0)
    assert dt.round_to("bf16", F32(3.4e38)) == F32(np.inf)
    # f8e4m3: 4 bits -> spacing 1/8 on [1, 2), 4 on [32, 64)
    assert dt.round_to("f8e4m3", F32(1.0625)) == F32(1.0)
    assert dt.round_to("f8e4m3", F32(1.1875)) == F32(1.25)
    assert dt.round_to("f8e4m3", F32(42.0)) == F32(40.0)  # tie between 40 (even) and 44
    assert dt.round_to("f8e4m3", F32(46.0)) == F32(48.0)  # tie between 44 and 48 (even)


def test_f8e4m3_saturates():
    x = np.array([448, 449, 464, 465, 1e4, 3e38, np.inf, -500, -np.inf, np.nan, -448], dtype=np.float32)
    got = dt.round_to("f8e4m3", x)
    np.testing.assert_array_equal(got[:-2], [448, 448, 448, 448, 448, 448, 448, -448, -448])
    assert np.isnan(got[-2])
    assert got[-1] == -448
    s = dt.to_storage("f8e4m3", x)
    assert s.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    # without the clip ml_dtypes would give NaN beyond 464 (the tie 464 goes to 448)
    assert np.isnan(np.array([465.0], np.float32).astype(ml_dtypes.float8_e4m3fn)[0].astype(np.float32))
    r = dt.scalar_rounder("f8e4m3")
    assert r(F32(1e6)) == F32(448) and r(F32(-np.inf)) == F32(-448) and np.isnan(r(F32(np.nan)))
    # smallest subnormal is 2^-9; half of it ties to 0 (even)
    assert dt.round_to("f8e4m3", F32(2.0**-10)) == 0.0
    assert dt.round_to("f8e4m3", F32(2.0**-10 * 1.01)) == F32(2.0**-9)


def test_fp8_scaling_example_from_the_chapter():
    amax = F32(10.0)
    scale = F32(448.0) / amax  # 44.8 in f32
    q = dt.round_to("f8e4m3", F32(1.0) * scale)
    assert float(scale) == float(F32(44.8))
    assert q == F32(44.0)
    back = q * amax / F32(448.0)  # 44 * 10 / 448 = 55/56
    assert back == F32(440.0) / F32(448.0)
    assert Fraction(float(back)) == Fraction(float(F32(float(Fraction(55, 56)))))
    assert abs(float(back) - 55 / 56) < 2.0**-24


def test_f32_addition_is_order_dependent():
    one, tiny = F32(1.0), F32(2.0**-24)
    left = (one + tiny) + tiny  # each step is a tie, rounded to even (1.0)
    right = one + (tiny + tiny)  # 1 + 2^-23 exactly
    assert left == F32(1.0)
    assert right == F32(1 + 2.0**-23)
    assert left != right
    assert dt.round_to("f32", 1 + 2.0**-24) == F32(1.0)


def test_round_to_scalar_and_array_types():
    assert isinstance(dt.round_to("bf16", 1.3), np.float32)
    assert isinstance(dt.round_to("f32", np.float64(1.3)), np.float32)
    a = dt.round_to("f16", np.arange(6, dtype=np.float64).reshape(2, 3) / 3)
    assert a.dtype == np.float32 and a.shape == (2, 3)
    assert dt.to_storage("bf16", [1, 2, 3]).dtype == dt.NUMPY_DTYPES["bf16"]
    # storage arrays of another tdsl dtype convert exactly through f32
    b = dt.to_storage("bf16", np.array([1.5, 3.25], np.float32))
    assert dt.to_storage("f32", b).tolist() == [1.5, 3.25]
    with pytest.raises(ValueError, match="unknown dtype"):
        dt.round_to("f64", 1.0)


def test_random_array():
    rng = np.random.default_rng(0)
    for d in dt.NUMPY_DTYPES:
        a = dt.random_array(d, (3, 4), rng)
        assert a.dtype == dt.NUMPY_DTYPES[d] and a.shape == (3, 4)
        assert np.all(np.isfinite(a.astype(np.float32)))
        # already representable: rounding again changes nothing
        np.testing.assert_array_equal(dt.round_to(d, a.astype(np.float32)), a.astype(np.float32))
    a1 = dt.random_array("bf16", [5], np.random.default_rng(7), scale=3.0)
    a2 = dt.random_array("bf16", 5, np.random.default_rng(7), scale=3.0)
    np.testing.assert_array_equal(a1.astype(np.float32), a2.astype(np.float32))
    assert dt.random_array("f32", (), np.random.default_rng(0)).shape == ()


def test_describe_difference():
    a = np.array([[1.0, 2.0], [np.nan, 4.0]], np.float32)
    assert dt.describe_difference(a, a.copy()).startswith("identical (4 elements)")
    b = a.copy()
    b[0, 1] = 2.5
    b[1, 1] = np.nan
    msg = dt.describe_difference(a, b)
    assert msg.startswith("2 of 4 elements differ")
    assert "first difference at [0, 1]: 2.0 vs 2.5" in msg
    assert "max abs error inf at [1, 1]" in msg
    assert "shapes differ" in dt.describe_difference(a, a[0])
    bf = dt.to_storage("bf16", a)
    assert dt.describe_difference(bf, a).startswith("identical")


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=True, allow_infinity=True))
def test_scalar_rounder_matches_array_rounding(x):
    x = F32(x)
    with np.errstate(over="ignore"):
        _check_scalar(x)


def _check_scalar(x):
    for d in dt.NUMPY_DTYPES:
        want = dt.round_to(d, np.array([x]))[0]
        got = dt.scalar_rounder(d)(x)
        assert isinstance(got, np.float32)
        assert _same(float(got), float(want))
        assert _same(float(got), ref_round(d, float(x)) if d != "f32" else float(x))


def test_comparison_tolerance_trusts_every_bit_of_the_narrow_dtypes():
    """verify.py cannot import dtypes.py (the GPU machine has numpy only): its table must agree with it, f32 aside."""
    from tdsl.compiler.model.dtypes import PRECISION_BITS
    from tdsl.compiler.verify import TOLERANCE_BITS

    assert set(TOLERANCE_BITS) == set(PRECISION_BITS)
    assert all(TOLERANCE_BITS[d] == PRECISION_BITS[d] for d in PRECISION_BITS if d != "f32")
    assert TOLERANCE_BITS["f32"] < PRECISION_BITS["f32"]
    from tdsl.compiler.verify.compare import ROUNDING_BITS

    assert ROUNDING_BITS == PRECISION_BITS  # a value's own rounding: every bit
