"""The parser on valid programs: every syntactic form, the AST it builds, and spans."""

import math
import textwrap

import pytest

from tdsl.frontend import ast
from tdsl.frontend.parser import format_expr, parse


def _parse(text: str) -> ast.Program:
    return parse(textwrap.dedent(text), "t.tdsl")


def _value(rhs: str, sig: str = "A: f32[M, K], W: f32[K, N]", lhs: str = "Y[i, j]") -> ast.Expr:
    """Parse one statement's right-hand side."""
    program = parse(f"const M = 4, K = 8, N = 2\nkernel f({sig}) -> Y: f32[M, N] {{\n  {lhs} = {rhs}\n}}\n")
    return program.kernels[0].body[0].value


GEMM = """\
# comments start with '#'
const M = 1024, K = 4096, N = 12288     # compile-time sizes
const eps = 1e-6                        # a float constant
param B                                 # a run-time size

kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j])
}

schedule tiled {
  io, ii = split(C.i, 64)
  jo, jj = split(C.j, factor=64)
  ko, kk = split(C.k, 32)
  reorder(C, io, jo, ko, ii, jj, kk)
  reverse_compute_at(Y, C.jo)
  cache_read(A, shared, at=C.ko)
  cache_write(C, register, at=C.jo)
  pipeline(C.ko, stages=3)
  bind(C.io, grid.x)
  io, jo, ii, jj = tile(C.i, C.j, 64, 64)
  fuse(C.io, C.jo)
  compute_inline(T)
}
"""


# ---------------------------------------------------------------- declarations


def test_sizes_consts_and_params():
    program = _parse(
        """
        const M = 1024, K = 4096, N = 12288
        const eps = 1e-6; const big = 3.5
        const neg = -2
        param B
        param S, T
        """
    )
    got = [(s.name, s.value, s.is_param) for s in program.sizes]
    assert got == [
        ("M", 1024, False),
        ("K", 4096, False),
        ("N", 12288, False),
        ("eps", 1e-6, False),
        ("big", 3.5, False),
        ("neg", -2, False),
        ("B", None, True),
        ("S", None, True),
        ("T", None, True),
    ]
    assert isinstance(program.sizes[0].value, int) and isinstance(program.sizes[3].value, float)


def test_empty_and_comment_only_programs():
    for text in ("", "\n\n", "# nothing here\n", "  # indented comment", ";;\n;"):
        program = parse(text)
        assert (program.sizes, program.kernels, program.schedules) == ([], [], [])


def test_program_keeps_source_and_filename():
    program = parse(GEMM, "gemm.tdsl")
    assert program.source == GEMM and program.filename == "gemm.tdsl"


def test_kernel_signature_forms():
    program = _parse(
        """
        const N = 8
        kernel a(X: f32[N]) -> (Y: f32[N]) { Y[i] = X[i] }
        kernel b(X: f32[N]) -> Y: bf16[2 * N] { Y[i] = 0 }
        kernel c() -> (Y: f16[N], Z: f8e4m3[N, N]) {
          Y[i] = 1
          Z[i, j] = 2
        }
        kernel d(
          X: f32[N],
          W: f32[N + 1, N],
        ) -> Y: f32[N] {
          Y[i] = X[i]
        }
        """
    )
    a, b, c, d = program.kernels
    assert [p.name for p in a.params] == ["X"] and [r.name for r in a.results] == ["Y"]
    assert b.results[0].type.dtype == "bf16" and format_expr(b.results[0].type.shape[0]) == "2 * N"
    assert c.params == [] and [(r.name, r.type.dtype, len(r.type.shape)) for r in c.results] == [
        ("Y", "f16", 1),
        ("Z", "f8e4m3", 2),
    ]
    assert [p.name for p in d.params] == ["X", "W"]
    assert format_expr(d.params[1].type.shape[0]) == "N + 1"


def test_statement_forms():
    program = _parse(
        """
        const N = 8
        kernel f(A: f32[N, N]) -> Y: f32[N, N] {
          T[i, j : j <= i]: bf16 = A[i, j]
          U[i, j : j <= i and i < 4] = A[i, j]; V[i] = A[i, i]

          # a comment line between statements
          Y[i, j]: f32 = T[i, j] + U[i, j] + V[i]
        }
        """
    )
    t, u, v, y = program.kernels[0].body
    assert (t.target, [n.name for n in t.iters], t.dtype) == ("T", ["i", "j"], "bf16")
    assert [format_expr(c) for c in t.conditions] == ["j <= i"]
    assert [format_expr(c) for c in u.conditions] == ["j <= i", "i < 4"] and u.dtype is None
    assert v.target == "V" and y.dtype == "f32"


# ---------------------------------------------------------------- value expressions


