"""The emitted Ascend kernels, executed in NumPy (compiler/verify/ascend_sim) against the reference interpreter.

Every schedule the Ascend backends emit is generated at small sizes -- not multiples of the tiles where the
backend emits such sizes (ragged), multiples of the tiles otherwise and in addition (aligned: on the 950
only unmasked operand tiles go to the cube, and unmasked tiles take other paths on the 910B) -- and its module
text is executed on random inputs by the simulator; every output and GM temporary is compared with the
interpreter run in program order (`compiler.verify.compare`), and the bytes each kernel allocated per scope
must equal the totals its header declares.  Further tests show the check can fail: buffers beyond a scope's
capacity, and kernels broken by editing the emitted text (a skipped copy, an offset index, a missing flag).

Not simulated, because the backend does not emit them (each asserted in `test_what_is_not_emitted`):
ascend-950 `gemm` `gpu` at ragged sizes (masked operand tiles leave the cube and the vector staging exceeds
UB).  The flash kernels also run at ragged sizes with D = 16 (`RAGGED_CUBE`): QKᵀ and P·V on the cube in
full key blocks, on the vector cores in the masked rest.  A schedule with online() is held to its own
semantics (the interpreter executing the online form) and to program order within the online bound.
"""

import re
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdsl.backends.ascend910b import api as api910b
from tdsl.compiler.verify.ascend_sim import (CapacityExceeded, SimulationError, Unsupported, namespace_functions,
                                             simulate)
from tdsl.compiler.driver.api import load
from tdsl.compiler.driver.generate import generate
from tdsl.compiler.errors import BackendError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.analysis.buffer_plan import CapacityError
from tdsl.compiler.verify import compare, online_bound

from catalog import EXAMPLES, EXPECTED, INTERPRETER_SIZES, padded_tile_gemm

RAGGED = INTERPRETER_SIZES  # not multiples of the tiles
ALIGNED = {  # multiples of every tile of every schedule (the smallest that give two steps of most loops)
    "gemm": {"M": 128, "N": 128, "K": 64},
    "gemm_silu": {"M": 128, "N": 64, "K": 64},
    "swiglu_quant": {"M": 8, "N": 2048},
    "rmsnorm": {"M": 3, "N": 512},
    "softmax": {"M": 3, "N": 1024},
    "quant_gemm": {"M": 128, "N": 128, "K": 64},
    "attention": {"L": 64, "D": 16},
    "mha": {"B": 1, "H": 2, "L": 128, "D": 16},  # batches of heads: two heads here, two batches in mha_causal
    "mha_causal": {"B": 2, "H": 1, "L": 128, "D": 16},
    "mha_fa": {"B": 1, "H": 2, "L": 128, "D": 16},
}
# ragged, with products wide enough for the cube (the flash kernels' QKᵀ and P·V on the 950's cube in full key
# blocks, on the vector cores in the masked rest); one head (ALIGNED and RAGGED have two heads or batches)
RAGGED_CUBE = {"mha": {"B": 1, "H": 1, "L": 150, "D": 16}, "mha_causal": {"B": 1, "H": 1, "L": 140, "D": 16},
               "mha_fa": {"B": 1, "H": 1, "L": 150, "D": 16}}
SIZES = {"ragged": RAGGED, "aligned": ALIGNED, "ragged_cube": RAGGED_CUBE}

CASES = (
    [("ascend-950", ex, s, "ragged") for ex, s in [
        ("gemm", "tiled"), ("gemm_silu", "fused"), ("gemm_silu", "fast"), ("swiglu_quant", "fused"),
        ("swiglu_quant", "inlined"),
        ("rmsnorm", "row_per_program"), ("softmax", "row_fused"), ("quant_gemm", "separate"),
        ("attention", "unfused"), ("mha", "unfused"), ("mha_causal", "unfused")]]
    + [("ascend-950", ex, s, "aligned") for ex, s in [
        ("gemm", "tiled"), ("gemm", "gpu"), ("gemm_silu", "fused"), ("gemm_silu", "fast"), ("swiglu_quant", "fused"),
        ("swiglu_quant", "inlined"), ("rmsnorm", "row_per_program"), ("softmax", "row_fused"),
        ("quant_gemm", "separate"), ("attention", "unfused"), ("mha", "unfused"), ("mha_causal", "unfused")]]
    + [(target, ex, "flash_ascend", sizes) for target in ("ascend-950", "ascend-910b")
       for ex in ("mha", "mha_causal", "mha_fa") for sizes in ("ragged", "aligned", "ragged_cube")]
    + [("ascend-910b", "mha", "flash", "aligned")]  # 128-row blocks fit the 910B's UB at D = 16
    + [("ascend-910b", ex, s, "ragged") for ex, s in [
        ("gemm", "tiled"), ("gemm", "gpu"), ("gemm_silu", "fused"), ("gemm_silu", "fast"), ("swiglu_quant", "fused"),
        ("swiglu_quant", "inlined"), ("rmsnorm", "row_per_program"), ("softmax", "row_fused"),
        ("quant_gemm", "separate"), ("attention", "unfused"), ("mha", "unfused"), ("mha_causal", "unfused")]]
    + [("ascend-910b", ex, s, "aligned") for ex, s in [
        ("gemm", "tiled"), ("gemm", "gpu"), ("gemm_silu", "fused"), ("gemm_silu", "fast"),
        ("swiglu_quant", "fused"), ("swiglu_quant", "inlined"), ("rmsnorm", "row_per_program"),
        ("softmax", "row_fused"), ("quant_gemm", "separate"), ("attention", "unfused"), ("mha", "unfused"),
        ("mha_causal", "unfused")]]
)
IDS = [f"{t}-{e}-{s}-{k}" for t, e, s, k in CASES]

