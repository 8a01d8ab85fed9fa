"""Text -> `ast.Program`.

`parse(text, filename)` runs the LALR grammar of `grammar.lark` and turns
the Lark tree into the dataclasses of `ast.py`, with a `Span` on every
node.  Every syntax error becomes a located `SourceError` whose message
names what was expected in plain words ("expected ']' or ',' after index,
found 'foo'"); no Lark exception escapes.

Size: one transformer per grammar rule plus the plain-words syntax errors; it mirrors grammar.lark.
"""

from __future__ import annotations

import math
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Optional

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedToken, VisitError

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import SourceError, escape_char
from tdsl.frontend.limits import (MAX_EXPR_DEPTH, MAX_EXPR_OPERATIONS, MAX_SOURCE_CHARS, float_problem, float_value,
                                  int_problem, node_size, reserved_name_problem,
                                  too_deep_message, too_many_operations_message)
from tdsl.frontend.printer import expr_text

GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")

_OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB"}
_CLOSERS = {"RPAR", "RSQB"}


# ---------------------------------------------------------------- layout (postlexer)


class _Layout:
    """Makes newlines significant only outside brackets.

    Drops newlines inside (...) and [...] (multi-line calls and lists),
    collapses runs of newlines / ';' into one separator, and ends the
    token stream with a separator so the last line needs no newline.
    It also remembers the open brackets, which gives syntax errors their
    context ("after index").
    """

    always_accept = ("_NL",)

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        # Open brackets: (opener, the token before it, the token before that).
        self.brackets: list[tuple[Token, Optional[Token], Optional[Token]]] = []
        # The innermost open bracket before `last` was read (copying the whole stack per token would make
        # deeply nested input quadratic).
        self.top_before_last: Optional[tuple[Token, Optional[Token], Optional[Token]]] = None
        self.last: Optional[Token] = None  # last real (non-separator) token
        self.history: list[Token] = []  # tokens handed to the parser, last few only

    def process(self, stream: Iterable[Token]) -> Iterator[Token]:
        self.reset()
        pending_sep = None  # the first of a run of separators: ";" or a line break
        for tok in stream:
            if tok.type == "_NL":
                if tok.value == "\n" and self.brackets:
                    continue  # a line break inside brackets is just whitespace
                if tok.value == ";" and self.brackets:
                    yield self._emit(tok)  # the parser rejects it: "found ';'"
                    continue
                pending_sep = pending_sep or (";" if tok.value == ";" else "\n")
                continue
            if pending_sep:
                if self.last is not None:  # a leading separator is useless
                    yield self._emit(self._separator_after(self.last, pending_sep))
                pending_sep = None
            self.top_before_last = self.brackets[-1] if self.brackets else None
            self._track_brackets(tok)
            self.last = tok
            yield self._emit(tok)
        if self.last is not None:
            yield self._emit(self._separator_after(self.last))

    def _emit(self, tok: Token) -> Token:
        self.history = (self.history + [tok])[-3:]
        return tok

    def _track_brackets(self, tok: Token) -> None:
        if tok.type in _OPENERS:
            before = self.history[-1] if self.history else None
            before2 = self.history[-2] if len(self.history) > 1 else None
            self.brackets.append((tok, before, before2))
        elif tok.type in _CLOSERS and self.brackets:
            self.brackets.pop()

    @staticmethod
    def _separator_after(tok: Token, value: str = "\n") -> Token:
        """A synthetic separator just after `tok` (errors at it point there), `;` or a line break as written."""
        line = tok.end_line or tok.line
        col = tok.end_column or tok.column
        return Token(
            "_NL", value, start_pos=tok.end_pos, line=line, column=col, end_line=line, end_column=col + 1, end_pos=tok.end_pos
        )


# The postlexer keeps per-parse state, so one parse runs at a time.
_PARSE_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _lark() -> tuple[Lark, _Layout]:
    layout = _Layout()
    parser = Lark(
        GRAMMAR_PATH.read_text(),
        parser="lalr",
        lexer="basic",
        postlex=layout,
        propagate_positions=True,
        maybe_placeholders=True,
    )
    return parser, layout


# ---------------------------------------------------------------- tree -> ast


def _span(meta) -> ast.Span:
    if getattr(meta, "empty", True):
        return ast.NOSPAN
    return ast.Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(tok: Token) -> ast.Span:
    return ast.Span(tok.line, tok.column, tok.end_line, tok.end_column)


