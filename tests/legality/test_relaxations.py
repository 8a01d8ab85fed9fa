"""Differential tests of the exact relaxations of the legality checker (docs/legality.md#exact-relaxations).

1. A `max` reduction has no order constraint: it gives the same bits in every order and grouping of its terms
   (the interpreter's max is IEEE 754-2019 maximum with one canonical NaN, and rounding is monotone).
2. A rounding to a dtype whose grid the value already lies on is the identity, so a step may drop it or add it
   (compiler/legality/grids.py).

Each newly legal schedule is run in the interpreter on inputs chosen to expose a reordering or a rounding
(values spread over 2^-8 .. 2^8 with random signs, NaNs with different bits, +-0.0, +-inf, values beyond the
f8e4m3 range) and must be bit-identical to program order; the neighbours that are not exact stay illegal, with
their rule, and change the result when run anyway.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.driver.api import loads
from tdsl.compiler.legality.grids import closure, constant_grids, tensor_grids, value_grids
from tdsl.compiler.reference.interpreter import instances_in_order, interpret, program_order, run
from tdsl.compiler.reference.runtime import _fmax, _fmin
from tdsl.compiler.legality.rounding import buffer_semantics
from tdsl.testing import assert_illegal, assert_legal, run_differences

from catalog import EXAMPLES

DTYPES = ("f8e4m3", "bf16", "f16", "f32")
CANONICAL_NAN = 0x7FC00000


def bits(x) -> int:
    return int(np.float32(x).view(np.uint32))


def f32_from_bits(b: int) -> np.float32:
    return np.array([b], dtype=np.uint32).view(np.float32)[0]


def every_value(dtype: str) -> np.ndarray:
    """Every bit pattern of a 8- or 16-bit dtype, as f32 (NaNs included)."""
    if dtype == "f8e4m3":
        return np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    storage = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[dtype]
    return np.arange(1 << 16, dtype=np.uint16).view(storage).astype(np.float32)


def rounds_to_itself(dtype: str, values) -> np.ndarray:
    r = dt.scalar_rounder(dtype)
    with np.errstate(all="ignore"):
        return np.array([bits(r(v)) == bits(v) for v in values])


def spread(rng, shape) -> np.ndarray:
    """Random signs, magnitudes spread over 2^-8 .. 2^8 (f64; rounded to each input's dtype when loaded)."""
    return rng.choice([-1.0, 1.0], size=shape) * np.exp2(rng.uniform(-8, 8, size=shape))


def same_bits(a, b) -> bool:
    return np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


# ================================================================ the grids nest exactly


@pytest.mark.parametrize("src", ["f8e4m3", "bf16", "f16"])
def test_grid_closure_is_exact_bit_for_bit(src):
    """Every value of `src` (NaNs and subnormals included) rounds to itself in every dtype of closure(src), and
    some finite value of `src` changes in every other dtype: the inclusions are exactly f8e4m3 < bf16, f16 < f32."""
    values = every_value(src)
    if src == "bf16":
        values = values[~np.isnan(values) | np.isin(values.view(np.uint32), [CANONICAL_NAN, CANONICAL_NAN | 1 << 31])]
    for dst in DTYPES:
        same = rounds_to_itself(dst, values)
        if dst in closure(src):
            assert same.all(), (src, dst, values[~same][:4])
        else:
            assert not same[np.isfinite(values)].all(), (src, dst)


def test_grid_inclusions_at_the_edges():
    # f8e4m3's smallest subnormal 2^-9 and largest value 448 are normal numbers of bf16 and f16.
    for v in (2.0 ** -9, 3 * 2.0 ** -9, 448.0, -448.0):
        assert {"bf16", "f16", "f32"} <= constant_grids(v)
    assert "f8e4m3" in constant_grids(2.0 ** -9) and "f8e4m3" not in constant_grids(2.0 ** -10)
    # f16's smallest subnormal 2^-24 is a bf16 value, but a subnormal with 10 significant bits is not.
    assert "bf16" in constant_grids(2.0 ** -24)
    assert "bf16" not in constant_grids(1023 * 2.0 ** -24) and "f16" in constant_grids(1023 * 2.0 ** -24)
    # bf16 has f32's range: 2^-30 and 2^100 are bf16 values but not f16 ones (f16 underflows / overflows).
    assert constant_grids(2.0 ** -30) == constant_grids(2.0 ** 100) == {"bf16", "f32"}
    # inf lies on every grid but f8e4m3's (which saturates it to 448); 0.1 only on f32's.
    assert constant_grids(float("inf")) == {"bf16", "f16", "f32"}
    assert constant_grids(0.1) == {"f32"} and constant_grids(-0.0) == set(DTYPES)


def test_canonical_nan_and_bf16_nans():
    """max/min's NaN is the canonical quiet NaN, which every rounding keeps; a bf16 store canonicalises NaNs, so
    the NaNs a bf16 tensor holds round to themselves (a bf16 NaN with a payload would not: never stored)."""
    nan = f32_from_bits(CANONICAL_NAN)
    for dtype in DTYPES:
        assert bits(dt.scalar_rounder(dtype)(nan)) == CANONICAL_NAN
    payloads = [f32_from_bits(b) for b in (0x7F800001, 0xFF812345, 0x7FC00001, 0xFFC00000)]
    stored = {bits(dt.scalar_rounder("bf16")(p)) for p in payloads}
    assert stored == {CANONICAL_NAN, CANONICAL_NAN | 1 << 31}
    loaded = dt.round_to("bf16", np.array(payloads, dtype=np.float32)).view(np.uint32)
    assert set(loaded.tolist()) == stored


# ================================================================ max: one result in every order


SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.0 ** -149, -(2.0 ** -149), float("inf"), float("-inf"), 448.0, 1e30]
NANS = [f32_from_bits(b) for b in (CANONICAL_NAN, CANONICAL_NAN | 1 << 31, 0x7F800001, 0xFFBADBAD)]


