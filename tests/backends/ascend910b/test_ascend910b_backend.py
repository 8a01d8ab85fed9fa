"""The ascend-910b backend: the tilelang-ascend 0.1.4 API of the chapter's 5.4.5, checked with ast.parse and bound
call by call to that API's signatures (the package needs CANN and cannot be installed here); every legal schedule
of every example compiles and its text matches the golden file; programs it cannot express are BackendErrors with
the reason."""

import os
import re
import subprocess
import sys

import pytest

from tdsl.compiler.analysis.buffer_plan import CapacityError

from catalog import CHAPTER_SIZES, EXAMPLES, LEGAL, LEGAL_IDS, REFUSED, ROOT

os.environ.setdefault("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang"))

from tdsl.backends.ascend910b.api import check_module  # noqa: E402
from tdsl.compiler.driver.api import load  # noqa: E402
from tdsl.compiler.driver.generate import generate  # noqa: E402
from tdsl.compiler.errors import BackendError  # noqa: E402

# What the target refuses, and why (a substring of the error): the memory plan rejects schedules whose buffers
# do not fit the target (CapacityError, exit 1) before the backend runs; the backend refuses what it cannot express.
REFUSED_910B = {(ex, name): text for (ex, name, backend), text in REFUSED.items() if backend == "ascend-910b"}


@pytest.mark.parametrize("example,name", LEGAL, ids=LEGAL_IDS)
def test_ascend910b_parses_and_fits_the_tilelang_ascend_api(example, name, golden):
    prog = load(EXAMPLES / f"{example}.tdsl", sizes=CHAPTER_SIZES.get(example))
    if (example, name) in REFUSED_910B:
        with pytest.raises((BackendError, CapacityError), match=re.escape(REFUSED_910B[example, name])):
            generate(prog, name, target="ascend-910b")
        return
    text = generate(prog, name, target="ascend-910b")
    golden(text, suffix=".py")
    assert check_module(text) == []
    assert "is_npu=True) as (cid, vid):" in text


def test_ascend910b_chapter_gemm_follows_5_4_5():
    text = generate(load(EXAMPLES / "gemm.tdsl"), "gpu", target="ascend-910b")
    for line in ('A_L1 = T.alloc_L1((3, 128, 64), "bfloat16")', 'A_L0A = T.alloc_L0A((128, 64), "bfloat16")',
                 'B_L0B = T.alloc_L0B((64, 128), "bfloat16")', 'C_L0C = T.alloc_L0C((128, 128), "float32")',
                 'with T.Scope("C"):', "for ko in T.Pipelined(0, 64, num_stages=3):",
                 "T.copy(A[(128 * io), (64 * ko)], A_L1[ko % 3, :, :])  # GM -> L1",
                 "T.copy(A_L1[ko % 3, :, :], A_L0A)  # L1 -> L0A",
                 "T.mma(A_L0A, B_L0B, C_L0C, init=ko == 0)",
                 "T.copy(C_L0C, C[(128 * io), (128 * jo)])  # L0C -> GM"):
        assert line in text, line


def test_ascend910b_vector_work_is_in_vector_scope_after_the_cube():
    text = generate(load(EXAMPLES / "gemm_silu.tdsl"), "fused", target="ascend-910b")
    c, v = text.index('with T.Scope("C")'), text.index('with T.Scope("V")')
    assert c < text.index("T.mma(") < text.index('T.set_cross_flag("FIX", 0)') < v
    assert v < text.index("T.wait_cross_flag(0)") < text.index("T.tile.exp(")
    assert "T.tile.silu(" not in text  # SiLU is the program's composition of primitives, not the hardware's


def test_the_api_check_catches_mistakes():
    bad = 'import tilelang.language as T\nT.alloc_L1((1, 2))\nT.tile.exp(a, b, c)\nT.mmad(a, b, c)\nT.Scope("X")\n'
    problems = "\n".join(check_module(bad))
    assert "T.alloc_L1: missing a required argument: 'dtype'" in problems
    assert "T.tile.exp: too many positional arguments" in problems
    assert "T.mmad is not in the tilelang-ascend 0.1.4 API" in problems
    assert 'T.Scope takes "C" or "V"' in problems