@pytest.mark.parametrize(
    "rhs, printed",
    [
        ("A[i, k + 1] * 2", "A[i, k + 1] * 2"),
        ("-A[i, 0] + 1.0 - 2 / 3", "-A[i, 0] + 1.0 - 2 / 3"),
        ("(A[i, 0] + 1) * 2", "(A[i, 0] + 1) * 2"),
        ("A[i, 0] - (1 - 2)", "A[i, 0] - (1 - 2)"),
        ("1e-6 + eps + inf", "1e-06 + eps + inf"),
        ("-inf", "-inf"),
        ("i * M + j", "i * M + j"),
        ("A[i // 2, (j + 1) % 4]", "A[i // 2, (j + 1) % 4]"),
        ("A[2 * i - 1, N - 1 - j]", "A[2 * i - 1, N - 1 - j]"),
        ("exp(log(sqrt(rsqrt(A[i, 0]))))", "exp(log(sqrt(rsqrt(A[i, 0]))))"),
        ("silu(sigmoid(tanh(abs(A[i, 0]))))", "silu(sigmoid(tanh(abs(A[i, 0]))))"),
        ("max(A[i, 0], 0.0) - min(A[i, 1], 1)", "max(A[i, 0], 0.0) - min(A[i, 1], 1)"),
        ("where(j <= i, A[i, j], -inf)", "where(j <= i, A[i, j], -inf)"),
        ("bf16(f16(f32(f8e4m3(A[i, 0]))))", "bf16(f16(f32(f8e4m3(A[i, 0]))))"),
    ],
)
def test_value_expressions_round_trip(rhs, printed):
    assert format_expr(_value(rhs)) == printed


def test_literals():
    value = _value("1.5 + 2 + inf + .5 + 3e2")
    leaves = []

    def walk(e):
        if isinstance(e, ast.BinOp):
            walk(e.lhs), walk(e.rhs)
        else:
            leaves.append(e)

    walk(value)
    assert [type(x).__name__ for x in leaves] == ["FloatLit", "IntLit", "FloatLit", "FloatLit", "FloatLit"]
    assert leaves[0].value == 1.5 and leaves[1].value == 2 and math.isinf(leaves[2].value)
    assert leaves[3].value == 0.5 and leaves[4].value == 300.0


def test_precedence_and_associativity():
    value = _value("1 - 2 - 3 * 4 / 5")
    assert isinstance(value, ast.BinOp) and value.op == "-"
    assert isinstance(value.lhs, ast.BinOp) and value.lhs.op == "-"  # left-associative
    assert value.rhs.op == "/" and value.rhs.lhs.op == "*"
    neg = _value("-A[i, 0] * 2")
    assert neg.op == "*" and isinstance(neg.lhs, ast.Neg)  # unary minus binds tighter


def test_multi_line_call():
    value = _value("where(\n    j <= i,\n    A[i,\n      j],\n    0.0\n  )")
    assert isinstance(value, ast.Call) and value.func == "where" and len(value.args) == 3
    assert isinstance(value.args[0], ast.Compare) and value.args[0].op == "<="


# ---------------------------------------------------------------- reductions


def test_reduction_forms():
    r = _value("sum(k) A[i, k] * W[k, j] accum f32")
    assert isinstance(r, ast.Reduce) and (r.op, [n.name for n in r.iters], r.accum, r.combine) == ("sum", ["k"], "f32", None)
    assert format_expr(r.body) == "A[i, k] * W[k, j]"  # the body extends to the right

    r = _value("max(k, l : k <= l and l < 8) A[k, l]")
    assert (r.op, [n.name for n in r.iters]) == ("max", ["k", "l"])
    assert [format_expr(c) for c in r.conditions] == ["k <= l", "l < 8"] and r.accum is None

    r = _value("sum(k : k <= i) A[i, k] accum bf16 combine segments(8)")
    assert (r.accum, r.combine) == ("bf16", "segments(8)")
    for policy in ("reassoc", "deterministic", "strict"):
        assert _value(f"sum(k) A[i, k] combine {policy}").combine == policy

    r = _value("sum(k) (-A[i, k]) + 1")
    assert isinstance(r, ast.Reduce) and format_expr(r.body) == "-A[i, k] + 1"


def test_max_function_versus_max_reduction():
    call = _value("max(A[i, 0], W[0, j])")
    assert isinstance(call, ast.Call) and call.func == "max"
    red = _value("max(k) A[i, k]")
    assert isinstance(red, ast.Reduce) and red.op == "max"
    sub = _value("max(A[i, 0], 1.0) - 2.0")  # not a reduction with body -2.0
    assert isinstance(sub, ast.BinOp) and sub.op == "-" and isinstance(sub.lhs, ast.Call)
    red = _value("max(k : k < 4) (A[i, k])")
    assert isinstance(red, ast.Reduce) and [format_expr(c) for c in red.conditions] == ["k < 4"]


def test_nested_reduction_parses():
    # Rejected later by the checker; the parser keeps it so it can say why.
    value = _value("1 + sum(k) A[i, k]")
    assert isinstance(value, ast.BinOp) and isinstance(value.rhs, ast.Reduce)


# ---------------------------------------------------------------- schedules