def test_max_and_min_are_commutative_associative_bit_for_bit():
    values = [np.float32(v) for v in SPECIALS] + NANS
    for f in (_fmax, _fmin):
        for a, b in itertools.product(values, repeat=2):
            assert bits(f(a, b)) == bits(f(b, a)), (f.__name__, a, b)
        for a, b, c in itertools.product(values, repeat=3):
            assert bits(f(f(a, b), c)) == bits(f(a, f(b, c))), (f.__name__, a, b, c)
    assert bits(_fmax(np.float32(-0.0), np.float32(0.0))) == bits(np.float32(0.0))
    assert bits(_fmin(np.float32(0.0), np.float32(-0.0))) == bits(np.float32(-0.0))
    assert all(bits(_fmax(n, np.float32(1))) == CANONICAL_NAN for n in NANS)


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f8e4m3"])
def test_rounding_commutes_with_max(dtype):
    """round(max(a, b)) == max(round(a), round(b)) bit for bit: rounding is monotone (in the order with
    -0.0 < +0.0), also when it saturates (f8e4m3: 1000 and 500 both become 448), and keeps the canonical NaN."""
    rng = np.random.default_rng(1)
    r = dt.scalar_rounder(dtype)
    values = [np.float32(v) for v in spread(rng, 400)] + [np.float32(v) for v in SPECIALS] + NANS
    values += [np.float32(v) for v in (500.0, -1000.0, 464.0, 65520.0, 2.0 ** -150, -(2.0 ** -140))]
    with np.errstate(all="ignore"):
        for a, b in itertools.product(values, repeat=2):
            assert bits(r(_fmax(a, b))) == bits(_fmax(r(a), r(b))), (dtype, a, b)


ROWMAX = """
const M = 9, K = 13
kernel rowmax(X: f32[M, K]) -> (m: STORE[M]) {
  m[i] = max(k) X[i, k] accum ACCUM POLICY
}
"""

DTYPE_PAIRS = [("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16"), ("f16", "f16"), ("bf16", "f8e4m3"),
               ("f8e4m3", "f32")]
POLICIES = ["", "combine deterministic", "combine segments(4)"]


def rowmax(store: str, accum: str, policy: str = "", sizes=None):
    text = ROWMAX.replace("STORE", store).replace("ACCUM", accum).replace("POLICY", policy)
    return loads(text, sizes=sizes)