# (target, example, schedule, sizes) the backends refuse, and why (a substring of the error)
NOT_EMITTED = [
    ("ascend-950", "gemm", "gpu", "ragged", "UB"),
    ("ascend-910b", "mha_causal", "flash", "aligned", "the buffers in UB need 219,680 B"),  # its row maximum is seen through exp only: no IEEE form (29th session)
]


def program(example, sizes):
    return load(EXAMPLES / f"{example}.tdsl", sizes=SIZES[sizes][example])


@lru_cache(maxsize=None)
def reference(example, sizes):
    """Random inputs and the interpreter's result in program order (shared by the targets and schedules)."""
    original = program(example, sizes).schedule()
    inputs = random_inputs(original.model, seed=11)
    return original.model, inputs, interpret(original.model, original.time_map(), inputs)


@lru_cache(maxsize=None)
def emitted(target, example, schedule, sizes):
    return generate(program(example, sizes), schedule, target=target)


@lru_cache(maxsize=None)
def own_semantics(example, schedule, sizes):
    """The interpreter's result of a schedule with online() (the rewritten form, executed exactly), or None."""
    sched = program(example, sizes).schedule(schedule)
    if not sched.tree.online:
        return None
    _, inputs, _ = reference(example, sizes)
    return interpret(sched.model, sched.time_map(), inputs)


def check(target, example, schedule, sizes, text=None):
    """Simulate (the emitted or the given) module; {tensor: Comparison} for every output and GM temporary.  A
    schedule with online() is held to its own semantics (tight) and to program order within the online bound."""
    model, inputs, want = reference(example, sizes)
    sim = simulate(text or emitted(target, example, schedule, sizes), inputs, target)
    own = own_semantics(example, schedule, sizes)
    got = {}
    for name, t in model.tensors.items():
        if t.kind != "input" and name in sim.tensors:
            result = sim.tensors[name].astype(np.float32)
            if own is None:
                got[name] = compare(want[name].astype(np.float32), result, t.dtype)
            else:
                got[name] = compare(own[name].astype(np.float32), result, t.dtype)
                got[f"{name} (program order)"] = online_bound(model, name, want[name], result)
    assert {t.name for t in model.outputs()} <= set(got)
    return sim, got


@pytest.mark.parametrize("target,example,schedule,sizes", CASES, ids=IDS)
def test_emitted_kernel_computes_the_program(target, example, schedule, sizes):
    try:
        sim, result = check(target, example, schedule, sizes)
    except Unsupported as err:
        pytest.skip(f"not simulated faithfully: {err}")
    for name, c in result.items():
        assert c.ok, f"{target} {example}/{schedule} ({sizes}): {name}: {c.summary()}"
    for run in sim.kernels:
        assert run.footprint == run.declared, f"{run.name}: allocated {run.footprint}, header says {run.declared}"
        for scope, used in run.footprint.items():
            assert used <= sim.capacities[scope]


@pytest.mark.parametrize("target,example,schedule,sizes,why", NOT_EMITTED,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in NOT_EMITTED])
def test_what_is_not_emitted(target, example, schedule, sizes, why):
    with pytest.raises((BackendError, CapacityError), match=re.escape(why)):
        generate(program(example, sizes), schedule, target=target)


def test_chapter_gemm_over_several_blocks_and_pipeline_steps():
    """gemm `gpu` on a 2 x 2 grid with two pipelined K steps (too large for the interpreter in this file's
    budget): both targets' kernels against the exact product (f32 tolerance) and against each other."""
    prog = load(EXAMPLES / "gemm.tdsl", sizes={"M": 256, "N": 256, "K": 128})
    inputs = random_inputs(prog.schedule().model, seed=5)
    exact = inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
    outs = {}
    for target in ("ascend-950", "ascend-910b"):
        sim = simulate(generate(prog, "gpu", target=target), inputs)
        assert sim.kernels[0].blocks == 4
        outs[target] = sim.tensors["C"]
        c = compare(exact, outs[target], "f32")
        assert c.ok, f"{target}: {c.summary()}"
    assert np.array_equal(outs["ascend-950"], outs["ascend-910b"])


# ---------------------------------------------------------------- capacities


def test_a_buffer_beyond_ub_is_caught():
    text = emitted("ascend-950", "softmax", "row_fused", "aligned")
    big = text.replace('p_m = T.alloc_shared((1024,), "float32")', 'p_m = T.alloc_shared((70000,), "float32")')
    assert big != text
    with pytest.raises(CapacityExceeded, match=r"UB need 280,004 B but ascend-950 allows 253,952 B") as err:
        check("ascend-950", "softmax", "row_fused", "aligned", big)
    assert err.value.scope == "UB" and "p_m (70000,) f32 = 280,000 B" in str(err.value)