def _name(tok: Token, role: str) -> ast.Name:
    """A name that the program defines (not one it refers to), checked against the reserved words."""
    _check_name(str(tok), _tok_span(tok), role)
    return ast.Name(str(tok), _tok_span(tok))


def _check_name(name: str, span: ast.Span, role: str) -> None:
    problem = reserved_name_problem(name, role)
    if problem is not None:
        raise SourceError(problem, span)


def _check_not_infinity(expr: ast.Expr, role: str) -> None:
    """`inf` where a name is defined: the parser has already read it as the float infinity."""
    if isinstance(expr, ast.FloatLit) and math.isinf(expr.value):
        raise SourceError(reserved_name_problem("inf", role), expr.span)


def _int(tok: Token) -> int:
    """An INT token's value, refused (with its place) beyond the 32-bit range."""
    problem = int_problem(str(tok))
    if problem is not None:
        raise SourceError(problem, _tok_span(tok))
    return int(tok)


def _float(tok: Token) -> float:
    value = float(tok)
    problem = float_problem(str(tok), value)
    if problem is not None:
        raise SourceError(problem, _tok_span(tok))
    return float_value(value)


def _present(items) -> list:
    """Drop the None placeholders Lark puts for absent `[...]` parts."""
    return [x for x in items if x is not None]


# Reduction combine policies: these words, or segments(N) or fast_accum(N) with N >= 1.
COMBINE_POLICIES = ("reassoc", "deterministic", "strict", "online", "fast_accum")

def format_expr(expr: ast.Expr) -> str:
    """Print an expression back in source syntax (messages; the normal form that iterator extents are compared in)."""
    return expr_text(expr)


