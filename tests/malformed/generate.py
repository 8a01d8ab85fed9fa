"""Malformed .tdsl programs, made by mutating the seven examples with fixed seeds.

`candidates()` returns every program once (a file's bytes and a stable name such as
`delete_token.gemm.3`), in the same order on every run: each family draws from its own
`random.Random(f"{family}.{example}")`.

Families: token deletion, duplication and swaps; truncation; odd characters and unicode inserted
(NUL, escape sequences, bidi overrides, line separators, zero-width characters); invalid UTF-8 bytes;
zero, negative, huge and non-integer sizes; bad schedule steps (wrong arity, non-loop references,
zero / negative / huge factors, unknown primitives and keywords, nested lists); names that are Python
or isl keywords or start with '__'; and a few hand-written programs (empty files, deep and long
expressions, files past the size limit).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass(frozen=True)
class Candidate:
    name: str
    data: bytes  # the file, as written to disk

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="backslashreplace")


# ---------------------------------------------------------------- tokens of a program

_TOKEN = re.compile(r"#[^\n]*|[A-Za-z_]\w*|\d+\.?\d*(?:[eE][+-]?\d+)?|->|//|<=|>=|==|!=|\S")


def _tokens(text: str) -> list[tuple[int, int]]:
    """(start, end) of every token that is not a comment."""
    return [m.span() for m in _TOKEN.finditer(text) if not m.group().startswith("#")]


def _replace(text: str, span: tuple[int, int], new: str) -> str:
    return text[: span[0]] + new + text[span[1] :]


# ---------------------------------------------------------------- token and character mutations


def delete_token(text: str, rng: random.Random) -> Iterator[str]:
    toks = _tokens(text)
    for _ in range(12):
        yield _replace(text, rng.choice(toks), "")


def duplicate_token(text: str, rng: random.Random) -> Iterator[str]:
    toks = _tokens(text)
    for _ in range(6):
        start, end = rng.choice(toks)
        yield text[:end] + " " + text[start:end] + text[end:]


def swap_tokens(text: str, rng: random.Random) -> Iterator[str]:
    toks = _tokens(text)
    for n in range(6):
        i = rng.randrange(len(toks) - 1)
        j = i + 1 if n % 2 == 0 else rng.randrange(len(toks))
        (a, b) = sorted((i, j))
        if a == b:
            continue
        first, second = toks[a], toks[b]
        yield (
            text[: first[0]] + text[second[0] : second[1]] + text[first[1] : second[0]]
            + text[first[0] : first[1]] + text[second[1] :]
        )


def truncate(text: str, rng: random.Random) -> Iterator[str]:
    for _ in range(6):
        yield text[: rng.randrange(1, len(text))]


ODD_TEXT = [
    "\x00", "\x1b", "\x1b[31m", "\x1b]0;title\x07", "\u202e", "\u2066", "\u2069", "\u2028", "\u2029",
    "\x85", "\v", "\f", "\r", "\u200b", "\u200d", "\ufeff", "\x7f", "\x9b", "\xa0", "é", "e\u0301", "\u6f22",
    "\U0001f600", "$", "@", "`", "\\", '"', "'", "?", "!", "~", "^", "&", "|", "{", "}", "..", "\t\t",
]


def insert_odd_text(text: str, rng: random.Random) -> Iterator[str]:
    toks = _tokens(text)
    for n in range(8):
        odd = rng.choice(ODD_TEXT)
        # Half before a token (in code), half anywhere (comments and blank space too).
        where = rng.choice(toks)[0] if n % 2 == 0 else rng.randrange(len(text))
        yield text[:where] + odd + text[where:]


BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\xf8\x88\x80\x80\x80"]


def insert_bad_utf8(text: str, rng: random.Random) -> Iterator[bytes]:
    data = text.encode("utf-8")
    for _ in range(3):
        where = rng.randrange(len(data) + 1)
        yield data[:where] + rng.choice(BAD_UTF8) + data[where:]


# ---------------------------------------------------------------- sizes

BAD_SIZES = [
    "0", "-3", "-0", "2147483648", "4611686018427387904", "9" * 400, "1e999", "-1e999", "2147483647",
    "65536", "0.0", "1e-999", "00000000000000000000000008", "2.5",
]
_SIZE_ITEM = re.compile(r"(?:const\s+|,\s*)([A-Za-z_]\w*)\s*=\s*(-?[0-9.eE+-]+)")


def bad_size(text: str, rng: random.Random) -> Iterator[str]:
    items = [m.span(2) for m in _SIZE_ITEM.finditer(text)]
    for _ in range(6):
        yield _replace(text, rng.choice(items), rng.choice(BAD_SIZES))


# ---------------------------------------------------------------- schedule steps

_STEP = re.compile(
    r"^(?P<indent>[ \t]*)(?P<results>(?:\w+\s*,\s*)*\w+\s*=\s*)?(?P<prim>\w+)\((?P<args>[^()\n]*)\)[ \t]*$", re.M
)
_LOOP_REF = re.compile(r"\b[A-Za-z_]\w*\.[A-Za-z_]\w*\b")
_INT_ARG = re.compile(r"(?<![\w.])\d+\b")

BAD_FACTORS = ["0", "-4", "-2147483647", "2147483647", "2147483648", "9" * 300, "1", "100000", "[]", "[0, 0]", "shared"]
BAD_REFS = [
    "C.nope", "nope.i", "grid.x", "grid.w", "shared", "-5", "[1, 2]", "[[[1]]]", "[" * 30 + "]" * 30, "i", "X.i",
]
BAD_PRIMITIVES = ["splitt", "vectorize", "unroll", "parallel", "tile", "split", "fuse", "reorder", "reverse", "rfactor",
                  "compute_inline", "launch", "cache_read", "bind", "__init__", "lambda"]
EXTRA_ARGS = ["7", "C.i", "foo=1", "stages=3", "at=64", "factor=0", "factor=[1, 2]", "stages=shared", "warps=0",
              "segments=-1", "dtype=i32", "axis=grid.q", "round=maybe"]


def _steps(text: str) -> list[re.Match]:
    return [m for m in _STEP.finditer(text) if m.group("prim") not in ("kernel", "schedule")]


def bad_schedule_step(text: str, rng: random.Random) -> Iterator[str]:
    steps = _steps(text)
    mutations: list[Callable[[re.Match], str]] = [
        lambda m: _with_args(m, _INT_ARG.sub(lambda _: rng.choice(BAD_FACTORS), m.group("args"), count=1)),
        lambda m: _with_args(m, _LOOP_REF.sub(lambda _: rng.choice(BAD_REFS), m.group("args"), count=1)),
        lambda m: _replace(m.group(), _span_in(m, "prim"), rng.choice(BAD_PRIMITIVES)),
        lambda m: _with_args(m, ", ".join(m.group("args").split(", ")[:-1])),  # one argument fewer
        lambda m: _with_args(m, m.group("args") + ", " + rng.choice(EXTRA_ARGS)),
        lambda m: _with_results(m, "a, b, c, d, e = "),
        lambda m: _with_results(m, "x = "),
        lambda m: m.group() + "\n" + m.group(),  # the same step twice
    ]
    for n in range(10):
        step = rng.choice(steps)
        new = mutations[n % len(mutations)](step) if n < len(mutations) else rng.choice(mutations)(step)
        yield text[: step.start()] + new + text[step.end() :]


ODD_FACTORS = ["1", "2", "3", "7", "100", "1000", "4095", "4097", "65536", "2147483647"]
ODD_STEPS = [
    "reorder(C, io, io)", "fuse(C.i, C.i)", "compute_at(C, C.i)", "compute_inline(Y)", "cache_read(C, shared, at=C.i)",
    "reverse(grid.x)", "pipeline(C.k, stages=1000000)", "bind(C.i, grid.x)\n  bind(C.j, grid.x)", "launch(C, warps=64)",
    "rfactor(C.k, segments=3)", "cache_write(C, global, at=C.i)", "tile(C.i, 4)", "split(C.i, [4, 4])",
]


def odd_schedule_arguments(text: str, rng: random.Random) -> Iterator[str]:
    """Factors that are legal but unusual (1, odd, larger than the loop, 2^31 - 1), and steps that misuse
    statements, loops and scopes (the statement and loop names are the gemm's; others get 'unknown')."""
    steps = _steps(text)
    for _ in range(5):
        step = rng.choice(steps)
        new = _with_args(step, _INT_ARG.sub(lambda _: rng.choice(ODD_FACTORS), step.group("args")))
        yield text[: step.start()] + new + text[step.end() :]
    for _ in range(3):
        step = rng.choice(steps)
        yield text[: step.end()] + "\n  " + rng.choice(ODD_STEPS) + text[step.end() :]


def _span_in(m: re.Match, group: str) -> tuple[int, int]:
    return m.start(group) - m.start(), m.end(group) - m.start()


def _with_args(m: re.Match, args: str) -> str:
    return _replace(m.group(), _span_in(m, "args"), args)


def _with_results(m: re.Match, results: str) -> str:
    if m.group("results") is None:
        return _replace(m.group(), (len(m.group("indent")), len(m.group("indent"))), results)
    return _replace(m.group(), _span_in(m, "results"), results)


# ---------------------------------------------------------------- reserved names

RESERVED = [
    "lambda", "None", "True", "False", "def", "class", "import", "yield", "async", "await", "in", "is", "not",
    "pass", "return", "with", "global", "del", "mod", "floor", "ceil", "Max", "MIN", "exists", "NaN", "infty",
    "infinity", "rat", "implies", "or", "true", "floord", "__t", "__init__", "__", "and", "for", "kernel",
]
# Words of the language itself: renaming them is a plain syntax error, which the other families cover.
_LANGUAGE = {
    "const", "param", "kernel", "schedule", "for", "accum", "combine", "and", "sum", "max", "min", "where", "exp",
    "log", "sqrt", "rsqrt", "silu", "sigmoid", "tanh", "abs", "bf16", "f16", "f32", "f8e4m3", "shared", "register",
    "grid", "x", "y", "z", "at", "stages", "warps", "inf", "reassoc", "segments", "strict", "deterministic",
}


def reserved_name(text: str, rng: random.Random) -> Iterator[str]:
    code = "\n".join(line.split("#")[0] for line in text.split("\n"))
    names = sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", code)) - _LANGUAGE - set(_prim_names(text)))
    for _ in range(8):
        name = rng.choice(names)
        yield re.sub(rf"\b{re.escape(name)}\b", rng.choice(RESERVED), text)


def _prim_names(text: str) -> list[str]:
    return [m.group("prim") for m in _steps(text)]


# ---------------------------------------------------------------- hand-written programs

_SMALL = (
    "const N = 8\nkernel f(A: f32[N], B: f32[N, N]) -> Y: f32[N] {\n  Y[i] = %s\n}\n"
    "schedule s {\n  io, ii = split(Y.i, 4)\n}\n"
)


def handwritten() -> Iterator[tuple[str, bytes]]:
    def text(name: str, source: str) -> tuple[str, bytes]:
        return name, source.encode("utf-8")

    yield text("empty", "")
    yield "bom_only", b"\xef\xbb\xbf"
    yield text("blank_lines", "\n" * 1000)
    yield text("whitespace_only", " \t\f\r\n \t\n")
    yield text("comments_only", "# nothing here\n# at all\n")
    yield text("sizes_only", "const M = 8, N = 8\nparam B\n")
    yield text("schedule_only", "schedule s {\n  io, ii = split(Y.i, 4)\n}\n")
    yield text("kernel_without_schedule_check", "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n  Y[i] = A[i]\n}\n")
    yield text("flat_sum_101", _SMALL % " + ".join(["A[i]"] * 101))
    yield text("flat_sum_1000", _SMALL % " + ".join(["A[i]"] * 1000))
    yield text("unary_minus_20000", _SMALL % ("-" * 20000 + "A[i]"))
    yield text("calls_150_deep", _SMALL % ("exp(" * 150 + "A[i]" + ")" * 150))
    yield text("parentheses_5000_deep", _SMALL % ("(" * 5000 + "A[i]" + ")" * 5000))
    yield text("parentheses_unclosed", _SMALL % ("(" * 5000 + "A[i]"))
    yield text("deep_index", _SMALL % ("A[" + " + ".join(["i"] * 150) + "]"))
    yield text("deep_condition", _SMALL.replace("Y[i] = %s", "Y[i : " + " + ".join(["i"] * 150) + " < N] = A[i]"))
    yield text("deep_schedule_list", _SMALL.replace("split(Y.i, 4)", "split(Y.i, " + "[" * 150 + "4" + "]" * 150 + ")"))
    yield text("index_product_overflow", _SMALL % "A[i * 2147483647 * 2147483647]")
    yield text("huge_segments", _SMALL % "sum(k) B[i, k] combine segments(99999999999999999999)")
    yield text("segments_zero", _SMALL % "sum(k) B[i, k] combine segments(0)")
    yield text("float_overflow", _SMALL % "A[i] * 1e999")
    yield text("float_huge_exponent", _SMALL % ("A[i] * 1e" + "9" * 5000))
    yield text("int_value_huge", _SMALL % ("A[i] + " + "9" * 5000))
    yield text("line_1_2_megabytes", _SMALL % " + ".join(["A[i]"] * 170_000))
    yield text("file_past_size_limit", "# " + "x" * 70_000 + "\n" + _SMALL % "A[i]")
    yield text("many_statements", "const N = 8\nkernel f(A: f32[N]) -> Y: f32[N] {\n" + "".join(
        f"  T{k}[i] = A[i]\n" for k in range(500)) + "  Y[i] = T499[i] $\n}\n")
    yield text("dimension_zero", "const N = 8\nkernel f(A: f32[N - 8]) -> Y: f32[N] {\n  Y[i] = 1\n}\n")
    yield text("dimension_negative", "const N = 8\nkernel f(A: f32[N - 16]) -> Y: f32[N] {\n  Y[i] = 1\n}\n")
    yield text("too_many_elements", "const N = 65536\nkernel f(A: f32[N, N]) -> Y: f32[N] { Y[i] = sum(k) A[i, k] }\n")
    yield text("param_dunder", "param __B\nkernel f(A: f32[__B]) -> Y: f32[__B] {\n  Y[i] = A[i]\n}\n")
    yield text("unicode_digits", _SMALL % "A[i] + \u0663")
    yield text("fullwidth_name", _SMALL % "\uff21[i]")
    yield text("crlf_error", (_SMALL % "B[i]").replace("\n", "\r\n"))
    yield text("lone_cr_error", (_SMALL % "Q[i]").replace("\n", "\r"))
    yield text("bidi_in_comment", "# \u202e }\u2066 {\n" + _SMALL % "A[i] # \u202e Q[i]")
    yield text("ansi_in_comment_then_error", "# \x1b[2J\x1b[H\n" + _SMALL % "A[i] \x1b[31m + 1")


# ---------------------------------------------------------------- all candidates

FAMILIES: list[Callable] = [
    delete_token, duplicate_token, swap_tokens, truncate, insert_odd_text, insert_bad_utf8, bad_size,
    bad_schedule_step, odd_schedule_arguments, reserved_name,
]


# The attention examples (mha, and those that repeat its text with a few statements changed: FlashAttention's
# rounding, exponential, or a causal domain): one candidate in THINNED[stem] of each family.  Every candidate an
# attention example's frontend accepts is compiled for each legal schedule, a second each; most of the suite's time.
THINNED = {"mha": 2, "mha_fa": 3, "mha_fa_exp2": 3, "mha_causal": 2}


def candidates() -> list[Candidate]:
    """Every malformed program, each once, in a fixed order."""
    found: list[Candidate] = []
    seen: set[bytes] = set()

    def add(name: str, data: bytes) -> None:
        if data not in seen:
            seen.add(data)
            found.append(Candidate(name, data))

    for family in FAMILIES:
        for path in sorted(EXAMPLES.glob("*.tdsl")):
            text = path.read_text(encoding="utf-8")
            rng = random.Random(f"{family.__name__}.{path.stem}")
            for n, mutated in enumerate(family(text, rng)):
                if n % THINNED.get(path.stem, 1):
                    continue
                data = mutated if isinstance(mutated, bytes) else mutated.encode("utf-8")
                if data != text.encode("utf-8"):
                    add(f"{family.__name__}.{path.stem}.{n}", data)
    for name, data in handwritten():
        add(f"handwritten.{name}", data)
    return found