def test_pipeline_stages_count_against_l1():
    """On the 950 the dialect keeps one L1 copy per stage: 17 stages of 32 KiB exceed 512 KiB."""
    text = emitted("ascend-950", "gemm", "gpu", "aligned")
    assert "num_stages=3" in text and "L1 98304" in text
    with pytest.raises(CapacityExceeded, match=r"L1 need 557,056 B but ascend-950 allows 524,288 B") as err:
        check("ascend-950", "gemm", "gpu", "aligned", text.replace("num_stages=3", "num_stages=17"))
    assert "A_l1 (128, 64) bf16 x17 stages" in str(err.value)


def test_910b_stage_slots_count_against_l1():
    text = emitted("ascend-910b", "gemm", "gpu", "aligned")
    big = text.replace('A_L1 = T.alloc_L1((3, 128, 64), "bfloat16")', 'A_L1 = T.alloc_L1((40, 128, 64), "bfloat16")')
    assert big != text
    with pytest.raises(CapacityExceeded, match=r"L1 need 655,360 B but ascend-910b allows 524,032 B"):
        check("ascend-910b", "gemm", "gpu", "aligned", big)


def test_capacities_come_from_the_targets():
    from tdsl.compiler.targets import get_target

    sim, _ = check("ascend-910b", "rmsnorm", "row_per_program", "aligned")
    target = get_target("ascend-910b")
    assert sim.capacities == {s: target.scope(s).per_block for s in ("L1", "L0A", "L0B", "L0C", "UB")}
    _, inputs, _ = reference("rmsnorm", "aligned")
    with pytest.raises(CapacityExceeded, match="UB need"):
        simulate(emitted("ascend-910b", "rmsnorm", "row_per_program", "aligned"), inputs, caps={"UB": 4096})


# ---------------------------------------------------------------- broken kernels are detected

# (target, example, schedule, sizes, text to replace, replacement, SimulationError message or None: wrong result)
BROKEN = [
    # a skipped copy: L0A keeps its uninitialised (NaN) contents
    ("ascend-950", "gemm_silu", "fused", "aligned", "            T.copy(A_l1, A_l0a)  # L1 -> L0A\n", "", None),
    # the accumulator never cleared
    ("ascend-950", "gemm", "tiled", "aligned", "clear_accum=ko == 0", "clear_accum=False", None),
    # an index that stays in bounds but takes the other column block of B
    ("ascend-950", "gemm", "tiled", "aligned", "T.copy(B[(32 * ko), (64 * jo)], B_l1)",
     "T.copy(B[(32 * ko), (64 * (1 - jo))], B_l1)", None),
    # the wrong pipeline slot of L1 on the 910B
    ("ascend-910b", "gemm_silu", "fused", "aligned", "T.copy(A_L1[ko % 3, :, :], A_L0A)",
     "T.copy(A_L1[(ko + 1) % 3, :, :], A_L0A)", None),
    # a mask dropped from a store at a ragged edge
    ("ascend-950", "softmax", "row_fused", "ragged", "                if (l0 <= 1099):\n                    Y[",
     "                if True:\n                    Y[", "out-of-bounds access Y"),
    # an offset index at a ragged edge
    ("ascend-950", "rmsnorm", "row_per_program", "ragged",
     '(T.if_then_else((l0 <= 599), T.Cast("float32", X[(l_i), l0])',
     '(T.if_then_else((l0 <= 599), T.Cast("float32", X[(l_i), (l0 + 1)])', "out-of-bounds access X"),
    # a scalar result stored by every lane
    ("ascend-950", "rmsnorm", "row_per_program", "ragged", "for l0 in T.Parallel(1):\n                v_r[0]",
     "for l0 in T.Parallel(4):\n                v_r[0]", "both store v_r element"),
    # a missing cast before a store
    ("ascend-950", "gemm_silu", "fused", "aligned", 'Y_out[l0, l1] = T.Cast("bfloat16", C_ub[l0, l1])',
     "Y_out[l0, l1] = C_ub[l0, l1]", "needs a T.Cast"),
    # a copy that converts
    ("ascend-950", "quant_gemm", "separate", "aligned", "T.copy(Out_out, Out[0, 0])", "T.copy(P_ub, Out[0, 0])",
     "converts dtypes"),
    # the vector core reads the workspace without waiting for the cube
    ("ascend-910b", "gemm_silu", "fused", "aligned", "T.wait_cross_flag(0)  # the cube's result is in the workspace\n",
     "\n", "without waiting for a cross-core flag"),
    # the flag raised on a pipe that did not write the workspace
    ("ascend-910b", "gemm_silu", "fused", "aligned", 'T.set_cross_flag("FIX", 0)', 'T.set_cross_flag("MTE2", 0)',
     "without waiting for a cross-core flag"),
    # a wait for a flag nobody sets
    ("ascend-910b", "gemm_silu", "fused", "aligned", "T.wait_cross_flag(0)", "T.wait_cross_flag(1)", "wait forever"),
    # the cube's result moved L0C -> UB, a path the 910B does not have
    ("ascend-910b", "gemm_silu", "fused", "aligned", "T.copy(C_L0C, C_ws[cid, 0, 0])", "T.copy(C_L0C, C_ub)",
     "has no data path L0C -> UB"),
    # vector work in the cube scope
    ("ascend-910b", "softmax", "row_fused", "aligned", 'with T.Scope("V"):', 'with T.Scope("C"):',
     "T.tile.fill outside the vector scope"),
    # a misspelt API function
    ("ascend-910b", "rmsnorm", "row_per_program", "aligned", "T.tile.mul(", "T.tile.mult(", "has no attribute 'mult'"),
]


