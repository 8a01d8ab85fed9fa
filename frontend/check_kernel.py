"""The checks of one kernel: its declarations (names, dtypes, shapes), its statements in order (what each writes,
what it may read at that point, its storage dtype), reductions, conditions and value expressions; `run` returns
the resolved `KernelInfo`.  The integer side (affine indices, conditions and dimensions, compile-time values,
iterator extents) is `_IndexChecks` (frontend/check_index.py), which the checker extends: both use the same
scopes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from tdsl.frontend import ast
from tdsl.frontend.check_common import (
    DEFAULT_DTYPE,
    FUNCTION_ARITY,
    REDUCTIONS,
    KernelInfo,
    StmtInfo,
    TensorInfo,
    _did_you_mean,
    _fail,
    _is_float_const,
    _word_span,
)
from tdsl.frontend.check_index import _IndexChecks
from tdsl.frontend.limits import MAX_INT
from tdsl.frontend.parser import format_expr


# ---------------------------------------------------------------- helpers


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


# ---------------------------------------------------------------- one kernel


@dataclass
class _StmtScope:
    """What a statement's expressions may refer to, and what they taught us."""

    target: str
    iters: list[str]  # iterators in scope (LHS, plus reduction ones inside the reduction)
    plain: list[tuple[str, ast.Expr, ast.Access]] = field(default_factory=list)  # (iterator, extent, read)
    lhs: list[str] = field(default_factory=list)  # the left-hand iterators (the rank of the target)

    def inner(self, extra: list[str]) -> "_StmtScope":
        return _StmtScope(self.target, self.iters + extra, self.plain, self.lhs)  # shares `plain`