def test_cli_compile_for_ascend910b(tmp_path):
    target = "ascend-910b"
    out = tmp_path / "k.py"
    done = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", "compile", str(EXAMPLES / "gemm.tdsl"),
                           "--schedule", "gpu", "--target", target, "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"target {target}" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", "compile", str(EXAMPLES / "gemm_silu.tdsl"),
                           "--schedule", "fast", "--target", target, "-o", str(out)], capture_output=True, text=True)
    # the 910B's two vector cores take 64 rows each: 164,864 B of UB per vector core (the cube's result,
    # rounded in place, a bf16 copy, one temporary for the expanded SiLU and one row of 1.0 for 1 / y)
    assert done.returncode == 0, done.stderr
    assert "on-chip bytes: L0A 16384, L0B 32768, L0C 131072, L1 147456, UB 164864" in out.read_text()


# ---------------------------------------------------------------- what the 910B refuses, and why

NARROW = """
const M = 64, N = 100
kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 2.0
}
schedule narrow {
  io, jo, ii, jj = tile(Y.i, Y.j, 16, WIDTH)
  bind(Y.io, grid.x)
  bind(Y.jo, grid.y)
}
"""

# tiles of 17 columns: each 32-lane tile reaches 15 lanes into the next one (masked, written back as they were)
PARTIAL = """
const M = 8, N = 40
kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
  Y[i, j] = X[i, j] * 2.0
}
schedule partial {
  jo, io, jj, ii = tile(Y.j, Y.i, 17, 8)
  BIND
}
"""

THREE_D = """
const A = 3, B = 4, C = 5
kernel k(X: f32[A, B, C]) -> (Y: f32[A, B, C]) {
  Y[a, b, c] = X[a, b, c] * 2.0
}
"""

REFUSED_PROGRAMS_910B = {
    # tile rows of 4 f32 = 16 bytes, and the tensor continues past each tile
    "narrow store": (NARROW.replace("WIDTH", "4"), "narrow",
                     "Y: its tile of 4 lanes along j (its extent in the tile -- a split's factor, or the span of a skewed or short loop -- rounded up to a power of two) would be widened to 8 lanes (a tile row copied between GM and UB is a "
                     "whole number of 32-byte blocks (8 lanes"),
    "masked FP8 store": ("""
const N = 64
kernel k(X: f32[N, N]) -> (Q: f8e4m3[N, N]) {
  Q[i, j : j <= i] = X[i, j]
}
schedule tiles {
  io, jo, ii, jj = tile(Q.i, Q.j, 32, 64)
  bind(Q.io, grid.x)
}
""", "tiles", "Q: a store of FP8 bytes under a mask other than the tensor's bounds is not generated"),
    "small E4M3 tile": ("""
const N = 64
kernel k(X: f32[N]) -> (Q: f8e4m3[N]) {
  Q[i] = X[i]
}
schedule tiles {
  io, ii = split(Q.i, 32)
  bind(Q.io, grid.x)
}
""", "tiles", "Q: its tile of 32 lanes along i (its extent in the tile -- a split's factor, or the span of a skewed or short loop -- rounded up to a power of two) would be widened to 128 lanes (the E4M3 conversions compare whole "
              "256-byte repeats (128 f16 values)), and the wider tile would write lanes of the neighbouring tile"),
}

# Regions no one T.copy moves, loaded and stored lane by lane: a 3-D tile (CPU fuzz seed 5468, doitgen with
# host(Sm.r), was refused; the NumPy model rejects one copy of it), a transposed 3-D store, a transposed 2-D read.
LANES = """
kernel k(X: f32[A, B, C], W: f32[C, B]) -> (Y: f32[A, B, C], Z: f32[C, B, A], V: f32[B, C]) {
  Y[a, b, c] = X[a, b, c] * 2.0 + 1.0
  Z[c, b, a] = X[a, b, c] - W[c, b]
  V[b, c] = W[c, b] * 0.5
}
"""


@pytest.mark.parametrize("sizes", ["const A = 3, B = 5, C = 7", "const A = 2, B = 8, C = 16"])
def test_910b_moves_what_no_copy_moves_lane_by_lane(sizes):
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    prog = loads(sizes + LANES)
    text = generate(prog, None, target="ascend-910b")
    assert "X lane by lane: it spans more than two tile axes" in text
    assert "Z lane by lane: it spans more than two tile axes" in text and "W lane by lane: no T.copy moves" in text
    results = check_schedule(prog, None, "ascend-910b", seed=2)
    assert set(results) == {"Y", "Z", "V"} and all(r.ok and r.max_abs == 0 for r in results.values()), results


