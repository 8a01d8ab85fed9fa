"""`T.tile.*` of tilelang-ascend 0.1.4 (ascend_tile.py): the 910B's vector instructions on UB buffers.

Each operation takes a pointer and an element count: its operands are contiguous UB regions of equal element
counts (not shapes), one dtype the AscendC instruction takes, and a second operand that may be a buffer, a
`BufferLoad` (read at its first index) or a scalar as the real code generator allows.  rsqrt, sigmoid and silu
are computed as compiler/model/functions.py composes them (one f32 rounding per step), like the interpreter.
"""

from __future__ import annotations

import numpy as np

from tdsl.backends.ascend910b.api import CAST_MODES, COMPARE_MODES, SELECT_MODES
from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.model.functions import COMPOSITIONS

from tdsl.compiler.verify.ascend_sim.buffers import (DUPLICATE_DTYPES, Buffer, BufferLoad, Region, SimulationError, Unsupported, _is_int_dtype,
                      _is_scalar, _name, _storage, _strip, _what)
from tdsl.compiler.verify.ascend_sim.lang_common import _f64_math
from tdsl.compiler.verify.ascend_sim.machine import _Machine

# dtypes of the 910B's vector instructions (AscendC dav_c220 kernel_operator_vec_binary_impl.h static_asserts:
# Add/Sub/Mul/Max/Min half/float/int16/int32, Div half/float, And/Or int16/uint16; Exp/Ln/... half/float)
ARITH_DTYPES = ("f16", "f32", "i16", "i32")
FLOAT_DTYPES = ("f16", "f32")
BITWISE_DTYPES = ("i16", "u16")
COMPARE = {"EQ": np.equal, "NE": np.not_equal, "GT": np.greater, "GE": np.greater_equal, "LT": np.less,
           "LE": np.less_equal}  # NaN: False except NE, as IEEE comparisons
ANY_SRC1 = ("tensor", "load", "scalar")
NO_SCALAR = "src1 is a buffer, a region or a BufferLoad (ascend_tile.py:867, 889: not a bare scalar)"
NO_BITWISE_SCALAR = ("src1 is a buffer or a region: binary_op's scalar form would call tl.ascend_bitwise_ands / "
                     "_ors, which are not registered (ascend.cc:879-888 has ascend_bitwise_and / _or only)")


def _reciprocal(v):
    """1 / v as DivsOpCodegen computes a scalar divisor: in f32, then in the operand's dtype (codegen_ascend.cc:
    1731-1745), for AscendC::Muls."""
    v = np.asarray(v)
    with np.errstate(all="ignore"):
        return (np.float32(1.0) / v.astype(np.float32)).astype(v.dtype)


class _ArrayAlgebra:
    """compiler/model/functions.py's algebra over the array of a T.tile.* operand: each step one NumPy operation, with
    NumPy's promotion (`1` is an f32) and no fused multiply-add; a primitive is the float64 result rounded once."""

    PRIMITIVES = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}

    def one(self):
        return np.float32(1.0)

    def neg(self, x):
        return -x

    def add(self, x, y):
        return x + y

    def mul(self, x, y):
        return x * y

    def div(self, x, y):
        return x / y

    def call(self, func, x):
        return _f64_math(self.PRIMITIVES[func], x)


def _composed(func: str, a):
    """rsqrt / sigmoid / silu of an array, step by step as the function catalog defines them (the interpreter's
    steps; the real T.tile.silu and friends are AscendC's, which the emitters do not call)."""
    return COMPOSITIONS[func](a, _ArrayAlgebra())


