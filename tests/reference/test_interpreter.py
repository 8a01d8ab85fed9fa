"""The reference interpreter (compiler/reference/: interpreter.py, order.py, statements.py, runtime.py) on hand-built
KernelModels."""

from __future__ import annotations

import gc
import itertools
import math
import time

import islpy as isl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.reference import interpreter as interp
from tdsl.compiler.reference import order as instance_order, runtime
from tdsl.compiler.model.program import KernelModel, Stmt, Tensor
from tdsl.frontend import ast

F32 = np.float32


# ------------------------------------------------------------------ model-building helpers


def N(name):
    return ast.Name(name)


def ix(e):
    """An index expression from an int, an iterator name, or a ready node."""
    if isinstance(e, int):
        return ast.IntLit(e)
    if isinstance(e, str):
        return ast.Name(e)
    return e


def rd(tensor, *indices):
    return ast.Access(tensor, [ix(i) for i in indices])


def op(o, a, b):
    return ast.BinOp(o, a, b)


def call(f, *args):
    return ast.Call(f, list(args))


def dom(text):
    return isl.Set(text)


def gemm_model(M=4, Nn=5, K=3, in_dtype="f32", out_dtype="f32", accum=None, kind="output"):
    d = dom(f"{{ C[i, j, k] : 0 <= i < {M} and 0 <= j < {Nn} and 0 <= k < {K} }}")
    body = op("*", rd("A", "i", "k"), rd("B", "k", "j"))
    c = Stmt("C", ["i", "j"], ["k"], d, body, out_dtype, "sum", accum)
    tensors = {
        "A": Tensor("A", in_dtype, [M, K], "input"),
        "B": Tensor("B", in_dtype, [K, Nn], "input"),
        "C": Tensor("C", out_dtype, [M, Nn], kind),
    }
    return KernelModel("gemm", [c], tensors, {"M": M, "N": Nn, "K": K}, [])


def gemm_silu_model(M=4, Nn=5, K=3, c_dtype="f32", d_dtype="bf16"):
    m = gemm_model(M, Nn, K, "bf16", c_dtype, None, kind="temp")
    d = dom(f"{{ D[i, j] : 0 <= i < {M} and 0 <= j < {Nn} }}")
    m.stmts.append(Stmt("D", ["i", "j"], [], d, call("silu", rd("C", "i", "j")), d_dtype))
    m.tensors["D"] = Tensor("D", d_dtype, [M, Nn], "output")
    return m


def softmax_model(R=3, L=7, out_dtype="bf16"):
    S = f"0 <= i < {R} and 0 <= j < {L}"
    stmts = [
        Stmt("Mx", ["i"], ["j"], dom(f"{{ Mx[i, j] : {S} }}"), rd("X", "i", "j"), "f32", "max"),
        Stmt("E", ["i", "j"], [], dom(f"{{ E[i, j] : {S} }}"),
             call("exp", op("-", rd("X", "i", "j"), rd("Mx", "i"))), "f32"),
        Stmt("Sm", ["i"], ["j"], dom(f"{{ Sm[i, j] : {S} }}"), rd("E", "i", "j"), "f32", "sum"),
        Stmt("Y", ["i", "j"], [], dom(f"{{ Y[i, j] : {S} }}"),
             op("/", rd("E", "i", "j"), rd("Sm", "i")), out_dtype),
    ]
    tensors = {
        "X": Tensor("X", "bf16", [R, L], "input"),
        "Mx": Tensor("Mx", "f32", [R], "temp"),
        "E": Tensor("E", "f32", [R, L], "temp"),
        "Sm": Tensor("Sm", "f32", [R], "temp"),
        "Y": Tensor("Y", out_dtype, [R, L], "output"),
    }
    return KernelModel("softmax", stmts, tensors, {"R": R, "L": L}, [])


def silu_ref(x):
    x = np.asarray(x, np.float32)
    e = np.array([F32(math.exp(float(-v))) for v in x.ravel()], np.float32).reshape(x.shape)
    return x * (F32(1) / (F32(1) + e))


def gemm_ref_sequential(a, b, accum="f32", out="f32"):
    """Exact reference: per element, k in increasing order, f32 products, accum rounding."""
    a = a.astype(np.float32)
    b = b.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = dt.round_to(accum, acc + a[:, k, None] * b[None, k, :])
    return dt.round_to(out, acc)


# ------------------------------------------------------------------ GEMM