def rowmax_inputs(seed: int, rows: int = 9, cols: int = 13) -> dict:
    """Rows that expose an order: spread values; only +-0.0; only -0.0; NaNs with four different bit patterns;
    -inf and +inf; values beyond 448 (an f8e4m3 accumulator saturates them); ties of equal values."""
    rng = np.random.default_rng(seed)
    X = spread(rng, (rows, cols)).astype(np.float32)
    X[1] = rng.choice([0.0, -0.0], size=cols)
    X[2] = -0.0
    for pos, nan in zip(rng.choice(cols, size=len(NANS), replace=False), NANS):
        X[3, pos] = nan
    X[4, rng.choice(cols, size=3, replace=False)] = [-np.inf, np.inf, -np.inf]
    X[5] = -np.inf
    X[6] = rng.uniform(300, 3000, size=cols) * rng.choice([-1, 1], size=cols)
    X[7] = np.float32(rng.choice([0.5, -0.5, 2.0 ** -8], size=cols))
    X[8, rng.choice(cols)] = NANS[1]
    return {"X": X}


MAX_SCHEDULES = [
    "reverse(m.k)",
    "reorder(m, k, i)",
    "ko, kk = split(m.k, 4)\nreverse(m.kk)\nreorder(m, kk, ko, i)",
    "ko, kk = split(m.k, 4)\nrfactor(m.ko)",
    "ko, kk = split(m.k, 4)\nrfactor(m.ko)\nreorder(m_rf, ko, i, kk)\nbind(m_rf.ko, grid.x)\nreverse(m.ko)",
    "rfactor(m.k, segments=M)",
    "rfactor(m.k, segments=3)",
    "bind(m.k, grid.x)",
    "reverse(m.k)\nbind(m.i, grid.x)",
]


@pytest.mark.parametrize("store, accum", DTYPE_PAIRS)
@pytest.mark.parametrize("policy", POLICIES)
def test_reordered_max_reductions_are_legal_and_bit_identical(store, accum, policy):
    prog = rowmax(store, accum, policy)
    for steps in MAX_SCHEDULES:
        s = assert_legal(prog, steps, run=True)
        for seed in range(3):
            assert run_differences(prog, s, inputs=rowmax_inputs(seed)) == [], (steps, seed)


@pytest.mark.parametrize("store, accum", DTYPE_PAIRS)
def test_a_max_reduction_gives_the_same_bits_in_any_order(store, accum):
    """Beyond the schedules: random permutations of all instances (the orders atomics could produce)."""
    prog = rowmax(store, accum)
    model = prog.model()
    order = instances_in_order(model, program_order(model))
    rng = np.random.default_rng(7)
    for seed in range(3):
        X = rowmax_inputs(seed)
        want = run(model, order, X)["m"]
        assert float(want[1]) == 0.0 and not np.signbit(want[1])  # a row of +-0.0: +0.0
        assert np.signbit(want[2])  # a row of -0.0: -0.0
        assert bits(np.float32(want[3])) == CANONICAL_NAN  # four different NaNs: the canonical one
        for _ in range(5):
            shuffled = [order[k] for k in rng.permutation(len(order))]
            assert same_bits(run(model, shuffled, X)["m"], want)


def test_max_of_a_computed_nan_and_an_input_nan():
    """inf - inf is a NaN with the sign bit set (x86), an unwritten element a positive one: the reversed row still
    gives the same bits."""
    prog = loads("""
const M = 2, K = 4
kernel nanmax(X: f32[M, K], W: f32[K]) -> (m: bf16[M]) {
  m[i] = max(k) X[i, k] - W[k]
}
""")
    s = assert_legal(prog, "reverse(m.k)", run=True)
    X = {"X": np.array([[np.inf, 1, np.nan, 2], [1, np.inf, 3, -0.0]], np.float32),
         "W": np.array([np.inf, 0, 0, 0.0], np.float32)}
    assert run_differences(prog, s, inputs=X) == []


@pytest.mark.parametrize("example, sizes, steps", [
    ("softmax", {"M": 3, "N": 19}, "reverse(m.j)\ncompute_at(s, Y.i)\ncompute_at(e, Y.i)\ncompute_at(m, Y.i)"),
    ("softmax", {"M": 3, "N": 19}, "jo, jj = split(m.j, 4)\nrfactor(m.jo)\nbind(m_rf.i, grid.x)"),
    ("attention", {"L": 7, "D": 5}, "reverse(m.j)"),
    ("quant_gemm", {"M": 4, "K": 24, "N": 8}, "rfactor(amax.k, segments=4)\nbind(amax_rf.i, grid.x)"),
])
def test_examples_with_reordered_row_maxima(example, sizes, steps):
    path = EXAMPLES / f"{example}.tdsl"
    prog = loads(path.read_text(), str(path), sizes=sizes)
    s = assert_legal(prog, steps, run=True)
    rng = np.random.default_rng(3)
    X = {t.name: spread(rng, tuple(t.shape)) for t in prog.model().inputs()}
    assert run_differences(prog, s, inputs=X) == []


