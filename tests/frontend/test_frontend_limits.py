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
    "casts_and_where": PROGRAM % ("bf16(where(i < 4, " * (LEVELS // 2) + "A[i]" + ", 1.0))" * (LEVELS // 2)),
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
