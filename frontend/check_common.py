"""What the checks of a program share: the records they resolve (`TensorInfo`, `StmtInfo`, `KernelInfo`), the
element-wise functions and reductions of the language with the dtype of an unannotated temporary, and how a
message fails at a span, points at a word and suggests a name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Optional

from tdsl.compiler.model.functions import COMPOSITIONS, PRIMITIVES

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import SourceError

# Element-wise functions and their number of arguments: the catalog's (compiler/model/functions.py, one argument for
# a composition), `where`, and the casts, named after the dtypes they round to.
FUNCTION_ARITY: dict[str, int] = {
    **{f: n for f, n in PRIMITIVES.items() if n == 1},
    **{f: 1 for f in COMPOSITIONS},
    **{f: n for f, n in PRIMITIVES.items() if n != 1},
    "where": 3,
    **{dtype: 1 for dtype in ast.DTYPES},
}
REDUCTIONS = ("sum", "max", "min")
DEFAULT_DTYPE = "f32"  # storage dtype of a temporary without annotation


@dataclass
class TensorInfo:
    name: str
    dtype: str
    shape: list[ast.Expr]
    kind: str  # "input" | "output" | "temp"
    span: ast.Span
    stored_in: Optional[str] = None  # an output kept in this input's array (`C: f32[M, N] in C_in`)
    stored_in_span: ast.Span = ast.NOSPAN


@dataclass
class StmtInfo:
    stmt: ast.Statement
    dtype: str  # resolved storage dtype
    reduce: Optional[ast.Reduce]  # the top-level reduction of the statement, or None
    extents: dict[str, ast.Expr]  # every LHS and reduction iterator -> its extent; 0 <= it < extent
    loops: list[str] = field(default_factory=list)  # iterators of the enclosing `for` blocks, outermost first
    # program order: the item's position in the kernel body, then in each enclosing block's body (len(loops) + 1)
    order: list[int] = field(default_factory=list)


@dataclass
class KernelInfo:
    kernel: ast.Kernel
    tensors: dict[str, TensorInfo]  # inputs, outputs, temporaries, in definition order
    stmts: list[StmtInfo]
    sizes: dict[str, ast.SizeDecl]
    schedules: list[ast.ScheduleBlock] = field(default_factory=list)  # the schedule blocks for this kernel


# ---------------------------------------------------------------- helpers


def _fail(message: str, span: Optional[ast.Span]) -> None:
    raise SourceError(message, span)


def _did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _word_span(span: ast.Span, word: str) -> ast.Span:
    """The span of `word` written at the start of `span` (a target name, a keyword)."""
    return ast.Span(span.line, span.column, span.line, span.column + len(word))


def _is_float_const(decl: ast.SizeDecl) -> bool:
    return isinstance(decl.value, float)