def test_a_max_reduction_still_ends_before_its_readers():
    """Order-free terms, but the result is complete only after the last one: reduction-incomplete stays."""
    prog = loads("""
const M = 4, K = 8
kernel q(X: bf16[M, K]) -> (Y: bf16[M, K]) {
  a[i] = max(k) abs(X[i, k])
  Y[i, k] = X[i, k] / a[i]
}
""")
    assert_illegal(prog, "ko, kk = split(a.k, 4)\nreverse_compute_at(Y, a.ko)", rule="reduction-incomplete",
                   changes_result=True)


# ================================================================ sums keep their order


TOTAL = """
const K = 4
kernel total(X: f32[K]) -> (s: f32[1]) {
  s[i] = sum(k) X[k] POLICY
}
"""
CHAPTER = {"X": np.array([1, 0, 2.0 ** -24, 2.0 ** -24], np.float32)}  # 1 in order; 1 + 2^-23 reversed or regrouped


def outputs(state, X):
    return interpret(state.model, state.tree.union_map(state.model), X)


@pytest.mark.parametrize("steps, rule", [
    ("reverse(s.k)", "reduction-order"),
    ("reorder(s, k, i)\nreverse(s.k)", "reduction-order"),
    ("bind(s.k, grid.x)", "parallel-reduction"),
    ("ko, kk = split(s.k, 2)\nrfactor(s.ko)", "reduction-grouping"),
])
def test_a_sum_in_another_order_stays_illegal(steps, rule):
    prog = loads(TOTAL.replace("POLICY", ""))
    err = assert_illegal(prog, steps, rule=rule)
    if rule != "parallel-reduction":
        assert outputs(prog.schedule(), CHAPTER)["s"].tolist() == [1.0]
        assert outputs(err.rejected, CHAPTER)["s"].tolist() == [1.0 + 2.0 ** -23]


def test_sum_policies_keep_their_rules():
    det = loads(TOTAL.replace("POLICY", "combine deterministic"))
    assert_illegal(det, "bind(s.k, grid.x)", rule="atomic-combine")
    rows = loads(ROWMAX.replace("max(k)", "sum(k)").replace("STORE", "f32").replace("ACCUM", "f32")
                 .replace("POLICY", "combine deterministic"))
    assert_illegal(rows, "rfactor(m.k, segments=M)", rule="segment-count")
    seg = loads(TOTAL.replace("K = 4", "K = 6").replace("POLICY", "combine segments(2)"))
    assert_illegal(seg, "rfactor(s.k, segments=3)", rule="segment-count")
    assert_illegal(seg, "reverse(s.k)", rule="reduction-order")


def test_a_sum_reversed_changes_the_result_on_spread_inputs():
    prog = loads("""
const M = 4, K = 64
kernel rowsum(X: bf16[M, K]) -> (s: f32[M]) {
  s[i] = sum(k) X[i, k]
}
""")
    err = assert_illegal(prog, "reverse(s.k)", rule="reduction-order")
    X = {"X": spread(np.random.default_rng(0), (4, 64))}
    assert run_differences(prog, err.rejected, inputs=X) != []


# ================================================================ roundings that change nothing


def chain(t_dtype: str, value: str, x: str = "bf16", y: str = "bf16") -> str:
    return f"""
const N = 64
kernel chain(X: {x}[N], Y: {x}[N], Z: {y}[N], U: f32[N]) -> (W: f32[N]) {{
  T[i]: {t_dtype} = {value}
  W[i] = T[i] * U[i]
}}
"""


