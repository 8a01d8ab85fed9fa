"""The 910B operations of the Ascend execution model (compiler/verify/ascend_sim) that the emitted kernels need
for masks, ragged tiles and FP8, on small hand-written modules in the emitted style.

Each feature is checked twice: the result it must compute (against NumPy written out here, not against the
simulator), and a misuse the real tilelang-ascend 0.1.4 would reject or get wrong, which must be a
SimulationError (or a problem found by api910b.check_module).
"""

import re

import ml_dtypes
import numpy as np
import pytest
from tdsl.backends.ascend910b import api as api910b
from tdsl.compiler.verify.ascend_sim import (
    SimulationError,
    Unsupported,
    namespace_functions,
    simulate,
)
from tdsl.compiler.model import dtypes as dt

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int16": 2, "uint16": 2, "uint8": 1}


def vector_module(params, allocs, body, blocks=1, top=""):
    """A 910B module with one kernel `k` whose vector core 0 runs `body` (lines, 16 spaces deep).

    allocs: [(name, shape, dtype)] of UB buffers; the header declares their bytes, which the tests compare
    with what the simulation allocated.
    """
    ub = sum(int(np.prod(shape)) * ITEMSIZE[dtype] for _, shape, dtype in allocs)
    lines = [f'        {n} = T.alloc_ub({shape}, "{dtype}")' for n, shape, dtype in allocs]
    text = "\n".join([
        "# Target ascend-910b (hand-written in the emitted style)",
        "import tilelang",
        "import tilelang.language as T",
        top,
        "",
        "@T.prim_func",
        f"def k({params}):",
        f"    # hand-written; on-chip bytes: UB {ub}",
        f"    with T.Kernel({blocks}, is_npu=True) as (cid, vid):",
        *lines,
        '        with T.Scope("V"):',
        "            if vid == 0:",
        *("                " + line for line in body.strip("\n").splitlines()),
        "",
        "",
        'KERNELS = {"k": k}',
        "",
    ])
    return text


def run(text, inputs):
    """Simulate, and check that the module passes the API check and declared what it allocated."""
    assert api910b.check_module(text) == []
    sim = simulate(text, inputs)
    for kernel in sim.kernels:
        assert kernel.footprint == kernel.declared
    return sim


def fails(text, inputs, message, error=SimulationError):
    with pytest.raises(error, match=re.escape(message)):
        simulate(text, inputs)


RNG = np.random.default_rng(7)


# ---------------------------------------------------------------- T.tile.compare


COMPARE = vector_module(
    'X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"), M: T.Tensor((16,), "uint8")',
    [("x", (64,), "float32"), ("y", (64,), "float32"), ("m", (16,), "uint8")],
    """
T.copy(X[0], x)
T.copy(Y[0], y)
T.tile.compare(m, x, y, "GT")
T.copy(m, M[0])
""")


