"""User-facing errors.

Every mistake a user can make is reported as a `TdslError`; the CLI prints
`str(error)` and exits with `error.exit_code`, never a traceback.  Errors
tied to source text render as

    prog.tdsl:3:14: error: unknown tensor 'B'
      C[i, j] = A[i, k] * B[k, j]
                          ^

The echoed line is the lexer's line (only '\\n' ends a line), control and
invisible characters in it are shown escaped (`\\x1b`, `\\u202e`) so that
they cannot act on the terminal, and the caret line repeats the tabs of
the source line so that the caret stays under the faulty text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

from tdsl.frontend.ast import Span

# A longer echoed line is cut to a window around the caret.
MAX_ECHO_WIDTH = 160
_ECHO_LEAD = 40  # columns shown before the caret in a cut line
_CUT = "..."


_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


class TdslError(Exception):
    """Base of every error meant for the user (exit code 2 unless a subclass says otherwise)."""

    exit_code = 2


def escape_char(char: str) -> str:
    """`char` as the terminal should show it: itself when printable, else an escape such as `\\x1b`."""
    if char.isprintable():
        return char
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, keep: str = "") -> str:
    """`text` with every non-printable character (except those in `keep`) escaped."""
    return "".join(c if c in keep else escape_char(c) for c in text)


def source_lines(source: str) -> list[str]:
    """The lines of a program as the lexer counts them: only '\\n' ends a line.

    (`str.splitlines` also splits at '\\f', '\\v', '\\r', U+2028... which the
    lexer treats as whitespace or as unexpected characters, so its line
    numbers would disagree with the lexer's.)  The '\\r' of a '\\r\\n' ending
    is not part of the line.
    """
    lines = source.split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _cell(char: str) -> tuple[str, int]:
    """How one source character is echoed, and how many columns it takes."""
    if char == "\t":
        return "\t", 8  # the caret line repeats the tab, so its real width does not matter
    shown = escape_char(char)
    if shown != char:
        return shown, len(shown)
    if unicodedata.combining(char):
        return char, 0
    return char, 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def echo_with_caret(line: str, column: int, width: int) -> tuple[str, str]:
    """The echoed source line and the caret line under characters [column, column + width) (1-based)."""
    cells = [_cell(c) for c in line]
    start = min(max(column - 1, 0), len(cells))
    end = min(max(start + width, start + 1), len(cells))
    lo, hi = _window(cells, start)
    text = "".join(shown for shown, _ in cells[lo:hi])
    pad = "".join("\t" if shown == "\t" else " " * cols for shown, cols in cells[lo:start])
    marks = "^" * max(1, sum(max(cols, 1) for _, cols in cells[start:min(end, hi)]))
    if lo > 0:
        text, pad = _CUT + text, " " * len(_CUT) + pad
    if hi < len(cells):
        text += _CUT
    return text, pad + marks


def _window(cells: list[tuple[str, int]], start: int) -> tuple[int, int]:
    """Which characters of a long line to echo: at most MAX_ECHO_WIDTH columns, the caret near the left."""
    if sum(cols for _, cols in cells) <= MAX_ECHO_WIDTH:
        return 0, len(cells)
    lo, lead = start, 0
    while lo > 0 and lead + cells[lo - 1][1] <= _ECHO_LEAD:
        lo -= 1
        lead += cells[lo][1]
    hi, used = lo, 0
    while hi < len(cells) and used + cells[hi][1] <= MAX_ECHO_WIDTH:
        used += cells[hi][1]
        hi += 1
    return lo, max(hi, start + 1)


class SourceError(TdslError):
    """An error at a place in a .tdsl file (syntax or semantics)."""

    def __init__(self, message: str, span: Optional[Span] = None, source: str = "", filename: str = "<string>"):
        self.message = message
        self.span = span
        self.source = source
        self.filename = filename
        super().__init__(self.render())

    def located(self, source: str, filename: str) -> "SourceError":
        """Attach the file text once it is known (checks may raise without it)."""
        self.source, self.filename = source, filename
        self.args = (self.render(),)
        return self

    def render(self) -> str:
        span = self.span
        message = visible(self.message, keep="\n")
        filename = visible(self.filename)
        if span is None or span.line <= 0:
            return f"{filename}: error: {message}"
        head = f"{filename}:{span.line}:{span.column}: error: {message}"
        lines = source_lines(self.source)
        if not (1 <= span.line <= len(lines)) or not self.source:
            return head
        line = lines[span.line - 1]
        width = 1
        if span.end_line == span.line and span.end_column > span.column:
            width = span.end_column - span.column
        elif span.end_line > span.line:  # a construct over several lines (a block, a step): mark its first word
            word = re.match(r"\w+", line[span.column - 1:])
            width = len(word.group()) if word else 1
        text, caret = echo_with_caret(line, span.column, width)
        return f"{head}\n  {text}\n  {caret}"

    def __str__(self) -> str:
        return self.render()
