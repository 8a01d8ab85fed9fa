"""The integer side of a kernel's checks: an index, a condition or a tensor dimension must be affine, a size
expression may have a value known at compile time, and every iterator of a statement gets an extent.

Iterator extents: a left-hand iterator of a statement writing a kernel
result ranges over the declared result dimension; every other iterator
takes the extent of a dimension it indexes *plainly* (`A[i, k]` gives `k`
the extent of A's dimension 1).  All plain uses must agree.
"""

from __future__ import annotations

from typing import Optional

from tdsl.frontend import ast
from tdsl.frontend.check_common import TensorInfo, _did_you_mean, _fail, _is_float_const
from tdsl.frontend.parser import format_expr

# How each kind of affine context is named in messages.
_AFFINE_PLACES = {"index": "an index", "condition": "a condition", "dimension": "a tensor dimension",
                  "loop bound": "a loop bound"}


class _IndexChecks:
    """Mixed into `_KernelChecker` (frontend/check_kernel.py), whose `sizes`, `_name_kind`, `_unknown_name` and
    `_misplaced` it uses."""

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
        if place in ("dimension", "loop bound"):
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
        loops: Optional[dict[str, ast.Expr]] = None,
    ) -> dict[str, ast.Expr]:
        """Each iterator's extent, from the result declaration or its plain uses (which must agree).  An enclosing
        loop block's iterator ranges over the block's bound, whatever the tensors it indexes (the model checks that
        reads and writes stay inside them)."""
        loops = loops or {}
        known: dict[str, tuple[ast.Expr, str]] = {}  # iterator -> (extent, where it came from)
        if info is not None:
            lhs_text = f"{stmt.target}[{', '.join(i.name for i in stmt.iters)}]"
            for it, dim in zip(stmt.iters, info.shape):
                if it.name not in loops:
                    known[it.name] = (dim, lhs_text)
        for name, bound in loops.items():
            known[name] = (bound, f"for {name} < {format_expr(bound)}")
        for name, extent, acc in plain:
            if name in loops:
                continue
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
        conditions = list(stmt.conditions) + (list(reduce.conditions) if reduce is not None else [])
        self._bound_by_conditions([it.name for it in iters if it.name not in known], conditions, known)
        for it in iters:
            if it.name not in known:
                n = it.name
                _fail(f"cannot infer the range of iterator '{n}': index a tensor with it directly (A[{n}]) or "
                      f"backwards (A[N - 1 - {n}] for a dimension of extent N), bound it above by a condition ({n} < N, "
                      f"or {n} <= an iterator that has a range), or run it in a loop block", it.span)
        return {it.name: known[it.name][0] for it in iters}

    def _bound_by_conditions(self, unknown: list[str], conditions: list[ast.Compare], known: dict) -> None:
        """Extents for the iterators of `unknown` that no tensor dimension sizes, from the conditions that bound
        them above: `k < E` gives E and `k <= E` gives E + 1 for E over sizes, `k < i` and `k <= i` give i's
        extent (the condition keeps the domain exact).  Repeated, as a bound may be an iterator sized this way."""
        progress = True
        while progress:
            progress = False
            for cond in conditions:
                for name, inclusive, limit in _upper_bounds(cond):
                    extent = self._extent_below(limit, inclusive, known) if name in unknown and name not in known else None
                    if extent is not None:
                        known[name] = (extent, format_expr(cond))
                        progress = True

    def _extent_below(self, limit: ast.Expr, inclusive: bool, known: dict) -> Optional[ast.Expr]:
        """The extent an iterator takes when it is below `limit` (at most `limit` when `inclusive`), or None when
        the limit is neither an expression over sizes nor an iterator of known extent."""
        if isinstance(limit, ast.Name) and limit.name in known:
            return known[limit.name][0]
        if any(isinstance(e, ast.Name) and e.name not in self.sizes for e in ast.walk(limit)):
            return None  # another iterator, not (yet) sized
        if not inclusive:
            return limit
        if isinstance(limit, ast.BinOp) and limit.op == "-" and isinstance(limit.rhs, ast.IntLit) and limit.rhs.value >= 1:
            rest = limit.rhs.value - 1  # k <= N - 1 gives N, k <= N - 3 gives N - 2
            return limit.lhs if rest == 0 else ast.BinOp("-", limit.lhs, ast.IntLit(rest, limit.span), limit.span)
        return ast.BinOp("+", limit, ast.IntLit(1, limit.span), limit.span)

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


def _upper_bounds(cond: ast.Compare) -> list[tuple[str, bool, ast.Expr]]:
    """(name, inclusive, limit) for each bare name the condition bounds above: `k < E`, `k <= E`, `E > k`,
    `E >= k`, `k == E` (both sides)."""
    flipped = {">": "<", ">=": "<=", "==": "=="}
    sides = ((cond.op, cond.lhs, cond.rhs), (flipped.get(cond.op), cond.rhs, cond.lhs))
    return [(lhs.name, op != "<", rhs) for op, lhs, rhs in sides if op in ("<", "<=", "==") and isinstance(lhs, ast.Name)]