def test_compare_writes_one_bit_per_element_least_significant_first():
    x = RNG.standard_normal(64).astype(np.float32)
    y = RNG.standard_normal(64).astype(np.float32)
    x[3], y[5], x[7], y[7] = np.nan, np.nan, 1.0, 1.0
    sim = run(COMPARE, {"X": x, "Y": y})
    want = np.packbits(x > y, bitorder="little")  # element i: bit i % 8 of byte i // 8
    assert np.array_equal(sim.tensors["M"][:8], want)
    assert want[0] & 0x08 == 0 and want[0] & 0x20 == 0  # NaN compares false
    assert list(sim.tensors["M"][8:]) == [0x7F] * 8  # the bytes past the 64 bits were never written
    # the bit order itself: only element 9 greater -> byte 1 = 0b10
    x2 = np.zeros(64, np.float32)
    x2[9] = 1.0
    sim = run(COMPARE, {"X": x2, "Y": np.zeros(64, np.float32)})
    assert list(sim.tensors["M"][:8]) == [0, 2, 0, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("mode,op", [("EQ", np.equal), ("NE", np.not_equal), ("GE", np.greater_equal),
                                     ("LT", np.less), ("LE", np.less_equal)])
def test_compare_modes_and_a_scalar_or_bufferload_operand(mode, op):
    x = np.round(RNG.standard_normal(64), 1).astype(np.float32)
    x[:4] = [0.5, np.nan, 0.5, -0.5]
    text = COMPARE.replace('T.tile.compare(m, x, y, "GT")', f'T.tile.compare(m, x, 0.5, "{mode}")')
    sim = run(text, {"X": x, "Y": x})
    assert np.array_equal(sim.tensors["M"][:8], np.packbits(op(x, np.float32(0.5)), bitorder="little"))
    # the same through a BufferLoad of a 1-D UB buffer: the element y[2] (= x[2] = 0.5)
    loaded = COMPARE.replace("T.copy(Y[0], y)", "T.copy(X[0], y)").replace(
        'T.tile.compare(m, x, y, "GT")', f'T.tile.compare(m, x, y[2], "{mode}")')
    sim = run(loaded, {"X": x, "Y": x})
    assert np.array_equal(sim.tensors["M"][:8], np.packbits(op(x, np.float32(0.5)), bitorder="little"))


def test_compare_misuse():
    x = np.zeros(64, np.float32)
    small = COMPARE.replace('m = T.alloc_ub((16,), "uint8")', 'm = T.alloc_ub((4,), "uint8")')
    small = small.replace("UB 528", "UB 516").replace("T.copy(m, M[0])", "T.copy(m, M[0:4])")
    assert small.count("(4,)") == 1 and "UB 516" in small
    fails(small, {"X": x, "Y": x}, "the mask m (4 u8) is too small or not uint8: 64 elements of x need 8 uint8 bytes")
    # 16 f32 elements are 64 bytes: the code generator refuses compares of other than 256-byte multiples
    short = COMPARE.replace('T.tile.compare(m, x, y, "GT")', 'T.tile.compare(m, x[0:16], y[0:16], "GT")')
    fails(short, {"X": x, "Y": x}, "T.tile.compare of 16 f32 elements of x (64 B): the compiler requires a "
                                   "multiple of 256 bytes")
    bad_mode = COMPARE.replace('"GT"', '"GTE"')
    assert api910b.check_module(bad_mode) == [
        "line 17: T.tile.compare with an unknown comparison mode 'GTE' (one of EQ, GE, GT, LE, LT, NE, as a constant)"]
    fails(bad_mode, {"X": x, "Y": x}, "T.tile.compare with mode 'GTE'")
    fp_mask = COMPARE.replace('T.tile.compare(m, x, y, "GT")', 'T.tile.compare(y, x, 0.0, "GT")')
    fails(fp_mask, {"X": x, "Y": x}, "the mask y (64 f32) is too small or not uint8")


# ---------------------------------------------------------------- T.tile.select and T.tile.createvecindex

CAUSAL = vector_module(
    'S: T.Tensor((4, 64), "float32"), P: T.Tensor((4, 64), "float32")',
    [("s", (4, 64), "float32"), ("cols", (64,), "float32"), ("mask", (8,), "uint8")],
    """
T.copy(S[0, 0], s)
T.tile.createvecindex(cols, 0.0)
for r in T.serial(4):
    T.tile.compare(mask, cols, T.Cast("float32", r), "LE")
    T.tile.select(s[r, :], mask, s[r, :], -T.infinity("float32"), "VSEL_TENSOR_SCALAR_MODE")
T.copy(s, P[0, 0])
""")


def test_causal_rows_are_masked_with_minus_infinity():
    s = RNG.standard_normal((4, 64)).astype(np.float32)
    sim = run(CAUSAL, {"S": s})
    r, j = np.indices((4, 64))
    assert np.array_equal(sim.tensors["P"], np.where(j <= r, s, -np.inf))
    # a mask of the wrong side (GE) masks the other triangle: the check can fail
    sim = run(CAUSAL.replace('"LE"', '"GE"'), {"S": s})
    assert not np.array_equal(sim.tensors["P"], np.where(j <= r, s, -np.inf))


SELECT = vector_module(
    'A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), K: T.Tensor((16,), "uint8"), '
    'Y: T.Tensor((128,), "float32")',
    [("a", (128,), "float32"), ("b", (128,), "float32"), ("sel", (16,), "uint8"), ("y", (128,), "float32")],
    """
T.copy(A[0], a)
T.copy(B[0], b)
T.copy(K[0], sel)
T.tile.select(y, sel, a, b, "VSEL_TENSOR_TENSOR_MODE")
T.copy(y, Y[0])
""")


def test_select_between_two_buffers_and_the_cmpmask_register_mode():
    a = RNG.standard_normal(128).astype(np.float32)
    b = RNG.standard_normal(128).astype(np.float32)
    k = RNG.integers(0, 256, 16).astype(np.uint8)
    bits = np.unpackbits(k, bitorder="little").astype(bool)
    sim = run(SELECT, {"A": a, "B": b, "K": k})
    assert np.array_equal(sim.tensors["Y"], np.where(bits, a, b))
    # VSEL_CMPMASK_SPR takes its mask from the CMPMASK register: the first 64 bits (f32) in every repeat
    sim = run(SELECT.replace("VSEL_TENSOR_TENSOR_MODE", "VSEL_CMPMASK_SPR"), {"A": a, "B": b, "K": k})
    assert np.array_equal(sim.tensors["Y"], np.where(np.tile(bits[:64], 2), a, b))


def test_createvecindex():
    text = vector_module(
        'Y: T.Tensor((64,), "float32"), I: T.Tensor((2, 32), "int32"), F: T.Tensor((1,), "int32")',
        [("y", (64,), "float32"), ("i", (2, 32), "int32"), ("f", (1,), "int32")],
        """
T.copy(F[0], f)
T.tile.createvecindex(y, -2.5)
T.tile.createvecindex(i, f[0])
T.copy(y, Y[0])
T.copy(i, I[0, 0])
""")
    sim = run(text, {"F": np.array([7], np.int32)})
    assert np.array_equal(sim.tensors["Y"], np.arange(64, dtype=np.float32) - 2.5)
    assert sim.tensors["I"].dtype == np.int32
    assert np.array_equal(sim.tensors["I"], 7 + np.arange(64).reshape(2, 32))
    region = text.replace("T.tile.createvecindex(y, -2.5)", "T.tile.createvecindex(y[0:32], -2.5)")
    fails(region, {"F": np.array([7], np.int32)}, "T.tile.createvecindex takes a whole buffer")
    fractional = text.replace("T.tile.createvecindex(i, f[0])", "T.tile.createvecindex(i, 0.5)")
    fails(fractional, {"F": np.array([7], np.int32)}, "T.tile.createvecindex: 0.5 is not an integer")


def test_select_misuse():
    s = np.zeros((4, 64), np.float32)
    # the real select asserts dst_shape == src0_shape, a region's shape being its extents: [1, 64] != [64]
    mismatch = CAUSAL.replace("T.tile.select(s[r, :], mask, s[r, :],", "T.tile.select(s[r, :], mask, cols,")
    fails(mismatch, {"S": s}, "T.tile.select: dst s[0, :] has shape [1, 64] but src0 cols [64]")
    kinds = {"A": np.zeros(128, np.float32), "B": np.zeros(128, np.float32), "K": np.zeros(16, np.uint8)}
    # selMask and a tensor src1 go through .access_ptr, which a BufferRegion lacks
    mask_region = SELECT.replace("T.tile.select(y, sel, a, b,", "T.tile.select(y, sel[0:16], a, b,")
    fails(mask_region, kinds, "selMask must be a whole UB buffer")
    src1_region = SELECT.replace("T.tile.select(y, sel, a, b,", "T.tile.select(y, sel, a, b[0:128],")
    fails(src1_region, kinds, "in VSEL_TENSOR_TENSOR_MODE takes a whole UB buffer as src1")
    scalar_in_tensor_mode = SELECT.replace("T.tile.select(y, sel, a, b,", "T.tile.select(y, sel, a, 0.0,")
    fails(scalar_in_tensor_mode, kinds, "in VSEL_TENSOR_TENSOR_MODE takes a whole UB buffer as src1")
    buffer_in_scalar_mode = SELECT.replace("VSEL_TENSOR_TENSOR_MODE", "VSEL_TENSOR_SCALAR_MODE")
    fails(buffer_in_scalar_mode, kinds, "in VSEL_TENSOR_SCALAR_MODE takes a scalar src1")
    assert api910b.check_module(SELECT.replace("VSEL_TENSOR_TENSOR_MODE", "VSEL_TENSOR_MODE")) != []


def test_select_needs_a_large_enough_mask():
    text = SELECT.replace('sel = T.alloc_ub((16,), "uint8")', 'sel = T.alloc_ub((8,), "uint8")').replace(
        "T.copy(K[0], sel)", "T.copy(K[0:8], sel)").replace("UB 1552", "UB 1544")
    assert "UB 1544" in text and "(8,)" in text
    kinds = {"A": np.zeros(128, np.float32), "B": np.zeros(128, np.float32), "K": np.zeros(16, np.uint8)}
    fails(text, kinds, "the mask sel (8 u8) is too small or not uint8: 128 elements in VSEL_TENSOR_TENSOR_MODE "
                       "need 16 uint8 bytes")
    # the register mode reads only the first 64 bits: 8 bytes are enough there
    run(text.replace("VSEL_TENSOR_TENSOR_MODE", "VSEL_CMPMASK_SPR"), kinds)


# ---------------------------------------------------------------- scalar operands and regions of T.tile.*

SCALARS = vector_module(
    'X: T.Tensor((4, 64), "float32"), V: T.Tensor((8,), "float32"), Y: T.Tensor((4, 64), "float32")',
    [("x", (4, 64), "float32"), ("v", (8,), "float32"), ("y", (4, 64), "float32")],
    """
T.copy(X[0, 0], x)
T.copy(V[0], v)
for r in T.serial(4):
    p = x[r, 5]
    T.tile.mul(x[r, :], x[r, :], p)
    T.tile.mul(y[r, :], x[r, :], p)
T.tile.add(y[0:2, :], y[0:2, :], v[1])
T.tile.sub(y[2, :], y[2, :], v[2])
T.tile.div(y[3, :], y[3, :], v[3])
T.copy(y, Y[0, 0])
""")


def test_scalar_operands_bound_names_and_1d_buffer_loads():
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    v = np.array([0, 0.25, -1.5, 3.0, 0, 0, 0, 0], np.float32)
    sim = run(SCALARS, {"X": x, "V": v})
    want = x * x[:, 5:6] * x[:, 5:6]  # p = x[r, 5] is read when it is bound, before x[r, 5] changes
    want[0:2] += v[1]
    want[2] -= v[2]
    want[3] *= np.float32(1) / v[3]  # a scalar divisor: AscendC::Muls by its f32 reciprocal
    assert np.array_equal(sim.tensors["Y"], want)
    assert not np.array_equal(want[3], (x * x[:, 5:6] * x[:, 5:6])[3] / v[3])  # which differs from dividing here


def test_scalar_operand_misuse():
    inputs = {"X": np.zeros((4, 64), np.float32), "V": np.zeros(8, np.float32)}
    # a BufferLoad of a 2-D buffer: tilelang-ascend would read x's flat element 1, not x[1, 5]
    fails(SCALARS.replace("T.tile.add(y[0:2, :], y[0:2, :], v[1])", "T.tile.add(y[0:2, :], y[0:2, :], x[1, 5])"),
          inputs, "T.tile.add: the scalar operand x[1, 5] indexes the 2-d x, but tilelang-ascend reads a "
                  "BufferLoad operand at its first index only")
    fails(SCALARS.replace("T.tile.sub(y[2, :], y[2, :], v[2])", "T.tile.sub(y[2, :], y[2, :], 1.0)"), inputs,
          "T.tile.sub: src1 1.0 is a scalar, but src1 is a buffer, a region or a BufferLoad")
    fails(SCALARS.replace("T.tile.div(y[3, :], y[3, :], v[3])", "T.tile.div(y[3, :], y[3, :], 2.0)"), inputs,
          "T.tile.div: src1 2.0 is a scalar")
    # element counts must agree (shapes need not)
    fails(SCALARS.replace("T.tile.sub(y[2, :], y[2, :], v[2])", "T.tile.sub(y[2, :], y[1:3, :], v[2])"), inputs,
          "T.tile.sub: dst y has 64 elements but src0 y 128")
    # a region that is not one run of memory
    fails(SCALARS.replace("T.tile.sub(y[2, :], y[2, :], v[2])", "T.tile.sub(y[0:2, 0:32], y[2:4, 0:32], v[2])"),
          inputs, "the region y[0:2, 0:32] is not contiguous in y (4, 64)")


def test_bitwise_and_or_on_16_bit_integers():
    text = vector_module(
        'A: T.Tensor((64,), "int16"), B: T.Tensor((64,), "int16"), Y: T.Tensor((2, 64), "int16")',
        [("a", (64,), "int16"), ("b", (64,), "int16"), ("y", (2, 64), "int16")],
        """
T.copy(A[0], a)
T.copy(B[0], b)
T.tile.bitwise_and(y[0, :], a, b)
T.tile.bitwise_or(y[1, :], a, b)
T.copy(y, Y[0, 0])
""")
    a = RNG.integers(-2 ** 15, 2 ** 15, 64).astype(np.int16)
    b = RNG.integers(-2 ** 15, 2 ** 15, 64).astype(np.int16)
    sim = run(text, {"A": a, "B": b})
    assert np.array_equal(sim.tensors["Y"], np.stack([a & b, a | b]))
    fails(text.replace("T.tile.bitwise_or(y[1, :], a, b)", "T.tile.bitwise_or(y[1, :], a, 3)"),
          {"A": a, "B": b}, "T.tile.bitwise_or: src1 3 is a scalar, but src1 is a buffer or a region")
    wide = text.replace('"int16"', '"int32"').replace("UB 512", "UB 1024")
    fails(wide, {"A": a, "B": b}, "T.tile.bitwise_and: a (i32) into y (i32); the 910B's vector instruction "
                                  "takes one dtype of i16, u16")


def test_reduce_of_a_row_region():
    text = vector_module(
        'X: T.Tensor((4, 64), "float32"), Y: T.Tensor((8,), "float32")',
        [("x", (4, 64), "float32"), ("o", (8,), "float32")],
        """
T.copy(X[0, 0], x)
T.tile.fill(o, 0.0)
T.reduce_sum(x[2, :], o[3:4], dim=-1, clear=True)
T.copy(o, Y[0])
""")
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    y = run(text, {"X": x}).tensors["Y"]
    assert y[3] == pytest.approx(float(x[2].astype(np.float64).sum()), rel=1e-6)
    assert np.all(np.delete(y, 3) == 0)


def test_fill_takes_no_8_bit_buffer():
    text = vector_module('M: T.Tensor((32,), "uint8")', [("m", (32,), "uint8")], "T.tile.fill(m, 0)\nT.copy(m, M[0])")
    fails(text, {}, "T.tile.fill of m (u8): Fill is AscendC::Duplicate")


# ---------------------------------------------------------------- casts between floats and integers

CASTS = vector_module(
    'X: T.Tensor((64,), "float32"), I: T.Tensor((64,), "int32"), F: T.Tensor((64,), "float32")',
    [("x", (64,), "float32"), ("i", (64,), "int32"), ("f", (64,), "float32")],
    """
T.copy(X[0], x)
T.tile.cast(i, x, "CAST_RINT", 64)
T.tile.cast(f, i, "CAST_NONE", 64)
T.copy(i, I[0])
T.copy(f, F[0])
""")


def test_float_integer_casts():
    x = np.zeros(64, np.float32)
    x[:10] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7, 2.0 ** 24 + 2, 2.0 ** 30]
    sim = run(CASTS, {"X": x})
    want = np.array([0, 2, 2, 0, -2, -2, 4, -4, 2 ** 24 + 2, 2 ** 30], np.int64)  # half to even
    assert np.array_equal(sim.tensors["I"][:10], want)
    assert np.array_equal(sim.tensors["F"], sim.tensors["I"].astype(np.float32))

