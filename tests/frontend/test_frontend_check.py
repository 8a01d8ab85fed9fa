"""The checker on valid programs: resolved tensors, dtypes, reductions, iterator extents, schedules; file loading."""

import textwrap

import pytest

from tdsl.frontend import ast
from tdsl.frontend.check import KernelInfo, StmtInfo, TensorInfo, check_program, format_expr, load_file, load_source
from tdsl.frontend.diagnostics import SourceError, TdslError
from tdsl.frontend.parser import parse

GEMM = """\
const M = 1024, K = 4096, N = 12288
const eps = 1e-6
param B

kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}

schedule tiled {
  io, ii = split(C.i, 64)
  reverse_compute_at(Y, C.io)
}
"""


def _load(text: str):
    return load_source(textwrap.dedent(text), "t.tdsl")


def _extents(stmt: StmtInfo) -> dict[str, str]:
    return {name: format_expr(e) for name, e in stmt.extents.items()}


def test_gemm_resolution():
    program, kernels = load_source(GEMM, "gemm.tdsl")
    info = kernels["gemm_silu"]
    assert isinstance(info, KernelInfo) and info.kernel is program.kernels[0]
    assert [(t.name, t.kind, t.dtype) for t in info.tensors.values()] == [
        ("A", "input", "bf16"),
        ("W", "input", "bf16"),
        ("Y", "output", "bf16"),
        ("C", "temp", "bf16"),
    ]
    assert all(isinstance(t, TensorInfo) for t in info.tensors.values())
    assert [format_expr(d) for d in info.tensors["C"].shape] == ["M", "N"]
    c, y = info.stmts
    assert c.stmt is program.kernels[0].body[0] and c.dtype == "bf16"
    assert c.reduce is c.stmt.value and c.reduce.accum == "f32"
    assert _extents(c) == {"i": "M", "j": "N", "k": "K"}
    assert list(c.extents) == ["i", "j", "k"]  # LHS iterators, then reduction ones
    assert y.reduce is None and y.dtype == "bf16" and _extents(y) == {"i": "M", "j": "N"}
    assert set(info.sizes) == {"M", "K", "N", "eps", "B"}
    assert [s.name for s in info.schedules] == ["tiled"]


def test_temporary_dtype_defaults_to_f32_and_result_dtype_is_declared():
    _, kernels = _load(
        """
        const N = 8
        kernel f(A: bf16[N]) -> (Y: f16[N], Z: f8e4m3[N]) {
          T[i] = A[i]
          U[i]: bf16 = A[i]
          Y[i] = T[i] + U[i]
          Z[i]: f8e4m3 = f8e4m3(Y[i])
        }
        """
    )
    assert [(s.stmt.target, s.dtype) for s in kernels["f"].stmts] == [("T", "f32"), ("U", "bf16"), ("Y", "f16"), ("Z", "f8e4m3")]


def test_extents_from_plain_reads_of_temporaries():
    _, kernels = _load(
        """
        const M = 4, K = 8, N = 2
        kernel f(A: f32[M, K]) -> Y: f32[M] {
          T[i, k] = exp(A[i, k])
          S[k, i] = T[i, k]
          Y[i] = sum(k) S[k, i]
        }
        """
    )
    t, s, y = kernels["f"].stmts
    assert _extents(t) == {"i": "M", "k": "K"}
    assert _extents(s) == {"k": "K", "i": "M"}
    assert [format_expr(d) for d in kernels["f"].tensors["S"].shape] == ["K", "M"]
    assert _extents(y) == {"i": "M", "k": "K"}


def test_extents_with_affine_shapes_params_and_equal_constants():
    _, kernels = _load(
        """
        const N = 8, H = 8
        param B
        kernel f(A: f32[B, 2 * N], X: f32[8, H]) -> Y: f32[B, 2 * N] {
          Y[b, n] = A[b, n] + X[0, 0]
        }
        """
    )
    (y,) = kernels["f"].stmts
    assert _extents(y) == {"b": "B", "n": "2 * N"}
    # `H` and `8` are the same constant: the extents agree.
    _, kernels = _load(
        """
        const N = 8, H = 8
        kernel g(X: f32[N, H], V: f32[8]) -> Y: f32[N] {
          Y[i] = sum(k) X[i, k] * V[k]
        }
        """
    )
    assert _extents(kernels["g"].stmts[0]) == {"i": "N", "k": "H"}


def test_iterator_extent_disagreement_through_constants():
    with pytest.raises(SourceError, match=r"iterator 'k' ranges over H in X\[i, k\] but over 2 \* N in V\[k\]"):
        _load(
            """
            const N = 8, H = 8
            kernel g(X: f32[N, H], V: f32[2 * N]) -> Y: f32[N] {
              Y[i] = sum(k) X[i, k] * V[k]
            }
            """
        )


