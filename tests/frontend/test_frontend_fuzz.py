"""Robustness: whatever the input, the frontend either succeeds or raises a `SourceError`.

Valid programs are mutated at the character and at the token level
(delete, insert, duplicate, swap); any other exception (a Lark error, a
Python bug) fails the test.  The message must also read like ours, never
like Lark's (no terminal names such as RSQB).
"""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tdsl.frontend.check import load_source
from tdsl.frontend.diagnostics import SourceError

SEEDS = [
    """\
# gemm + silu
const M = 1024, K = 4096, N = 12288
const eps = 1e-6
param B
kernel gemm_silu(A: bf16[M, K], W: bf16[K, N]) -> (Y: bf16[M, N]) {
  C[i, j]: bf16 = sum(k) A[i, k] * W[k, j] accum f32
  Y[i, j] = silu(C[i, j]) + eps
}
schedule tiled {
  io, ii = split(C.i, 64)
  jo, jj = split(C.j, factor=64)
  reorder(C, io, jo, ii, jj)
  cache_read(A, shared, at=C.jo)
  bind(C.io, grid.x)
  io, jo, ii, jj = tile(C.i, C.j, [64, 64])
}
""",
    """\
const T = 16, D = 8
const scale = 0.125
kernel attn(Q: bf16[T, D], Kt: bf16[T, D]) -> P: bf16[T, T] {
  S[i, j : j <= i] = sum(d) Q[i, d] * Kt[j, d] * scale accum f32 combine segments(4)
  Mx[i] = max(j : j <= i) S[i, j]
  E[i, j : j <= i and 0 <= j] = exp(S[i, j] - Mx[i]); L[i] = sum(j : j <= i) E[i, j]
  P[i, j] = where(j <= i, E[i, j] / L[i], -inf)
}
schedule s for attn { pipeline(S.d, stages=3) }
""",
    """\
param B
const N = 8
kernel f(A: f32[B, 2 * N], V: f8e4m3[N]) -> (Y: f32[B, 2 * N], Z: f16[N]) {
  Y[b, n] = A[b, n] * 2 - A[b, (n + 1) % 16] + b
  Z[n] = f16(max(f32(V[n]), 0.0)) + abs(-V[N - 1 - n]) / rsqrt(tanh(sigmoid(log(sqrt(1.5)))))
}
""",
]

VOCAB = [
    "(", ")", "[", "]", "{", "}", ",", ":", ";", "\n", "=", "->", ".", "+", "-", "*", "/", "//", "%",
    "<", "<=", "==", "!=", "and", "sum", "max", "min", "where", "exp", "accum", "combine", "for",
    "kernel", "schedule", "const", "param", "segments(2)", "reassoc", "i", "j", "k", "M", "N", "A",
    "Y", "C", "eps", "inf", "0", "7", "1.5", "1e-3", "f32", "bf16", "i32", "#", "$", "\t", " ", "é",
]

_TOKEN = re.compile(r"\s+|#[^\n]*|[A-Za-z_]\w*|\d+\.?\d*(?:[eE][+-]?\d+)?|->|//|<=|>=|==|!=|.", re.S)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _assert_source_error_or_success(text: str) -> None:
    try:
        load_source(text, "fuzz.tdsl")
    except SourceError as err:
        rendered = str(err)
        assert rendered.startswith("fuzz.tdsl:"), rendered
        assert " error: " in rendered
        own_words = re.sub(r"'[^']*'", "", err.message)  # quoted parts may echo the input
        assert not re.search(r"\b(RSQB|LSQB|RPAR|LPAR|COMMA|__ANON\w*|_NL|\$END|Token\()", own_words), rendered
        if err.span is not None:
            assert err.span.line >= 1 and err.span.column >= 1, rendered


def test_seeds_are_valid():
    for seed in SEEDS:
        load_source(seed, "seed.tdsl")


_edit = st.tuples(
    st.sampled_from(["insert", "delete", "duplicate", "swap"]),
    st.floats(0, 1, exclude_max=True),
    st.floats(0, 1, exclude_max=True),
    st.integers(1, 8),
    st.sampled_from(VOCAB),
)


def _apply(items: list[str], edit) -> list[str]:
    kind, where, other, count, word = edit
    pos = int(where * (len(items) + 1))
    if kind == "insert":
        return items[:pos] + [word] + items[pos:]
    if kind == "delete":
        return items[:pos] + items[pos + count :]
    if kind == "duplicate":
        start = int(other * len(items)) if items else 0
        return items[:pos] + items[start : start + count] + items[pos:]
    if len(items) > 1:  # swap two elements
        a, b = min(pos, len(items) - 1), int(other * len(items))
        items = list(items)
        items[a], items[b] = items[b], items[a]
    return items


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(SEEDS), edits=st.lists(_edit, min_size=1, max_size=4), by_token=st.booleans())
def test_mutated_programs_raise_only_source_errors(seed, edits, by_token):
    items = _tokens(seed) if by_token else list(seed)
    assert "".join(items) == seed
    for edit in edits:
        items = _apply(items, edit)
    _assert_source_error_or_success("".join(items))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(VOCAB), max_size=40))
def test_token_soup_raises_only_source_errors(words):
    _assert_source_error_or_success(" ".join(words))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_source_errors(text):
    _assert_source_error_or_success(text)


@pytest.mark.parametrize(
    "text",
    [
        "\x00",
        "\ufeffconst N = 8",
        "const N = 8\nkernel f() -> Y: f32[N] {\n  Y[i] = " + "(" * 3000 + "1" + ")" * 3000 + "\n}\n",
        "const N = 8\nkernel f() -> Y: f32[N] {\n  Y[i] = " + "exp(" * 3000 + "1" + ")" * 3000 + "\n}\n",
        "const N = 8\nkernel f() -> Y: f32[N] {\n  Y[i] = 1" + " + 1" * 5000 + "\n}\n",
        "kernel f() -> Y: f32[" + "(" * 3000,
    ],
)
def test_pathological_inputs(text):
    _assert_source_error_or_success(text)