def test_integer_to_float_rounds_to_nearest_even():
    text = vector_module(
        'I: T.Tensor((64,), "int32"), F: T.Tensor((64,), "float32"), J: T.Tensor((64,), "int16"), '
        'H: T.Tensor((64,), "float16")',
        [("i", (64,), "int32"), ("f", (64,), "float32"), ("j", (64,), "int16"), ("h", (64,), "float16")],
        """
T.copy(I[0], i)
T.copy(J[0], j)
T.tile.cast(f, i, "CAST_RINT", 64)
T.tile.cast(h, j, "CAST_RINT", 64)
T.copy(f, F[0])
T.copy(h, H[0])
""")
    i = np.arange(64, dtype=np.int32) - 5
    i[:3] = [2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 31)]  # ties: to 2**24 and 2**24 + 4
    j = np.arange(64, dtype=np.int16)
    j[:2] = [2049, 2051]  # f16 ties: to 2048 and 2052
    sim = run(text, {"I": i, "J": j})
    assert list(sim.tensors["F"][:3]) == [2 ** 24, 2 ** 24 + 4, -(2 ** 31)]
    assert np.array_equal(sim.tensors["F"][3:], i[3:].astype(np.float32))
    assert list(sim.tensors["H"][:2]) == [2048, 2052] and np.array_equal(sim.tensors["H"][2:], j[2:])