def test_conditions_affine_indices_and_values():
    _, kernels = _load(
        """
        const T = 16, D = 8
        const scale = 0.125
        kernel attn(Q: bf16[T, D], Kt: bf16[T, D]) -> (P: bf16[T, T]) {
          S[i, j : j <= i] = sum(d) Q[i, d] * Kt[j, d] * scale accum f32 combine reassoc
          Mx[i] = max(j : j <= i) S[i, j]
          E[i, j : j <= i and 0 <= j] = exp(S[i, j] - Mx[i])
          L[i] = sum(j : j <= i) E[i, j]
          P[i, j] = where(j <= i, E[i, j] / L[i], 0.0)
          W[i, j] = Q[i, j] + Q[(i + 1) % 16, j // 2] + i * 2 - j + D + f32(i)
        }
        """
    )
    stmts = {s.stmt.target: s for s in kernels["attn"].stmts}
    assert stmts["S"].reduce.combine == "reassoc" and _extents(stmts["S"]) == {"i": "T", "j": "T", "d": "D"}
    assert stmts["Mx"].reduce.op == "max" and _extents(stmts["Mx"]) == {"i": "T", "j": "T"}
    assert stmts["L"].reduce.conditions[0].op == "<="
    assert _extents(stmts["W"]) == {"i": "T", "j": "D"}  # from Q[i, j]; the other indices are not plain
    assert stmts["P"].reduce is None


def test_max_function_and_reduction_in_one_kernel():
    _, kernels = _load(
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N] {
          R[i] = max(k) A[i, k]
          Y[i] = max(R[i], 0.0) - min(R[i], 1.0)
        }
        """
    )
    r, y = kernels["f"].stmts
    assert r.reduce is not None and r.reduce.op == "max" and y.reduce is None


def test_multiple_kernels_and_schedules():
    _, kernels = _load(
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        kernel g(A: f32[N]) -> Y: f32[N] { Y[i] = 2 * A[i] }
        schedule s1 for g { split(Y.i, 4) }
        schedule s2 for f { split(Y.i, 2) }
        schedule s3 for g { bind(Y.i, grid.x) }
        """
    )
    assert [s.name for s in kernels["f"].schedules] == ["s2"]
    assert [s.name for s in kernels["g"].schedules] == ["s1", "s3"]


