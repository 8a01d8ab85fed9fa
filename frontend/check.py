"""Semantic checks and name resolution of a parsed program.

`check_program(program)` verifies everything the grammar cannot (names,
ranks, dtypes, affine indices, definition order, where reductions and
comparisons may appear) and resolves, per kernel, the tensors with their
shapes and, per statement, the storage dtype and the extent of every
iterator.  The first problem found is raised as a located `SourceError`.

Iterator extents: a left-hand iterator of a statement writing a kernel
result ranges over the declared result dimension; every other iterator
takes the extent of a dimension it indexes *plainly* (`A[i, k]` gives `k`
the extent of A's dimension 1).  All plain uses must agree.

Size: one checker class over the whole AST (names, ranks, dtypes, affinity, order); every rule needs the
same scopes.
"""

from __future__ import annotations

import codecs
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from tdsl.compiler.model.functions import COMPOSITIONS, PRIMITIVES

from tdsl.frontend import ast
from tdsl.frontend.diagnostics import SourceError, TdslError, visible
from tdsl.frontend.limits import MAX_INT, MAX_SOURCE_CHARS
from tdsl.frontend.parser import COMBINE_POLICIES, format_expr, parse

__all__ = [
    "TensorInfo",
    "StmtInfo",
    "KernelInfo",
    "check_program",
    "load_source",
    "load_file",
    "format_expr",
    "FUNCTION_ARITY",
    "REDUCTIONS",
    "COMBINE_POLICIES",
]

# Element-wise functions and their number of arguments: the catalog's (compiler/model/functions.py, one argument for
# a composition), `where`, and the casts, named after the dtypes they round to.
FUNCTION_ARITY: dict[str, int] = {
    **{f: n for f, n in PRIMITIVES.items() if n == 1},
    **{f: 1 for f in COMPOSITIONS},
    **{f: n for f, n in PRIMITIVES.items() if n != 1},
    "where": 3,
    **{dtype: 1 for dtype in ast.DTYPES},
}
REDUCTIONS = ("sum", "max")
DEFAULT_DTYPE = "f32"  # storage dtype of a temporary without annotation

# How each kind of affine context is named in messages.
_AFFINE_PLACES = {"index": "an index", "condition": "a condition", "dimension": "a tensor dimension"}


@dataclass
class TensorInfo:
    name: str
    dtype: str
    shape: list[ast.Expr]
    kind: str  # "input" | "output" | "temp"
    span: ast.Span


@dataclass
class StmtInfo:
    stmt: ast.Statement
    dtype: str  # resolved storage dtype
    reduce: Optional[ast.Reduce]  # the top-level reduction of the statement, or None
    extents: dict[str, ast.Expr]  # every LHS and reduction iterator -> its extent; 0 <= it < extent


@dataclass
class KernelInfo:
    kernel: ast.Kernel
    tensors: dict[str, TensorInfo]  # inputs, outputs, temporaries, in definition order
    stmts: list[StmtInfo]
    sizes: dict[str, ast.SizeDecl]
    schedules: list[ast.ScheduleBlock] = field(default_factory=list)  # the schedule blocks for this kernel


# ---------------------------------------------------------------- entry points


def check_program(program: ast.Program) -> dict[str, KernelInfo]:
    """Check a parsed program; return the resolved kernels by name."""
    try:
        sizes = _collect_sizes(program.sizes)
        kernels = _check_kernels(program.kernels, sizes)
        _attach_schedules(program.schedules, kernels)
        return kernels
    except SourceError as err:
        raise err.located(program.source, program.filename)
    except RecursionError:
        raise SourceError("the program is nested too deeply", None).located(program.source, program.filename) from None


def load_source(text: str, filename: str = "<string>") -> tuple[ast.Program, dict[str, KernelInfo]]:
    """Parse and check program text."""
    program = parse(text, filename)
    return program, check_program(program)


def load_file(path: Union[str, Path]) -> tuple[ast.Program, dict[str, KernelInfo]]:
    """Parse and check a .tdsl file; an unreadable file is a `TdslError`."""
    return load_source(read_source(path), str(path))