# A product whose operand has a fixed index after its tile's axes (A[i, q, k] at one q: fuzz seed 5533's doitgen).
# One copy of the region's last two dimensions does not move the tile.
MIDDLE_INDEX = """
kernel k(A: bf16[M, Q, K], B: bf16[K, N]) -> (C: f32[M, Q, N]) {
  C[i, q, j] = sum(k) A[i, q, k] * B[k, j]
}
"""


def test_a_product_operand_with_a_fixed_index_after_its_tile_axes():
    """On the vector cores (a small tile) it is read lane by lane, bit for bit in the model, on both Ascend
    targets; on the cube the 950 gathers it into UB element by element and copies it to L1 (within the cube's
    tolerance), and the 910B, whose cube operands come from GM, refuses it naming the way out."""
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.verify.ascend_sim import check_schedule

    small = loads("const M = 5, Q = 1, K = 7, N = 3" + MIDDLE_INDEX)
    assert "A lane by lane: its tile axes are not the tensor's last two dimensions" in generate(
        small, None, target="ascend-910b")
    for target in ("ascend-910b", "ascend-950"):
        results = check_schedule(small, None, target, seed=1)
        assert results["C"].ok and results["C"].max_abs == 0, (target, results)
    cube = loads("const M = 32, Q = 1, K = 32, N = 32" + MIDDLE_INDEX)
    text = generate(cube, None, target="ascend-950")
    assert "T.copy(A_ub, A_l1)  # UB -> L1" in text and "T.copy(A[" not in text
    assert check_schedule(cube, None, "ascend-950", seed=1)["C"].ok
    with pytest.raises(BackendError, match=re.escape("C: the matrix product's operand A[i, q, k] has a fixed index "
                                                     "after its tile's axes")):
        generate(cube, None, target="ascend-910b")


def test_910b_runs_a_3d_tensor_once_each_tile_has_one_value_of_its_first_axis():
    """A 3-D tensor with its loop over a bound to the grid: each tile copies one 4 x 5 region."""
    import numpy as np

    from tdsl.compiler.verify.ascend_sim import simulate
    from tdsl.compiler.driver.api import loads

    text = generate(loads(THREE_D + "schedule b {\n  bind(Y.a, grid.x)\n}\n"), "b", target="ascend-910b")
    x = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)
    assert np.array_equal(simulate(text, {"X": x}, "ascend-910b").tensors["Y"], x * np.float32(2.0))


@pytest.mark.parametrize("case", sorted(REFUSED_PROGRAMS_910B))
def test_910b_refusals_name_the_reason(case, tmp_path):
    from tdsl.compiler.driver.api import loads

    text, schedule, why = REFUSED_PROGRAMS_910B[case]
    with pytest.raises(BackendError, match=re.escape(why)):
        generate(loads(text), schedule, target="ascend-910b")
    src = tmp_path / "k.tdsl"
    src.write_text(text)
    done = subprocess.run([sys.executable, "-m", "tdsl.compiler.driver.cli", "compile", str(src), "--schedule", schedule,
                           "--target", "ascend-910b", "-o", str(tmp_path / "k.py")], capture_output=True, text=True)
    assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr


def test_910b_rows_of_32_bytes_need_no_widening():
    """8 f32 lanes are one 32-byte UB row: the same program with tiles 8 wide compiles, unwidened, and runs."""
    import numpy as np

    from tdsl.compiler.verify.ascend_sim import simulate
    from tdsl.compiler.driver.api import loads

    text = generate(loads(NARROW.replace("WIDTH", "8")), "narrow", target="ascend-910b")
    assert 'T.alloc_ub((8, 8), "float32")' in text  # 8 of the 16 rows on each vector core
    x = np.random.default_rng(1).standard_normal((64, 100)).astype(np.float32)
    assert np.array_equal(simulate(text, {"X": x}, "ascend-910b").tensors["Y"], x * np.float32(2.0))