@pytest.mark.parametrize("target,example,schedule,sizes,old,new,error", BROKEN,
                         ids=[f"{b[0]}-{b[1]}-{n}" for n, b in enumerate(BROKEN)])
def test_a_broken_kernel_is_detected(target, example, schedule, sizes, old, new, error):
    text = emitted(target, example, schedule, sizes)
    assert old in text
    broken = text.replace(old, new, 1)
    if error is None:
        _, result = check(target, example, schedule, sizes, broken)
        assert not all(c.ok for c in result.values()), "the broken kernel passed"
    else:
        with pytest.raises(SimulationError, match=re.escape(error)) as err:
            check(target, example, schedule, sizes, broken)
        assert f"{example}_" in str(err.value) and "block" in str(err.value)  # where it happened


def test_both_vector_cores_writing_the_same_elements_is_caught():
    text = emitted("ascend-910b", "softmax", "row_fused", "aligned")
    both_cores = text.replace("if vid == 0:", "if vid < 2:")
    with pytest.raises(SimulationError, match="both vector cores write Y element"):
        check("ascend-910b", "softmax", "row_fused", "aligned", both_cores)


def _only_vector_core_0(text: str, line: str) -> str:
    """The emitted line (a flag call both vector cores must make) moved under `if vid == 0`."""
    at = text.index(line)
    start = text.rindex("\n", 0, at) + 1
    indent = text[start:at]
    return text[:start] + f"{indent}if vid == 0:\n{indent}    " + text[at:]


def test_both_vector_cores_must_take_part_in_the_cross_core_flags():
    """Mode 2 (AscendC CrossCoreSetFlag): a flag the cube sets reaches both vector cores and each must wait for
    it; the cube's wait goes on only when both vector cores have set the flag.  A kernel where only vector
    core 0 waits lets core 1 read its half of the cube's result too early; one where only core 0 sets hangs
    the cube."""
    text = emitted("ascend-910b", "gemm_silu", "fused", "aligned")
    waits_on_one = _only_vector_core_0(text, "T.wait_cross_flag(0)  # the cube's result is in the workspace")
    with pytest.raises(SimulationError, match="the vector core reads C_ws, which the cube core wrote in this block "
                                              r"\(element \[0, 32, 0\]\), without waiting"):
        check("ascend-910b", "gemm_silu", "fused", "aligned", waits_on_one)  # vector core 1 reads its half
    text = emitted("ascend-910b", "quant_gemm", "separate", "aligned")
    sets_on_one = _only_vector_core_0(text, 'T.set_cross_flag("MTE3", 0)')
    with pytest.raises(SimulationError, match="the cube waits for both vector cores to set it .mode 2., and vector "
                                              "core 1 did not"):
        check("ascend-910b", "quant_gemm", "separate", "aligned", sets_on_one)


# ---------------------------------------------------------------- the fake namespaces follow the real APIs


def test_the_910b_namespace_is_the_tilelang_ascend_api():
    import inspect

    fake = namespace_functions("ascend-910b")
    api = {n: f for n, f in vars(api910b).items() if inspect.isfunction(f) and not n.startswith("_")
           and f.__module__ == api910b.__name__ and n != "check_module"}
    api.update({f"tile.{n}": f for n, f in vars(api910b.tile).items() if inspect.isfunction(f)})
    assert set(fake) == set(api)
    for name, fn in api.items():
        assert str(inspect.signature(fake[name])) == str(inspect.signature(fn)), name


def test_the_950_namespace_follows_mainline_tilelang():
    import inspect

    real = pytest.importorskip("tilelang.ascend.language")
    for name, fn in namespace_functions("ascend-950").items():
        assert hasattr(real, name), name
        try:
            params = inspect.signature(getattr(real, name)).parameters
        except (TypeError, ValueError):
            continue
        mine = inspect.signature(fn).parameters
        assert list(mine) == [p for p in params if p in mine] and set(mine) <= set(params), (name, list(params))


# ---------------------------------------------------------------- lanes, masks and the helper

LANES = '''# Target ascend-950 (a hand-written module in the emitted style)
import tilelang.ascend.language as T


@T.prim_func
def k(X: T.Tensor((5,), "float32"), Y: T.Tensor((5,), "float32")):
    with T.Kernel(1) as cid:
        b = T.alloc_shared((8,), "float32")
        with T.SimtVF(threads=128):
            for l0 in T.Parallel(8):
                b[l0] = T.if_then_else(l0 < 5, X[l0], T.cast(0, "float32"))
        with T.SimtVF(threads=128):
            for l0 in T.Parallel(8):
                if l0 < 5:
                    Y[l0] = b[l0] * 2.0
                else:
                    b[l0] = 1.0


KERNELS = {"k": k}
'''