def _check_dtype(tok: Token) -> str:
    if tok not in ast.DTYPES:
        raise SourceError(f"unknown dtype '{tok}'; expected one of {', '.join(ast.DTYPES)}", _tok_span(tok))
    return str(tok)


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive):
    """Builds `ast` nodes bottom-up; each callback gets the rule's meta (positions).

    Non-recursive, so that a deep tree cannot exhaust Python's stack before
    `_nested` refuses it at the first subexpression deeper than MAX_EXPR_DEPTH.
    """

    def __init__(self) -> None:
        super().__init__()
        # id(node) -> (levels, operations, node kept alive); leaves: (1, 0)
        self._sizes: dict[int, tuple[int, int, object]] = {}

    def _size(self, node) -> tuple[int, int]:
        levels, operations, _ = self._sizes.get(id(node), (1, 0, None))
        return levels, operations

    def _nested(self, node, children: list, span: Optional[ast.Span] = None):
        """Record `node`'s size (limits.py: the levels and operations of the code generated for it); refuse it
        past a limit, at the first subexpression that is."""
        levels, operations = node_size(node, [self._size(c) for c in children])
        if levels > MAX_EXPR_DEPTH:
            raise SourceError(too_deep_message(levels), span or node.span)
        if operations > MAX_EXPR_OPERATIONS:
            raise SourceError(too_many_operations_message(operations), span or node.span)
        self._sizes[id(node)] = (levels, operations, node)
        return node

    # -------------------------------------------------- program

    def start(self, meta, items):
        program = ast.Program(sizes=[], kernels=[], schedules=[])
        for item in items:
            if isinstance(item, list):  # a const / param line declares several sizes
                program.sizes.extend(item)
            elif isinstance(item, ast.Kernel):
                program.kernels.append(item)
            elif isinstance(item, ast.ScheduleBlock):
                program.schedules.append(item)
        return program

    def const_decl(self, meta, items):
        return list(items)

    def const_item(self, meta, items):
        name, value = items
        _check_name(str(name), _tok_span(name), "constant" if isinstance(value, float) else "size")
        return ast.SizeDecl(str(name), value, is_param=False, span=_span(meta))

    def signed_number(self, meta, items):
        sign = -1 if len(items) == 2 else 1
        tok = items[-1]
        if tok.type == "NAME":  # `inf`, the one float literal spelled as a word; any other name is no number
            if tok != "inf":
                raise SourceError(f"expected a number, found '{tok}'", _tok_span(tok))
            return sign * math.inf
        return sign * (_int(tok) if tok.type == "INT" else _float(tok))

    def param_decl(self, meta, names):
        for n in names:
            _check_name(str(n), _tok_span(n), "size")
        return [ast.SizeDecl(str(n), None, is_param=True, span=_tok_span(n)) for n in names]

    # -------------------------------------------------- kernels

    def kernel(self, meta, items):
        name, params, results, body = items
        _check_name(str(name), _tok_span(name), "kernel")
        return ast.Kernel(str(name), params or [], results, body, _span(meta))

    def results(self, meta, items):
        (item,) = items
        return item if isinstance(item, list) else [item]

    def tensor_list(self, meta, items):
        return list(items)

    def tensor_decl(self, meta, items):
        name, dtype, shape, stored = items
        _check_name(str(name), _tok_span(name), "tensor")
        # `bf16[M, K]` (with `in X` after it: up to the last dimension and its `]`)
        end = (shape[-1].span.end_line, shape[-1].span.end_column + 1) if stored is not None \
            else (meta.end_line, meta.end_column)
        type_span = ast.Span(dtype.line, dtype.column, *end)
        ttype = ast.TensorType(_check_dtype(dtype), shape, type_span)
        if stored is None:
            return ast.TensorParam(str(name), ttype, _span(meta))
        return ast.TensorParam(str(name), ttype, _span(meta), str(stored), _tok_span(stored))

    def stored_in(self, meta, items):
        (name,) = items
        return name

    def kernel_body(self, meta, stmts):
        return list(stmts)

    def loop_block(self, meta, items):
        name, op, bound, body = items
        if str(op) != "<":
            raise SourceError(f"a loop block reads 'for {name} < bound' (from 0 up to, not including, the bound); "
                              f"found '{op}'", _tok_span(op))
        return ast.Block(_name(name, "iterator"), bound, body, _span(meta))

    def statement(self, meta, items):
        target, indices, conditions, dtype, value = items
        _check_name(str(target), _tok_span(target), "tensor")
        iters = [self._lhs_iterator(e) for e in indices]
        dtype = _check_dtype(dtype) if dtype is not None else None
        return ast.Statement(str(target), iters, conditions or [], dtype, value, _span(meta))

    @staticmethod
    def _lhs_iterator(expr: ast.Expr) -> ast.Name:
        # Left-hand indices define the statement's iterators, so they must be names.
        _check_not_infinity(expr, "iterator")
        if not isinstance(expr, ast.Name):
            raise SourceError(
                f"left-hand index '{format_expr(expr)}' must be a plain iterator name "
                "(each one defines an iterator of the statement)",
                expr.span,
            )
        _check_name(expr.name, expr.span, "iterator")
        return expr

    def conditions(self, meta, items):
        return list(items)

    # -------------------------------------------------- expressions

    def comparison(self, meta, items):
        lhs, op, rhs = items
        return self._nested(ast.Compare(str(op), lhs, rhs, _span(meta)), [lhs, rhs])

    def expr_list(self, meta, items):
        return list(items)

    def arg_list(self, meta, items):
        return list(items)

    def binop(self, meta, items):
        lhs, op, rhs = items
        return self._nested(ast.BinOp(str(op), lhs, rhs, _span(meta)), [lhs, rhs])

    def neg(self, meta, items):
        _, operand = items
        return self._nested(ast.Neg(operand, _span(meta)), [operand])

    def int_lit(self, meta, items):
        return ast.IntLit(_int(items[0]), _span(meta))

    def float_lit(self, meta, items):
        return ast.FloatLit(_float(items[0]), _span(meta))

    def name(self, meta, items):
        (tok,) = items
        if tok == "inf":  # the one float literal spelled as a word
            return ast.FloatLit(math.inf, _span(meta))
        return ast.Name(str(tok), _span(meta))

    def access(self, meta, items):
        tensor, indices = items
        return self._nested(ast.Access(str(tensor), indices, _span(meta)), indices)

    def call(self, meta, items):
        func, args = items
        return self._nested(ast.Call(str(func), args or [], _span(meta)), args or [])

    def reduction(self, meta, items):
        op, iters, conditions, body, init, accum, combine = items
        if combine == "online" and str(op) != "max":
            raise SourceError(
                f"`combine online` declares a running maximum that readers may use before it is complete (online "
                f"softmax); a {op} reduction cannot be one: declare it on the max(...) the exponentials subtract",
                _span(meta),
            )
        node = ast.Reduce(
            op=str(op),
            iters=[self._reduction_iterator(e) for e in iters],
            conditions=conditions or [],
            body=body,
            accum=accum,
            combine=combine,
            span=_span(meta),
            init=init,
        )
        return self._nested(node, [body, *(conditions or []), *([init] if init is not None else [])])

    def reduce_from(self, meta, items):
        (value,) = items
        return value

    @staticmethod
    def _reduction_iterator(expr: ast.Expr) -> ast.Name:
        _check_not_infinity(expr, "iterator")
        if not isinstance(expr, ast.Name):
            raise SourceError(f"reduction iterator '{format_expr(expr)}' must be a plain name", expr.span)
        _check_name(expr.name, expr.span, "iterator")
        return expr

    def accum(self, meta, items):
        (dtype,) = items
        if dtype not in ast.DTYPES:
            expected = ", ".join(ast.DTYPES)
            raise SourceError(f"accum expects a float dtype ({expected}), found '{dtype}'", _tok_span(dtype))
        return str(dtype)

    def combine(self, meta, items):
        name, count = items
        policy = str(name) if count is None else f"{name}({_int(count)})"
        valid = policy in COMBINE_POLICIES or (name in ("segments", "fast_accum") and count is not None
                                               and _int(count) >= 1)
        if not valid:
            raise SourceError(
                f"unknown combine policy '{policy}'; expected {', '.join(COMBINE_POLICIES)}, segments(N) or "
                f"fast_accum(N) with N >= 1",
                ast.Span(name.line, name.column, meta.end_line, meta.end_column),
            )
        return policy

    # -------------------------------------------------- schedules

    def schedule(self, meta, items):
        name, kernel, steps = items
        return ast.ScheduleBlock(str(name), None if kernel is None else str(kernel), steps, _span(meta),
                                 kernel_span=ast.NOSPAN if kernel is None else _tok_span(kernel),
                                 name_span=_tok_span(name))

    def schedule_body(self, meta, steps):
        return list(steps)

    def step(self, meta, items):
        results, primitive, args = items
        return ast.ScheduleStep(results or [], str(primitive), args or [], _span(meta))

    def step_results(self, meta, names):
        return [_name(n, "loop") for n in names]

    def sched_args(self, meta, args):
        # Positional values arrive bare; keyword ones already as ScheduleArg.
        wrapped = [a if isinstance(a, ast.ScheduleArg) else ast.ScheduleArg(a[0], None, a[1]) for a in args]
        seen: set = set()
        for arg in wrapped:
            if arg.keyword in seen:
                raise SourceError(f"'{arg.keyword}' is given twice in this step; give it once", arg.span)
            if arg.keyword is not None:
                seen.add(arg.keyword)
        return wrapped

    def keyword_arg(self, meta, items):
        key, (value, _) = items
        return ast.ScheduleArg(value, str(key), _span(meta))

    # A schedule value travels as (value, span) until it is wrapped in a ScheduleArg.
    def signed_int(self, meta, items):
        sign = -1 if len(items) == 2 else 1
        return sign * _int(items[-1]), _span(meta)

    def bare_name(self, meta, items):
        return str(items[0]), _span(meta)

    def loop_ref(self, meta, items):
        stmt, loop = items
        return ast.LoopRef(str(stmt), str(loop), _span(meta)), _span(meta)

    def sched_list(self, meta, items):
        values = [value for value, _ in _present(items)]
        # Lists nest like expressions (`[[[...]]]`): the same depth limit keeps later stages off deep recursion.
        return self._nested(values, values, _span(meta)), _span(meta)


