"""User-facing errors.

Every mistake a user can make is reported as a `TdslError`; the CLI prints
`str(error)` and exits with `error.exit_code`, never a traceback.  Errors
tied to source text render as

    prog.tdsl:3:14: error: unknown tensor 'B'
      C[i, j] = A[i, k] * B[k, j]
                          ^
"""

from __future__ import annotations

from typing import Optional

from .ast import Span


class TdslError(Exception):
    """Base of every error meant for the user (exit code 2 unless a subclass says otherwise)."""

    exit_code = 2


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
        if span is None or span.line <= 0:
            return f"{self.filename}: error: {self.message}"
        head = f"{self.filename}:{span.line}:{span.column}: error: {self.message}"
        lines = self.source.splitlines()
        if not (1 <= span.line <= len(lines)):
            return head
        text = lines[span.line - 1]
        width = 1
        if span.end_line == span.line and span.end_column > span.column:
            width = span.end_column - span.column
        caret = " " * (span.column - 1) + "^" * width
        return f"{head}\n  {text}\n  {caret}"

    def __str__(self) -> str:
        return self.render()