def read_source(path: Union[str, Path]) -> str:
    """The text of a .tdsl file, as Python reads text files: a byte-order mark dropped, '\\r\\n' and a lone
    '\\r' read as '\\n'.  Past the size limit only one more character is read: `parse` refuses it anyway."""
    shown = visible(str(path))  # a path may hold control characters too
    try:
        with open(path, encoding="utf-8-sig") as file:
            return file.read(MAX_SOURCE_CHARS + 1)
    except FileNotFoundError:
        raise TdslError(f"cannot read '{shown}': no such file") from None
    except IsADirectoryError:
        raise TdslError(f"cannot read '{shown}': it is a directory") from None
    except UnicodeDecodeError:
        raise _not_utf8(Path(path)) from None
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise TdslError(f"cannot read '{shown}': {getattr(err, 'strerror', None) or err}") from None


def _not_utf8(path: Path) -> TdslError:
    """Where a file stops being UTF-8: a located error at the first undecodable byte (shown as '\\xNN')."""
    limit = 4 * (MAX_SOURCE_CHARS + 1)  # bytes enough for the characters `read_source` reads
    try:
        with open(path, "rb") as file:
            data = file.read(limit)
    except OSError:
        data = b""
    cut = len(data) == limit
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        if not (cut and err.end == len(data)):  # not merely a character cut where reading stopped
            return _undecodable_byte(data, err.start, err.end, str(path))
    return TdslError(f"cannot read '{visible(str(path))}': it is not UTF-8 text")


def _undecodable_byte(data: bytes, start: int, end: int, filename: str) -> SourceError:
    prefix = _universal_newlines(data[:start].decode("utf-8"))
    text = prefix + _universal_newlines(data[start:].decode("utf-8", errors="backslashreplace"))
    line = prefix.count("\n") + 1
    column = len(prefix) - (prefix.rfind("\n") + 1) + 1
    span = ast.Span(line, column, line, column + 4 * (end - start))  # each byte shows as '\xNN'
    message = f"the file is not UTF-8 text: byte 0x{data[start]:02x} cannot be decoded (tdsl programs are UTF-8)"
    return SourceError(message, span).located(text, filename)


def _universal_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------- helpers


def _fail(message: str, span: Optional[ast.Span]) -> None:
    raise SourceError(message, span)


def _did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _word_span(span: ast.Span, word: str) -> ast.Span:
    """The span of `word` written at the start of `span` (a target name, a keyword)."""
    return ast.Span(span.line, span.column, span.line, span.column + len(word))


def _header(block: ast.ScheduleBlock) -> ast.Span:
    # Blocks span many lines; point at their `schedule` keyword.
    return _word_span(block.span, "schedule")


def _plural(count: int, noun: str) -> str:
    if noun == "index":
        return f"{count} {'index' if count == 1 else 'indices'}"
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _names_in(expr: ast.Expr):
    """Every `Name` in an expression, left to right."""
    if isinstance(expr, ast.Name):
        yield expr
    elif isinstance(expr, (ast.BinOp, ast.Compare)):
        yield from _names_in(expr.lhs)
        yield from _names_in(expr.rhs)
    elif isinstance(expr, ast.Neg):
        yield from _names_in(expr.operand)
    elif isinstance(expr, (ast.Access, ast.Call)):
        for sub in expr.indices if isinstance(expr, ast.Access) else expr.args:
            yield from _names_in(sub)


def _is_headless_reduction(expr: ast.Expr) -> bool:
    """`sum(k)` / `max(k)` parsed as a call: what `sum(k) -x` turns into."""
    return isinstance(expr, ast.Call) and expr.func in REDUCTIONS and (expr.func == "sum" or len(expr.args) != 2)


def _is_float_const(decl: ast.SizeDecl) -> bool:
    return isinstance(decl.value, float)


# ---------------------------------------------------------------- sizes, kernels, schedules


def _collect_sizes(decls: list[ast.SizeDecl]) -> dict[str, ast.SizeDecl]:
    sizes: dict[str, ast.SizeDecl] = {}
    for decl in decls:
        if decl.name == "inf":
            _fail("'inf' is reserved for the float infinity and cannot name a size", decl.span)
        if decl.name in sizes:
            first = sizes[decl.name].span.line
            _fail(f"duplicate definition of size '{decl.name}' (first defined at line {first})", decl.span)
        _check_size_value(decl)
        sizes[decl.name] = decl
    return sizes