def test_lanes_masks_and_guarded_loads():
    x = np.arange(5, dtype=np.float32)
    sim = simulate(LANES, {"X": x})
    assert np.array_equal(sim.tensors["Y"], 2 * x)
    unguarded = LANES.replace('T.if_then_else(l0 < 5, X[l0], T.cast(0, "float32"))', "X[l0]")
    with pytest.raises(SimulationError, match=re.escape("out-of-bounds access X[5] (shape (5,)) by lane [5]")):
        simulate(unguarded, {"X": x})
    racy = LANES.replace("Y[l0] = b[l0] * 2.0", "Y[l0] = b[(l0 + 5) % 8] * 2.0")
    war = "lane [5] of T.Parallel(8,) stores b element [5], which lane [0] of the same loop read"
    with pytest.raises(SimulationError, match=re.escape(war)):
        simulate(racy, {"X": x})
    raw = LANES.replace("                    b[l0] = 1.0",
                        "                    b[l0] = 1.0\n                    Y[l0 - 3] = b[l0 - 1]")
    raw_msg = "lane [6] of T.Parallel(8,) reads b element [5], which lane [5]"
    with pytest.raises(SimulationError, match=re.escape(raw_msg)):
        simulate(raw, {"X": x})
    into_input = LANES.replace("Y[l0] = b[l0] * 2.0", "X[l0] = b[l0] * 2.0")
    with pytest.raises(SimulationError, match="store into input tensor X"):
        simulate(into_input, {"X": x})


def test_check_schedule_helper():
    from tdsl.compiler.verify.ascend_sim import check_schedule

    result = check_schedule(program("rmsnorm", "ragged"), "row_per_program", "ascend-950", seed=3)
    assert set(result) == {"Y"} and result["Y"].ok


# ---------------------------------------------------------------- FP8 on the 910B, bit for bit

E4M3_ROUND = """
const N = 2048
kernel q(X: f32[N]) -> (Q: f8e4m3[N]) {
  Q[i] = X[i]
}
schedule tiles {
  io, ii = split(Q.i, 256)
  bind(Q.io, grid.x)
}
"""

E4M3_DECODE = """
const N = 256
kernel d(B: f8e4m3[N]) -> (Y: f32[N]) {
  Y[i] = B[i]
}
schedule one {
  io, ii = split(Y.i, 256)
  bind(Y.io, grid.x)
}
"""


def _e4m3_bytes(values):
    from tdsl.compiler.model import dtypes as dt

    return dt.to_storage("f8e4m3", np.asarray(values, dtype=np.float32)).view(np.uint8)


def test_910b_rounds_to_e4m3_exactly_at_every_tie_and_edge():
    """The vector core's E4M3 rounding (backends/ascend910b/e4m3.py) gives the interpreter's bytes exactly: every midpoint
    between neighbouring E4M3 values (ties to even), values just beside them, subnormals, saturation, signs.
    The 2-ulp comparison of the other tests would let a one-ulp rounding error pass; this does not."""
    from ml_dtypes import float8_e4m3fn

    from tdsl.compiler.driver.api import loads

    grid = np.arange(0, 127, dtype=np.uint8).view(float8_e4m3fn).astype(np.float32)  # 0 .. 448
    mids = (grid[:-1] + grid[1:]) / 2
    below, above = np.nextafter(mids, 0).astype(np.float32), np.nextafter(mids, 1000).astype(np.float32)
    edges = np.array([448.0, 463.9, 464.0, 470.0, 1e6, np.inf, 2.0 ** -10, 2.0 ** -11, 1e-30, 0.0], np.float32)
    pos = np.concatenate([grid, mids, below, above, edges]).astype(np.float32)
    x = np.concatenate([pos, -pos])
    x = np.resize(x, 2048).astype(np.float32)
    prog = loads(E4M3_ROUND)
    text = generate(prog, "tiles", target="ascend-910b")
    assert 'Q: T.Tensor((2048,), "uint8")' in text and 'E4M3_BYTES = ["Q"]' in text
    sim = simulate(text, {"X": x}, "ascend-910b")
    got = sim.tensors["Q"].astype(np.float32)
    want = _e4m3_bytes(x).view(float8_e4m3fn).astype(np.float32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} values rounded differently, first x={x[bad[0]]!r}: {got[bad[0]]} != {want[bad[0]]}"


def test_910b_decodes_every_e4m3_byte_exactly():
    from ml_dtypes import float8_e4m3fn

    from tdsl.compiler.driver.api import loads

    codes = np.arange(256, dtype=np.uint8)  # 0x7F and 0xFF are NaN (the encoder writes 0x7F for NaN)
    values = codes.view(float8_e4m3fn).astype(np.float32)
    text = generate(loads(E4M3_DECODE), "one", target="ascend-910b")
    sim = simulate(text, {"B": values}, "ascend-910b")
    got = sim.tensors["Y"]
    nan = np.isnan(values)
    assert nan.sum() == 2 and np.array_equal(np.isnan(got), nan), "the NaN bytes are not decoded as NaN"
    assert np.array_equal(got[~nan].view(np.uint32), values[~nan].view(np.uint32)), \
        "decoded values differ (or the sign of zero)"