def test_float_integer_cast_misuse():
    x = np.zeros(64, np.float32)
    x[5] = 0.5
    fails(CASTS.replace('"CAST_RINT"', '"CAST_NONE"'), {"X": x},
          "T.tile.cast x (f32) -> i (i32, CAST_NONE): 0.5 is not an integer")
    x[5] = 3e9
    fails(CASTS, {"X": x}, "3000000000.0 is outside i32 (-2147483648..2147483647)")
    x[5] = np.nan
    fails(CASTS, {"X": x}, "nan is not an integer")
    to16 = CASTS.replace('I: T.Tensor((64,), "int32")', 'I: T.Tensor((64,), "int16")').replace(
        'i = T.alloc_ub((64,), "int32")', 'i = T.alloc_ub((64,), "int16")').replace("UB 768", "UB 640")
    x[5] = 40000.0
    fails(to16, {"X": x}, "40000.0 is outside i16 (-32768..32767)")


# ---------------------------------------------------------------- copies that leave the GM tensor

RAGGED_IN = vector_module(
    'X: T.Tensor((6, 50), "float32"), Y: T.Tensor((2, 4, 64), "float32")',
    [("t", (4, 64), "float32")],
    """
T.copy(X[cid * 4, 0], t, pad_value=-T.infinity("float32"))
T.copy(t, Y[cid, 0, 0])
""", blocks=2)