def _check_size_value(decl: ast.SizeDecl) -> None:
    """An int `const` is a size: an extent of loops and tensors, a 32-bit integer in generated kernels."""
    value = decl.value
    if isinstance(value, int) and not decl.is_param and not 1 <= value <= MAX_INT:
        _fail(f"size '{decl.name}' is {value}, but a size must be between 1 and {MAX_INT} (2^31 - 1)", decl.span)


def _check_kernels(kernels: list[ast.Kernel], sizes: dict[str, ast.SizeDecl]) -> dict[str, KernelInfo]:
    infos: dict[str, KernelInfo] = {}
    for kernel in kernels:
        if kernel.name in infos:
            first = infos[kernel.name].kernel.span.line
            message = f"duplicate definition of kernel '{kernel.name}' (first defined at line {first})"
            _fail(message, _word_span(kernel.span, "kernel"))
        infos[kernel.name] = _KernelChecker(kernel, sizes).run()
    return infos


def _attach_schedules(blocks: list[ast.ScheduleBlock], kernels: dict[str, KernelInfo]) -> None:
    """Resolve which kernel each schedule block applies to (steps are the scheduler's business)."""
    seen: dict[str, ast.ScheduleBlock] = {}
    for block in blocks:
        if block.name in seen:
            first = seen[block.name].span.line
            _fail(f"duplicate definition of schedule '{block.name}' (first defined at line {first})", _header(block))
        seen[block.name] = block
        if block.kernel is not None:
            if block.kernel not in kernels:
                hint = _did_you_mean(block.kernel, kernels)
                _fail(f"unknown kernel '{block.kernel}' in schedule '{block.name}'{hint}", _header(block))
            kernels[block.kernel].schedules.append(block)
        elif not kernels:
            _fail(f"schedule '{block.name}' has no kernel to apply to: the program defines no kernel", _header(block))
        elif len(kernels) > 1:
            _fail(
                f"schedule '{block.name}' must name its kernel ('schedule {block.name} for KERNEL'): "
                f"the program defines several ({', '.join(kernels)})",
                _header(block),
            )
        else:
            next(iter(kernels.values())).schedules.append(block)


# ---------------------------------------------------------------- one kernel


@dataclass
class _StmtScope:
    """What a statement's expressions may refer to, and what they taught us."""

    target: str
    iters: list[str]  # iterators in scope (LHS, plus reduction ones inside the reduction)
    plain: list[tuple[str, ast.Expr, ast.Access]] = field(default_factory=list)  # (iterator, extent, read)

    def inner(self, extra: list[str]) -> "_StmtScope":
        return _StmtScope(self.target, self.iters + extra, self.plain)  # shares `plain`