def test_910b_fp8_product_on_the_cube_at_ragged_sizes():
    """quant_gemm's E4M3 product goes to the cube when its tiles are 16 wide or more; at sizes that are not
    multiples of the tiles the clipped byte copies leave lanes unfilled (no 8-bit Duplicate), which the
    decoded tiles must zero before the cube adds them up."""
    prog = load(EXAMPLES / "quant_gemm.tdsl", sizes={"M": 130, "N": 140, "K": 70})
    text = generate(prog, "separate", target="ascend-910b")
    assert "GM workspace (decoded FP8) -> L1" in text and "T.tile.select(" in text
    original = prog.schedule()
    inputs = random_inputs(original.model, seed=5)
    want = interpret(original.model, original.time_map(), inputs)
    sim = simulate(text, inputs, "ascend-910b")
    for name in ("Aq", "Out"):
        c = compare(want[name].astype(np.float32), sim.tensors[name].astype(np.float32), original.model.tensors[name].dtype)
        assert c.ok, f"{name}: {c.summary()}"


# ---------------------------------------------------------------- the 910B at random sizes

SIZE_RANGES = {  # (dimension, low, high): small enough for the interpreter, ragged almost always
    "gemm": [("M", 2, 150), ("N", 2, 150), ("K", 2, 150)],
    "gemm_silu": [("M", 2, 150), ("N", 2, 150), ("K", 2, 150)],
    "swiglu_quant": [("M", 1, 6), ("N", 2, 2100)],
    "rmsnorm": [("M", 1, 5), ("N", 2, 1100)],
    "softmax": [("M", 1, 5), ("N", 2, 1100)],
    "quant_gemm": [("M", 2, 150), ("N", 2, 150), ("K", 2, 150)],
    "attention": [("L", 2, 80), ("D", 2, 40)],
}


@st.composite
def _case(draw):
    example = draw(st.sampled_from(sorted(SIZE_RANGES)))
    schedule = draw(st.sampled_from(sorted(s for s, rule in EXPECTED[example].items() if rule is None)))
    sizes = {d: draw(st.integers(lo, hi)) for d, lo, hi in SIZE_RANGES[example]}
    return example, schedule, sizes, draw(st.integers(0, 2 ** 16))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_910b_kernels_at_random_sizes_compute_the_program_or_are_refused_with_a_reason(case):
    """Any example, legal schedule and sizes: the emitted 910B module runs and matches the interpreter, or the
    backend (or the memory plan) refuses it with a message -- never a crash or a kernel the simulator rejects."""
    from tdsl.compiler.verify.ascend_sim import check_schedule

    example, schedule, sizes, seed = case
    prog = load(EXAMPLES / f"{example}.tdsl", sizes=sizes)
    try:
        result = check_schedule(prog, schedule, "ascend-910b", seed=seed)
    except (BackendError, CapacityError) as err:
        assert str(err)
        return
    for name, c in result.items():
        assert c.ok, f"{example}/{schedule} {sizes}: {name}: {c.summary()}"


