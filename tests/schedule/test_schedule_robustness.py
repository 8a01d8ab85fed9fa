"""Every schedule step succeeds or raises a typed error and leaves the schedule as it was; every accepted trace
replays.  Regression tests for three classes of defect:

* buffers left behind: a step that takes a statement out of its cache buffer's loop (or removes that loop);
* `//` and `%` in indices, conditions and dimensions (isl's reader wants `floor((e)/d)` and `((e) mod d)`);
* loop names that the trace cannot print back (`1bad = fuse(...)`), and names a primitive makes up itself.
"""

import numpy as np
import pytest

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.cli import main
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.reference.interpreter import interpret, random_inputs
from tdsl.compiler.schedule.tree import statements_under, walk_loops
from tdsl.compiler.schedule.tree_view import tree_text
from tdsl.frontend.diagnostics import TdslError

from catalog import EXAMPLES

GEMM_SILU = """
const M = 16, K = 8, N = 16
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}
"""

CHAIN = """
const N = 8
kernel chain(X: f32[N], W: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * W[i]
  U[i] = T[i] + X[i]
  Y[i] = U[i] * 2.0
}
"""

STENCIL = """
const N = 16
kernel stencil(X: f32[N]) -> (Y: f32[N]) {
  T[i] = X[i] * 2.0
  Y[i : i >= 1] = T[i - 1] + T[i]
}
"""


def snapshot(s):
    return str(s.trace), tree_text(s.model, s.tree), [(b.tensor, b.kind, b.at.name, list(b.stmts))
                                                       for b in s.tree.buffers]


def replayed(text: str, s):
    """The schedule that the printed trace builds when pasted into a schedule block of the program."""
    return loads(f"{text}\nschedule again {{\n{s.trace}\n}}\n").schedule("again")


def assert_replays(text: str, s):
    again = replayed(text, s)
    assert tree_text(again.model, again.tree) == tree_text(s.model, s.tree)
    assert str(again.trace) == str(s.trace)


def assert_rejected_unchanged(s, call, match):
    before = snapshot(s)
    with pytest.raises(ScheduleError, match=match):
        call(s)
    assert snapshot(s) == before


def buffers_enclose_their_statements(s) -> bool:
    loops = list(walk_loops(s.tree.body))
    leaves = set(s.tree.leaves())
    for buf in s.tree.buffers:
        if not any(buf.at is loop for loop in loops):
            return False
        under = set(statements_under(buf.at))
        if any(stmt in leaves and stmt not in under for stmt in buf.stmts):
            return False
    return True


def fused_gemm_silu():
    s = loads(GEMM_SILU).schedule()
    s.tile("C.i", "C.j", 8, 8)
    s.split("C.k", 4)
    s.reorder("C", "io", "jo", "ko", "ii", "jj", "kk")
    s.reverse_compute_at("Y", "C.jo")
    s.cache_write("C", "register", at="C.jo")
    return s


# ---------------------------------------------------------------- buffers and moved statements


