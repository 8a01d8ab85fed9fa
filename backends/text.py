r"""User text inside generated source: one quoting function for every backend.

A file name, a schedule name or a statement can hold any character, and generated modules put such text into
`#` comments and docstrings.  A newline there would end the comment and make the rest a line of code that runs
on import; a quote or a backslash would end or change a string literal.  `comment_text` escapes everything
that could, the way `repr` writes it, so ordinary text comes out unchanged:

    comment_text("gemm_silu.tdsl")    == 'gemm_silu.tdsl'
    comment_text("a\nimport os")      == 'a\\nimport os'      # a backslash and an n: still one line

The result is safe in a `#` comment and inside any Python string literal, single- or triple-quoted; it is not
meant for f-strings, whose braces it leaves alone.
"""

from __future__ import annotations

# Printable, but they end or change a string literal: escape them too.
_QUOTED = {"\\": "\\\\", "'": "\\'", '"': '\\"'}
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def comment_text(text) -> str:
    """`text` with line breaks, other control and format characters (bidi controls, U+2028, U+0085, ...),
    lone surrogates, backslashes and quotes escaped, so it stays one line of inert text."""
    return "".join(_escape(ch) for ch in str(text))


def _escape(ch: str) -> str:
    if ch in _QUOTED:
        return _QUOTED[ch]
    if ch.isprintable():  # False for Cc, Cf (bidi controls), Zl, Zp, Cs, Co, Cn and every space but ' '
        return ch
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