def test_clipped_gm_to_ub_pads_the_tile():
    x = RNG.standard_normal((6, 50)).astype(np.float32)
    y = run(RAGGED_IN, {"X": x}).tensors["Y"]
    want = np.full((8, 64), -np.inf, np.float32)
    want[:6, :50] = x
    assert np.array_equal(y.reshape(8, 64), want)
    zero = run(RAGGED_IN.replace(', pad_value=-T.infinity("float32")', ""), {"X": x}).tensors["Y"].reshape(8, 64)
    assert np.all(zero[:6, 50:] == 0) and np.all(zero[6:] == 0) and np.array_equal(zero[:6, :50], x)
    # uint8 tiles: AscendC::Duplicate has no 8-bit form, so the clipped part keeps what was in UB
    u8 = RAGGED_IN.replace(', pad_value=-T.infinity("float32")', "").replace('"float32"', '"uint8"')
    u8 = u8.replace("UB 1024", "UB 256").replace("(6, 50)", "(6, 64)")
    b = RNG.integers(0, 256, (6, 64)).astype(np.uint8)
    got = run(u8, {"X": b}).tensors["Y"].reshape(8, 64)
    assert np.array_equal(got[:6], b) and np.all(got[6:] == 0x7F)


RAGGED_OUT = vector_module(
    'Y: T.Tensor((5, 50), "float32")',
    [("t", (4, 64), "float32")],
    """
T.tile.createvecindex(t, T.Cast("float32", cid * 1000))
T.copy(t, Y[cid * 4, 0])
""", blocks=2)