class _Tile910B:
    """`T.tile.*` of tilelang-ascend 0.1.4 (ascend_tile.py): operations on UB buffers and contiguous regions,
    each a pointer and an element count."""

    def __init__(self, m: _Machine):
        self._m = m

    def _operand(self, what, x, like: Buffer, n: int, kinds, rule=""):
        """(kind, value) of a second operand: ("tensor", n elements), ("load", a 1-D UB element) or ("scalar",
        converted to `like`'s dtype as the generated code does, codegen_ascend.cc:1641-1650, 1822-1827)."""
        m = self._m
        if isinstance(x, (Buffer, Region)):
            b, v = m.flat_view(x, what)
            if "tensor" not in kinds:
                raise SimulationError(f"{what}: src1 {b.name} is a buffer here, but {rule}")
            if v.size != n:
                raise SimulationError(f"{what}: src1 {b.name} has {v.size} elements, the operation {n} (binary_op "
                                      f"asserts size_0 == size_2, ascend_tile.py:835)")
            if b.dtype != like.dtype:
                raise SimulationError(f"{what}: src1 {b.name} is {b.dtype}, {like.name} {like.dtype}")
            return "tensor", v
        if isinstance(x, BufferLoad):
            if "load" not in kinds:
                raise SimulationError(f"{what}: src1 {x!r} is a BufferLoad here, but {rule}")
            v = m.scalar_load(x, what)
            if x.buf.dtype != like.dtype:
                raise SimulationError(f"{what}: the scalar operand {x!r} is {x.buf.dtype}, {like.name} {like.dtype} "
                                      f"(codegen_ascend.cc:1628 checks they agree)")
            return "load", v
        if not _is_scalar(x):
            raise SimulationError(f"{what}: src1 is {_what(x)}, not a buffer, a region or a scalar")
        if "scalar" not in kinds:
            raise SimulationError(f"{what}: src1 {x!r} is a scalar, but {rule}")
        return "scalar", _storage(like.dtype, x, f"{what}'s scalar operand")

    def _binary(self, what, fn, dst, src0, src1, kinds=ANY_SRC1, dtypes=ARITH_DTYPES, rule="", scalar_fn=None):
        m = self._m
        m.vector_op(what)
        db, d = m.flat_view(dst, what)
        sb, a = m.flat_view(src0, what)
        if a.size != d.size:
            raise SimulationError(f"{what}: dst {db.name} has {d.size} elements but src0 {sb.name} {a.size} "
                                  f"(binary_op asserts size_0 == size_1, ascend_tile.py:816)")
        if sb.dtype != db.dtype or db.dtype not in dtypes:
            raise SimulationError(f"{what}: {sb.name} ({sb.dtype}) into {db.name} ({db.dtype}); the 910B's vector "
                                  f"instruction takes one dtype of {', '.join(dtypes)}")
        kind, b = self._operand(what, src1, db, d.size, kinds, rule)
        d[...] = scalar_fn(a, b) if scalar_fn is not None and kind != "tensor" else fn(a, b)

    def _unary(self, what, fn, dst, src):
        m = self._m
        m.vector_op(what)
        db, d = m.flat_view(dst, what)
        sb, a = m.flat_view(src, what)
        if a.size != d.size or sb.dtype != db.dtype or db.dtype not in FLOAT_DTYPES:
            raise SimulationError(f"{what}: {a.size} {sb.dtype} elements of {sb.name} into {d.size} {db.dtype} of "
                                  f"{db.name} (unary_op asserts equal sizes, ascend_tile.py:958; one dtype of "
                                  f"{', '.join(FLOAT_DTYPES)})")
        d[...] = fn(a)

    def fill(self, buffer, value):
        m = self._m
        m.vector_op("T.tile.fill")
        b, v = m.flat_view(buffer, "T.tile.fill")
        if b.dtype not in DUPLICATE_DTYPES:
            raise SimulationError(f"T.tile.fill of {b.name} ({b.dtype}): Fill is AscendC::Duplicate (common.h:"
                                  f"923-927), which takes {', '.join(DUPLICATE_DTYPES)}")
        value = m.scalar_value(value, "T.tile.fill")
        v[...] = m._convert(b, value)

    def add(self, dst, src0, src1):
        self._binary("T.tile.add", np.add, dst, src0, src1)

    def sub(self, dst, src0, src1):
        # a BufferLoad subtrahend becomes AscendC::Adds of its negation (codegen_ascend.cc:1665-1719): exact
        self._binary("T.tile.sub", np.subtract, dst, src0, src1, ("tensor", "load"), rule=NO_SCALAR)

    def mul(self, dst, src0, src1):
        self._binary("T.tile.mul", np.multiply, dst, src0, src1)

    def div(self, dst, src0, src1):
        self._binary("T.tile.div", np.divide, dst, src0, src1, ("tensor", "load"), FLOAT_DTYPES, NO_SCALAR,
                     scalar_fn=lambda a, v: a * _reciprocal(v))

    def max(self, dst, src0, src1):  # noqa: A003
        self._binary("T.tile.max", np.maximum, dst, src0, src1)

    def min(self, dst, src0, src1):  # noqa: A003
        self._binary("T.tile.min", np.minimum, dst, src0, src1)

    def bitwise_and(self, dst, src0, src1):
        self._binary("T.tile.bitwise_and", np.bitwise_and, dst, src0, src1, ("tensor",), BITWISE_DTYPES,
                     NO_BITWISE_SCALAR)

    def bitwise_or(self, dst, src0, src1):
        self._binary("T.tile.bitwise_or", np.bitwise_or, dst, src0, src1, ("tensor",), BITWISE_DTYPES,
                     NO_BITWISE_SCALAR)

    def exp(self, dst, src0):
        self._unary("T.tile.exp", lambda a: _f64_math(np.exp, a), dst, src0)

    def ln(self, dst, src0):
        self._unary("T.tile.ln", lambda a: _f64_math(np.log, a), dst, src0)

    def abs(self, dst, src0):  # noqa: A003
        self._unary("T.tile.abs", np.abs, dst, src0)

    def sqrt(self, dst, src0):
        self._unary("T.tile.sqrt", lambda a: _f64_math(np.sqrt, a), dst, src0)

    def rsqrt(self, dst, src0):
        self._unary("T.tile.rsqrt", lambda a: _composed("rsqrt", a), dst, src0)

    def sigmoid(self, dst, src):
        self._unary("T.tile.sigmoid", lambda a: _composed("sigmoid", a), dst, src)

    def silu(self, dst, src):
        self._unary("T.tile.silu", lambda a: _composed("silu", a), dst, src)

    def cast(self, dst, src, mode, count):
        m = self._m
        m.vector_op("T.tile.cast")
        db, d = m.tile_view(dst, "T.tile.cast")
        sb, s = m.tile_view(src, "T.tile.cast")
        if mode not in CAST_MODES:
            raise SimulationError(f"T.tile.cast with unknown mode {mode!r}")
        if int(count) != d.size or d.size != s.size or _strip(d.shape) != _strip(s.shape):
            raise SimulationError(f"T.tile.cast of {count} elements from {s.shape} into {d.shape}")
        if mode not in ("CAST_RINT", "CAST_NONE"):
            raise Unsupported(f"T.tile.cast {mode}: only round-to-nearest-even (CAST_RINT, and CAST_NONE, which is "
                              f"RINT where the conversion is inexact) is modelled")
        what = f"T.tile.cast {sb.name} ({sb.dtype}) -> {db.name} ({db.dtype}, {mode})"
        if _is_int_dtype(db.dtype) and not _is_int_dtype(sb.dtype):
            wide = s.astype(np.float64)
            r = np.rint(wide)  # ties to even
            inexact = np.isfinite(wide) & (r != wide)
            if mode == "CAST_NONE" and inexact.any():
                v = wide.reshape(-1)[int(np.argmax(inexact.reshape(-1)))].item()
                raise SimulationError(f"{what}: {v} is not an integer; the emitter uses CAST_NONE only where the "
                                      f"conversion is exact (CAST_RINT rounds)")
            d[...] = _storage(db.dtype, r, what).reshape(d.shape)
        elif _is_int_dtype(db.dtype):
            d[...] = _storage(db.dtype, s, what).reshape(d.shape)
        else:  # float -> float, integer -> float: one RNE rounding (exact for the integers used)
            d[...] = dt.to_storage(db.dtype, s).reshape(d.shape)

    def createvecindex(self, dst, firstValue):  # noqa: N803
        what = "T.tile.createvecindex"
        m = self._m
        m.vector_op(what)
        if not isinstance(dst, Buffer):
            raise SimulationError(f"{what} takes a whole buffer: the real function uses dst.shape and "
                                  f"dst.access_ptr (ascend_tile.py:1426-1435); got {dst!r}")
        b, v = m.flat_view(dst, what)
        if b.dtype not in ARITH_DTYPES:
            raise SimulationError(f"{what} into {b.name} ({b.dtype}): AscendC::CreateVecIndex takes "
                                  f"{', '.join(ARITH_DTYPES)}")
        first = m.scalar_value(firstValue, what)
        v[...] = _storage(b.dtype, np.asarray(first) + np.arange(v.size), what)

    def compare(self, dst, src0, src1, mode):
        what = "T.tile.compare"
        m = self._m
        m.vector_op(what)
        if mode not in COMPARE_MODES:
            raise SimulationError(f"{what} with mode {mode!r}: one of {', '.join(sorted(COMPARE_MODES))} "
                                  f"(ascend_tile.py:1655)")
        sb, a = m.flat_view(src0, what)
        if sb.dtype not in FLOAT_DTYPES:
            raise SimulationError(f"{what} of {sb.name} ({sb.dtype}): one of {', '.join(FLOAT_DTYPES)} is compared")
        n = a.size
        if n * a.itemsize % 256:
            raise SimulationError(f"{what} of {n} {sb.dtype} elements of {sb.name} ({n * a.itemsize} B): the "
                                  f"compiler requires a multiple of 256 bytes (codegen_ascend.cc:1790, 1844)")
        db, d = m.flat_view(dst, what)
        need = -(-n // 8)
        if db.dtype != "u8" or d.size < need:
            raise SimulationError(f"{what}: the mask {db.name} ({d.size} {db.dtype}) is too small or not uint8: "
                                  f"{n} elements of {sb.name} need {need} uint8 bytes, one bit per element")
        _, b = self._operand(what, src1, sb, n, ANY_SRC1)
        with np.errstate(invalid="ignore"):
            bits = COMPARE[mode](a, b)
        d[:need] = np.packbits(bits, bitorder="little")  # element i: bit i % 8 of byte i // 8

    def select(self, dst, selMask, src0, src1, selMode):  # noqa: N803
        what = "T.tile.select"
        m = self._m
        m.vector_op(what)
        if selMode not in SELECT_MODES:
            raise SimulationError(f"{what} with selMode {selMode!r}: one of {', '.join(sorted(SELECT_MODES))} "
                                  f"(ascend_tile.py:626)")
        dshape, sshape = self._api_shape(dst, what), self._api_shape(src0, what)
        if dshape != sshape:
            raise SimulationError(f"{what}: dst {_name(dst)} has shape {dshape} but src0 {_name(src0)} {sshape}; "
                                  f"the real function asserts they are equal, a region's shape being its list of "
                                  f"extents (ascend_tile.py:578-593)")
        db, d = m.flat_view(dst, what)
        sb, a = m.flat_view(src0, what)
        if sb.dtype != db.dtype or db.dtype not in FLOAT_DTYPES:
            raise SimulationError(f"{what}: {sb.name} ({sb.dtype}) into {db.name} ({db.dtype}); AscendC::Select "
                                  f"takes one dtype of {', '.join(FLOAT_DTYPES)}")
        bits = self._selection(what, selMask, a.size, a.itemsize, selMode)
        if selMode == "VSEL_TENSOR_SCALAR_MODE":
            if not _is_scalar(src1):
                raise SimulationError(f"{what} in VSEL_TENSOR_SCALAR_MODE takes a scalar src1 (ascend_tile.py:"
                                      f"652-653), got {_what(src1)}")
            other = _storage(db.dtype, src1, f"{what}'s scalar src1")
        else:
            if not isinstance(src1, Buffer):
                raise SimulationError(f"{what} in {selMode} takes a whole UB buffer as src1: the real function calls "
                                      f"src1.access_ptr (ascend_tile.py:673), which a region lacks, and its BufferLoad "
                                      f"form passes indices[0] where the code generator expects the mode "
                                      f"(ascend_tile.py:640-649, codegen_ascend.cc:1327-1342); got {_what(src1)}")
            _, other = self._operand(what, src1, db, a.size, ("tensor",))
        d[...] = np.where(bits, a, other)

    def _api_shape(self, x, what):
        """The shape select compares: a buffer's shape, a region's extents (ascend_tile.py:578-589)."""
        if isinstance(x, Buffer):
            return list(x.shape)
        if isinstance(x, Region):
            return list(self._m._bounds(x)[2])
        raise SimulationError(f"{what} takes a UB buffer or region as dst and src0, got {_what(x)}")

    def _selection(self, what, mask, n, itemsize, mode):
        """Per element: take src0?  Bit i % 8 of byte i // 8 of the mask, except that VSEL_CMPMASK_SPR reuses the
        first 256 / itemsize bits in every 256-byte repeat (the CMPMASK register: 64 bits for f32, 128 for f16;
        AscendC Select mode 0, dav_c220 kernel_operator_vec_cmpsel_impl.h VselImpl)."""
        if not isinstance(mask, Buffer):
            raise SimulationError(f"{what}: selMask must be a whole UB buffer: the real function calls "
                                  f"selMask.access_ptr (ascend_tile.py:623); got {_what(mask)}")
        mb, mv = self._m.flat_view(mask, what)
        index = np.arange(n)
        if mode == "VSEL_CMPMASK_SPR":
            index = index % (256 // itemsize)
        need = -(-(int(index.max()) + 1) // 8) if n else 0
        if mb.dtype != "u8" or mv.size < need:
            raise SimulationError(f"{what}: the mask {mb.name} ({mv.size} {mb.dtype}) is too small or not uint8: "
                                  f"{n} elements in {mode} need {need} uint8 bytes")
        return np.unpackbits(mv[:need], bitorder="little")[index].astype(bool)
