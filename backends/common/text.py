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

from tdsl.frontend.diagnostics import escape_char

# Printable, but they end or change a string literal: escape them too.
_QUOTED = {"\\": "\\\\", "'": "\\'", '"': '\\"'}


def comment_text(text) -> str:
    """`text` with line breaks, other control and format characters (bidi controls, U+2028, U+0085, ...),
    lone surrogates, backslashes and quotes escaped, so it stays one line of inert text."""
    return "".join(_escape(ch) for ch in str(text))


def _escape(ch: str) -> str:
    """Backslash and quotes escaped too (the text may sit in a string literal); the rest as diagnostics show it:
    printable characters as they are, others (Cc, Cf such as bidi controls, Zl, Zp, every space but ' ') as
    `\\n`, `\\x1b`, `\\u202e`."""
    return _QUOTED.get(ch) or escape_char(ch)