def test_910b_two_vector_cores_split_the_rows_of_2d_tiles():
    """Each 910B AI core has two vector cores, each with its own UB: 2-D vector tiles go half to each (vid),
    1-D tiles (a row per block) to vector core 0."""
    text = generate(load(EXAMPLES / "gemm_silu.tdsl"), "fused", target="ascend-910b")
    vector = text[text.index('with T.Scope("V")'):]
    assert "if vid == 0" not in vector and "T.copy(C_ws[cid, vid * 32, 0], C_ub)" in vector
    assert 'C_ub = T.alloc_ub((32, 64), "float32")' in text
    text = generate(load(EXAMPLES / "rmsnorm.tdsl"), "row_per_program", target="ascend-910b")
    assert "if vid == 0:  # one of the two vector cores takes the whole tile" in text


def test_910b_partial_tiles_of_one_core_are_written_back_in_order():
    """The partial tiles above in a serial loop: one core stores them in turn, so the lanes a tile writes back
    as they were are stored again by the next tile -- the kernel computes the program."""
    import numpy as np

    from tdsl.compiler.verify.ascend_sim import simulate
    from tdsl.compiler.driver.api import loads

    text = generate(loads(PARTIAL.replace("BIND", "")), "partial", target="ascend-910b")
    assert "lanes outside the domain keep these values" in text
    x = np.random.default_rng(2).standard_normal((8, 40)).astype(np.float32)
    assert np.array_equal(simulate(text, {"X": x}, "ascend-910b").tensors["Y"], x * np.float32(2.0))


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f8e4m3"])
@pytest.mark.parametrize("bind", ["bind(Y.jo, grid.x)", "bind(Y.jo, grid.x)\n  bind(Y.io, grid.y)"])
def test_910b_partial_tiles_another_block_stores_go_lane_by_lane(dtype, bind):
    """Tiles of 17 columns bound to the grid: a 32-lane tile's last 15 lanes are the next block's, which it
    stores at the same time, so writing them back as they were would race.  Each lane inside the tile goes to
    its own GM element instead (from the first lane of a 32-byte UB row); the kernel computes the program."""
    from tdsl.compiler.verify import compare_outputs
    from tdsl.compiler.verify.ascend_sim import simulate
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.reference.interpreter import interpret, random_inputs

    prog = loads(PARTIAL.replace("BIND", bind).replace("-> (Y: f32", f"-> (Y: {dtype}"))
    text = generate(prog, "partial", target="ascend-910b")
    assert "lane by lane: its last lanes are another block's" in text and "keep these values" not in text
    model = prog.schedule().model
    inputs = random_inputs(model, seed=4)
    want = interpret(model, prog.schedule().time_map(), inputs)
    got = simulate(text, inputs, "ascend-910b").tensors
    assert all(c.ok and c.max_abs == 0 for c in compare_outputs(model, want, got).values())


COLUMNS = """
const M = 40, N = 3
kernel k(X: f32[M, N]) -> (Y: bf16[M, N], s: f32[N]) {
  Y[i, j] = X[i, j] * 2.0
  s[j] = sum(i) X[i, j]
}
schedule columns {
  io, jo, ii, jj = tile(Y.i, Y.j, 64, 1)
  io, jo, ii, jj = tile(s.j, s.i, 1, 64)
}
"""


def test_910b_tiles_down_a_column():
    """A 1-D tile along the rows of a 2-D tensor (the column fixed by a loop): T.copy would lay it along the
    last dimension, so the loads copy the rows into 32-byte UB rows (DataCopyPad starts each row on a block) and
    gather their first lanes, and the stores write element by element, only the rows inside the tensor."""
    import numpy as np

    from tdsl.compiler.verify.ascend_sim import simulate
    from tdsl.compiler.model import dtypes
    from tdsl.compiler.driver.api import loads

    text = generate(loads(COLUMNS), "columns", target="ascend-910b")
    assert 'X_rows_2 = T.alloc_ub((64, 8), "float32")' in text and "X_ub_1[r_3] = X_rows_2[r_3, 0]" in text
    assert "T.copy(Y_rows_8[r_9, 0:1], Y[r_9, jo])" in text and "if r_9 <= 39:" in text
    x = np.random.default_rng(3).standard_normal((40, 3)).astype(np.float32)
    got = simulate(text, {"X": x}, "ascend-910b").tensors
    assert np.array_equal(got["Y"], dtypes.to_storage("bf16", x * np.float32(2.0)))
    assert np.allclose(got["s"], x.sum(axis=0, dtype=np.float64), rtol=1e-5)