def chain_inputs(seed: int, n: int = 64) -> dict:
    """Spread values with +-0.0, +-inf, NaN, values out of f16's range and f16 subnormals."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in ("X", "Y", "Z"):
        v = spread(rng, n)
        v[rng.choice(n, size=8, replace=False)] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e6, 3 * 2.0 ** -24, -1e-30]
        out[name] = v
    out["U"] = spread(rng, n) * 1.5
    return out


ON_GRID = [
    ("bf16", "abs(X[i])"),
    ("bf16", "max(X[i], 0.0)"),  # relu
    ("bf16", "-X[i]"),
    ("bf16", "max(X[i], Y[i])"),
    ("bf16", "min(X[i], -Y[i])"),
    ("bf16", "where(X[i] > Y[i], X[i], Y[i])"),
    ("bf16", "where(X[i] > 0.5, X[i], 0.25)"),
    ("bf16", "f32(X[i])"),  # a cast to a wider dtype
    ("bf16", "bf16(X[i] * 3.0)"),  # a cast to T's own dtype
    ("bf16", "max(abs(X[i]), Z[i])"),  # Z: f8e4m3, on the bf16 grid too
    ("f16", "max(Z[i], -Z[i])"),  # f8e4m3 values on the f16 grid
    ("f16", "f8e4m3(X[i])"),
]


@pytest.mark.parametrize("t_dtype, value", ON_GRID)
def test_inline_without_a_cast_that_changes_nothing(t_dtype, value):
    prog = loads(chain(t_dtype, value, y="f8e4m3"))
    s = assert_legal(prog, "compute_inline(T, round=false)", run=True)
    for seed in range(3):
        assert run_differences(prog, s, inputs=chain_inputs(seed)) == [], seed


OFF_GRID = [
    ("bf16", "X[i] * 3.0", None),  # the brief's neighbour: 3x needs more bits than bf16 has
    ("bf16", "max(X[i], 0.1)", {"X": -1.0}),  # 0.1 is no bf16 value
    ("f16", "abs(X[i])", {"X": 70000.0}),  # bf16 values are not all f16 values (range)
    ("f16", "max(X[i], Y[i])", {"X": 2.0 ** -20 * 1.0078125}),  # nor f16's subnormals (precision)
    ("bf16", "Z[i] + X[i]", None),  # a sum of values on the grid is a new value
    ("f8e4m3", "abs(X[i])", None),  # bf16 values are not f8e4m3 values
]


@pytest.mark.parametrize("t_dtype, value, chosen", OFF_GRID)
def test_inline_without_a_cast_that_rounds_stays_illegal(t_dtype, value, chosen):
    prog = loads(chain(t_dtype, value, y="f8e4m3"))
    err = assert_illegal(prog, "compute_inline(T, round=false)", rule="rounding-removed", primitive="compute_inline",
                         statements=["T", "W"], changes_result=chosen is None)
    if chosen is not None:
        X = chain_inputs(0)
        for name, v in chosen.items():
            X[name][:] = v
        assert run_differences(prog, err.rejected, inputs=X) != []


# ---------------------------------------------------------------- buffers and partial results in another dtype


def buffered(state, X):
    """What the schedule's buffers with a dtype compute (each rounds where its dtype says), in the interpreter."""
    model = buffer_semantics(state.model, state.tree)
    return interpret(model, state.tree.union_map(model), X)


def assert_buffers_change_nothing(prog, s, inputs):
    want = interpret(prog.model(), program_order(prog.model()), inputs)
    got = buffered(s, inputs)
    for t in prog.model().outputs():
        assert same_bits(want[t.name], got[t.name]), t.name


QUANT = """
const M = 4, N = 16
kernel q(X: f8e4m3[M, N], Y: f8e4m3[M, N], B: bf16[M, N], U: f32[M, N]) -> (W: f32[M, N]) {
  T[i, j]: bf16 = VALUE
  W[i, j] = T[i, j] * U[i, j]
}
"""


def quant_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    X = {name: spread(rng, (4, 16)) for name in ("X", "Y", "B", "U")}
    X["X"][0, :6] = [0.0, -0.0, np.nan, 1000.0, -1000.0, 2.0 ** -9]
    X["B"][1, :4] = [np.inf, -0.0, np.nan, 2.0 ** -100]
    return X