@pytest.mark.parametrize("target", ["ascend-950", "ascend-910b"])
def test_a_tile_of_lanes_past_its_extent_computes_the_interpreters_bits(target):
    """A 48 × 96 product tile has 64 × 128 lanes (compiler/lower/tile_rules.py); the staged boxes are the lanes
    (the plan's box padded), the lanes past the tile masked to 0."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(padded_tile_gemm(40, 96, 150))
    results = check_schedule(prog, "s", target, seed=1)
    assert results and all(r.ok and r.max_abs == 0 for r in results.values()), results


# A masked load whose tile lies wholly outside its tensor at the last iterations of a serial loop around it
# (here serial because the output replaces the input it reads one row or column ahead).
PAST_THE_END = """
const M = 7, N = 11
kernel ahead(X: f32[M, N], W: DT[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 0.5 + where(READ_OK, X[READ] * W[READ], 2.5)
}
schedule in_place {
  store_in(Y, X)
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16", "f8e4m3"])
@pytest.mark.parametrize("read_ok, read", [("i < M - 1", "i + 1, j"),  # a row tile past the last row
                                           ("j < N - 1", "i, j + 1"),  # a column tile past the last column
                                           ("i < M - 2", "i + 2, j")])
def test_a_masked_load_past_the_tensors_end_reads_nothing_there(dtype, read_ok, read):
    """The 910B's copy of a tile whose GM region lies wholly outside the tensor is not clipped to nothing (the
    simulator refuses it): the load is made only where some lane of the tile reads, and the lanes take the
    masked value otherwise."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    source = PAST_THE_END.replace("DT", dtype).replace("READ_OK", read_ok).replace("READ", read)
    results = check_schedule(loads(source), "in_place", "ascend-910b", seed=3)
    assert results and all(r.ok for r in results.values()), results
    text = generate(loads(source), "in_place", target="ascend-910b")
    assert "else:  # every lane takes the masked value" in text


# A stencil's boundaries on the 910B: reads shifted along the tile's lanes either way (`j - 1`, `j + 1`, a row
# back and two lanes ahead), and `where`s that pick between computed values along the lanes (a guard of rows, of
# columns, and one that keeps a read inside the first columns).
STENCIL = """
const M = 13, N = 37
kernel st(X: DT[M, N], A: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = where(j >= 1, where(j < N - 1, X[i, j - 1] + X[i, j + 1] * 0.5, X[i, j] * 3.0), X[i, j] - 1.0) + where(j < 10, A[i, j], X[i, j] * 2.0) + where(i >= 1, where(j < N - 2, X[i - 1, j + 2], 0.5), X[i, j])
}
schedule tiles {
  io, jo, ii, jj = tile(Y.i, Y.j, 8, 16)
  bind(Y.io, grid.x)
  bind(Y.jo, grid.y)
}
schedule rows {
  io, ii = split(Y.i, 4)
  bind(Y.io, grid.x)
}
schedule column {
  reorder(Y, j, i)
  io, ii = split(Y.i, 8)
}
"""


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f8e4m3"])
@pytest.mark.parametrize("schedule", ["tiles", "rows", "column", None])
def test_the_910b_reads_shifted_tiles_and_picks_computed_values_along_the_lanes(dtype, schedule):
    """Bit for bit the interpreter's result in the NumPy model, on normal and on special inputs (a NaN or an
    infinity in the branch a lane does not take is dropped: T.tile.select picks bits).  A region that starts
    before the tensor (`j - 1` at j = 0: a copy clips only the end) is read lane by lane; where that depends on
    the loop variables, under a test of its start.  (E4M3 with 16-wide tiles is refused: its conversions need
    128 lanes.)"""
    import numpy as np

    from fuzz.cases import inputs_for
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify import compare_outputs
    from tdsl.compiler.verify.ascend_sim import check_schedule, simulate
    from tdsl.compiler.reference.interpreter import interpret

    prog = loads(STENCIL.replace("DT", dtype))
    if dtype == "f8e4m3" and schedule == "tiles":
        with pytest.raises(BackendError, match=r"its tile of 16 lanes along j \(its extent in the tile -- a split's factor, or the span of a skewed or short loop -- rounded up to a "
                                               r"power of two\) would be widened to 32 lanes"):
            generate(prog, schedule, target="ascend-910b")
        return
    results = check_schedule(prog, schedule, "ascend-910b", seed=5)
    assert results and all(r.ok and r.max_abs == 0 for r in results.values()), results
    text = generate(prog, schedule, target="ascend-910b")
    assert "VSEL_TENSOR_TENSOR_MODE" in text and "lane by lane: its region starts before it" in text
    model = prog.schedule().model
    inputs = inputs_for(model, 7, "special")
    want = interpret(model, prog.schedule().time_map(), inputs)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert np.isnan(want["Y"]).any() and all(c.ok for c in compare_outputs(model, want, got).values())


REVERSED = """
const M = 13, N = 37
kernel rv(X: DT[M, N], V: DT[N], W: DT[M, 2 * N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, N - 1 - j] + where(j >= 1, X[M - 1 - i, j - 1], 0.5) * V[N - 1 - j] + W[i, 2 * j + 1]
}
""" + STENCIL[STENCIL.index("schedule tiles"):]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("schedule", ["tiles", "rows", "column", None])
def test_the_910b_reads_reversed_and_strided_indices_lane_by_lane(dtype, schedule):
    """Reversed (`X[i, N - 1 - j]`, `X[M - 1 - i, j - 1]`) and strided (`W[i, 2 * j + 1]`) reads are no one T.copy
    region of the tile: the scalar unit reads them element by element (values.py `_load_lanes`), inside the
    tensor and under the load's mask; bit for bit the interpreter's result in the NumPy model."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(REVERSED.replace("DT", dtype))
    assert "lane by lane: no T.copy moves its region" in generate(prog, schedule, target="ascend-910b")
    results = check_schedule(prog, schedule, "ascend-910b", seed=5)
    assert results and all(r.ok and r.max_abs == 0 for r in results.values()), results


def test_the_910b_masks_the_lanes_of_a_3d_tile_row_by_row():
    """A sum of three factors over a 16 x 16 tile on the vector cores keeps its reduction axis in the tile (a 3-D
    tile, ragged at 21 x 19 x 11): its lane masks go row by row along both leading axes (vector.py `_mask_lanes`;
    PolyBench's 2mm was refused for it), and the reads of A and B, whose axes are not the tile's last ones, lane
    by lane.  The interpreter's result within the sums' tolerance, in the NumPy model."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads("""
const M = 21, N = 19, K = 11
kernel m3(A: f32[M, K], B: f32[K, N]) -> (Y: f32[M, N]) {
  Y[i, j] = sum(k) 1.5 * A[i, k] * B[k, j]
}
schedule tiles {
  io, jo, ii, jj = tile(Y.i, Y.j, 16, 16)
  bind(Y.io, grid.x)
  bind(Y.jo, grid.y)
}
""")
    text = generate(prog, "tiles", target="ascend-910b")
    assert "T.tile.select(" in text and "A lane by lane" in text
    results = check_schedule(prog, "tiles", "ascend-910b", seed=2)
    assert results and all(r.ok for r in results.values()), results


VALUE_WHERE = """
const M = 13, N = 37
kernel lr(X: DT[M, N], S: f32[N]) -> (Y: f32[M, N], Z: f32[1]) {
  Y[i, j] = where(X[i, j] > 0.0, X[i, j], 0.125 * X[i, j]) + where(S[j] <= X[i, j] * 2.0, 1.0, where(S[0] < S[j], S[j], -1.0)) + where(S[1] >= S[2], X[i, j], 0.5)
  Z[z] = where(S[0] > S[1], S[1], S[2] * 2.0)
}
""" + STENCIL[STENCIL.index("schedule tiles"):STENCIL.index("schedule column")].replace("8, 16", "8, 32")  # E4M3: 32


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f8e4m3"])
@pytest.mark.parametrize("schedule", ["tiles", "rows", None])
def test_the_910b_selects_on_comparisons_of_values(dtype, schedule):
    """`where` on values (a leaky ReLU, a threshold read from another tensor, a scalar against the lanes, a
    comparison of two scalars): the sides compared lane by lane (T.tile.compare) and the other branch's lanes
    selected in; bit for bit the interpreter's result in the NumPy model, also on special inputs (a NaN compares
    false and takes the other branch, as in the interpreter).  PolyBench's correlation was refused for it."""
    from fuzz.cases import inputs_for
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify import compare_outputs
    from tdsl.compiler.verify.ascend_sim import simulate

    prog = loads(VALUE_WHERE.replace("DT", dtype))
    text = generate(prog, schedule, target="ascend-910b")
    assert "a where on values, row by row" in text and "where_scalar" in text and 'if T.Cast("int32", ' in text
    assert not api910b.check_module(text)  # every T.* call binds to tilelang-ascend 0.1.4's signatures
    model = prog.schedule().model
    for dist in ("normal", "special"):
        inputs = inputs_for(model, 7, dist)
        want = interpret(model, prog.schedule().time_map(), inputs)
        got = simulate(text, inputs, "ascend-910b").tensors
        results = compare_outputs(model, want, got)
        assert all(r.ok and r.max_abs == 0 for r in results.values()), (dist, results)
    assert np.isnan(want["Y"]).any()


