"""The limits of docs/language.md ("Limits"): what is at a limit goes through every stage, what is past it
is refused quickly with its position."""

import contextlib
import io
import re
import time

import pytest

from tdsl.compiler.driver.cli import main
from tdsl.frontend.check import load_file, load_source
from tdsl.frontend.diagnostics import SourceError
from tdsl.frontend.limits import ISL_KEYWORDS, MAX_EXPR_DEPTH, MAX_SOURCE_CHARS, PYTHON_KEYWORDS

PROGRAM = """\
const N = 8
kernel f(A: f32[N]) -> Y: f32[N] {
  Y[i] = %s
}
schedule halves {
  io, ii = split(Y.i, 4)
}
"""


def _cli(*argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def _flat_sum(terms: int) -> str:
    return PROGRAM % " + ".join(["A[i]"] * terms)


# A name is one level and a read A[i] two; each operator, negation and call adds one.
DEPTH_OF_A_READ = 2
LEVELS = MAX_EXPR_DEPTH - DEPTH_OF_A_READ  # operators around the reads in an expression at the limit
AT_THE_LIMIT = {
    "flat_sum": _flat_sum(LEVELS + 1),
    "negations": PROGRAM % ("-" * LEVELS + "A[i]"),
    "calls": PROGRAM % ("exp(" * LEVELS + "A[i]" + ")" * LEVELS),
    "right_nested_sum": PROGRAM % ("A[i] + (" * LEVELS + "A[i]" + ")" * LEVELS),
    # a conversion to bf16 nests 2 levels of generated code, `where` 1
    "casts_and_where": PROGRAM % ("bf16(where(i < 4, " * (LEVELS // 3) + "A[i]" + ", 1.0))" * (LEVELS // 3)),
}


@pytest.mark.parametrize("shape", list(AT_THE_LIMIT))
def test_an_expression_at_the_depth_limit_goes_through_the_interpreter_and_the_triton_backend(shape, tmp_path):
    path = tmp_path / "deep.tdsl"
    path.write_text(AT_THE_LIMIT[shape])
    code, output = _cli("run", str(path), "--interp")
    assert code == 0, output
    assert "schedule halves vs program order: bit-identical" in output
    out = tmp_path / "deep.py"
    code, output = _cli("compile", str(path), "--target", "nvidia", "-o", str(out))
    assert code == 0, output
    compile(out.read_text(), str(out), "exec")  # Python accepts the generated module's nesting


# Every construct of an expression, nested around a read: `{}` is the expression inside.
CONSTRUCTS = {
    "add": "{} + 1.0", "sub": "{} - 1.0", "mul": "{} * 1.5", "div": "{} / 1.5", "neg": "-{}",
    "compare": "where({} < 1.0, 1.0, 2.0)", "where": "where(i < 4, {}, 1.0)", "max": "max({}, A[i])",
    "min": "min(A[i], {})", "exp": "exp({})", "log": "log({})", "sqrt": "sqrt({})", "abs": "abs({})",
    "tanh": "tanh({})", "exp2": "exp2({})", "fma": "fma({}, 1.5, A[i])", "fast_inverse": "fast_inverse({})",
    "bf16": "bf16({})", "f16": "f16({})", "f8e4m3": "f8e4m3({})", "rsqrt": "rsqrt({})", "sigmoid": "sigmoid({})",
    "fast_sigmoid": "fast_sigmoid({})", "silu": "silu({})", "fast_silu": "fast_silu({})",
}
# Levels of generated code per construct (frontend/limits.py: the most any backend nests), and where the
# count at the limit is not LEVELS over them: `where`'s condition `i < 4` is 4 levels deep itself, and the
# compositions that compute their argument twice are bounded by their operations (6 * 2^n - 5 <= 4096).
LEVELS_OF = {"sub": 3, "compare": 4, "bf16": 2, "f16": 2, "f8e4m3": 4, "rsqrt": 2, "sigmoid": 4, "fast_sigmoid": 4}
NESTED_AT_MOST = {"where": LEVELS - 2, "silu": 9, "fast_silu": 9}
# What a backend refuses whatever the nesting, with its reason (the Ascend targets spell no tanh, exp2 or fma;
# the 910B converts to E4M3 in whole 256-byte repeats).
REFUSED = {("ascend-910b", "tanh"), ("ascend-910b", "exp2"), ("ascend-950", "exp2"), ("ascend-910b", "fma"),
           ("ascend-950", "fma"), ("ascend-910b", "f8e4m3")}


def _nested(construct: str, times: int) -> str:
    e = "A[i]"
    for _ in range(times):
        e = CONSTRUCTS[construct].format(e)
    return PROGRAM % e


@pytest.mark.parametrize("construct", list(CONSTRUCTS))
def test_every_construct_nested_to_the_limit_generates_python_on_every_backend(construct, tmp_path):
    # The limit counts what the generated code nests, so a module at the limit is valid Python on every
    # backend (the 950 and TileLang nest a difference 3 levels deep, a conversion to E4M3 4) and one more
    # level is refused with its position, never a module Python cannot read.
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate
    from tdsl.compiler.errors import BackendError

    times = NESTED_AT_MOST.get(construct, LEVELS // LEVELS_OF.get(construct, 1))
    with pytest.raises(SourceError, match="levels deep|operations, more than the limit"):
        load_source(_nested(construct, times + 1), "deep.tdsl")
    prog = loads(_nested(construct, times), "deep.tdsl")
    for target, backend in (("nvidia", "triton"), ("nvidia", "tilelang"), ("ascend-910b", None),
                            ("ascend-950", None)):
        try:
            text = generate(prog, "halves", target=target, backend=backend)
        except BackendError as err:
            assert (target, construct) in REFUSED, f"{target}: {err}"
            continue
        assert (target, construct) not in REFUSED
        compile(text, f"{target}-{backend}.py", "exec")


def test_nested_compositions_past_the_operation_limit_are_refused_with_their_position(tmp_path):
    # silu computes its argument twice: ten nested calls would spell out 6,139 operations.
    path = tmp_path / "silu.tdsl"
    path.write_text(_nested("silu", 10))
    code, output = _cli("compile", str(path), "--target", "nvidia", "-o", str(tmp_path / "silu.py"))
    assert code == 2
    assert output.startswith(f"{path}:3:10: error: this expression computes 6,139 operations, more than the limit "
                             f"of 4,096")


def test_inlining_past_a_limit_is_refused_by_the_primitive(tmp_path):
    # Each statement is within the limits; inlined into one another they would not be (the generated code of
    # three inlined statements used to be a module Python refused: "too many nested parentheses").
    chain = " - 1.0" * 12  # 38 levels each: two inlined 74, three 110
    path = tmp_path / "inline.tdsl"
    path.write_text(f"""\
const N = 8
kernel f(X: f32[N]) -> (Y: f32[N]) {{
  A[i] = X[i]{chain}
  B[i] = A[i]{chain}
  Y[i] = B[i]{chain}
}}
schedule one {{
  compute_inline(A)
}}
schedule two {{
  compute_inline(A)
  compute_inline(B)
}}
""")
    code, output = _cli("check", str(path), "--schedule", "two")
    assert code == 2, output
    assert f"{path}:12:3: error: compute_inline: Y would compute an expression too large to generate: this " \
           f"expression nests 110 levels deep" in output
    assert "or keep B stored (compute_at it instead of inlining it)" in output
    code, output = _cli("check", str(path), "--schedule", "one")
    assert code == 0, output
    nested = "silu(" * 6 + "{}" + ")" * 6
    path.write_text(f"""\
const N = 8
kernel f(X: f32[N]) -> (Y: f32[N]) {{
  B[i] = {nested.format("X[i]")}
  Y[i] = {nested.format("B[i]")}
}}
schedule s {{
  compute_inline(B)
}}
""")
    code, output = _cli("check", str(path))
    assert code == 2, output
    assert "compute_inline: Y would compute an expression too large to generate: this expression computes " \
           "24,571 operations" in output


@pytest.mark.parametrize("length, ok", [(64, True), (65, False)])
def test_names_are_at_most_64_characters(length, ok, tmp_path):
    # Generated functions and the files Triton and TileLang cache them in are named after the kernel: a
    # 300-character name made `tdsl run` fail on "File name too long".
    name = "k" * length
    text = f"const N = 8\nkernel {name}(X: f32[N]) -> (Y: f32[N]) {{\n  Y[i] = X[i] * 2.0\n}}\n"
    if ok:
        load_source(text, "long.tdsl")
        return
    with pytest.raises(SourceError) as info:
        load_source(text, "long.tdsl")
    assert str(info.value).startswith(f"long.tdsl:2:8: error: the kernel name '{'k' * 16}...' is 65 characters "
                                      f"long, more than the limit of 64")


@pytest.mark.parametrize("literal, value", [("3.4028235e+38", 3.4028234663852886e38),
                                            ("3.40282356e+38", 3.4028234663852886e38),
                                            ("3.4028235E38", 3.4028234663852886e38),
                                            ("3.40282357e+38", None), ("1e39", None)])
def test_a_float_literal_that_rounds_to_a_finite_f32_is_that_f32(literal, value):
    # 3.4028235e+38 is how the largest f32 is usually printed; it is slightly above it as a double, and was
    # refused with a message that quoted it as the limit.
    text = f"const N = 8\nkernel f(X: f32[N]) -> (Y: f32[N]) {{\n  Y[i] = X[i] + {literal}\n}}\n"
    if value is None:
        with pytest.raises(SourceError, match="must round to a finite f32"):
            load_source(text, "big.tdsl")
        return
    program, _ = load_source(text, "big.tdsl")
    assert program.kernels[0].body[0].value.rhs.value == value


def test_a_flat_sum_is_not_rebalanced():
    # Left-associative, as written: rebalancing would change the floating-point rounding.
    program, kernels = load_source(_flat_sum(4), "sum.tdsl")
    value = program.kernels[0].body[0].value
    depth = 0
    while hasattr(value, "lhs"):
        assert not hasattr(value.rhs, "lhs")
        value, depth = value.lhs, depth + 1
    assert depth == 3


def test_an_expression_one_past_the_depth_limit_is_refused_with_its_position(tmp_path):
    path = tmp_path / "deep.tdsl"
    path.write_text(_flat_sum(LEVELS + 2))
    code, output = _cli("run", str(path), "--interp")
    assert code == 2
    assert output.startswith(f"{path}:3:10: error: this expression nests 101 levels deep, more than the limit of 100")
    code, output = _cli("compile", str(path), "--target", "nvidia", "-o", str(tmp_path / "deep.py"))
    assert code == 2 and output.startswith(f"{path}:3:10: error: this expression nests 101 levels deep")
    assert output.split("\n")[2].startswith("           ^^^^")


@pytest.mark.parametrize(
    "name, text",
    [
        ("line_1_2_megabytes", _flat_sum(170_000)),
        ("unary_minus", PROGRAM % ("-" * 60_000 + "A[i]")),
        ("parentheses", PROGRAM % ("(" * 60_000 + "A[i]" + ")" * 60_000)),
        ("unclosed_brackets", PROGRAM % ("A[" * 30_000)),
        ("many_lines_then_an_error", "# x\n" * 16_000 + PROGRAM % "A[i] $"),
    ],
)
def test_huge_inputs_are_answered_quickly(name, text, tmp_path):
    # 1.2 MB used to take more than 20 s (the whole tree was parsed, then a RecursionError).
    path = tmp_path / f"{name}.tdsl"
    path.write_text(text)
    start = time.process_time()  # this process's CPU time: other processes on the machine do not count
    with pytest.raises(SourceError) as info:
        load_file(path)
    assert time.process_time() - start < 2.0
    assert str(info.value).startswith(f"{path}:")
    assert str(info.value).split("\n")[0].split(":")[1].isdigit()


def test_a_program_of_exactly_the_maximum_length_is_read(tmp_path):
    text = _flat_sum(2)
    text += "#" * (MAX_SOURCE_CHARS - len(text) - 1) + "\n"
    assert len(text) == MAX_SOURCE_CHARS
    path = tmp_path / "full.tdsl"
    path.write_text(text)
    load_file(path)
    path.write_text(text + "\n")
    with pytest.raises(SourceError, match="longer than 65536 characters"):
        load_file(path)


@pytest.mark.parametrize("word", sorted(ISL_KEYWORDS))
def test_every_isl_keyword_is_refused_as_an_iterator_in_any_case(word):
    for spelled in (word, word.upper(), word.capitalize()):
        if spelled in PYTHON_KEYWORDS:
            continue  # True, False: refused as Python keywords first
        with pytest.raises(SourceError, match=f"'{spelled}' is an isl keyword and cannot name an iterator"):
            load_source(f"const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {{\n  Y[{spelled}] = A[{spelled}]\n}}\n")


def test_the_isl_keyword_list_is_what_isl_refuses():
    islpy = pytest.importorskip("islpy")
    for word in ISL_KEYWORDS:
        with pytest.raises(islpy.Error):
            islpy.Set(f"[{word}] -> {{ [i] : 0 <= i < {word} }}")
    islpy.Set("[maxi, floors, modulo] -> { [i] : 0 <= i < maxi + floors + modulo }")  # prefixes are fine


@pytest.mark.parametrize("word", sorted(PYTHON_KEYWORDS))
def test_every_python_keyword_is_refused_as_a_tensor_name(word):
    # the words tdsl uses too are a syntax error that says so
    refusal = (f"'{word}' is a word of the language: it cannot be a name" if word in ("and", "for", "from", "in") else
               f"'{word}' is a Python keyword and cannot name a tensor")
    with pytest.raises(SourceError, match=re.escape(refusal)):
        load_source(f"const N = 8\nkernel f({word}: f32[N]) -> Y: f32[N] {{\n  Y[i] = 1\n}}\n")


@pytest.mark.parametrize(
    "program, role",
    [
        ("const None = 8\n", "size"),
        ("const eps, = 1\n", None),
        ("const def = 1.5\n", "constant"),
        ("param lambda\n", "size"),
        ("const N = 8\nkernel def(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }\n", "kernel"),
        ("const N = 8\nkernel f(A: f32[N]) -> yield: f32[N] { yield[i] = A[i] }\n", "tensor"),
        ("const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n  with[i] = A[i]\n  Y[i] = with[i]\n}\n", "tensor"),
        ("const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] { Y[if] = A[if] }\n", "iterator"),
        ("const N = 8\nkernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(is) A[i, is] }\n", "iterator"),
        ("const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] { Y[i] = A[i] }\nschedule s { pass, i2 = split(Y.i, 4) }\n",
         "loop"),
    ],
)
def test_python_keywords_are_refused_in_every_role(program, role):
    with pytest.raises(SourceError) as info:
        load_source(program)
    if role is not None:
        assert f"is a Python keyword and cannot name a{'n' if role[0] in 'aeiou' else ''} {role} " in str(info.value)


def test_isl_keywords_may_name_tensors_and_float_constants():
    load_source("const N = 8\nconst mod = 0.5\nkernel floor(Max: f32[N]) -> Y: f32[N] { Y[i] = Max[i] * mod }\n")