def test_same_tensor_names_in_different_kernels():
    _, kernels = _load(
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { T[i] = A[i]; Y[i] = T[i] }
        kernel g(T: f32[N]) -> A: f32[N] { A[i] = T[i] }
        """
    )
    assert kernels["g"].tensors["T"].kind == "input"


def test_check_program_on_parsed_program_raises_located_errors():
    text = "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n  Y[i] = B[i]\n}\n"
    program = parse(text, "x.tdsl")
    with pytest.raises(SourceError) as info:
        check_program(program)
    assert str(info.value).startswith("x.tdsl:3:10: error: unknown tensor 'B'")
    assert info.value.span == ast.Span(3, 10, 3, 11)


def test_deep_nesting_is_a_located_source_error():
    # 20000 unary minus: refused at the innermost subexpression past the limit, not by a RecursionError.
    text = "const N = 8\nkernel f() -> Y: f32[N] {\n  Y[i] = " + "-" * 20000 + "1\n}\n"
    with pytest.raises(SourceError) as info:
        load_source(text, "deep.tdsl")
    assert str(info.value).startswith("deep.tdsl:3:19910: error: this expression nests 101 levels deep")


def test_hand_built_trees_too_deep_for_python_are_a_source_error():
    # Trees built in Python skip the parser's depth limit; the checker still never lets a RecursionError out.
    span = ast.Span(1, 1, 1, 2)
    value = ast.IntLit(1, span)
    for _ in range(5000):
        value = ast.Neg(value, span)
    with pytest.raises(SourceError, match="nested too deeply"):
        check_program(_program(ast.Statement("Y", [ast.Name("i", span)], [], None, value, span)))


# ---------------------------------------------------------------- files


def test_load_file(tmp_path):
    path = tmp_path / "gemm.tdsl"
    path.write_text(GEMM)
    program, kernels = load_file(path)
    assert program.filename == str(path) and "gemm_silu" in kernels


def test_load_file_reports_located_errors_with_the_path(tmp_path):
    path = tmp_path / "bad.tdsl"
    path.write_text("const N = 8\nconst N = 9\n")
    with pytest.raises(SourceError) as info:
        load_file(str(path))
    assert str(info.value).startswith(f"{path}:2:7: error: duplicate definition of size 'N'")


def test_load_file_missing(tmp_path):
    missing = tmp_path / "nope.tdsl"
    with pytest.raises(TdslError) as info:
        load_file(missing)
    assert str(info.value) == f"cannot read '{missing}': no such file"
    assert not isinstance(info.value, SourceError)


def test_load_file_path_with_a_nul_or_a_control_character(tmp_path):
    with pytest.raises(TdslError) as info:
        load_file(str(tmp_path / "a\x00b.tdsl"))
    assert str(info.value) == f"cannot read '{tmp_path}/a\\x00b.tdsl': embedded null byte"
    with pytest.raises(TdslError) as info:
        load_file(tmp_path / "a\x1b[31m.tdsl")
    assert str(info.value) == f"cannot read '{tmp_path}/a\\x1b[31m.tdsl': no such file"


def test_load_file_directory(tmp_path):
    with pytest.raises(TdslError) as info:
        load_file(tmp_path)
    assert str(info.value) == f"cannot read '{tmp_path}': it is a directory"


def test_load_file_not_utf8_points_at_the_first_undecodable_byte(tmp_path):
    path = tmp_path / "latin1.tdsl"
    path.write_bytes(b"const N = 8\r\nconst M = 4 # \xe9\xff\n")
    with pytest.raises(SourceError) as info:
        load_file(path)
    assert str(info.value) == (
        f"{path}:2:15: error: the file is not UTF-8 text: byte 0xe9 cannot be decoded (tdsl programs are UTF-8)\n"
        "  const M = 4 # \\xe9\\xff\n"
        "                ^^^^"
    )


def test_load_file_cut_character_at_the_end(tmp_path):
    path = tmp_path / "cut.tdsl"
    path.write_bytes(b"const N = 8 # \xe2\x82")
    with pytest.raises(SourceError) as info:
        load_file(path)
    assert str(info.value).splitlines()[0] == (
        f"{path}:1:15: error: the file is not UTF-8 text: byte 0xe2 cannot be decoded (tdsl programs are UTF-8)"
    )
    assert str(info.value).splitlines()[2] == "                ^^^^^^^^"


# ---------------------------------------------------------------- hand-built trees


def _program(stmt: ast.Statement, dtype: str = "f32") -> ast.Program:
    span = ast.Span(1, 1, 1, 2)
    result = ast.TensorParam("Y", ast.TensorType(dtype, [ast.IntLit(4, span)], span), span)
    kernel = ast.Kernel("f", [], [result], [stmt], span)
    return ast.Program(sizes=[], kernels=[kernel], schedules=[], source="Y[i] = 1\n", filename="built.tdsl")


def test_checker_guards_trees_not_built_by_the_parser():
    # The parser rejects these words already; trees built in Python get the same messages.
    span = ast.Span(1, 1, 1, 2)
    i = ast.Name("i", span)
    with pytest.raises(SourceError, match="unknown dtype 'i32'"):
        check_program(_program(ast.Statement("Y", [i], [], None, ast.IntLit(1, span), span), dtype="i32"))
    red = ast.Reduce("sum", [ast.Name("k", span)], [], ast.IntLit(1, span), accum="i8", span=span)
    with pytest.raises(SourceError, match="accum expects a float dtype"):
        check_program(_program(ast.Statement("Y", [i], [], None, red, span)))
    program = _program(ast.Statement("Y", [i], [], None, ast.Access("Y", [i, i], span), span))
    with pytest.raises(SourceError) as info:
        check_program(program)  # a recurrence's read of its own tensor has the rank of its left-hand side
    assert str(info.value).startswith("built.tdsl:1:1: error: tensor 'Y' has rank 1 but is indexed with 2 indices")


def test_a_float_constant_may_be_infinite():
    """The out-of-range message says "write 'inf'": a `const` takes it too (probe S of the 28th session)."""
    program, _ = _load("""
        const N = 4, lo = -inf, hi = inf
        kernel f(X: f32[N]) -> (Y: f32[N]) {
          Y[i] = max(min(X[i], hi), lo)
        }
    """)
    assert {d.name: d.value for d in program.sizes} == {"N": 4, "lo": float("-inf"), "hi": float("inf")}


@pytest.mark.parametrize("text, message", [
    ("const a = b\n", "1:11: error: expected a number, found 'b'"),
    ("const a = -\n", "1:12: error: expected a number, found end of line"),
    ("const inf = 3\n", "'inf' is reserved for the float infinity"),
])
def test_a_constant_value_other_than_a_number_or_inf_is_refused(text, message):
    with pytest.raises(SourceError) as info:
        load_source(text, "t.tdsl")
    assert message in str(info.value)