def test_schedule_steps():
    program = parse(GEMM)
    (block,) = program.schedules
    assert (block.name, block.kernel) == ("tiled", None)
    steps = {(s.primitive, tuple(n.name for n in s.results)): s for s in block.steps}
    split = steps[("split", ("io", "ii"))]
    assert [a.value for a in split.args] == [ast.LoopRef("C", "i", split.args[0].value.span), 64]
    factor = steps[("split", ("jo", "jj"))].args[1]
    assert (factor.keyword, factor.value) == ("factor", 64)
    reorder = steps[("reorder", ())]
    assert [a.value for a in reorder.args] == ["C", "io", "jo", "ko", "ii", "jj", "kk"]  # bare names stay str
    cache = steps[("cache_read", ())]
    assert cache.args[1].value == "shared" and cache.args[2].keyword == "at"
    assert (cache.args[2].value.stmt, cache.args[2].value.loop) == ("C", "ko")
    bind = steps[("bind", ())]
    assert (bind.args[1].value.stmt, bind.args[1].value.loop) == ("grid", "x")
    tile = steps[("tile", ("io", "jo", "ii", "jj"))]
    assert [a.value for a in tile.args][2:] == [64, 64]
    assert steps[("compute_inline", ())].args[0].value == "T"


def test_schedule_for_kernel_lists_and_multi_line_steps():
    program = _parse(
        """
        const N = 8
        kernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }
        schedule s for f {
          tile(Y.i, sizes=[4, 2], order=[], offset=-1)
          split(
            Y.i,
            4,
          )
          fence()
        }
        schedule t for f {}
        """
    )
    s, t = program.schedules
    assert (s.kernel, t.kernel, t.steps) == ("f", "f", [])
    tile, split, fence = s.steps
    assert [(a.keyword, a.value) for a in tile.args[1:]] == [("sizes", [4, 2]), ("order", []), ("offset", -1)]
    assert [a.value for a in split.args][1:] == [4]
    assert fence.args == [] and fence.results == []


# ---------------------------------------------------------------- spans


def _text_at(source: str, span: ast.Span) -> str:
    assert span.line == span.end_line, span
    return source.splitlines()[span.line - 1][span.column - 1 : span.end_column - 1]


def test_spans_cover_exactly_their_text():
    program = parse(GEMM)
    kernel = program.kernels[0]
    c, y = kernel.body
    assert _text_at(GEMM, c.span) == "C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32"
    assert _text_at(GEMM, c.iters[1].span) == "j"
    red = c.value
    assert _text_at(GEMM, red.span) == "sum(k) A[i, k] * W[k, j] accum f32"
    assert _text_at(GEMM, red.iters[0].span) == "k"
    assert _text_at(GEMM, red.body.span) == "A[i, k] * W[k, j]"
    assert _text_at(GEMM, red.body.rhs.span) == "W[k, j]"
    assert _text_at(GEMM, red.body.rhs.indices[0].span) == "k"
    assert _text_at(GEMM, y.value.span) == "silu(C[i, j])"
    assert _text_at(GEMM, kernel.params[1].span) == "W: bf16[K, N]"
    assert _text_at(GEMM, kernel.params[1].type.span) == "bf16[K, N]"
    assert _text_at(GEMM, kernel.params[1].type.shape[1].span) == "N"
    assert _text_at(GEMM, kernel.results[0].span) == "Y: bf16[M, N]"
    assert _text_at(GEMM, program.sizes[1].span) == "K = 4096"
    assert _text_at(GEMM, program.sizes[4].span) == "B"
    assert (kernel.span.line, kernel.span.column, kernel.span.end_line) == (6, 1, 9)
    step = program.schedules[0].steps[1]
    assert _text_at(GEMM, step.span) == "jo, jj = split(C.j, factor=64)"
    assert _text_at(GEMM, step.results[1].span) == "jj"
    assert _text_at(GEMM, step.args[0].span) == "C.j"
    assert _text_at(GEMM, step.args[1].span) == "factor=64"


def test_every_node_has_a_span():
    program = parse(GEMM)
    missing = []

    def visit(node, path):
        if isinstance(node, list):
            for i, x in enumerate(node):
                visit(x, f"{path}[{i}]")
        elif hasattr(node, "__dataclass_fields__"):
            if "span" in node.__dataclass_fields__ and (node.span.line <= 0 or node.span.end_line <= 0):
                missing.append(path)
            for name in node.__dataclass_fields__:
                if name != "span":
                    visit(getattr(node, name), f"{path}.{name}")

    visit(program.sizes, "sizes")
    visit(program.kernels, "kernels")
    visit(program.schedules, "schedules")
    assert missing == []


@pytest.mark.parametrize(
    "text",
    [
        "const N = 8\r\nkernel f(A: f32[N]) -> Y: f32[N] {\r\n  Y[i] = A[i]\r\n}\r\n",  # Windows line ends
        "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }",  # no final newline
        "const N = 8\n\tkernel f(A: f32[N]) -> Y: f32[N] {\n\n\n  Y[i] = A[i] # note\n\n}\n\n",
    ],
)
def test_layout_variants(text):
    program = parse(text)
    assert program.kernels[0].body[0].target == "Y"