@pytest.mark.parametrize("value, steps", [
    # an f8e4m3 shared copy of values that are f8e4m3 values stored as bf16
    ("abs(X[i, j])", "cache_read(T, shared, at=W.i, dtype=f8e4m3)"),
    ("max(X[i, j], Y[i, j])", "cache_read(T, shared, at=W.j, dtype=f8e4m3)"),
    # an f8e4m3 register copy of such a statement (two roundings, the first one the identity)
    ("max(X[i, j], -Y[i, j])", "cache_write(T, register, at=T.i, dtype=f8e4m3)"),
    # an f32 register copy read inside the loop: the bf16 rounding it skips is the identity
    ("abs(B[i, j])", "reverse_compute_at(W, T.i)\ncache_write(T, register, at=T.i, dtype=f32)"),
    ("where(B[i, j] > 0.0, B[i, j], -0.0)", "reverse_compute_at(W, T.j)\ncache_write(T, register, at=T.j, dtype=f32)"),
])
def test_buffers_in_a_dtype_whose_grid_holds_the_values(value, steps):
    prog = loads(QUANT.replace("VALUE", value))
    s = assert_legal(prog, steps, run=True)
    for seed in range(3):
        assert_buffers_change_nothing(prog, s, quant_inputs(seed))


@pytest.mark.parametrize("value, steps, rule", [
    ("X[i, j] * 3.0", "cache_read(T, shared, at=W.i, dtype=f8e4m3)", "rounding-added"),
    ("abs(B[i, j])", "cache_read(T, shared, at=W.i, dtype=f8e4m3)", "rounding-added"),
    ("max(X[i, j], B[i, j])", "cache_write(T, register, at=T.i, dtype=f8e4m3)", "rounding-added"),
    ("B[i, j] * B[i, j]", "reverse_compute_at(W, T.i)\ncache_write(T, register, at=T.i, dtype=f32)", "rounding-removed"),
])
def test_buffers_that_round_stay_illegal(value, steps, rule):
    prog = loads(QUANT.replace("VALUE", value))
    assert_illegal(prog, steps, rule=rule, changes_result=True)


ROWMAX_BF16 = """
const M = 4, K = 16
kernel r(X: XDTYPE[M, K], U: f32[M, K]) -> (W: f32[M, K]) {
  m[i]: STORE = max(k) BODY accum f32
  W[i, k] = m[i] * U[i, k]
}
"""


def rowmax_bf16(body: str = "X[i, k]", x: str = "bf16", store: str = "bf16"):
    return loads(ROWMAX_BF16.replace("BODY", body).replace("XDTYPE", x).replace("STORE", store))


def rowmax_bf16_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    X = {"X": spread(rng, (4, 16)), "U": spread(rng, (4, 16))}
    X["X"][1] = rng.choice([0.0, -0.0], size=16)
    X["X"][2, 3] = np.nan
    return X


@pytest.mark.parametrize("steps", [
    # a bf16 accumulator instead of the f32 one: the maxima of bf16 values are bf16 values
    "cache_write(m, register, at=m.i, dtype=bf16)",
    "reverse_compute_at(W, m.i)\ncache_write(m, register, at=m.i, dtype=bf16)",
    # an f32 register copy read inside the loop: the bf16 store rounding it skips is the identity
    "reverse_compute_at(W, m.i)\ncache_write(m, register, at=m.i, dtype=f32)",
    # partial maxima stored as bf16
    "ko, kk = split(m.k, 4)\nrfactor(m.ko, dtype=bf16)",
])
def test_max_accumulators_in_a_dtype_whose_grid_holds_the_terms(steps):
    prog = rowmax_bf16()
    s = assert_legal(prog, steps, run=True)
    for seed in range(3):
        assert_buffers_change_nothing(prog, s, rowmax_bf16_inputs(seed))


@pytest.mark.parametrize("body, x, store, steps, rule", [
    # (stored as f32: a bf16 store would round the maximum anyway, and rounding commutes with max)
    ("X[i, k] * 3.0", "bf16", "f32", "cache_write(m, register, at=m.i, dtype=bf16)", "rounding-added"),
    ("X[i, k]", "f32", "f32", "cache_write(m, register, at=m.i, dtype=bf16)", "rounding-added"),
    ("X[i, k] * 3.0", "bf16", "f32", "ko, kk = split(m.k, 4)\nrfactor(m.ko, dtype=bf16)", "rounding-added"),
    ("X[i, k]", "bf16", "bf16", "ko, kk = split(m.k, 4)\nrfactor(m.ko, dtype=f8e4m3)", "rounding-added"),
    ("X[i, k]", "f32", "bf16", "reverse_compute_at(W, m.i)\ncache_write(m, register, at=m.i, dtype=f32)",
     "rounding-removed"),
])
def test_max_accumulators_that_round_stay_illegal(body, x, store, steps, rule):
    assert_illegal(rowmax_bf16(body, x, store), steps, rule=rule, changes_result=True)