@pytest.mark.parametrize("port, sizes", [("blas/gemm.tdsl", {"NI": 5, "NJ": 9, "NK": 7}),
                                         ("blas/trmm.tdsl", {"M": 6, "N": 9}),
                                         ("stencils/seidel_2d.tdsl", {"N": 7, "TSTEPS": 3})])
def test_the_910b_generates_polybench_ports_that_fold_their_storage(port, sizes):
    """PolyBench's in-place updates kept in one plane (`fold_storage(Cs, k, 1)`, seidel-2d's step tensors) at
    ragged sizes: each folded tensor read and written lane by lane at its plane; bit for bit in the NumPy model."""
    from pathlib import Path

    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    source = (Path(__file__).resolve().parents[2] / "benchmarks/polybench" / port).read_text()
    assert "fold_storage" in source
    results = check_schedule(loads(source, sizes=sizes), "tiled", "ascend-910b", seed=3)
    assert results and all(r.ok and r.max_abs == 0 for r in results.values()), results


@pytest.mark.parametrize("where", [(1, slice(2, 5)), (slice(None), 3), (slice(1, 4), slice(0, 7, 2), 2),
                                   (-1, slice(None)), (2,), (1, 2, 0), (slice(4, 9),)])
def test_the_cross_core_check_takes_a_regions_own_elements(where):
    """The elements a copy writes or reads, as flat indices of the region alone (not of the whole tensor, which
    made a copy of one element cost the tensor's size): the same indices, in the same order, as numpy's."""
    from types import SimpleNamespace

    from tdsl.compiler.verify.ascend_sim.cross_core import _flat_of

    buf = SimpleNamespace(shape=(5, 7, 3), data=np.zeros((5, 7, 3)))
    assert np.array_equal(_flat_of(buf, where), np.arange(105).reshape(5, 7, 3)[where].reshape(-1))


def test_the_910b_stores_no_row_of_a_skewed_tile_past_the_tensor():
    """PolyBench's seidel-2d (without its fold_storage) at N = 14: a skewed tile stored row by row has rows past
    the tensor's last one, which its mask leaves to the copy's clipping; a copy of a row wholly outside is not
    clipped to nothing (the NumPy model refused the module), so the row's own test keeps it inside."""
    from pathlib import Path

    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    source = (Path(__file__).resolve().parents[2] / "benchmarks/polybench/stencils/seidel_2d.tdsl").read_text()
    source = "\n".join(line for line in source.splitlines() if "fold_storage" not in line)
    results = check_schedule(loads(source, sizes={"N": 14}), "tiled", "ascend-910b", seed=1)
    assert results and all(r.ok for r in results.values()), results