def test_clipped_ub_to_gm_writes_only_the_valid_part():
    y = run(RAGGED_OUT, {}).tensors["Y"]
    tiles = [1000 * b + np.arange(256, dtype=np.float32).reshape(4, 64) for b in range(2)]
    assert np.array_equal(y, np.concatenate(tiles)[:5, :50])
    # on the 950 the same region is an error, not clipped
    text950 = LANES_950.replace("Y: T.Tensor((8,), \"float32\")", "Y: T.Tensor((5,), \"float32\")")
    fails(text950, {"X": np.zeros(8, np.float32)}, "region Y[0:8] lies outside Y (shape (5,))")


LANES_950 = '''# Target ascend-950 (hand-written in the emitted style)
import tilelang.ascend.language as T


@T.prim_func
def k(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as cid:
        b = T.alloc_shared((8,), "float32")
        T.copy(X[0], b)
        T.copy(b, Y[0])


KERNELS = {"k": k}
'''


def test_clipped_copy_misuse():
    x = np.zeros((6, 50), np.float32)
    fails(RAGGED_IN.replace("T.copy(X[cid * 4, 0], t,", "T.copy(X[cid * 4 - 1, 0], t,"), {"X": x},
          "T.copy X -> t: the GM region X[-1:3, 0:64] starts at a negative index")
    fails(RAGGED_IN.replace("T.copy(X[cid * 4, 0], t,", "T.copy(X[cid * 4 + 4, 0], t,"), {"X": x},
          "T.copy X -> t: the GM region X[8:12, 0:64] lies entirely outside X (shape (6, 50))")
    # a GM region that leaves the tensor along a dimension the copy does not clip
    deep = RAGGED_IN.replace("T.copy(t, Y[cid, 0, 0])", "T.copy(t, Y[cid + 1, 0, 0])")
    fails(deep, {"X": x}, "leaves Y (shape (2, 4, 64)) along dimension 0, which the copy does not clip",
          Unsupported)
    # UB rows must be whole 32-byte blocks when a copy moves several of them
    narrow = vector_module('X: T.Tensor((6, 50), "float32")', [("t", (4, 10), "float32")],
                           "T.copy(X[0, 0], t)")
    fails(narrow, {"X": x}, "UB rows of 10 f32 (40 B) in t: DataCopyPad starts every UB row on a 32-byte block")
    # an L1 tile is zero-filled: pad_value does not apply
    fails(CUBE.replace("T.copy(A[0, 0], A_L1)", "T.copy(A[0, 0], A_L1, pad_value=1.0)"),
          {"A": np.zeros((20, 24), np.float32), "B": np.zeros((24, 40), np.float32)},
          "T.copy A -> A_L1 with pad_value: only a GM -> UB copy pads")
    relu = RAGGED_IN.replace("T.copy(X[cid * 4, 0], t,", "T.copy(X[cid * 4, 0], t, enable_relu=True,")
    fails(relu, {"X": x}, "T.copy with enable_relu", Unsupported)