class _KernelChecker(_IndexChecks):
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
        for decl in self.kernel.params + self.kernel.results:
            if decl.stored_in is not None:
                self._check_stored_in(decl)
        self.readable = {p.name for p in self.kernel.params}
        for stmt in ast.statements(self.kernel.body):
            self.targets.setdefault(stmt.target, stmt)
        stmts = self._body(self.kernel.body, {}, [])
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

    def _check_stored_in(self, decl: ast.TensorParam) -> None:
        """`C: f32[M, N] in C_in`: a result kept in a parameter of its dtype and shape, which the kernel updates
        in place (as the schedule step `store_in(C, C_in)` decides it; the order is checked with the model)."""
        name, array, span = decl.name, decl.stored_in, decl.stored_in_span
        if self.tensors[name].kind == "input":
            _fail(f"'in {array}' keeps a result in a parameter's array; '{name}' is a parameter (read-only): "
                  f"declare the updated tensor among the results, '-> ({name}_out: ... in {name})'", span)
        target = self.tensors.get(array)
        if target is None:
            inputs = [t for t, info in self.tensors.items() if info.kind == "input"]
            _fail(f"unknown tensor '{array}'{_did_you_mean(array, inputs)}: 'in' names a parameter of the kernel",
                  span)
        if target.kind != "input":
            _fail(f"'{array}' is a result; 'in' names a parameter of the kernel, whose array the result updates in "
                  f"place", span)
        holder = next((t.name for t in self.tensors.values() if t.stored_in == array), None)
        if holder is not None:
            _fail(f"'{array}' already holds '{holder}'; a parameter holds one result", span)
        out = self.tensors[name]
        if out.dtype != target.dtype:
            _fail(f"'{name}' is {out.dtype} and '{array}' is {target.dtype}: a result is kept in a parameter of its "
                  f"own dtype", span)
        if [self._dim_key(d) for d in out.shape] != [self._dim_key(d) for d in target.shape]:
            shown = ", ".join(format_expr(d) for d in target.shape)
            _fail(f"'{name}' has shape [{', '.join(format_expr(d) for d in out.shape)}] and '{array}' [{shown}]: a "
                  f"result is kept in a parameter of its own shape", span)
        out.stored_in, out.stored_in_span = array, span

    def _dim_key(self, dim: ast.Expr):
        """A dimension's value where it is known, else its text (a `param`)."""
        value = self._const_value(dim)
        return value if value is not None else format_expr(dim)

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

    # -------------------------------------------------- loop blocks

    def _body(self, items: list, loops: dict[str, ast.Expr], order: list[int]) -> list[StmtInfo]:
        """The statements of a kernel body or a block's body, in source order; `loops`: the enclosing blocks'
        iterators and bounds, `order`: their positions (program order)."""
        stmts: list[StmtInfo] = []
        for position, item in enumerate(items):
            if isinstance(item, ast.Block):
                stmts += self._block(item, loops, order + [position])
            else:
                stmts.append(self._statement(item, loops, order + [position]))
        return stmts

    def _block(self, block: ast.Block, loops: dict[str, ast.Expr], order: list[int]) -> list[StmtInfo]:
        name = block.iterator.name
        kind = self._not_an_iterator(name)
        if kind is not None:
            _fail(f"'{name}' is a {kind}, not an iterator; a loop block needs a fresh name", block.iterator.span)
        if name in loops:
            _fail(f"loop iterator '{name}' shadows the enclosing loop's iterator '{name}'", block.iterator.span)
        self._affine(block.bound, [], "loop bound")
        if not block.body:
            _fail(f"the loop block 'for {name}' has no statements", block.span)
        # Inside the block a statement may read what any statement of the block computes (at earlier steps, which
        # the model proves: compiler/model/recurrences.py).
        self.readable.update(stmt.target for stmt in ast.statements(block.body))
        return self._body(block.body, {**loops, name: block.bound}, order)

    # -------------------------------------------------- statements

    def _statement(self, stmt: ast.Statement, loops: dict[str, ast.Expr], order: list[int]) -> StmtInfo:
        target_span = _word_span(stmt.span, stmt.target)
        info = self._check_target(stmt, target_span)
        lhs = self._check_lhs_iterators(stmt.iters, [])
        for name in loops:
            if name not in lhs:
                _fail(f"{stmt.target} is inside the loop block 'for {name}' but does not index its tensor by {name}: "
                      f"write {stmt.target}[{name}, ...] (each step computes its own elements; how many steps are kept "
                      f"in memory is the schedule's decision)", target_span)
        if info is not None and len(stmt.iters) != len(info.shape):
            _fail(self._rank_message(stmt.target, len(info.shape), len(stmt.iters)), target_span)
        dtype = self._storage_dtype(stmt, info, target_span)
        reduce = stmt.value if isinstance(stmt.value, ast.Reduce) else None
        for cond in stmt.conditions:
            self._reject_reduction_iterators(cond, reduce)
            self._condition(cond, lhs)

        scope = _StmtScope(stmt.target, lhs, lhs=lhs)
        if reduce is not None:
            self._reduction(reduce, scope)
        else:
            self._value(stmt.value, scope)

        extents = self._extents(stmt, info, reduce, scope.plain, loops)
        if info is None:  # a temporary: its shape is the range of its iterators
            shape = [extents[i] for i in lhs]
            self._check_element_count(stmt.target, shape, target_span)
            self.tensors[stmt.target] = TensorInfo(stmt.target, dtype, shape, "temp", stmt.span)
        self.written[stmt.target] = stmt
        self.readable.add(stmt.target)
        return StmtInfo(stmt, dtype, reduce, extents, list(loops), order)

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
            kind = self._not_an_iterator(it.name)
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

    def _not_an_iterator(self, name: str) -> Optional[str]:
        """What `name` is, when it cannot name an iterator; a temporary the kernel writes further down says where."""
        kind = self._name_kind(name)
        if kind == "tensor" and name not in self.tensors:
            return f"tensor (written at line {self.targets[name].span.line})"
        return kind

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
        if red.combine is not None and red.combine.startswith("fast_accum") and red.op != "sum":
            _fail(f"`combine {red.combine}` lets a matrix unit add FP8 products in reduced precision; a {red.op} "
                  f"adds nothing: declare it on a sum", red.span)
        inner = scope.inner(names)
        for cond in red.conditions:
            self._condition(cond, inner.iters)
        self._value(red.body, inner)
        if red.init is not None:
            self._start(red, names, scope)
        return names

    def _start(self, red: ast.Reduce, names: list[str], scope: _StmtScope) -> None:
        """`sum(k) body from init`: a value of the element alone, computed once before its first term."""
        if red.op != "sum":
            from tdsl.frontend.printer import expr_text

            lhs = ", ".join(scope.lhs)
            part = f"{scope.target}_{red.op}[{lhs}]"
            _fail(f"only a sum starts from a value; {red.op} is exact in any order: take the {red.op} in a "
                  f"statement of its own and the start value in the next (`{part} = {red.op}({', '.join(names)}) "
                  f"...`, then `{scope.target}[{lhs}] = {red.op}({expr_text(red.init)}, {part})`)", red.init.span)
        for name in _names_in(red.init):
            if name.name in names:
                _fail(f"the value a sum starts from is computed once per element, before its terms: it cannot use "
                      f"the reduction iterator '{name.name}'", name.span)
        if any(isinstance(e, ast.Reduce) for e in ast.walk(red.init)):
            _fail("the value a sum starts from cannot be a reduction; compute it in a statement of its own",
                  red.init.span)
        if red.combine == "online" or (red.combine or "").startswith("segments"):
            _fail(f"a sum that starts from a value cannot declare `combine {red.combine}`: its first term is the "
                  f"start value; declare strict order (the default), reassoc or deterministic", red.init.span)
        self._value(red.init, scope)

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
                message = (f"'{expr.op}' is only allowed in indices and in a statement's conditions (`T[i : ...]`), not in "
                           f"values (a `where` compares values); use '/' to divide values, or indices such as "
                           f"`X[2 * j]`, `X[2 * j + 1]`")
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
        if acc.tensor == scope.target:
            self._self_read(acc, scope)
            return
        if acc.tensor in self.readable and acc.tensor not in self.tensors:
            self._later_read(acc, scope)
            return
        info = self._readable_tensor(acc, scope)
        if len(acc.indices) != len(info.shape):
            _fail(self._rank_message(acc.tensor, len(info.shape), len(acc.indices)), acc.span)
        for dim, index in enumerate(acc.indices):
            self._affine(index, scope.iters, "index")
            if isinstance(index, ast.Name) and index.name in scope.iters:
                scope.plain.append((index.name, info.shape[dim], acc))
            elif (mirrored := self._mirrored(index, info.shape[dim], scope.iters)) is not None:
                scope.plain.append((mirrored, info.shape[dim], acc))

    def _mirrored(self, index: ast.Expr, extent: ast.Expr, iters: list[str]) -> Optional[str]:
        """The iterator of an index that runs a dimension backwards, `N - 1 - r` for a dimension of extent N: r
        takes the values 0 .. N - 1 exactly when the index does, so it sizes r as a plain index would."""
        if not (isinstance(index, ast.BinOp) and index.op == "-" and isinstance(index.rhs, ast.Name)
                and index.rhs.name in iters):
            return None
        if any(n.name in iters for n in _names_in(index.lhs)):
            return None
        last = ast.BinOp("-", extent, ast.IntLit(1))
        return index.rhs.name if self._same_extent(index.lhs, last) else None

    def _self_read(self, acc: ast.Access, scope: _StmtScope) -> None:
        """A recurrence: the statement reads elements of its own tensor.  Its rank is the number of left-hand
        iterators; that it reads only elements computed before the reading instance is proven on the model, with
        isl (compiler/model/recurrences.py).  It does not size an iterator (the tensor's shape may be the one
        this statement defines)."""
        rank = len(scope.lhs)
        if len(acc.indices) != rank:
            _fail(self._rank_message(acc.tensor, rank, len(acc.indices)), acc.span)
        for index in acc.indices:
            self._affine(index, scope.iters, "index")

    def _later_read(self, acc: ast.Access, scope: _StmtScope) -> None:
        """A read of a temporary that a later statement of the enclosing loop block computes (at an earlier step,
        proven on the model): its rank is that statement's number of left-hand iterators; like a recurrence's read,
        it does not size an iterator."""
        rank = len(self.targets[acc.tensor].iters)
        if len(acc.indices) != rank:
            _fail(self._rank_message(acc.tensor, rank, len(acc.indices)), acc.span)
        for index in acc.indices:
            self._affine(index, scope.iters, "index")

    def _readable_tensor(self, acc: ast.Access, scope: _StmtScope) -> TensorInfo:
        name = acc.tensor
        span = _word_span(acc.span, name)
        if name in self.readable:
            return self.tensors[name]
        if name in self.tensors or name in self.targets:
            stmt = self.targets.get(name)
            where = f" (it is computed at line {stmt.span.line})" if stmt is not None else " (it is never computed)"
            _fail(f"tensor '{name}' is read before it is defined{where}", span)
        if name in self.sizes:
            _fail(f"'{name}' is a {self._name_kind(name)}, not a tensor", span)
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