def test_a_sum_accumulator_in_bf16_stays_illegal_even_for_bf16_terms():
    prog = loads(ROWMAX_BF16.replace("max(k) BODY", "sum(k) X[i, k]").replace("XDTYPE", "bf16").replace("STORE", "bf16"))
    assert_illegal(prog, "cache_write(m, register, at=m.i, dtype=bf16)", rule="rounding-added", changes_result=True)
    assert_illegal(prog, "ko, kk = split(m.k, 4)\nrfactor(m.ko, dtype=bf16)", rule="reduction-grouping")


# ---------------------------------------------------------------- the analysis itself


def test_value_grids_of_expressions():
    prog = loads(QUANT.replace("VALUE", "X[i, j]"))
    model = prog.model()

    def grids(text):
        src = QUANT.replace("VALUE", text)
        stmt = loads(src).model().stmt("T")
        return value_grids(model, stmt.value, stmt.iters)

    assert grids("X[i, j]") == set(DTYPES)
    assert grids("abs(B[i, j])") == {"bf16", "f32"}
    assert grids("max(X[i, j], B[i, j])") == {"bf16", "f32"}
    assert grids("where(X[i, j] > B[i, j], X[i, j], 1.0)") == set(DTYPES)
    assert grids("f16(B[i, j])") == {"f16", "f32"}  # rounded: no longer on bf16's grid as far as we know
    assert grids("bf16(X[i, j])") == set(DTYPES)  # the identity on an f8e4m3 value
    assert grids("X[i, j] * 1.0") == {"f32"} and grids("exp(X[i, j])") == {"f32"}
    assert grids("max(X[i, j], 0.1)") == {"f32"}
    assert grids("where(X[i, j] > 0.0, X[i, j], i)") == {"f32"}  # names without ranges: not analysed
    # (with the statement's iterator ranges: tests/legality/test_integer_values.py)
    assert tensor_grids(model, "T") == set(DTYPES)  # T: bf16 = X[i, j] stores f8e4m3 values
    assert tensor_grids(model, "W") == {"f32"}


@pytest.mark.parametrize("target", ["nvidia", "ascend-910b", "ascend-950"])
def test_a_maximum_declared_in_segments_is_generated_as_any_maximum(target):
    """A max gives the same bits in any grouping, so its `combine segments(8)` asks nothing of the kernel: every
    generator refused it unless an rfactor computed the segments (probe MM), against docs/legality.md."""
    from tdsl.compiler.driver.generate import generate

    source = ("const M = 4, N = 29\nkernel rowpeak(X: bf16[M, N]) -> (m: bf16[M]) {\n"
              "  m[i] = max(j) abs(X[i, j]) combine segments(8)\n}\nschedule rev {\n  reverse(m.j)\n"
              "  bind(m.i, grid.x)\n}\n")
    for block in (None, "rev"):
        assert "rowpeak" in generate(loads(source), block, target=target)
    summed = source.replace("max(j) abs(X[i, j])", "sum(j) X[i, j] accum f32")
    with pytest.raises(Exception, match=r"declares `combine segments\(8\)`: its terms must be combined in those"):
        generate(loads(summed), None, target=target)  # a sum's segments are its result: an rfactor computes them


def test_partial_sums_as_many_as_the_segments_but_cut_elsewhere_say_so():
    """Both counts were 3 and the message blamed the count: '(3 segments of 3 terms of k), but rfactor would make
    3 partial sums' (probe MM)."""
    err = assert_illegal("const M = 2, K = 10\nkernel ev(X: f32[M, K]) -> (s: f32[M]) {\n"
                         "  s[i] = sum(k : k % 2 == 0) X[i, k] combine segments(3)\n}\n",
                         "ko, kk = split(s.k, 4)\nrfactor(s.ko)", rule="segment-count", changes_result=True)
    assert err.detail == ("s declares `combine segments(3)` (3 segments of 3 values of k), but rfactor would cut its "
                          "partial sums at other values of k")