def test_910b_expression_temporaries_are_reused_in_place():
    """SiLU arrives as x * (1 / (1 + exp(-x))) (compiler/model/functions.py).  On a 64 x 256 f32 tile per vector core
    a temporary is 64 KiB of the 910B's 191.75 KiB of UB, so `fast` fits only if each step writes over the
    subexpression it consumes (the T.tile.* operations are element by element, dst may be a source), the cube's
    result is rounded in place, and 1 / y divides y row by row by one row of 1.0 (T.tile.div takes a scalar only
    as the divisor, where it would multiply by a rounded reciprocal)."""
    text = generate(load(EXAMPLES / "gemm_silu.tdsl"), "fast", target="ascend-910b")
    tiles = re.findall(r'= T\.alloc_ub\(\(64, 256\), "(\w+)"\)', text)
    assert sorted(tiles) == ["bfloat16", "float32", "float32"]  # the cube's result, one temporary, a bf16 copy
    assert 'T.alloc_ub((256,), "float32")' in text
    assert "T.tile.exp(t_3, t_3)" in text and "T.tile.add(t_3, t_3, 1.0)" in text
    assert re.search(r"for (r_\d+) in T\.serial\(64\):\n\s+T\.tile\.div\(t_3\[\1, :\], t_\d+, t_3\[\1, :\]\)", text)
    assert "T.tile.cast(C_ub, t_bf16_1" in text  # C rounded to bf16 in place


def test_910b_e4m3_of_narrow_rows_and_of_scalars():
    """The E4M3 conversions compare whole 256-byte repeats: a tile computed row by row (rows of 32 f32 lanes)
    is rounded as a whole after its rows, and a scalar through 64 lanes of its own (both were refused)."""
    from tdsl.compiler.verify.ascend_sim import check_schedule
    from tdsl.compiler.driver.api import loads

    prog = load(EXAMPLES / "quant_gemm.tdsl", sizes={"M": 4, "K": 32, "N": 8})
    text = generate(prog, None, target="ascend-910b")
    assert "row by row: Aq reads values broadcast along the row" in text and "T.tile.abs(s_abs_8, Aq_rows_2)" in text
    assert all(c.ok for c in check_schedule(prog, None, "ascend-910b").values())
    scalar = loads("""
const N = 40
kernel k(X: f32[N], Z: f32[N]) -> (Y: f32[N]) {
  Y[i] = X[i] * f8e4m3(Z[3] * 3.0)
}
""")
    assert "e4m3_scalar" in generate(scalar, None, target="ascend-910b")
    assert all(c.ok for c in check_schedule(scalar, None, "ascend-910b").values())


def test_a_comparison_whose_variable_cancels_is_written_without_it():
    # where(j > j, ...) in a row of the tile's column j: printed as a row condition, where j has no name
    from tdsl.compiler.lower import tileir as T
    from tdsl.compiler.lower.lane_masks import atoms, mentions

    [atom] = atoms(T.Bin(">", T.Var("j"), T.Var("j")))
    assert atom == T.Bin(">", T.Const(0), T.Const(0)) and not mentions(atom, "j")
    [kept] = atoms(T.Bin("<=", T.Var("j"), T.Var("i")))
    assert kept == T.Bin("<=", T.Var("j"), T.Var("i"))  # nothing cancels: unchanged


def test_a_comparison_always_holds_over_the_loops_ranges():
    """`always_holds` with the loops' first values, and their last ones where given: the whole-tile guard leaves
    out a tensor bound the loop's range already keeps (`64 * qo < 4096` for qo up to 63) and keeps the others."""
    from tdsl.compiler.lower import tileir as T
    from tdsl.compiler.lower.lane_masks import always_holds

    start = T.Bin("*", T.Const(64), T.Var("qo"))
    below = T.Bin("<", start, T.Const(4096))
    assert always_holds(below, {"qo": 0}, {"qo": 63})
    assert not always_holds(below, {"qo": 0}, {"qo": 64})
    assert not always_holds(below, {"qo": 0})  # no last value: nothing proven
    assert always_holds(T.Bin(">=", start, T.Const(0)), {"qo": 0})
    assert not always_holds(T.Bin("<", T.Bin("+", start, T.Var("vid")), T.Const(4096)), {"qo": 0}, {"qo": 63})