CUBE = '''# Target ascend-910b (hand-written in the emitted style)
import tilelang
import tilelang.language as T


@T.prim_func
def k(A: T.Tensor((20, 24), "bfloat16"), B: T.Tensor((24, 40), "bfloat16"), C: T.Tensor((20, 40), "float32"),
      W: T.Tensor((40, 40), "float32"), R: T.Tensor((8, 40), "float32")):
    # hand-written; on-chip bytes: L0A 2048, L0B 4096, L0C 8192, L1 6144, UB 2048
    with T.Kernel(1, is_npu=True) as (cid, vid):
        A_L1 = T.alloc_L1((32, 32), "bfloat16")
        B_L1 = T.alloc_L1((32, 64), "bfloat16")
        A_L0A = T.alloc_L0A((32, 32), "bfloat16")
        B_L0B = T.alloc_L0B((32, 64), "bfloat16")
        C_L0C = T.alloc_L0C((32, 64), "float32")
        w = T.alloc_ub((8, 64), "float32")
        with T.Scope("C"):
            T.copy(A[0, 0], A_L1)
            T.copy(B[0, 0], B_L1)
            T.copy(A_L1, A_L0A)
            T.copy(B_L1, B_L0B)
            T.mma(A_L0A, B_L0B, C_L0C, init=True)
            T.copy(C_L0C, C[0, 0])
            T.copy(C_L0C, W[0, 0])
            T.set_cross_flag("FIX", 0)
        with T.Scope("V"):
            if vid == 0:
                T.copy(W[32, 0], w)
            T.wait_cross_flag(0)
            if vid == 0:
                T.copy(W[0, 0], w)
                T.copy(w, R[0, 0])


KERNELS = {"k": k}
'''


def test_clipped_gm_to_l1_is_zero_filled_and_the_product_is_right():
    a = dt.to_storage("bf16", RNG.standard_normal((20, 24)))
    b = dt.to_storage("bf16", RNG.standard_normal((24, 40)))
    sim = run(CUBE, {"A": a, "B": b})
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(sim.tensors["C"], exact, rtol=1e-5, atol=1e-5)
    assert np.array_equal(sim.tensors["R"], sim.tensors["W"][:8])
    # W got the whole L0C tile clipped to 40 columns: its rows 20..31 come from A_L1's zero rows
    w = sim.tensors["W"]
    assert np.array_equal(w[:20], sim.tensors["C"]) and np.all(w[20:32] == 0) and np.all(np.isnan(w[32:]))


def test_cross_core_flags_track_the_elements_written():
    a = dt.to_storage("bf16", RNG.standard_normal((20, 24)))
    b = dt.to_storage("bf16", RNG.standard_normal((24, 40)))
    # W[32:40] was not written by the cube (its copy was clipped to 20 rows): reading it needs no flag, but
    # reading W[0:8] before the wait does
    early = CUBE.replace("                T.copy(W[32, 0], w)\n            T.wait_cross_flag(0)\n",
                         "                T.copy(W[8, 0], w)\n            T.wait_cross_flag(0)\n")
    fails(early, {"A": a, "B": b}, "the vector core reads W, which the cube core wrote in this block (element "
                                   "[8, 0]), without waiting for a cross-core flag")
    assert "T.copy(W[32, 0], w)" in CUBE  # the passing version reads W[32:40] first


