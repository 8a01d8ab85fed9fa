"""FP8 (E4M3) on the Ascend 910B, which has no FP8 type: E4M3 tensors are bytes in GM, and the vector core
rounds, encodes and decodes with whole-tile arithmetic that is exact in f32 / f16.

Rounding to E4M3 (RNE, saturating at +-448 like `compiler.dtypes`): with a = min(|x|, 448), the value
rounded to the quantum 2^(e-3) of binade [2^e, 2^(e+1)) is (a + 2^(e+20)) - 2^(e+20) in f32 -- the sum lies
in [2^(e+20), 2^(e+21)), whose ulp is exactly that quantum, so the hardware's RNE addition does the
rounding.  The subnormals and the lowest binade share the quantum 2^-9 (e <= -6).  Fifteen binades,
each chosen with `T.tile.compare(a >= 2^e)` and `T.tile.select`; then the sign, read from x + 1/x, whose
sign is x's also at -0.0 (where `x < 0` is false).

Encoding an E4M3 value r >= 0 as its byte: r * 2^(3-e) + 8e + 48 in binade e (the same formula is right
at both ends of every binade, and for the subnormals with e = -6), plus 128 for negative values, and NaN
as 0x7F (found by comparing r with itself); the byte goes f32 -> f16 -> uint8 (exact for integers up to 255).

Decoding a byte b (as f16, exact): with the sign bit removed (b >= 128: b - 128), the value is
b * 2^-9 for b < 16 and (b - 8E + 8) * 2^(E-10) for 8E <= b < 8E + 8, E = 2..15, negated for the sign --
all exact in f16 (E4M3 values have 4 significant bits and lie in [2^-9, 448]).  The byte 0x7F/0xFF is
E4M3's NaN (the encoder writes it for NaN: exp(inf - inf) in a softmax of infinite scores) and is decoded as
NaN, made as 0 / 0.
"""

from __future__ import annotations

import math

from tdsl.compiler.errors import BackendError

NORMAL_BINADES = range(-5, 9)  # e = -5 .. 8: the binades above the shared 2^-9 quantum
DECODE_EXPONENTS = range(2, 16)  # E = 2 .. 15 (E = 0, 1 share b * 2^-9)


def _check_compare(n: int, itemsize: int) -> None:
    """T.tile.compare works on whole 256-byte repeats (codegen_ascend.cc): whole-tile masks need that many bytes."""
    if n * itemsize % 256:
        raise BackendError(f"an E4M3 conversion of a tile of {n} elements: the 910B's T.tile.compare takes a multiple "
                           f"of 256 bytes ({256 // itemsize} elements of {itemsize} bytes); use larger tiles")


def _f(x: float) -> str:
    return repr(float(x))


def round_e4m3(p, x: str, shape) -> str:
    """Emit the rounding of the f32 tile `x` to E4M3 values (f32); returns the result buffer."""
    n = math.prod(shape)
    _check_compare(n, 4)
    a = p.scratch("f32", shape, "abs")
    y = p.alloc(p.fresh("e4m3"), shape, "f32", "UB", "x rounded to E4M3")
    t = p.scratch("f32", shape)
    m = p.mask_buffer(n)
    p.emit("# round to E4M3 (RNE, saturating): per binade e, (a + 2^(e+20)) - 2^(e+20) rounds to its quantum")
    p.emit(f"T.tile.abs({a}, {x})")
    p.emit(f"T.tile.min({a}, {a}, 448.0)")
    p.emit(f"T.tile.add({y}, {a}, {_f(2.0 ** 14)})")
    p.emit(f"T.tile.add({y}, {y}, {_f(-2.0 ** 14)})  # the quantum 2^-9 of the subnormals and of binade -6")
    _piecewise(p, a, y, t, m, [(2.0 ** e, [f"T.tile.add({t}, {a}, {_f(2.0 ** (e + 20))})",
                                           f"T.tile.add({t}, {t}, {_f(-2.0 ** (e + 20))})"])
                               for e in NORMAL_BINADES])
    _sign_key(p, a, x)
    _when(p, m, a, 0.0, "LT", y, t, [f"T.tile.mul({t}, {y}, -1.0)"])
    return y