def test_fusion_report_of_the_fused_gemm_silu_does_not_crash(capsys):
    assert main(["fuse", str(EXAMPLES / "gemm_silu.tdsl"), "--schedule", "fused"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "compute_at(C, Y.io)" in l)
    assert line.split()[0] == "n/a"
    assert "C writes C through the register buffer of C at loop C.jo (cache_write)" in line
    assert "move C before caching C" in line
    assert "cannot fuse loop io with itself" not in out  # loops the base schedule already shares are skipped


def test_compute_at_out_of_a_cache_write_loop_is_a_schedule_error():
    s = fused_gemm_silu()
    assert_rejected_unchanged(s, lambda s: s.compute_at("C", "Y.io"),
                              r"compute_at: C writes C through the register buffer of C at loop C\.jo")


def test_a_statement_deeper_in_the_buffer_loop_keeps_its_buffer():
    s = fused_gemm_silu()
    s.compute_at("C", "Y.i")  # C stays inside jo: the buffer still encloses it
    assert buffers_enclose_their_statements(s)
    assert_replays(GEMM_SILU, s)


def test_moving_a_reader_out_of_a_shared_read_copy_is_a_schedule_error():
    s = loads(CHAIN).schedule()
    s.fuse("T.i", "U.i")
    s.cache_read("X", "shared", at="T.i")  # read by T and U
    assert_rejected_unchanged(s, lambda s: s.compute_at("U", "Y.i"),
                              r"U reads X through the shared copy of X at loop U\.i \(cache_read\); "
                              r"this step would take U out of that loop, away from the copy: move U before caching X")


def test_moving_the_only_reader_out_of_its_copy_is_a_schedule_error():
    # Before: accepted with the copy left behind; the compiler then crashed (KeyError in memory._index).
    s = loads(CHAIN).schedule()
    s.fuse("U.i", "Y.i")
    s.cache_read("T", "shared", at="U.i")
    assert_rejected_unchanged(s, lambda s: s.reverse_compute_at("U", "T.i"), r"U reads T through the shared copy")


def test_moving_a_writer_out_of_its_cache_write_loop_is_a_schedule_error():
    # Before: KeyError in legality.check_cache_write.
    s = loads(CHAIN).schedule()
    s.fuse("U.i", "Y.i")
    s.cache_write("U", "register", at="U.i")
    assert_rejected_unchanged(s, lambda s: s.reverse_compute_at("U", "T.i"),
                              r"reverse_compute_at: U writes U through the register buffer of U at loop U\.i")


def test_softmax_fuzz_case_a_copy_left_behind_then_compiled():
    # A fuzzer finding: the copy of X stayed at loop i after e left it; emission crashed with KeyError: 'i'.
    s = loads((EXAMPLES / "softmax.tdsl").read_text(), sizes={"M": 1, "N": 1}).schedule()
    s.fuse("e.i", "s.i")
    s.cache_read("X", "shared", at="e.i")
    assert_rejected_unchanged(s, lambda s: s.reverse_compute_at("e", "m.i"), r"e reads X through the shared copy")


def test_a_buffer_on_the_moved_statements_own_loop_moves_with_it():
    s = loads(CHAIN).schedule()
    s.cache_write("T", "register", at="T.i")
    s.compute_at("T", "U.i")
    buf = s.tree.buffers[0]
    assert buf.at.name == "T_i" and any(buf.at is l for l in s.tree.path("T"))
    assert buffers_enclose_their_statements(s)
    assert_replays(CHAIN, s)
    m = s.model
    inputs = random_inputs(m, 0)
    want = interpret(m, loads(CHAIN).schedule().time_map(), inputs)
    got = interpret(m, s.time_map(), inputs)
    assert np.array_equal(want["Y"], got["Y"])


def test_inlining_the_only_statement_under_a_copy_names_the_copy():
    s = loads(CHAIN).schedule()
    s.cache_read("W", "shared", at="T.i")
    assert_rejected_unchanged(s, lambda s: s.compute_inline("T"),
                              r"compute_inline: the shared copy of W is placed at loop i \(cache_read\), which this "
                              r"step would remove; apply compute_inline before cache_read")


def test_inlining_a_reader_of_a_copy_lets_the_new_reader_use_it():
    s = loads(CHAIN).schedule()
    s.fuse("T.i", "U.i")
    s.cache_read("W", "shared", at="T.i")
    s.compute_inline("T")  # U now reads W, inside the copy's loop
    assert s.tree.buffers[0].stmts == ["U"]
    assert buffers_enclose_their_statements(s)


CHAIN_BUFFERED = CHAIN + """
schedule shared_first {
  fuse(T.i, U.i)
  cache_read(X, shared, at=T.i)
  cache_write(T, register, at=T.i)
}
schedule shared_last {
  fuse(U.i, Y.i)
  cache_read(T, shared, at=U.i)
  cache_write(U, register, at=U.i)
}
schedule own_loops {
  cache_read(W, shared, at=T.i)
  cache_write(T, register, at=T.i)
  cache_write(U, local, at=U.i)
}
"""


def _buffered_schedules():
    """(program text, schedule) for every schedule block that places a cache buffer: the examples' and ours."""
    texts = [path.read_text() for path in sorted(EXAMPLES.glob("*.tdsl"))] + [CHAIN_BUFFERED]
    for text in texts:
        prog = loads(text)
        for name in prog.schedule_names:
            if any(step.primitive.startswith("cache_") for step in prog.block(name).steps):
                yield pytest.param(text, name, id=f"{prog.model().name}-{name}")


@pytest.mark.parametrize("text, block", list(_buffered_schedules()))
def test_every_placement_keeps_every_buffer_around_its_statements(text, block):
    """Every compute_at / reverse_compute_at of every statement into every loop of every other, from a schedule
    with buffers: typed errors only, and after an accepted step every buffer still encloses its statements."""
    sizes = {k: 4 for k, v in loads(text).model().sizes.items() if isinstance(v, int)}
    base = loads(text, sizes=sizes).schedule(block)
    for primitive in ("compute_at", "reverse_compute_at"):
        for moved in base.tree.leaves():
            for target in base.tree.leaves():
                for loop in base.tree.path(target):
                    s = base.trace.replay(loads(text, sizes=sizes).schedule())
                    try:
                        getattr(s, primitive)(moved, f"{target}.{loop.name}")
                    except TdslError:
                        continue
                    assert buffers_enclose_their_statements(s), f"{primitive}({moved}, {target}.{loop.name})"


# ---------------------------------------------------------------- // and % in indices, conditions, dimensions

DIVMOD = """
const N = 16, M = 8
kernel dm(A: f32[N], B: f32[M, N]) -> (Y: f32[N], P: f32[M, N]) {
  T[i] = A[i] * 2.0 + A[(i - 3) // 2 + 2] + A[(-i) % 4]
  Y[i] = T[i // 2] + T[((i + 1) // 3) % 5] + A[(i - 5) % 4] + T[i]
  P[i, j : j % 2 == 0 and i // 2 <= 2] = B[i, (j // 2) % 3] + T[(i - 7) % 3] + B[i, j]
}
schedule tiled {
  io, ii = split(T.i, 4)
  jo, jj = split(P.j, 4)
  reorder(P, jo, i, jj)
}
schedule fused {
  compute_at(T, Y.i)
}
"""


def divmod_reference(A, B):
    """What DIVMOD computes, with Python's floor division and modulo (negative operands included)."""
    f = np.float32
    T = np.array([f(f(A[i] * f(2.0)) + A[(i - 3) // 2 + 2]) + A[(-i) % 4] for i in range(16)], dtype=np.float32)
    Y = np.array([f(f(f(T[i // 2] + T[((i + 1) // 3) % 5]) + A[(i - 5) % 4]) + T[i]) for i in range(16)],
                 dtype=np.float32)
    P = np.full((8, 16), np.nan, dtype=np.float32)
    for i in range(8):
        for j in range(16):
            if j % 2 == 0 and i // 2 <= 2:
                P[i, j] = f(f(B[i, (j // 2) % 3] + T[(i - 7) % 3]) + B[i, j])
    return Y, P


def test_floor_division_and_modulo_read_as_isl_text():
    m = loads(DIVMOD).model()
    assert str(m.stmt("P").domain).startswith("{ P[i, j] : (j) mod 2 = 0")
    rel = next(r for r in m.stmt("T").reads if "mod" in str(r.relation))
    assert rel.relation.is_single_valued()


@pytest.mark.parametrize("schedule", [None, "tiled", "fused"])
def test_floor_division_and_modulo_run_as_python_computes_them(schedule):
    prog = loads(DIVMOD)
    s = prog.schedule(schedule)
    rng = np.random.default_rng(3)
    A = rng.standard_normal(16).astype(np.float32)
    B = rng.standard_normal((8, 16)).astype(np.float32)
    out = interpret(s.model, s.time_map(), {"A": A, "B": B})
    Y, P = divmod_reference(A, B)
    assert np.array_equal(out["Y"], Y)
    assert np.array_equal(out["P"], P, equal_nan=True)


def test_tdsl_run_interp_of_floor_division_and_modulo(tmp_path, capsys):
    prog = tmp_path / "dm.tdsl"
    prog.write_text("const N = 16\nkernel f(A: f32[N]) -> (Y: f32[N]) { Y[i] = A[i // 2] + A[(i + 1) % 4] }\n")
    assert main(["run", str(prog), "--interp"]) == 0
    prog.write_text(DIVMOD)
    assert main(["run", str(prog), "--interp", "--schedule", "tiled"]) == 0
    assert "bit-identical" in capsys.readouterr().out


def test_dimensions_with_floor_division_and_modulo():
    m = loads("const N = 16\nkernel f(A: f32[N]) -> (Y: f32[N // 2 + N % 3]) { Y[i] = A[2 * i // 3] }\n").model()
    assert m.tensors["Y"].shape == [9]
    p = loads("param N\nkernel f(A: f32[N]) -> (Y: f32[N // 2]) { Y[i] = A[2 * i + 1] }\n")
    assert "2i <= -2 + N" in str(p.model().stmt("Y").domain)
    assert p.model(sizes={"N": 9}).tensors["Y"].shape == [4]


TRITON_DIVMOD = """
const M = 8, N = 16
kernel g(B: f32[M, N]) -> (P: f32[M, N]) {
  P[i, j : j % 2 == 0 and i // 2 <= 2] = B[i, (j // 2) % 3] + B[(i + 1) % 8, j // 2]
}
schedule tiled {
  io, jo, ii, jj = tile(P.i, P.j, 2, 4)
}
"""


def _triton_matches(text: str, schedule, tmp_path) -> bool:
    from tdsl.compiler.driver.generate import generate, load_module, run_generated
    from tdsl.compiler.verify import compare

    prog = loads(text)
    module = load_module(generate(prog, schedule), tmp_path / f"dm_{schedule}.py")
    s = prog.schedule(schedule)
    inputs = random_inputs(s.model, 0)
    want = interpret(s.model, prog.schedule(None).time_map(), inputs)
    got = run_generated(module, s.model, inputs, guard=5)
    return all(compare(want[t.name].astype(np.float32), got[t.name], t.dtype).ok for t in s.model.outputs())


@pytest.mark.parametrize("schedule", [None, "tiled"])
def test_triton_kernels_with_floor_division_and_modulo(schedule, tmp_path):
    # Program order used to crash in the memory planner: a strided tile gave isl bounds with rational coefficients.
    assert _triton_matches(TRITON_DIVMOD, schedule, tmp_path)


NEGATIVE_DIVMOD = """
const N = 16
kernel f(A: f32[N]) -> (Y: f32[N]) {
  Y[i : (i - 9) // 4 >= -1] = A[(i - 5) % 4] + A[(7 - i) % 3] + A[(2 - i) // 5 + 3]
}
schedule split { io, ii = split(Y.i, 4) }
"""


@pytest.mark.parametrize("schedule", [None, "split"])
def test_triton_floor_division_and_remainder_of_negative_operands(schedule, tmp_path):
    # Triton's `//` and `%` truncate toward zero; the language's are floor operations (`(-1) % 4 == 3`).
    assert _triton_matches(NEGATIVE_DIVMOD, schedule, tmp_path)


# ---------------------------------------------------------------- loop names the trace can print back

BAD_NAMES = ["1bad", "x y", "", "const", "kernel", "accum", "for", "lambda", "floor", "MOD", "__x", "é", "a.b", 5, None]


def _name_calls():
    return {
        "split": (STENCIL, lambda s, n: s.split("T.i", 4, names=[n, "b"])),
        "tile": (GEMM_SILU, lambda s, n: s.tile("C.i", "C.j", 4, 4, names=["a", n, "c", "d"])),
        "fuse nested": (GEMM_SILU, lambda s, n: s.fuse("C.i", "C.j", names=[n])),
        "fuse siblings": (STENCIL, lambda s, n: s.fuse("T.i", "Y.i", names=[n])),
    }


@pytest.mark.parametrize("bad", BAD_NAMES, ids=repr)
@pytest.mark.parametrize("call", list(_name_calls()))
def test_every_primitive_that_names_loops_refuses_names_the_trace_cannot_print(call, bad):
    text, apply = _name_calls()[call]
    s = loads(text).schedule()
    before = snapshot(s)
    with pytest.raises(ScheduleError, match=r"(not a valid loop name|word of the tdsl language|Python keyword|"
                                            r"isl keyword|starts with '__')"):
        apply(s, bad)
    assert snapshot(s) == before


def test_sibling_fuse_with_a_bad_name_no_longer_breaks_the_trace():
    s = loads(GEMM_SILU).schedule()
    s.split("C.i", 4)
    s.split("Y.i", 4)
    with pytest.raises(ScheduleError, match=r"fuse: '1bad' is not a valid loop name"):
        s.fuse("C.io", "Y.io", names=["1bad"])


@pytest.mark.parametrize("name", ["_x", "sum", "grid", "shared", "I", "x1", "Floorx"])
@pytest.mark.parametrize("call", list(_name_calls()))
def test_accepted_names_replay(call, name):
    text, apply = _name_calls()[call]
    s = loads(text).schedule()
    apply(s, name)
    assert_replays(text, s)


@pytest.mark.parametrize("call", list(_name_calls()))
def test_new_names_may_not_repeat_a_loop_they_meet(call):
    text, apply = _name_calls()[call]
    s = loads(text).schedule()
    taken = {"split": "b", "tile": "a", "fuse nested": "k", "fuse siblings": None}[call]
    if taken is None:
        s = loads(STENCIL).schedule()
        s.split("Y.i", 2, names=["z", "w"])
        with pytest.raises(ScheduleError, match=r"would have two loops named w|already exists"):
            s.fuse("T.i", "Y.z", names=["w"])
        return
    with pytest.raises(ScheduleError, match=r"new loop names must differ|already exists here"):
        apply(s, taken)


def test_a_default_name_that_is_reserved_asks_for_names():
    s = loads("const N = 8\nkernel k(X: f32[N]) -> (Y: f32[N]) { Y[_] = X[_] * 2.0 }\n").schedule()
    with pytest.raises(ScheduleError, match=r"split: '__' starts with '__'.*a default name: give the new loops names"):
        s.split("Y._", 2)
    assert s.split("Y._", 2, names=["a", "b"]) == ("a", "b")


def test_compute_at_renames_a_clash_to_a_fresh_name_that_replays():
    s = loads(STENCIL).schedule()
    s.split("Y.i", 4, names=["i", "T_i"])  # the target path is i, T_i: T's loop i and its usual new name clash
    s.compute_at("T", "Y.T_i")
    names = [l.name for l in s.tree.path("T")]
    assert names[:2] == ["i", "T_i"] and len(set(names)) == len(names)
    assert_replays(STENCIL, s)


def test_compute_at_of_a_statement_whose_clash_name_would_be_reserved():
    text = "const N = 8\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  _[i] = X[i] * 2.0\n  Y[i] = _[i] + _[N - 1 - i]\n}\n"
    s = loads(text).schedule()
    s.compute_at("_", "Y.i")  # _'s own loop i is kept (not pinned) and must not become '__i'
    names = [l.name for l in s.tree.path("_")]
    assert not any(n.startswith("__") for n in names) and len(set(names)) == len(names)
    assert_replays(text, s)


def test_factors_beyond_32_bits_are_refused_like_the_parser_does():
    s = loads(STENCIL).schedule()
    with pytest.raises(ScheduleError, match=r"split: the factor must be at most 2147483647"):
        s.split("T.i", 2**31)
    with pytest.raises(ScheduleError, match=r"pipeline: stages must be at most"):
        s.pipeline("T.i", stages=2**40)


# ---------------------------------------------------------------- Python API arguments of the wrong type


@pytest.mark.parametrize("call", [
    lambda s: s.split(4.0, 2),
    lambda s: s.reorder("T", 1, 2),
    lambda s: s.bind("T.i", 3),
    lambda s: s.tile("T.i", 4.5, 2),
    lambda s: s.split("T.i", 2, names=7),
    lambda s: s.compute_at(3, "Y.i"),
])
def test_wrong_argument_types_are_schedule_errors(call):
    s = loads(STENCIL).schedule()
    before = snapshot(s)
    with pytest.raises(ScheduleError):
        call(s)
    assert snapshot(s) == before


MATMUL = """const N = 8
kernel k(X: f32[N, N]) -> (Y: f32[N, N]) {
  T[i, j] = X[i, j] * 2.0
  Y[i, j] = sum(k) T[i, k] * X[k, j]
}
"""


@pytest.mark.parametrize("step, says", [
    ("cache_read(X, Y.i, shared)", "cache_read: unknown memory scope 'Y.i'"),
    ("cache_write(Y, Y.j, Y.i)", "cache_write: unknown memory scope 'Y.j'"),
    ("fold_storage(T, Y.i, 1)", "fold_storage: T has no dimension 'Y.i'"),
    ("fold_storage(Y.i, i, 1)", "fold_storage: unknown tensor 'Y.i'"),
    ("store_in(Y, Y.i)", "store_in: unknown tensor 'Y.i'"),
    ("split(Y.i, Y.j)", "split: the factor must be a positive integer, got 'Y.j'"),
    ("pipeline(Y.i, Y.j)", "pipeline: stages must be a positive integer, got 'Y.j'"),
    ("launch(Y, warps=Y.i)", "launch: warps must be a positive integer, got 'Y.i'"),
    ("skew(Y.i, Y.j, Y.i)", "skew: the factor must be a positive integer, got 'Y.i'"),
    ("shift(T.i, Y.j)", "got 'Y.j'"),
    # probe P: an extra argument was taken for the Python API's names=, a list shown as Python's repr
    ("fuse(Y.i, Y.j, Y.k)", "fuse: wrong arguments; expected fuse(STMT.L1, STMT.L2)"),
    ("split(Y.i, 64, 32)", "split: wrong arguments; expected split(STMT.LOOP, FACTOR)"),
    ("split(Y.i, 4, [a, b])", "split: [a, b] is a list, and no argument of split is one"),
    ("compute_at(T, [Y.i])", "compute_at: [Y.i] is a list"),
    ("cache_read(X, [shared], at=Y.i)", "cache_read: [shared] is a list"),
    ("bind(Y.i, 5)", "bind: expected a grid axis (grid.x, grid.y or grid.z), got 5"),
    ("compute_inline(5)", "compute_inline: expected a statement, named by the tensor it writes, got 5"),
])
def test_an_argument_of_the_wrong_kind_is_named_as_written(step, says):
    """A schedule block's `Y.i` given for a scope, a tensor, a dimension or a number: the error names it as the
    step wrote it (these messages showed the parser's `LoopRef(stmt='Y', loop='i', span=Span(...))`)."""
    with pytest.raises(TdslError) as err:
        loads(MATMUL + "schedule s {\n  " + step + "\n}\n").schedule("s")
    assert says in str(err.value)
    assert "LoopRef" not in str(err.value) and "Span(" not in str(err.value)


def test_a_loop_may_not_take_a_size_name():
    # A loop becomes an iterator of the partial sums in rfactor; a loop named like the param K made rfactor
    # write `C_rf[i, K, kk]` next to the parameter K and crash (ValueError).
    text = "param K\nconst M = 4\nkernel k(X: f32[M, K]) -> (s: f32[M]) {\n  s[i] = sum(k) X[i, k] combine reassoc\n}\n"
    s = loads(text).schedule()
    for name in ("K", "M"):
        with pytest.raises(ScheduleError, match=rf"split: '{name}' is a size of the kernel; loops need fresh names"):
            s.split("s.k", 4, names=[name, "kk"])
    with pytest.raises(ScheduleError, match=r"'M' is a size"):
        s.fuse("s.i", "s.k", names=["M"])
    # a float constant is no size, and the messages do not call it one (probe of the 25th session)
    eps = loads(text.replace("const M = 4", "const M = 4, eps = 0.5")).schedule()
    with pytest.raises(ScheduleError, match=r"split: 'eps' is a float constant of the kernel; loops need fresh names"):
        eps.split("s.k", 4, names=["eps", "kk"])
    with pytest.raises(TdslError, match=r"unknown sizes given: Y \(known: K, M\)$"):
        loads(text.replace("const M = 4", "const M = 4, eps = 0.5")).model(sizes={"Y": 3})


def test_a_statement_without_instances_is_refused_with_the_reason():
    """Refused when the model is built, at the statement (before any schedule, plan or backend sees it)."""
    from tdsl.frontend.diagnostics import SourceError

    text = "const N = 4\nkernel k(X: f32[N]) -> (Y: f32[N]) {\n  T[i] = X[i] * 2.0\n  Y[i : i >= 1 and i < 1] = T[i]\n}\n"
    with pytest.raises(SourceError, match=r":4:3: error: statement Y has no instance"):
        loads(text).schedule()


def test_numpy_integers_are_sizes_and_factors():
    """Sizes and step arguments computed with NumPy (`np.int64`) are the ints they stand for, in the trace too;
    program text that is no str is a TypeError that says so (probe S of the 28th session)."""
    from tdsl.frontend.check import load_source

    prog = loads((EXAMPLES / "gemm_silu.tdsl").read_text(), sizes={"M": np.int64(70), "N": np.int32(65), "K": np.uint16(33)})
    s = prog.schedule()
    s.split("C.i", np.int64(16))
    s.tile("Y.i", "Y.j", np.int64(8), np.int8(8))
    assert str(s.trace) == "io, ii = split(C.i, 16)\nio, jo, ii, jj = tile(Y.i, Y.j, 8, 8)"
    assert s.model.sizes["M"] == 70 and type(s.model.sizes["M"]) is int
    with pytest.raises(TdslError, match=r"size M must be an integer, got np.float64\(7.0\)"):
        loads((EXAMPLES / "gemm_silu.tdsl").read_text(), sizes={"M": np.float64(7.0)}).schedule()
    with pytest.raises(ScheduleError, match=r"must be a positive integer, got True"):
        prog.schedule().split("C.i", True)
    with pytest.raises(TypeError, match="the program text must be a str, got bytes"):
        load_source(b"const N = 4", "p.tdsl")
    with pytest.raises(TypeError, match="the file name must be a str, got NoneType"):
        load_source("const N = 4", None)


# Probe HH: a loop name at the 64-character limit that a step renames.  recompute_at names its tile's loops after
# the consumer's, and compute_at renames a producer loop STMT_loop; each tried base2, base3, ... forever when the
# base was taken and every number made it too long.
LONG = "a" * 64
NEAR = "c" * 62
LONG_NAMES = {
    "recompute_at": f"""const N = 16
kernel k(X: f32[N]) -> (Y: f32[N]) {{
  T[{LONG}] = X[{LONG}] * 2.0
  Y[i] = T[i] + where(i > 0, T[i - 1], 0.0)
}}
schedule s {{
  {LONG}, ii = split(Y.i, 4)
  recompute_at(T, Y.{LONG})
}}
""",
    "compute_at": f"""const N = 16
kernel k(X: f32[N]) -> (Y: f32[N]) {{
  T[{NEAR}] = X[{NEAR}] * 2.0
  Y[i : i >= 1] = T[i] + T[i - 1]
}}
schedule s {{
  T_{NEAR}, {NEAR} = split(Y.i, 4)
  compute_at(T, Y.{NEAR})
}}
""",
}


@pytest.fixture
def sixty_seconds():
    """A test that hung before its fix fails instead (SIGALRM: pytest's workers run tests in their main thread)."""
    import signal

    def expire(*_):
        raise TimeoutError("still running after 60 s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("step", list(LONG_NAMES))
def test_a_step_renaming_a_loop_at_the_name_limit_finds_a_name_within_it(step, sixty_seconds):
    from tdsl.compiler.driver.testing import assert_legal
    from tdsl.frontend.limits import MAX_NAME_CHARS

    text = LONG_NAMES[step]
    sched = assert_legal(loads(text, "long.tdsl"), "s", run=True)
    names = [loop.name for loop in walk_loops(sched.tree.body)]
    assert len(set(names)) == len(names) and all(len(n) <= MAX_NAME_CHARS for n in names)
    assert_replays(text.split("schedule")[0], sched)


def test_a_fresh_loop_name_stays_within_the_limit(sixty_seconds):
    from tdsl.compiler.schedule.primitives.common import fresh_loop_name, loop_name_problem

    taken = {LONG, LONG[:63] + "2", "x" * 70}
    for base in (LONG, "x" * 70):
        name = fresh_loop_name(base, taken)
        assert name not in taken and loop_name_problem(name) is None
    assert fresh_loop_name(LONG, taken) == LONG[:63] + "3"