# ---------------------------------------------------------------- FP8 as bytes

FP8 = vector_module(
    'X: T.Tensor((64,), "uint8"), Y: T.Tensor((128,), "uint8"), Z: T.Tensor((32,), "uint8")',
    [("t", (64,), "uint8")],
    """
T.copy(X[0], t)
T.copy(t, Y[0])
T.copy(t[0:32], Z[0])
""", top='E4M3_BYTES = ["X", "Y"]')


def test_e4m3_bytes_round_trip():
    x = RNG.standard_normal(64).astype(np.float32) * 100
    x[:3] = [1000.0, -1000.0, 0.1]
    sim = run(FP8, {"X": x})
    want = dt.round_to("f8e4m3", x)
    assert want[0] == 448 and want[1] == -448  # saturated when encoded
    assert sim.tensors["Y"].dtype == np.float32 and np.array_equal(sim.tensors["Y"][:64], want)
    assert np.all(np.isnan(sim.tensors["Y"][64:]))  # 0x7F: never written
    assert np.array_equal(sim.tensors["X"], want)
    # Z is not listed: plain bytes, the E4M3 bit patterns
    assert sim.tensors["Z"].dtype == np.uint8
    assert np.array_equal(sim.tensors["Z"], want[:32].astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_e4m3_bytes_misuse():
    x = np.zeros(64, np.float32)
    fails(FP8.replace('E4M3_BYTES = ["X", "Y"]', 'E4M3_BYTES = ["X", "Q"]'), {"X": x},
          "E4M3_BYTES names Q, which is not a tensor parameter of the module's kernels")
    as_float = FP8.replace('X: T.Tensor((64,), "uint8")', 'X: T.Tensor((64,), "float32")')
    fails(as_float, {"X": x}, "E4M3_BYTES names X, which is a f32 tensor")
    fails(FP8.replace('E4M3_BYTES = ["X", "Y"]', 'E4M3_BYTES = "X"'), {"X": x}, "a list or tuple of tensor names")
    # without the listing X is a uint8 input, and 0.5 is not a byte
    fails(FP8.replace('E4M3_BYTES = ["X", "Y"]', ""), {"X": np.full(64, 0.5)}, "input X: 0.5 is not an integer")


# ---------------------------------------------------------------- the namespace


def test_new_tile_functions_are_in_the_namespace_and_the_api():
    names = {"tile.compare", "tile.select", "tile.createvecindex", "tile.bitwise_and", "tile.bitwise_or"}
    assert names <= set(namespace_functions("ascend-910b"))
    import inspect

    assert str(inspect.signature(api910b.tile.select)) == "(dst, selMask, src0, src1, selMode)"
    assert str(inspect.signature(api910b.tile.createvecindex)) == "(dst, firstValue)"


# ---------------------------------------------------------------- cross-core flags (mode 2)

FLAGS = '''# Target ascend-910b (hand-written in the emitted style)
import tilelang
import tilelang.language as T


@T.prim_func
def k(R: T.Tensor((8,), "float32")):
    # hand-written; on-chip bytes: UB 32
    with T.Kernel(1, is_npu=True) as (cid, vid):
        r = T.alloc_ub((8,), "float32")
        with T.Scope("C"):
            for n in T.serial(SETS):
                T.set_cross_flag("FIX", FLAG)
        with T.Scope("V"):
WAITS
            if vid == 0:
                T.tile.fill(r, 1.0)
                T.copy(r, R[0])


KERNELS = {"k": k}
'''


def _flags(sets, flag):
    waits = "\n".join(["            T.wait_cross_flag(FLAG)"] * sets)
    return FLAGS.replace("WAITS", waits).replace("SETS", str(sets)).replace("FLAG", str(flag))


def test_both_vector_cores_wait_for_each_set_of_the_cube():
    assert np.all(run(_flags(3, 10), {}).tensors["R"] == 1.0)


def test_flag_ids_stop_at_10_on_the_910b():
    fails(_flags(1, 11), {}, "the 910B has cross-core flags 0..10")


def test_a_flag_counter_holds_16_sets():
    assert np.all(run(_flags(16, 0), {}).tensors["R"] == 1.0)
    fails(_flags(17, 0), {}, "cross-core flag 0 set 17 times without a wait: a counter holds at most 16 sets")