# ---------------------------------------------------------------- syntax errors

# Human words for the grammar's terminals (string terminals are shown quoted).
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "CMP": "a comparison ('<', '<=', '>', '>=', '==' or '!=')",
    "_NL": "end of line",
    "$END": "end of input",
}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "DSLASH", "PERCENT"}
_EXPRESSION_START = {"NAME", "INT", "FLOAT", "LPAR"}
# Tokens that could merely continue what came before (an index after a
# name, a comparison, 'accum' after a reduction body...).  Listing them is
# noise when something structural (a closer, ',', end of line) also fits.
_CONTINUATIONS = _OPERATORS | {"LSQB", "LPAR", "CMP", "ACCUM", "COMBINE", "AND", "COLON", "DOT"}
# Preferred order when several things are expected.
_ORDER = [
    *("CONST", "PARAM", "KERNEL", "SCHEDULE"),
    *("RSQB", "RPAR", "RBRACE", "COMMA", "COLON", "EQUAL", "LSQB", "LPAR", "LBRACE", "_ARROW"),
]
_TOP_LEVEL = {"CONST", "PARAM", "KERNEL", "SCHEDULE"}


def _found(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    if tok.type == "_NL":
        return "';'" if tok.value == ";" else "end of line"
    return f"'{tok.value}'"


def _terminal_word(name: str, parser: Lark) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    term = next((t for t in parser.terminals if t.name == name), None)
    if term is not None and term.pattern.type == "str":
        return f"'{term.pattern.value}'"
    return name.lower()


def _expected_words(expected: set[str], parser: Lark) -> list[str]:
    """Turn the parser's expected terminals into a short list of phrases."""
    expected = set(expected)
    words: list[str] = []
    if {"NAME", "INT", "LPAR"} <= expected:
        # Anything that can start an expression: say so once.
        expected -= _EXPRESSION_START | {"MINUS"}
        words.append("an expression")
    elif {"INT", "FLOAT"} <= expected:
        expected -= {"INT", "FLOAT", "MINUS", "NAME"}  # a (signed) number; the NAME there is `inf`
        words.append("a number")
    if expected & _TOP_LEVEL or "_NL" in expected:
        # Where a new declaration may start, or a line may end, the end of input fits too: no news.
        expected.discard("$END")
    if expected & _TOP_LEVEL:
        expected.discard("_NL")
    essential = expected - _CONTINUATIONS
    if "_NL" in essential:
        essential.discard("RBRACE")  # "end of line" already covers closing the block
    operators = expected & _OPERATORS
    if operators == {"MINUS"} and expected & {"INT", "FLOAT"}:
        operators = set()  # just the sign of a number
        expected.discard("MINUS")
    if essential or words:
        shown = essential
        if operators and not essential & {"RSQB", "RPAR", "COMMA"}:
            shown = shown | {"<operator>"}
    else:
        shown = expected
    for name in sorted(shown - _OPERATORS - {"_NL", "<operator>"}, key=_order_key):
        words.append(_terminal_word(name, parser))
    if "<operator>" in shown or (shown & _OPERATORS):
        words.append("an operator")
    if "_NL" in shown:
        words.append("end of line")
    return words


def _order_key(name: str) -> tuple[int, str]:
    return (_ORDER.index(name) if name in _ORDER else len(_ORDER), name)


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _bracket_context(layout: _Layout, err_tok: Token) -> tuple[Optional[str], Optional[str]]:
    """(what the innermost open bracket holds, the closer it expects)."""
    # The postlexer has already seen the bad token; use its state from before.
    top = layout.top_before_last if err_tok is layout.last else (layout.brackets[-1] if layout.brackets else None)
    if top is None:
        return None, None
    opener, before, before2 = top
    closer = _OPENERS[opener.type]
    if opener.type == "LSQB":
        if before is not None and before.type == "NAME":
            kind = "dimension" if before2 is not None and before2.type == "COLON" else "index"
            return kind, closer
        return "list element", closer
    if before is not None and before.type == "NAME":
        if before2 is not None and before2.type == "KERNEL":
            return "parameter", closer
        return "argument", closer
    if before is not None and before.type == "_ARROW":
        return "result", closer
    return "expression", closer


def _syntax_message(err: UnexpectedToken, parser: Lark, layout: _Layout) -> str:
    expected = err.accepts or err.expected or set()
    words = _expected_words(expected, parser)
    context, closer = _bracket_context(layout, err.token)
    where = ""
    if context and {closer, "COMMA"} <= set(expected) and err.token.type != "$END":
        # An element was just completed ("expected ']' or ',' after index").
        where = f" after {context}"
    if not words:
        return f"unexpected {_found(err.token)}"
    reserved = ""
    if "NAME" in expected and err.token.type != "NAME" and re.fullmatch(r"[A-Za-z_]\w*", str(err.token)):
        reserved = f" ('{err.token}' is a word of the language: it cannot be a name)"
    return (f"expected {_join_or(words)}{where}, found {_found(err.token)}{reserved}"
            f"{_unbalanced_hint(err, context)}{_line_break_hint(err, expected)}")


def _unbalanced_hint(err: UnexpectedToken, context: Optional[str]) -> str:
    """A closing bracket with no bracket open (probe II: `(X[i] * 2.0))` said only "expected end of line")."""
    opener = {"RPAR": "(", "RSQB": "["}.get(err.token.type)
    if opener is None or context is not None:
        return ""
    return f" (no '{opener}' is open here: one '{err.token}' too many)"


def _line_break_hint(err: UnexpectedToken, expected: set) -> str:
    """A line that ends before its statement does: only `( )` and `[ ]` hide newlines (docs/language.md)."""
    if err.token.type != "_NL" or err.token.value == ";" or "_NL" in expected:
        return ""
    return " (a line may break only inside ( ) or [ ]: continue it on this line)"


def _end_span(layout: _Layout) -> ast.Span:
    """Where 'end of input' is reported: just after the last real token."""
    tok = layout.last
    if tok is None:
        return ast.Span(1, 1, 1, 2)
    return ast.Span(tok.end_line, tok.end_column, tok.end_line, tok.end_column + 1)


def _error_span(tok: Token, layout: _Layout) -> ast.Span:
    if tok.type == "$END":
        return _end_span(layout)
    if tok.type == "_NL" and tok.value == "\n":
        # A synthetic separator sits right after the previous token.
        return ast.Span(tok.line, tok.column, tok.line, tok.column + 1)
    return _tok_span(tok)


def _syntax_error(err: LarkError, text: str, parser: Lark, layout: _Layout) -> SourceError:
    if isinstance(err, UnexpectedToken):
        return SourceError(_syntax_message(err, parser, layout), _error_span(err.token, layout))
    if isinstance(err, UnexpectedCharacters):
        char = text[err.pos_in_stream] if 0 <= err.pos_in_stream < len(text) else "?"
        span = ast.Span(err.line, err.column, err.line, err.column + 1)
        return SourceError(f"unexpected character '{escape_char(char)}'", span)  # escaped: it may be a control
    if isinstance(err, UnexpectedEOF):
        words = _expected_words(set(err.expected or ()), parser)
        msg = f"expected {_join_or(words)}, found end of input" if words else "unexpected end of input"
        return SourceError(msg, _end_span(layout))
    return SourceError(f"syntax error: {err}", None)


# ---------------------------------------------------------------- entry point


def _check_size(text: str) -> None:
    """Refuse a program too long to parse quickly, pointing at its first character past the limit."""
    if len(text) <= MAX_SOURCE_CHARS:
        return
    line = text.count("\n", 0, MAX_SOURCE_CHARS) + 1
    column = MAX_SOURCE_CHARS - (text.rfind("\n", 0, MAX_SOURCE_CHARS) + 1) + 1
    raise SourceError(
        f"the program is longer than {MAX_SOURCE_CHARS} characters ({MAX_SOURCE_CHARS // 1024} KiB), "
        "the most tdsl reads; split it into several files (one per kernel)",
        ast.Span(line, column, line, column + 1),
    )


def name_problem(name: str) -> Optional[str]:
    """Why `name` cannot be written where the language takes a name (a schedule's, given on the command line),
    or None when it can."""
    parser, _ = _lark()
    if not re.fullmatch(parser.get_terminal("NAME").pattern.to_regexp(), name):
        return f"'{name}' is not a name: an ASCII letter or '_', then ASCII letters, digits and '_'"
    words = {t.pattern.value for t in parser.terminals if t.pattern.type == "str"}
    if name in words:
        return f"'{name}' is a word of the language: it cannot be a name"
    return None


def parse(text: str, filename: str = "<string>") -> ast.Program:
    """Parse a .tdsl program; raise a located `SourceError` on any syntax error."""
    try:
        _check_size(text)
    except SourceError as err:
        raise err.located(text, filename) from None
    parser, layout = _lark()
    with _PARSE_LOCK:
        try:
            tree = parser.parse(text)
        except LarkError as err:
            raise _syntax_error(err, text, parser, layout).located(text, filename) from None
    try:
        program = _ToAst().transform(tree)
    except VisitError as err:
        # A callback raised: one of our SourceErrors, or a bug (shown as itself, not as a Lark error).
        if isinstance(err.orig_exc, SourceError):
            raise err.orig_exc.located(text, filename) from None
        raise err.orig_exc from None
    program.source = text
    program.filename = filename
    return program