def encode_e4m3(p, r: str, shape) -> str:
    """Emit the bytes of the E4M3 values in the f32 tile `r`; returns a uint8 buffer."""
    n = math.prod(shape)
    _check_compare(n, 4)
    a = p.scratch("f32", shape, "abs")
    b = p.alloc(p.fresh("e4m3_code"), shape, "f32", "UB", "E4M3 byte values")
    t = p.scratch("f32", shape)
    m = p.mask_buffer(n)
    h = p.alloc(p.fresh("e4m3_code16"), shape, "f16", "UB")
    u = p.alloc(p.fresh("e4m3_bytes"), shape, "u8", "UB", "E4M3 bytes")
    p.emit("# encode E4M3 values as bytes: r * 2^(3-e) + 8e + 48 in binade e, + 128 if negative")
    p.emit(f"T.tile.abs({a}, {r})")
    p.emit(f"T.tile.mul({b}, {a}, {_f(2.0 ** 9)})")
    _piecewise(p, a, b, t, m, [(2.0 ** e, [f"T.tile.mul({t}, {a}, {_f(2.0 ** (3 - e))})",
                                           f"T.tile.add({t}, {t}, {_f(8 * e + 48)})"])
                               for e in NORMAL_BINADES])
    _sign_key(p, a, r)
    _when(p, m, a, 0.0, "LT", b, t, [f"T.tile.add({t}, {b}, 128.0)"])
    # NaN (the rounding keeps it; padding lanes of a ragged tile may hold 0 / 0) is the byte 0x7F, as E4M3
    # has it -- and an integer cast of NaN would be undefined
    p.emit(f"T.tile.compare({m}, {r}, {r}, \"EQ\")  # false only for NaN")
    p.emit(f"T.tile.select({b}, {m}, {b}, 127.0, \"VSEL_TENSOR_SCALAR_MODE\")")
    p.emit(f"T.tile.cast({h}, {b}, \"CAST_NONE\", {n})  # integers 0..255: exact in f16")
    p.emit(f"T.tile.cast({u}, {h}, \"CAST_RINT\", {n})")
    return u


def decode_e4m3(p, raw: str, shape) -> str:
    """Emit the E4M3 values (f16, exact) of the bytes in the uint8 tile `raw`; returns an f16 buffer."""
    n = math.prod(shape)
    _check_compare(n, 2)
    b = p.scratch("f16", shape, "byte")
    v = p.alloc(p.fresh("e4m3_f16"), shape, "f16", "UB", "decoded E4M3 values")
    t = p.scratch("f16", shape)
    m = p.mask_buffer(n)
    neg = p.mask_buffer(n, "sign")
    p.emit("# decode E4M3 bytes: b * 2^-9 below 16, (b - 8E + 8) * 2^(E-10) for 8E <= b < 8E + 8; then the sign")
    p.emit(f"T.tile.cast({b}, {raw}, \"CAST_NONE\", {n})")
    _when(p, neg, b, 128.0, "GE", b, t, [f"T.tile.add({t}, {b}, -128.0)"])  # the sign bit, kept in `neg`
    p.emit(f"T.tile.mul({v}, {b}, {_f(2.0 ** -9)})")
    _piecewise(p, b, v, t, m, [(8.0 * e, [f"T.tile.add({t}, {b}, {_f(8 - 8 * e)})"]
                                + ([f"T.tile.mul({t}, {t}, {_f(2.0 ** (e - 10))})"] if e != 10 else []))
                               for e in DECODE_EXPONENTS])
    # 0x7F (0xFF with the sign): NaN, not the 480 the formula of E = 15 would give
    _when(p, m, b, 127.0, "EQ", v, t, [f"T.tile.sub({t}, {b}, {b})", f"T.tile.div({t}, {t}, {t})  # 0 / 0: NaN"])
    p.emit(f"T.tile.mul({t}, {v}, -1.0)")
    _select(p, v, neg, t)
    return v


def _sign_key(p, key: str, x: str) -> None:
    """key = x + 1/x, negative exactly where x has its sign bit set and is no NaN: -0.0 too (1/-0 = -inf), which
    `x < 0` misses, so a -0.0 (or a negative rounded to zero) keeps its sign in E4M3, as the interpreter has it."""
    p.emit(f"T.tile.fill({key}, 1.0)")
    p.emit(f"T.tile.div({key}, {key}, {x})")
    p.emit(f"T.tile.add({key}, {key}, {x})  # the sign of x, also at -0.0")


def _select(p, out: str, mask: str, t: str) -> None:
    p.emit(f"T.tile.select({out}, {mask}, {t}, {out}, \"VSEL_TENSOR_TENSOR_MODE\")")


def _when(p, mask: str, key: str, threshold: float, mode: str, out: str, t: str, ops: list) -> None:
    """out = (the value `ops` leave in t) where `key MODE threshold`, else out unchanged."""
    p.emit(f"T.tile.compare({mask}, {key}, {_f(threshold)}, \"{mode}\")")
    for op in ops:
        p.emit(op)
    _select(p, out, mask, t)


def _piecewise(p, key: str, out: str, t: str, mask: str, pieces) -> None:
    """For each (threshold, ops) in increasing order: out = (what ops leave in t) where key >= threshold --
    the last piece whose threshold the lane reaches wins."""
    for threshold, ops in pieces:
        _when(p, mask, key, threshold, "GE", out, t, ops)