class _KernelChecker:
    def __init__(self, kernel: ast.Kernel, sizes: dict[str, ast.SizeDecl]):
        self.kernel = kernel
        self.sizes = sizes
        self.tensors: dict[str, TensorInfo] = {}
        self.readable: set[str] = set()  # tensors whose values exist at the current statement
        self.written: dict[str, ast.Statement] = {}
        # First statement writing each name: tells "read too early" from "unknown".
        self.targets: dict[str, ast.Statement] = {}

    def run(self) -> KernelInfo:
        for param in self.kernel.params:
            self._declare(param, "input")
        for result in self.kernel.results:
            self._declare(result, "output")
        self.readable = {p.name for p in self.kernel.params}
        for stmt in self.kernel.body:
            self.targets.setdefault(stmt.target, stmt)
        stmts = [self._statement(stmt) for stmt in self.kernel.body]
        for result in self.kernel.results:
            if result.name not in self.written:
                _fail(f"result '{result.name}' is never computed", result.span)
        return KernelInfo(self.kernel, self.tensors, stmts, dict(self.sizes))

    # -------------------------------------------------- declarations

    def _declare(self, param: ast.TensorParam, kind: str) -> None:
        name = param.name
        self._check_tensor_name(name, param.span)
        if name in self.tensors:
            first = self.tensors[name].span.line
            _fail(f"duplicate definition of tensor '{name}' (first defined at line {first})", param.span)
        ttype = param.type
        self._check_dtype(ttype.dtype, _word_span(ttype.span, ttype.dtype))
        for dim in ttype.shape:
            self._affine(dim, [], "dimension")
        self._check_shape(name, ttype.shape, param.span)
        self.tensors[name] = TensorInfo(name, ttype.dtype, list(ttype.shape), kind, param.span)

    def _check_tensor_name(self, name: str, span: ast.Span) -> None:
        if name in self.sizes:
            line = self.sizes[name].span.line
            _fail(f"tensor '{name}' has the same name as the size defined at line {line}", span)

    def _check_shape(self, name: str, shape: list[ast.Expr], span: ast.Span) -> None:
        """Dimensions known at compile time are in 1..2^31-1, and so is the element count (32-bit offsets)."""
        for axis, dim in enumerate(shape):
            value = self._const_value(dim)
            if value is not None and not 1 <= value <= MAX_INT:
                shown = str(value) if isinstance(dim, ast.IntLit) else f"{format_expr(dim)} = {value}"
                _fail(
                    f"dimension {axis} of tensor '{name}' is {shown}, but a dimension must be between 1 and {MAX_INT}",
                    dim.span,
                )
        self._check_element_count(name, shape, span)

    def _check_element_count(self, name: str, shape: list[ast.Expr], span: ast.Span) -> None:
        values = [self._const_value(dim) for dim in shape]
        if None in values or math.prod(values) <= MAX_INT:
            return  # a param's value is known only at run time
        _fail(
            f"tensor '{name}' has {math.prod(values)} elements ({' x '.join(map(str, values))}), but a tensor may "
            f"have at most {MAX_INT} (2^31 - 1): generated kernels index it with 32-bit integers",
            span,
        )

    @staticmethod
    def _check_dtype(dtype: str, span: ast.Span) -> None:
        # The parser already rejects unknown dtype words; this guards hand-built trees.
        if dtype not in ast.DTYPES:
            _fail(f"unknown dtype '{dtype}'; expected one of {', '.join(ast.DTYPES)}", span)

    # -------------------------------------------------- statements

    def _statement(self, stmt: ast.Statement) -> StmtInfo:
        target_span = _word_span(stmt.span, stmt.target)
        info = self._check_target(stmt, target_span)
        lhs = self._check_lhs_iterators(stmt.iters, [])
        if info is not None and len(stmt.iters) != len(info.shape):
            _fail(self._rank_message(stmt.target, len(info.shape), len(stmt.iters)), target_span)
        dtype = self._storage_dtype(stmt, info, target_span)
        reduce = stmt.value if isinstance(stmt.value, ast.Reduce) else None
        for cond in stmt.conditions:
            self._reject_reduction_iterators(cond, reduce)
            self._condition(cond, lhs)

        scope = _StmtScope(stmt.target, lhs)
        if reduce is not None:
            self._reduction(reduce, scope)
        else:
            self._value(stmt.value, scope)

        extents = self._extents(stmt, info, reduce, scope.plain)
        if info is None:  # a temporary: its shape is the range of its iterators
            shape = [extents[i] for i in lhs]
            self._check_element_count(stmt.target, shape, target_span)
            self.tensors[stmt.target] = TensorInfo(stmt.target, dtype, shape, "temp", stmt.span)
        self.written[stmt.target] = stmt
        self.readable.add(stmt.target)
        return StmtInfo(stmt, dtype, reduce, extents)

    def _check_target(self, stmt: ast.Statement, span: ast.Span) -> Optional[TensorInfo]:
        """The declared tensor a statement writes (a result), or None for a new temporary."""
        name = stmt.target
        self._check_tensor_name(name, span)
        info = self.tensors.get(name)
        if info is not None and info.kind == "input":
            _fail(f"cannot write kernel input '{name}'", span)
        if name in self.written:
            _fail(f"tensor '{name}' is written twice (first written at line {self.written[name].span.line})", span)
        return info

    def _check_lhs_iterators(self, iters: list[ast.Name], outer: list[str], reduction: bool = False) -> list[str]:
        """Iterators must be fresh names, distinct, and (for reductions) not shadow the LHS."""
        names: list[str] = []
        for it in iters:
            kind = self._name_kind(it.name)
            if kind is not None:
                _fail(f"'{it.name}' is a {kind}, not an iterator; iterators need fresh names", it.span)
            if it.name in outer:
                _fail(f"reduction iterator '{it.name}' shadows the left-hand iterator '{it.name}'", it.span)
            if it.name in names:
                where = "in the reduction" if reduction else "on the left-hand side"
                _fail(f"iterator '{it.name}' appears twice {where}", it.span)
            names.append(it.name)
        return names

    def _name_kind(self, name: str) -> Optional[str]:
        decl = self.sizes.get(name)
        if decl is not None:
            return "float constant" if _is_float_const(decl) else "size"
        if name in self.tensors or name in self.targets:
            return "tensor"
        return None

    def _storage_dtype(self, stmt: ast.Statement, info: Optional[TensorInfo], span: ast.Span) -> str:
        if stmt.dtype is not None:
            self._check_dtype(stmt.dtype, stmt.span)
        if info is None:
            return stmt.dtype or DEFAULT_DTYPE
        if stmt.dtype is not None and stmt.dtype != info.dtype:
            _fail(
                f"dtype annotation '{stmt.dtype}' conflicts with the declared dtype '{info.dtype}' "
                f"of result '{stmt.target}'",
                span,
            )
        return info.dtype

    @staticmethod
    def _rank_message(name: str, rank: int, used: int) -> str:
        return f"tensor '{name}' has rank {rank} but is indexed with {_plural(used, 'index')}"

    # -------------------------------------------------- reductions and conditions

    def _reduction(self, red: ast.Reduce, scope: _StmtScope) -> list[str]:
        if red.op not in REDUCTIONS:
            _fail(f"unknown reduction '{red.op}'; expected {' or '.join(REDUCTIONS)}", _word_span(red.span, red.op))
        names = self._check_lhs_iterators(red.iters, scope.iters, reduction=True)
        if red.accum is not None and red.accum not in ast.DTYPES:
            _fail(f"accum expects a float dtype ({', '.join(ast.DTYPES)}), found '{red.accum}'", red.span)
        inner = scope.inner(names)
        for cond in red.conditions:
            self._condition(cond, inner.iters)
        self._value(red.body, inner)
        return names

    @staticmethod
    def _reject_reduction_iterators(cond: ast.Expr, reduce: Optional[ast.Reduce]) -> None:
        """A left-hand condition restricts the statement's domain: reduction iterators are not in it yet."""
        if reduce is None:
            return
        red = {it.name for it in reduce.iters}
        for name in _names_in(cond):
            if name.name in red:
                _fail(
                    f"reduction iterator '{name.name}' cannot be used in a left-hand condition; "
                    f"put it in the reduction, as in '{reduce.op}({name.name} : ...)'",
                    name.span,
                )

    def _condition(self, cond: ast.Expr, iters: list[str]) -> None:
        if not isinstance(cond, ast.Compare):  # the grammar only builds comparisons here
            _fail("a condition must be a comparison, such as 'j <= i'", cond.span)
        if cond.op == "!=":
            _fail("'!=' is not affine and cannot be used in a condition; split the domain with '<' and '>'", cond.span)
        self._affine(cond.lhs, iters, "condition")
        self._affine(cond.rhs, iters, "condition")

    # -------------------------------------------------- value expressions

    def _value(self, expr: ast.Expr, scope: _StmtScope) -> None:
        if isinstance(expr, (ast.IntLit, ast.FloatLit)):
            return
        if isinstance(expr, ast.Name):
            self._value_name(expr, scope)
        elif isinstance(expr, ast.BinOp):
            if expr.op == "-" and _is_headless_reduction(expr.lhs):
                _fail(
                    f"a reduction body cannot start with '-'; "
                    f"put it in parentheses, as in '{expr.lhs.func}(k) (-A[i, k])'",
                    expr.span,
                )
            if expr.op in ("//", "%"):
                message = f"'{expr.op}' is only allowed in indices and conditions; use '/' for division of values"
                _fail(message, expr.span)
            self._value(expr.lhs, scope)
            self._value(expr.rhs, scope)
        elif isinstance(expr, ast.Neg):
            self._value(expr.operand, scope)
        elif isinstance(expr, ast.Access):
            self._access(expr, scope)
        elif isinstance(expr, ast.Call):
            self._call(expr, scope)
        else:
            self._misplaced(expr)

    @staticmethod
    def _misplaced(expr: ast.Expr) -> None:
        """Comparisons and reductions are fine only in their one place each."""
        if isinstance(expr, ast.Compare):
            _fail("a comparison is only allowed as the first argument of where(...)", expr.span)
        if isinstance(expr, ast.Reduce):
            _fail(
                "a reduction must be the whole right-hand side of a statement; assign it to its own tensor",
                expr.span,
            )
        _fail("unexpected expression", expr.span)

    def _value_name(self, expr: ast.Name, scope: _StmtScope) -> None:
        if expr.name in scope.iters or expr.name in self.sizes:
            return  # an iterator or int size (its integer value), or a float constant
        if self._name_kind(expr.name) == "tensor":
            _fail(f"tensor '{expr.name}' must be indexed, as in {expr.name}[...]", expr.span)
        self._unknown_name(expr, scope.iters)

    def _unknown_name(self, expr: ast.Name, iters: list[str]) -> None:
        hint = _did_you_mean(expr.name, list(iters) + list(self.sizes))
        _fail(f"'{expr.name}' is not an iterator of this statement, a size or a constant{hint}", expr.span)

    def _access(self, acc: ast.Access, scope: _StmtScope) -> None:
        info = self._readable_tensor(acc, scope)
        if len(acc.indices) != len(info.shape):
            _fail(self._rank_message(acc.tensor, len(info.shape), len(acc.indices)), acc.span)
        for dim, index in enumerate(acc.indices):
            self._affine(index, scope.iters, "index")
            if isinstance(index, ast.Name) and index.name in scope.iters:
                scope.plain.append((index.name, info.shape[dim], acc))

    def _readable_tensor(self, acc: ast.Access, scope: _StmtScope) -> TensorInfo:
        name = acc.tensor
        span = _word_span(acc.span, name)
        if name == scope.target:
            _fail(f"tensor '{name}' is read in its own definition", span)
        if name in self.readable:
            return self.tensors[name]
        if name in self.tensors or name in self.targets:
            stmt = self.targets.get(name)
            where = f" (it is computed at line {stmt.span.line})" if stmt is not None else " (it is never computed)"
            _fail(f"tensor '{name}' is read before it is defined{where}", span)
        if name in self.sizes:
            _fail(f"'{name}' is a size, not a tensor", span)
        hint = _did_you_mean(name, list(self.tensors) + list(self.targets))
        _fail(f"unknown tensor '{name}'{hint}", span)

    def _call(self, call: ast.Call, scope: _StmtScope) -> None:
        func_span = _word_span(call.span, call.func)
        arity = FUNCTION_ARITY.get(call.func)
        if arity is None:
            if call.func in REDUCTIONS:
                _fail(f"'{call.func}' is a reduction and needs a body, as in '{call.func}(k) A[i, k]'", func_span)
            hint = _did_you_mean(call.func, FUNCTION_ARITY)
            _fail(f"unknown function '{call.func}'{hint}", func_span)
        if len(call.args) != arity:
            hint = f" (a reduction needs a body, as in '{call.func}(k) A[i, k]')" if call.func in REDUCTIONS else ""
            _fail(f"'{call.func}' takes {_plural(arity, 'argument')}, got {len(call.args)}{hint}", call.span)
        args = call.args
        if call.func == "where":
            cond = args[0]
            if not isinstance(cond, ast.Compare):
                _fail("the first argument of where(...) must be a comparison, such as 'j <= i'", cond.span)
            args = [cond.lhs, cond.rhs] + args[1:]
        for arg in args:
            self._value(arg, scope)

    # -------------------------------------------------- affine expressions

    def _affine(self, expr: ast.Expr, iters: list[str], place: str) -> bool:
        """Check an index / condition / dimension; return True when it is a compile-time constant.

        Affine: iterators, sizes and int literals combined with + and -,
        products with at least one constant factor, and // or % by a
        positive int literal.  A `param` is symbolic, so it is not constant.
        """
        where = _AFFINE_PLACES[place]
        if isinstance(expr, ast.IntLit):
            return True
        if isinstance(expr, ast.FloatLit):
            _fail(f"a float cannot be used in {where}", expr.span)
        if isinstance(expr, ast.Name):
            return self._affine_name(expr, iters, place)
        if isinstance(expr, ast.Neg):
            return self._affine(expr.operand, iters, place)
        if isinstance(expr, ast.BinOp):
            return self._affine_binop(expr, iters, place)
        if isinstance(expr, ast.Access):
            _fail(f"{where} cannot read a tensor ('{expr.tensor}'): indirect indexing is not supported", expr.span)
        if isinstance(expr, ast.Call):
            _fail(f"{where} cannot call a function ('{expr.func}')", expr.span)
        self._misplaced(expr)
        return False

    def _affine_name(self, expr: ast.Name, iters: list[str], place: str) -> bool:
        if expr.name in iters:
            return False
        decl = self.sizes.get(expr.name)
        if decl is not None:
            if _is_float_const(decl):
                where = _AFFINE_PLACES[place]
                _fail(f"float constant '{expr.name}' cannot be used in {where}; only int sizes can", expr.span)
            return not decl.is_param
        if self._name_kind(expr.name) == "tensor":
            where = _AFFINE_PLACES[place]
            _fail(f"{where} cannot read a tensor ('{expr.name}'): indirect indexing is not supported", expr.span)
        if place == "dimension":
            _fail(f"unknown size '{expr.name}'{_did_you_mean(expr.name, self.sizes)}", expr.span)
        self._unknown_name(expr, iters)
        return False

    def _affine_binop(self, expr: ast.BinOp, iters: list[str], place: str) -> bool:
        where = _AFFINE_PLACES[place]
        if expr.op == "/":
            _fail(f"use '//' for integer division in {where}, not '/'", expr.span)
        if expr.op in ("//", "%"):
            rhs = expr.rhs
            if not (isinstance(rhs, ast.IntLit) and rhs.value > 0):
                found = format_expr(rhs)
                _fail(f"'{expr.op}' in {where} needs a positive integer literal on its right, found '{found}'", expr.span)
            return self._affine(expr.lhs, iters, place)
        lhs_const = self._affine(expr.lhs, iters, place)
        rhs_const = self._affine(expr.rhs, iters, place)
        if expr.op == "*" and not lhs_const and not rhs_const:
            _fail(f"{where} must be affine, but '{format_expr(expr)}' multiplies two non-constant terms", expr.span)
        return lhs_const and rhs_const

    # -------------------------------------------------- iterator extents

    def _extents(
        self,
        stmt: ast.Statement,
        info: Optional[TensorInfo],
        reduce: Optional[ast.Reduce],
        plain: list[tuple[str, ast.Expr, ast.Access]],
    ) -> dict[str, ast.Expr]:
        """Each iterator's extent, from the result declaration or its plain uses (which must agree)."""
        known: dict[str, tuple[ast.Expr, str]] = {}  # iterator -> (extent, where it came from)
        if info is not None:
            lhs_text = f"{stmt.target}[{', '.join(i.name for i in stmt.iters)}]"
            for it, dim in zip(stmt.iters, info.shape):
                known[it.name] = (dim, lhs_text)
        for name, extent, acc in plain:
            if name not in known:
                known[name] = (extent, format_expr(acc))
            elif not self._same_extent(known[name][0], extent):
                first, origin = known[name]
                _fail(
                    f"iterator '{name}' ranges over {format_expr(first)} in {origin} "
                    f"but over {format_expr(extent)} in {format_expr(acc)}",
                    acc.span,
                )
        iters = list(stmt.iters) + (list(reduce.iters) if reduce is not None else [])
        for it in iters:
            if it.name not in known:
                _fail(f"cannot infer the range of iterator '{it.name}': index a tensor with it directly", it.span)
        return {it.name: known[it.name][0] for it in iters}

    def _same_extent(self, a: ast.Expr, b: ast.Expr) -> bool:
        if format_expr(a) == format_expr(b):
            return True
        va, vb = self._const_value(a), self._const_value(b)
        return va is not None and va == vb

    def _const_value(self, expr: ast.Expr) -> Optional[int]:
        """The value of an expression over int literals and `const` sizes, else None."""
        if isinstance(expr, ast.IntLit):
            return expr.value
        if isinstance(expr, ast.Name):
            decl = self.sizes.get(expr.name)
            return decl.value if decl is not None and isinstance(decl.value, int) and not decl.is_param else None
        if isinstance(expr, ast.Neg):
            value = self._const_value(expr.operand)
            return None if value is None else -value
        if isinstance(expr, ast.BinOp):
            lhs, rhs = self._const_value(expr.lhs), self._const_value(expr.rhs)
            if lhs is None or rhs is None:
                return None
            if expr.op == "+":
                return lhs + rhs
            if expr.op == "-":
                return lhs - rhs
            if expr.op == "*":
                return lhs * rhs
            if expr.op in ("//", "%") and rhs > 0:
                return lhs // rhs if expr.op == "//" else lhs % rhs
        return None