def test_gemm_f32_exact_with_integers():
    m = gemm_model(4, 5, 3)
    rng = np.random.default_rng(0)
    a = rng.integers(-8, 9, size=(4, 3)).astype(np.float32)
    b = rng.integers(-8, 9, size=(3, 5)).astype(np.float32)
    out = interp.interpret(m, interp.program_order(m), {"A": a, "B": b})
    assert set(out) == {"C"}
    assert out["C"].dtype == np.float32
    np.testing.assert_array_equal(out["C"], (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


def test_gemm_f32_random_vs_f64_and_exact_sequential():
    m = gemm_model(4, 5, 3)
    inp = interp.random_inputs(m, seed=3)
    out = interp.interpret(m, interp.program_order(m), inp)
    ref64 = inp["A"].astype(np.float64) @ inp["B"].astype(np.float64)
    np.testing.assert_allclose(out["C"], ref64, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["C"], gemm_ref_sequential(inp["A"], inp["B"]))


def test_gemm_bf16_inputs_f32_accum_bf16_store():
    m = gemm_model(4, 5, 3, in_dtype="bf16", out_dtype="bf16", accum="f32")
    inp = interp.random_inputs(m, seed=4)
    assert inp["A"].dtype == dt.NUMPY_DTYPES["bf16"]
    out = interp.interpret(m, interp.program_order(m), inp)
    assert out["C"].dtype == dt.NUMPY_DTYPES["bf16"]
    want = gemm_ref_sequential(inp["A"], inp["B"], accum="f32", out="bf16")
    np.testing.assert_array_equal(out["C"].astype(np.float32), want)
    # the store rounded: values are bf16 values, different from the f32 sums
    f32sum = gemm_ref_sequential(inp["A"], inp["B"])
    assert not np.array_equal(f32sum, want)
    np.testing.assert_array_equal(dt.round_to("bf16", f32sum), out["C"].astype(np.float32))
    ref64 = inp["A"].astype(np.float64) @ inp["B"].astype(np.float64)
    np.testing.assert_allclose(out["C"].astype(np.float64), ref64, rtol=2**-7, atol=1e-2)


def test_gemm_bf16_accumulator_rounds_every_step():
    K = 16
    m = gemm_model(3, 4, K, in_dtype="bf16", out_dtype="f32", accum="bf16")
    inp = interp.random_inputs(m, seed=5)
    out = interp.interpret(m, interp.program_order(m), inp)
    want = gemm_ref_sequential(inp["A"], inp["B"], accum="bf16", out="f32")
    np.testing.assert_array_equal(out["C"], want)
    assert not np.array_equal(out["C"], gemm_ref_sequential(inp["A"], inp["B"]))


def test_sum_order_dependence_is_visible():
    # C[0] = sum(k) X[k] with X = [1, 2^-24, 2^-24]: forward gives 1, backward 1 + 2^-23.
    d = dom("{ C[i, k] : i = 0 and 0 <= k < 3 }")
    m = KernelModel(
        "s",
        [Stmt("C", ["i"], ["k"], d, rd("X", "k"), "f32", "sum")],
        {"X": Tensor("X", "f32", [3], "input"), "C": Tensor("C", "f32", [1], "output")},
        {},
        [],
    )
    x = np.array([1.0, 2.0**-24, 2.0**-24], np.float32)
    fwd = interp.interpret(m, interp.program_order(m), {"X": x})["C"][0]
    bwd = interp.interpret(m, isl.UnionMap("{ C[i, k] -> [i, -k] }"), {"X": x})["C"][0]
    assert fwd == F32(1.0)
    assert bwd == F32(1 + 2.0**-23)


@pytest.mark.parametrize("lanes, want", [(2, 0.0), (4, 0.0), (8, 0.5)])
def test_sums_as_tile_reductions_of_some_lanes(lanes, want):
    # X = [1, 2^25, -2^25, 1, 0.5] (f32 spacing 4 at 2^25): in order the first 1 is lost, the second kept (1.5).
    # 2 lanes: ((1 - 2^25) + 0.5) + (2^25 + 1) = -2^25 + 2^25; 4 lanes: ((1.5 + 2^25) + (-2^25 + 1)) = 0; 8 lanes:
    # ((1 + 2^25) + (-2^25 + 1)) + 0.5 = 0.5
    d = dom("{ C[i, k] : i = 0 and 0 <= k < 5 }")
    m = KernelModel(
        "s",
        [Stmt("C", ["i"], ["k"], d, rd("X", "k"), "f32", "sum")],
        {"X": Tensor("X", "f32", [5], "input"), "C": Tensor("C", "f32", [1], "output")},
        {},
        [],
    )
    x = np.array([1.0, 2.0**25, -(2.0**25), 1.0, 0.5], np.float32)
    assert interp.interpret(m, interp.program_order(m), {"X": x})["C"][0] == F32(1.5)
    assert interp.interpret(m, interp.program_order(m), {"X": x}, lanes=lanes)["C"][0] == F32(want)


# ------------------------------------------------------------------ fused pipelines


def test_silu_after_gemm():
    m = gemm_silu_model()
    inp = interp.random_inputs(m, seed=6)
    out = interp.interpret(m, interp.program_order(m), inp)
    assert set(out) == {"C", "D"}  # temps are returned too
    c = gemm_ref_sequential(inp["A"], inp["B"])
    np.testing.assert_array_equal(out["C"], c)
    np.testing.assert_array_equal(out["D"].astype(np.float32), dt.round_to("bf16", silu_ref(c)))
    c64 = inp["A"].astype(np.float64) @ inp["B"].astype(np.float64)
    np.testing.assert_allclose(out["D"].astype(np.float64), c64 / (1 + np.exp(-c64)), rtol=1e-2, atol=1e-2)


def test_fused_legal_schedule_gives_same_result():
    m = gemm_silu_model()
    inp = interp.random_inputs(m, seed=7)
    ref = interp.interpret(m, interp.program_order(m), inp)
    fused = isl.UnionMap("{ C[i, j, k] -> [i, j, 0, k]; D[i, j] -> [i, j, 1, 0] }")
    out = interp.interpret(m, fused, inp)
    for name in ref:
        np.testing.assert_array_equal(out[name].astype(np.float32), ref[name].astype(np.float32))


def test_softmax():
    m = softmax_model(3, 7)
    inp = interp.random_inputs(m, seed=8, scale=2.0)
    out = interp.interpret(m, interp.program_order(m), inp)
    x = inp["X"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    assert out["Y"].dtype == dt.NUMPY_DTYPES["bf16"]
    np.testing.assert_allclose(out["Y"].astype(np.float64), ref, rtol=2**-7, atol=1e-6)
    np.testing.assert_array_equal(out["Mx"], inp["X"].astype(np.float32).max(axis=1))
    np.testing.assert_allclose(out["Sm"], e.sum(axis=1), rtol=1e-6)


def test_causal_max_reduction():
    # R[i] = max(j : j <= i) X[i, j]
    n = 6
    d = dom(f"{{ R[i, j] : 0 <= i < {n} and 0 <= j <= i }}")
    m = KernelModel(
        "causal",
        [Stmt("R", ["i"], ["j"], d, rd("X", "i", "j"), "bf16", "max")],
        {"X": Tensor("X", "bf16", [n, n], "input"), "R": Tensor("R", "bf16", [n], "output")},
        {"n": n},
        [],
    )
    inp = interp.random_inputs(m, seed=9)
    x = inp["X"].astype(np.float32)
    x[:, -1] = 100.0  # above the diagonal except in the last row: must be ignored
    inp["X"] = dt.to_storage("bf16", x)
    order = interp.instances_in_order(m, interp.program_order(m))
    assert len(order) == n * (n + 1) // 2
    out = interp.run(m, order, inp)
    want = np.array([x[i, : i + 1].max() for i in range(n)], np.float32)
    np.testing.assert_array_equal(out["R"].astype(np.float32), want)
    assert out["R"][-1] == 100.0 and np.all(out["R"][:-1].astype(np.float32) < 100.0)


def test_max_propagates_nan_and_min_max_where():
    # Y[i] = where(X[i] > 0, max(X[i], 1), min(X[i], -1))
    d = dom("{ Y[i] : 0 <= i < 4 }")
    body = call(
        "where",
        ast.Compare(">", rd("X", "i"), ast.IntLit(0)),
        call("max", rd("X", "i"), ast.IntLit(1)),
        call("min", rd("X", "i"), ast.IntLit(-1)),
    )
    m = KernelModel(
        "w",
        [Stmt("Y", ["i"], [], d, body, "f32")],
        {"X": Tensor("X", "f32", [4], "input"), "Y": Tensor("Y", "f32", [4], "output")},
        {},
        [],
    )
    x = np.array([0.5, 3.0, -0.25, np.nan], np.float32)
    y = interp.interpret(m, interp.program_order(m), {"X": x})["Y"]
    np.testing.assert_array_equal(y[:3], [1.0, 3.0, -1.0])
    assert np.isnan(y[3])  # NaN > 0 is false, then min(NaN, -1) = NaN


# ------------------------------------------------------------------ illegal schedules become visible


def test_reversed_statement_order_reads_unwritten_nan():
    m = gemm_silu_model()
    inp = interp.random_inputs(m, seed=10)
    bad = isl.UnionMap("{ C[i, j, k] -> [1, i, j, k]; D[i, j] -> [0, i, j, 0] }")
    tr = interp.Trace()
    out = interp.interpret(m, bad, inp, trace=tr)
    assert np.all(np.isnan(out["D"].astype(np.float32)))
    assert not np.isnan(out["C"]).any()
    assert tr.n_early_reads == 4 * 5
    r = tr.early_reads[0]
    assert (r.reader, r.tensor, r.done, r.expected) == ("D", "C", 0, 3)
    assert tr.complete("C").all() and tr.complete("D").all()
    # legal order: no early reads
    tr2 = interp.Trace()
    interp.interpret(m, interp.program_order(m), inp, trace=tr2)
    assert tr2.n_early_reads == 0 and tr2.early_reads == []


def test_unwritten_temp_element_is_nan():
    # a temp whose statement only covers half of it
    d = dom("{ T[i] : 0 <= i < 2 }")
    d2 = dom("{ Y[i] : 0 <= i < 4 }")
    m = KernelModel(
        "h",
        [
            Stmt("T", ["i"], [], d, rd("X", "i"), "f32"),
            Stmt("Y", ["i"], [], d2, op("+", rd("T", "i"), ast.FloatLit(1.0)), "f32"),
        ],
        {
            "X": Tensor("X", "f32", [4], "input"),
            "T": Tensor("T", "f32", [4], "temp"),
            "Y": Tensor("Y", "f32", [4], "output"),
        },
        {},
        [],
    )
    out = interp.interpret(m, interp.program_order(m), {"X": np.arange(4, dtype=np.float32)})
    np.testing.assert_array_equal(out["Y"][:2], [1.0, 2.0])
    assert np.isnan(out["Y"][2:]).all() and np.isnan(out["T"][2:]).all()


def test_reader_inside_the_reduction_loop_sees_a_partial_sum():
    K = 3
    m = gemm_silu_model(K=K, d_dtype="f32")
    inp = interp.random_inputs(m, seed=11)
    # D[i, j] runs right after C[i, j, 0]
    bad = isl.UnionMap("{ C[i, j, k] -> [i, j, k, 0]; D[i, j] -> [i, j, 0, 1] }")
    tr = interp.Trace()
    out = interp.interpret(m, bad, inp, trace=tr)
    a = inp["A"].astype(np.float32)
    b = inp["B"].astype(np.float32)
    partial = a[:, 0, None] * b[None, 0, :]
    np.testing.assert_array_equal(out["D"], silu_ref(partial))
    # C itself is still complete and right
    np.testing.assert_array_equal(out["C"], gemm_ref_sequential(inp["A"], inp["B"]))
    assert tr.n_early_reads == 4 * 5
    assert {(r.done, r.expected) for r in tr.early_reads} == {(1, K)}
    legal = interp.interpret(m, interp.program_order(m), inp)
    assert not np.array_equal(out["D"], legal["D"])


@pytest.mark.parametrize("schedule", [
    "{ C[i, j, k] -> [i, j, k, 0]; D[i, j] -> [i, j, 0, 1] }",  # D reads partial sums: early reads
    "{ C[i, j, k] -> [floor(i/2), j, k, i]; D[i, j] -> [floor(i/2), j, 9, i] }",  # interleaved, legal
    "{ C[i, j, k] -> [2 - k, i, j, 0]; D[i, j] -> [3, i, j, 0] }",  # the sum in reverse order
])
def test_interpret_from_the_sorted_arrays_is_run_in_order(schedule):
    """`interpret` executes from the sorted instance arrays; `run` from the list of instances.  Same bits, same
    trace (counts, expected counts, early reads) on any order."""
    m = gemm_silu_model(K=3, d_dtype="f32")
    inp = interp.random_inputs(m, seed=5)
    sched = isl.UnionMap(schedule)
    fast, slow = interp.Trace(), interp.Trace()
    got = interp.interpret(m, sched, inp, trace=fast)
    want = interp.run(m, interp.instances_in_order(m, sched), inp, trace=slow)
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name
    assert fast.n_instances == slow.n_instances == 4 * 5 * 3 + 4 * 5
    assert fast.early_reads == slow.early_reads and fast.n_early_reads == slow.n_early_reads
    for name in slow.counts:
        np.testing.assert_array_equal(fast.counts[name], slow.counts[name])
        np.testing.assert_array_equal(fast.expected[name], slow.expected[name])


def test_partial_result_is_rounded_to_storage_dtype():
    # a bf16 C read after every update sees round_bf16(acc) (as fused code would)
    m = gemm_silu_model(K=4, c_dtype="bf16", d_dtype="f32")
    inp = interp.random_inputs(m, seed=12)
    bad = isl.UnionMap("{ C[i, j, k] -> [i, j, k, 0]; D[i, j] -> [i, j, 1, 1] }")  # after k = 0, 1
    out = interp.interpret(m, bad, inp)
    a = inp["A"].astype(np.float32)
    b = inp["B"].astype(np.float32)
    acc = a[:, 0, None] * b[None, 0, :] + a[:, 1, None] * b[None, 1, :]
    np.testing.assert_array_equal(out["D"], silu_ref(dt.round_to("bf16", acc)))


def test_ties_raise():
    m = gemm_model(2, 2, 2)
    inp = interp.random_inputs(m, 0)
    with pytest.raises(ValueError, match="not injective"):
        interp.interpret(m, isl.UnionMap("{ C[i, j, k] -> [i, j] }"), inp)
    m2 = gemm_silu_model(2, 2, 2)
    with pytest.raises(ValueError, match=r"not injective: .*\[0, 0, 1, 0\]"):
        interp.instances_in_order(
            m2, isl.UnionMap("{ C[i, j, k] -> [i, j, k, 0]; D[i, j] -> [i, j, 1, 0] }")
        )


def test_bad_schedules_raise():
    m = gemm_silu_model(2, 2, 2)
    with pytest.raises(ValueError, match="no time to some instances of 'D'"):
        interp.instances_in_order(m, isl.UnionMap("{ C[i, j, k] -> [i, j, k] }"))
    with pytest.raises(ValueError, match="no time"):
        interp.instances_in_order(
            m, isl.UnionMap("{ C[i, j, k] -> [i, j, k] : k = 0; D[i, j] -> [i, j, 5] }")
        )
    with pytest.raises(ValueError, match="several times"):
        interp.instances_in_order(
            m, isl.UnionMap("{ C[i, j, k] -> [i, j, t] : t = k or t = k + 10; D[i, j] -> [i, j, 5] }")
        )
    with pytest.raises(ValueError, match="different dimensions"):
        interp.instances_in_order(m, isl.UnionMap("{ C[i, j, k] -> [i, j, k]; D[i, j] -> [i, j] }"))
    with pytest.raises(ValueError, match="unbound isl parameters"):
        interp.instances_in_order(m, isl.UnionMap("[P] -> { C[i, j, k] -> [P, i, j, k]; D[i, j] -> [P, i, j, 9] }"))


def test_schedule_params_bound_from_sizes_and_several_range_spaces():
    m = gemm_silu_model(2, 3, 2)
    inp = interp.random_inputs(m, 1)
    ref = interp.interpret(m, interp.program_order(m), inp)
    s = isl.UnionMap("[M] -> { C[i, j, k] -> T0[i, j, 0, k] : M > 0; D[i, j] -> T1[i, j, M, 0] }")
    assert m.sizes["M"] == 2
    out = interp.interpret(m, s, inp)
    np.testing.assert_array_equal(out["D"].astype(np.float32), ref["D"].astype(np.float32))


# ------------------------------------------------------------------ errors in the model / inputs


def test_out_of_bounds_and_where_guard():
    d = dom("{ Y[i] : 0 <= i < 4 }")

    def model(body):
        return KernelModel(
            "s",
            [Stmt("Y", ["i"], [], d, body, "f32")],
            {"X": Tensor("X", "f32", [4], "input"), "Y": Tensor("Y", "f32", [4], "output")},
            {},
            [],
        )

    x = {"X": np.arange(4, dtype=np.float32)}
    prev = rd("X", op("-", N("i"), ast.IntLit(1)))
    with pytest.raises(IndexError, match=r"read of X\[-1\] out of bounds .* instance \[0\]"):
        interp.interpret(model(prev), interp.program_order(model(prev)), x)
    guarded = call("where", ast.Compare(">", N("i"), ast.IntLit(0)), prev, ast.FloatLit(-1.0))
    y = interp.interpret(model(guarded), interp.program_order(model(guarded)), x)["Y"]
    np.testing.assert_array_equal(y, [-1, 0, 1, 2])
    # index arithmetic with // and %
    m = model(rd("X", op("%", op("+", N("i"), ast.IntLit(3)), ast.IntLit(4))))
    np.testing.assert_array_equal(interp.interpret(m, interp.program_order(m), x)["Y"], [3, 0, 1, 2])
    m = model(rd("X", op("//", op("*", N("i"), ast.IntLit(2)), ast.IntLit(3))))
    np.testing.assert_array_equal(interp.interpret(m, interp.program_order(m), x)["Y"], [0, 0, 1, 2])


def test_input_and_model_errors():
    m = gemm_model(2, 2, 2)
    with pytest.raises(ValueError, match="missing input"):
        interp.interpret(m, interp.program_order(m), {"A": np.zeros((2, 2), np.float32)})
    with pytest.raises(ValueError, match="shape"):
        interp.interpret(m, interp.program_order(m), {"A": np.zeros((2, 3)), "B": np.zeros((2, 2))})
    m.tensors["A"].shape = ["M2", 2]
    with pytest.raises(ValueError, match="not an int"):
        interp.random_inputs(m, 0)
    m = gemm_model(2, 2, 2)
    m.stmts[0].value = call("frobnicate", rd("A", "i", "k"))
    with pytest.raises(ValueError, match="unknown function 'frobnicate'"):
        interp.interpret(m, interp.program_order(m), interp.random_inputs(m, 0))


def test_names_literals_casts_functions():
    # Y[i] = f8e4m3(X[i] * s) + i + eps, with s a size and eps a float const; f8e4m3 store saturates
    d = dom("{ Y[i] : 0 <= i < 5 }")
    body = op(
        "+",
        op("+", call("f8e4m3", op("*", rd("X", "i"), N("s"))), N("i")),
        N("eps"),
    )
    m = KernelModel(
        "c",
        [Stmt("Y", ["i"], [], d, body, "f32"),
         Stmt("Z", ["i"], [], dom("{ Z[i] : 0 <= i < 5 }"), op("*", rd("X", "i"), ast.IntLit(1000)), "f8e4m3")],
        {"X": Tensor("X", "f32", [5], "input"), "Y": Tensor("Y", "f32", [5], "output"),
         "Z": Tensor("Z", "f8e4m3", [5], "output")},
        {"s": 10, "eps": 0.1},
        [],
    )
    x = np.array([4.48, 0.1, -100.0, 1.0, np.nan], np.float32)
    out = interp.interpret(m, interp.program_order(m), {"X": x})
    q = dt.round_to("f8e4m3", x * F32(10))
    want = (q + np.arange(5, dtype=np.float32)) + F32(0.1)
    np.testing.assert_array_equal(out["Y"][:4], want[:4])
    assert np.isnan(out["Y"][4])
    z = out["Z"].astype(np.float32)
    np.testing.assert_array_equal(z[:4], [448.0, 96.0, -448.0, 448.0])
    assert np.isnan(z[4])
    # unary functions: f64 libm rounded to f32; sigmoid / silu / rsqrt by their formulas
    for f, ref in [
        ("exp", lambda v: F32(math.exp(v))),
        ("log", lambda v: F32(math.log(v))),
        ("sqrt", lambda v: F32(math.sqrt(v))),
        ("tanh", lambda v: F32(math.tanh(v))),
        ("abs", lambda v: F32(abs(v))),
        ("rsqrt", lambda v: F32(1) / F32(math.sqrt(v))),
        ("sigmoid", lambda v: F32(1) / (F32(1) + F32(math.exp(-v)))),
    ]:
        mm = KernelModel(
            "u",
            [Stmt("Y", ["i"], [], dom("{ Y[i] : 0 <= i < 3 }"), call(f, rd("X", "i")), "f32")],
            {"X": Tensor("X", "f32", [3], "input"), "Y": Tensor("Y", "f32", [3], "output")},
            {},
            [],
        )
        xv = np.array([0.5, 2.25, 7.0], np.float32)
        got = interp.interpret(mm, interp.program_order(mm), {"X": xv})["Y"]
        np.testing.assert_array_equal(got, [ref(float(v)) for v in xv], err_msg=f)
    # IEEE specials, no warnings, no exceptions
    assert runtime._exp(F32(1000)) == np.inf and runtime._exp(F32(-np.inf)) == 0
    assert runtime._log(F32(0)) == -np.inf and np.isnan(runtime._log(F32(-1)))
    assert np.isnan(runtime._sqrt(F32(-1))) and np.isnan(runtime._exp(F32(np.nan)))


def test_scalar_tensor_reduction():
    # S[] = sum(i) X[i]  (a statement without LHS iterators)
    d = dom("{ S[i] : 0 <= i < 6 }")
    m = KernelModel(
        "t",
        [Stmt("S", [], ["i"], d, rd("X", "i"), "f32", "sum")],
        {"X": Tensor("X", "f32", [6], "input"), "S": Tensor("S", "f32", [], "output")},
        {},
        [],
    )
    x = np.arange(6, dtype=np.float32)
    out = interp.interpret(m, interp.program_order(m), {"X": x})
    assert out["S"].shape == () and out["S"] == 15.0


# ------------------------------------------------------------------ ordering / program order


def test_program_order_round_trip():
    m = gemm_silu_model(2, 3, 2)
    po = interp.program_order(m)
    assert po.is_equal(isl.UnionMap(str(po)))
    assert po.is_equal(
        isl.UnionMap(
            "{ C[i, j, k] -> [0, i, j, k] : 0 <= i < 2 and 0 <= j < 3 and 0 <= k < 2;"
            "  D[i, j] -> [1, i, j, 0] : 0 <= i < 2 and 0 <= j < 3 }"
        )
    )
    order = interp.instances_in_order(m, po)
    want = [("C", p) for p in itertools.product(range(2), range(3), range(2))]
    want += [("D", p) for p in itertools.product(range(2), range(3))]
    assert order == want
    inp = interp.random_inputs(m, 2)
    a = interp.run(m, want, inp)
    b = interp.interpret(m, isl.UnionMap(str(po)), inp)
    for k in a:
        np.testing.assert_array_equal(a[k].astype(np.float32), b[k].astype(np.float32))


def test_random_inputs_deterministic():
    m = gemm_model(3, 3, 3, in_dtype="f8e4m3")
    a, b = interp.random_inputs(m, 5), interp.random_inputs(m, 5)
    assert set(a) == {"A", "B"}
    assert a["A"].dtype == dt.NUMPY_DTYPES["f8e4m3"]
    np.testing.assert_array_equal(a["A"].astype(np.float32), b["A"].astype(np.float32))
    assert not np.array_equal(a["A"].astype(np.float32), interp.random_inputs(m, 6)["A"].astype(np.float32))


_SCHEDULES = [
    "{ S[i, j] -> [floor(i/4), floor(j/3), i, j] }",
    "{ S[i, j] -> [j, -i] }",
    "{ S[i, j] -> [i + j, j] }",
    "{ S[i, j] -> [i mod 3, floor(i/3), j] }",
    "{ S[i, j] -> [0, i, j] : i < 5; S[i, j] -> [1, -j, i] : i >= 5 }",
    "{ S[i, j] -> [floor((i + 2j)/5), (i + 2j) mod 5, j] }",
    "{ S[i, j] -> [2i - j, j] }",
]
_DOMAINS = [
    "{ S[i, j] : 0 <= i < 11 and 0 <= j < 7 }",
    "{ S[i, j] : 0 <= i < 11 and 0 <= j <= i }",
    "{ S[i, j] : 0 <= i < 11 and 0 <= j < 7 and (i + j) mod 3 = 0 }",
    "{ S[i, j] : 0 <= i < 11 and exists e : j = 2e and 0 <= j < 9 }",
    "{ S[i, j] : 3 <= i < 9 and i - 2 <= j <= i + 2 and 2j >= i }",
]


@pytest.mark.parametrize("domain", _DOMAINS)
@pytest.mark.parametrize("sched", _SCHEDULES)
def test_fast_enumeration_matches_foreach_point(domain, sched):
    d = isl.Set(domain)
    m = isl.Map(sched).intersect_domain(d)
    pts, times = instance_order._map_points(m)
    spts, stimes = instance_order._map_points_slow(m)
    a = sorted(zip(map(tuple, pts.tolist()), map(tuple, times.tolist())))
    b = sorted(zip(map(tuple, spts.tolist()), map(tuple, stimes.tolist())))
    assert a == b
    assert len(a) == d.count_val().to_python() if hasattr(d, "count_val") else True
    np.testing.assert_array_equal(instance_order._set_points(d), instance_order._set_points_slow(d))


def test_zero_dim_domain_and_empty_domain():
    assert instance_order._set_points(isl.Set("{ S[] }")).shape == (1, 0)
    assert instance_order._set_points(isl.Set("{ S[i] : 0 <= i < 0 }")).shape == (0, 1)
    with pytest.raises(ValueError, match="unbounded"):
        instance_order._set_points(isl.Set("{ S[i] : i >= 0 }"))


# ------------------------------------------------------------------ properties


@settings(max_examples=40, deadline=None)
@given(
    perm=st.permutations([0, 1, 2]),
    tiles=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)),
    tiled=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_loop_permutations_and_tilings_keep_gemm_bits(perm, tiles, tiled, seed):
    """Any tiling / loop permutation keeps each element's k order: bit-identical results."""
    m = gemm_silu_model(5, 4, 6, c_dtype="f32", d_dtype="bf16")
    inp = interp.random_inputs(m, seed)
    ref = interp.interpret(m, interp.program_order(m), inp)
    v = ["i", "j", "k"]
    inner = [v[p] for p in perm]
    outer = [f"floor({x}/{t})" for x, t in zip(inner, tiles)] if tiled else []
    dims = outer + inner
    c = "{ C[i, j, k] -> [0, %s] }" % ", ".join(dims)
    dd = [d.replace("k", "0") for d in dims]
    dmap = "{ D[i, j] -> [1, %s] }" % ", ".join(dd)
    sched = isl.UnionMap(c).union(isl.UnionMap(dmap))
    out = interp.interpret(m, sched, inp)
    for name in ref:
        np.testing.assert_array_equal(out[name].astype(np.float32), ref[name].astype(np.float32))


# ------------------------------------------------------------------ performance


def _best_time(fn, repeats=3):
    """The best of a few runs with the garbage collector off: a timing test
    measures the interpreter, not a collection of the whole suite's heap or a
    busy machine (CI once saw one 0.5 s pause)."""
    best = math.inf
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    finally:
        if was_enabled:
            gc.enable()
    return best


def test_performance_gemm_8x8x8():
    m = gemm_silu_model(8, 8, 8)
    inp = interp.random_inputs(m, 0)
    sched = isl.UnionMap(
        "{ C[i, j, k] -> [floor(i/4), floor(j/4), 0, i, j, k]; D[i, j] -> [floor(i/4), floor(j/4), 1, i, j, 0] }"
    )
    interp.interpret(m, sched, inp)  # warm up
    dt_ = _best_time(lambda: interp.interpret(m, sched, inp))
    assert dt_ < 0.5, f"8x8x8 GEMM + SiLU took {dt_:.3f} s"


def test_performance_instances_per_second():
    m = gemm_model(16, 16, 16, in_dtype="bf16", out_dtype="bf16", accum="f32")  # 4096 instances
    inp = interp.random_inputs(m, 0)
    sched = isl.UnionMap("{ C[i, j, k] -> [floor(i/8), floor(j/8), k, i, j] }")
    order = interp.instances_in_order(m, sched)
    assert len(order) == 4096
    t_order = _best_time(lambda: interp.instances_in_order(m, sched))
    t_run = _best_time(lambda: interp.run(m, order, inp))
    rate = len(order) / (t_order + t_run)
    print(f"\n4096 instances: order {t_order:.4f} s, run {t_run:.4f} s, {rate:,.0f} instances/s")
    assert rate > 20_000


def test_fallbacks_give_the_same_order(monkeypatch):
    m = gemm_silu_model(3, 4, 3)
    sched = isl.UnionMap(
        "{ C[i, j, k] -> [floor(i/2), j mod 2, floor(j/2), i, k]; D[i, j] -> [floor(i/2), j mod 2, floor(j/2), i, 7] }"
    )
    want = interp.instances_in_order(m, sched)

    def refuse(*a, **k):
        raise NotImplementedError("forced")

    with monkeypatch.context() as mp:
        mp.setattr(instance_order, "_ast_expr_eval", refuse)
        assert interp.instances_in_order(m, sched) == want
    with monkeypatch.context() as mp:
        mp.setattr(instance_order, "_BOX_LIMIT", 1)
        assert interp.instances_in_order(m, sched) == want
    # the order is the lexicographic order of the time vectors
    times = [(i // 2, j % 2, j // 2, i, k if s == "C" else 7) for s, p in want for (i, j, k) in [tuple(p) + (0,) * (3 - len(p))]]
    assert times == sorted(times)


# ---------------------------------------------------------------- fma and exp2 (compiler/model/functions.py)


def _fma_exact(a, b, c) -> np.float32:
    """a·b + c in rationals, rounded to nearest f32 (ties to even)."""
    from fractions import Fraction

    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    near = np.float32(float(exact))
    around = [near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf))]
    return min(around, key=lambda v: (abs(Fraction(float(v)) - exact), int(np.float32(v).view(np.int32)) & 1))


_F32_SCALED = st.builds(lambda m, e: np.float32(m * 2.0 ** e), st.floats(-1, 1, width=32), st.integers(-40, 40))


@settings(max_examples=400, deadline=None)
@given(_F32_SCALED, _F32_SCALED, st.integers(-3, 3), st.sampled_from([0.0, 2.0 ** -24, -2.0 ** -24, 2.0 ** -40]))
def test_fma_rounds_once(a, b, shift, nudge):
    """c close to -a·b is where rounding the product first (or the sum in f64 and then in f32) goes wrong."""
    c = np.float32(-(float(a) * float(b)) * (1.0 + nudge) * 2.0 ** shift)
    assert runtime._fma(a, b, c) == _fma_exact(a, b, c)


def test_fma_and_exp2_at_the_edges():
    assert runtime._fma(np.float32(3.0), np.float32(np.inf), np.float32(1.0)) == np.inf
    assert math.isnan(runtime._fma(np.float32(0.0), np.float32(np.inf), np.float32(1.0)))
    assert runtime._fma(np.float32(2.0 ** 64), np.float32(2.0 ** 64), np.float32(0.0)) == np.inf
    # a·b + c = 1 + 2^-24 + 2^-70: rounded to f64 first it is 1 + 2^-24, a tie that f32 rounds to even (1); the
    # exact value is above the tie and rounds up
    a, b, c = np.float32(-(2.0 ** -24) * (1 + 2.0 ** -23)), np.float32(1 - 2.0 ** -23), np.float32(1 + 2.0 ** -23)
    assert np.float32(float(a) * float(b) + float(c)) == 1.0
    assert runtime._fma(a, b, c) == _fma_exact(a, b, c) == np.float32(1 + 2.0 ** -23)
    assert runtime._exp2(np.float32(-np.inf)) == 0.0 and runtime._exp2(np.float32(128.0)) == np.inf
    assert runtime._exp2(np.float32(-149.0)) == np.float32(2.0 ** -149) and runtime._exp2(np.float32(-151.0)) == 0.0
    assert runtime._exp2(np.float32(0.5)) == np.float32(math.sqrt(2.0)) and math.isnan(runtime._exp2(np.float32("nan")))


def test_reordered_sums_move_only_the_rounding_of_sums():
    """`interpret(..., variant=seed)` adds every sum's terms of one element in another order (the chapter's
    1 + 2^-24 + 2^-24 then keeps its small terms) and leaves everything else in program order: a max, and the
    statements that read the sum after it."""
    from tdsl.compiler.driver.api import loads

    sched = loads("""
const K = 3
kernel k(X: f32[K]) -> (s: f32[1], m: f32[1], t: f32[1]) {
  s[i] = sum(k) X[k]
  m[i] = max(k) X[k]
  t[i] = s[i] * 2.0
}
""", "k.tdsl").schedule()
    X = {"X": np.array([1, 2.0 ** -24, 2.0 ** -24], dtype=np.float32)}
    program = interp.interpret(sched.model, sched.time_map(), X)
    reversed_ = interp.interpret(sched.model, sched.time_map(), X, variant=0)
    assert program["s"].tolist() == [1.0] and reversed_["s"].tolist() == [1.0 + 2.0 ** -23]
    assert reversed_["t"].tolist() == [2.0 + 2.0 ** -22]  # read after the whole sum, as in program order
    assert reversed_["m"].tolist() == program["m"].tolist() == [1.0]
    for seed in range(1, 4):  # a shuffle: some order of the same three terms
        assert interp.interpret(sched.model, sched.time_map(), X, variant=seed)["s"].tolist()[0] in (
            1.0, 1.0 + 2.0 ** -23)


def test_a_variant_flushes_an_exponentials_subnormal_result_as_the_gpus_do():
    """GPU fuzz seed 52 (H100): Triton's and TileLang's exp2 gave +0 where the f32 result is subnormal
    (ex2.approx.ftz), so `(R * 0.5) * (0.0 - exp2(X))` at R = +0 was +0 where the interpreter has -0 (18 zeros of
    the other sign, which a variant did not have).  Every variant now flushes such results of exp and exp2."""
    from tdsl.compiler.driver.api import loads

    sched = loads("""
const N = 3
kernel k(X: f32[N], R: f32[N]) -> (E: f32[N], F: f32[N], Z: f32[N]) {
  E[i] = exp(X[i])
  F[i] = exp2(X[i])
  Z[i] = (R[i] * 0.5) * (0.0 - exp2(X[i]))
}
""", "k.tdsl").schedule()
    inputs = {"X": np.array([-140.0, -100.0, -125.0], dtype=np.float32), "R": np.zeros(3, dtype=np.float32)}
    exact = interp.interpret(sched.model, sched.time_map(), inputs)
    assert exact["F"][0] == np.float32(2.0 ** -140) and 0 < exact["E"][1] < 2.0 ** -126  # subnormal results
    assert np.signbit(exact["Z"][0])  # +0 * -2^-140
    for seed in range(4):
        got = interp.interpret(sched.model, sched.time_map(), inputs, variant=seed)
        assert got["F"][0] == 0 and got["E"][1] == 0 and not np.signbit(got["Z"][0])  # +0 * (0 - 0)
        assert 0.99 < got["F"][1] / 2.0 ** -100 < 1.01 and 0.99 < got["F"][2] / 2.0 ** -125 < 1.01  # normal: kept


def test_a_variant_computes_exp_as_far_off_as_the_gpus_may_be():
    """`variant` 0 takes every exp and exp2 up by the GPU's error bound (ex2.approx's 2^-22, and for exp the
    rounding of x·log2 e: 2^-24·|x| relative), variant 1 down; sqrt, IEEE on the GPU too, is not varied."""
    from tdsl.compiler.driver.api import loads

    sched = loads("""
const N = 3
kernel k(X: f32[N]) -> (E: f32[N], F: f32[N], S: f32[N]) {
  E[i] = exp(X[i])
  F[i] = exp2(X[i])
  S[i] = sqrt(X[i])
}
""", "k.tdsl").schedule()
    x = np.array([88.72283, 1.5, 40.0], dtype=np.float32)  # exp(88.72283) is just below the largest f32
    exact = interp.interpret(sched.model, sched.time_map(), {"X": x})
    up = interp.interpret(sched.model, sched.time_map(), {"X": x}, variant=0)
    down = interp.interpret(sched.model, sched.time_map(), {"X": x}, variant=1)
    bound = 2.0 ** -22 + 2.0 ** -24 * x.astype(np.float64)
    rounded = 2.0 ** -23  # the two values' f32 roundings
    for got in (up, down):
        assert np.all(np.abs(got["E"].astype(np.float64) / exact["E"] - 1) <= bound + rounded)
        assert np.all(np.abs(got["F"].astype(np.float64) / exact["F"] - 1) <= 2.0 ** -22 + rounded)
        assert got["S"].tolist() == exact["S"].tolist()
    assert np.all(up["E"] > exact["E"]) and np.all(exact["E"] > down["E"])
    assert np.all(up["F"] > exact["F"]) and np.all(exact["F"] > down["F"])
