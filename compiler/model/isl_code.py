"""Turn isl quasi-affine objects into tile-program expressions (`tileir.Expr`).

isl's AST builder already knows how to print a piecewise quasi-affine
function or a set as a compact expression (`(M - 1) / 64 + 1`,
`i >= 64 * io && M >= i + 1`); we ask it for that expression tree and
translate its nodes.  Loop variables and iterators are turned into isl
parameters first, so the expressions only mention names.
"""

from __future__ import annotations

import re
from functools import lru_cache

import islpy as isl

from tdsl.compiler.lower.tileir import Bin, Const, Expr, Neg, Select, Var

_OPS = {
    isl.ast_expr_op_type.add: "+",
    isl.ast_expr_op_type.sub: "-",
    isl.ast_expr_op_type.mul: "*",
    isl.ast_expr_op_type.div: "//",  # exact division
    isl.ast_expr_op_type.fdiv_q: "//",
    isl.ast_expr_op_type.pdiv_q: "//",
    isl.ast_expr_op_type.pdiv_r: "%",
    isl.ast_expr_op_type.zdiv_r: "%",  # only ever compared with 0, so the sign convention does not matter
    isl.ast_expr_op_type.min: "min",
    isl.ast_expr_op_type.max: "max",
    isl.ast_expr_op_type.eq: "==",
    isl.ast_expr_op_type.le: "<=",
    isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=",
    isl.ast_expr_op_type.gt: ">",
    isl.ast_expr_op_type.and_: "and",
    isl.ast_expr_op_type.and_then: "and",
    isl.ast_expr_op_type.or_: "or",
    isl.ast_expr_op_type.or_else: "or",
}


def ast_to_expr(node: isl.AstExpr) -> Expr:
    kind = node.get_type()
    if kind == isl.ast_expr_type.int:
        return Const(node.get_val().to_python())
    if kind == isl.ast_expr_type.id:
        return Var(node.get_id().get_name())
    op = node.get_op_type()
    args = [ast_to_expr(node.get_op_arg(i)) for i in range(node.get_op_n_arg())]
    if op == isl.ast_expr_op_type.minus:
        return Neg(args[0])
    if op in (isl.ast_expr_op_type.select, isl.ast_expr_op_type.cond):
        return Select(args[0], args[1], args[2])
    if op not in _OPS:
        raise NotImplementedError(f"isl expression operator {op}")
    result = args[0]
    for arg in args[1:]:
        result = Bin(_OPS[op], result, arg)
    return result


def as_params(s: isl.Set) -> isl.Set:
    """Every set dimension becomes a named parameter (so isl prints it by name)."""
    n = s.dim(isl.dim_type.set)
    names = [s.get_dim_name(isl.dim_type.set, i) for i in range(n)]
    if any(name is None for name in names):
        raise ValueError(f"unnamed dimension in {s}")
    return s.move_dims(isl.dim_type.param, s.dim(isl.dim_type.param), isl.dim_type.set, 0, n).params()


def set_to_expr(s: isl.Set, context: isl.Set = None) -> Expr:
    """A boolean expression: membership in `s` (a parameter-only set), simplified under `context`."""
    if context is not None:
        s = s.gist(context)
    if s.plain_is_universe():
        return Const(1)
    build = isl.AstBuild.from_context(context if context is not None else isl.Set.universe(s.get_space()))
    return ast_to_expr(build.expr_from_set(s))


def pw_aff_to_expr(pa: isl.PwAff, context: isl.Set = None) -> Expr:
    """An integer expression of a parameter-only piecewise quasi-affine function."""
    if context is not None:
        pa = pa.gist(context)
    build = isl.AstBuild.from_context(context if context is not None else isl.Set.universe(pa.get_domain_space()))
    return ast_to_expr(build.expr_from_pw_aff(pa.coalesce()))


def integer_bounds(pa: isl.PwAff) -> tuple[isl.Val, isl.Val]:
    """(min, max) of a piecewise affine function that takes integer values everywhere on its domain.

    isl may write such a function with rational coefficients on a piece whose equalities make it integral
    (`(io - 2)/3` where `3jo = io + 1`: the span of a tile whose loops split by 3 and 8); min_val and max_val
    refuse those pieces.  Their floor is the same function, written with integer divisions, which they take."""
    whole = pa.floor()
    return whole.min_val(), whole.max_val()


# A symbolic tensor dimension is kept in the model as affine text in isl's syntax (`(N + 1)`, `floor((N)/2)`):
# the model reads it back into isl sets.  Generated code needs it in its own syntax, so both go through the
# expression tree: `dimension_text` writes one for the model, `dimension_expr` reads one for the printers
# (backends/common/python_expr.py prints it as Python).
_ISL_WORDS = frozenset({"floor", "mod", "min", "max"})  # the words of a dimension's text that name no size


def dimension_text(pa: isl.PwAff) -> str:
    """A parameter-only quasi-affine function (one piece) as the model's dimension text."""
    return _isl_text(pw_aff_to_expr(pa))


def _isl_text(e: Expr) -> str:
    if isinstance(e, Const):
        return str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Neg):
        return f"(-{_isl_text(e.operand)})"
    if isinstance(e, Bin) and e.op in ("+", "-", "*"):
        return f"({_isl_text(e.lhs)} {e.op} {_isl_text(e.rhs)})"
    if isinstance(e, Bin) and e.op == "//":
        return f"floor(({_isl_text(e.lhs)})/{_isl_text(e.rhs)})"
    if isinstance(e, Bin) and e.op == "%":
        return f"(({_isl_text(e.lhs)}) mod {_isl_text(e.rhs)})"
    if isinstance(e, Bin) and e.op in ("min", "max"):
        return f"{e.op}({_isl_text(e.lhs)}, {_isl_text(e.rhs)})"
    raise ValueError(f"not a dimension: {e!r}")


def dimension_sizes(text: str) -> frozenset:
    """The sizes a dimension's text names."""
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) - _ISL_WORDS


@lru_cache(maxsize=None)
def dimension_expr(text: str) -> Expr:
    """The model's dimension text as an expression tree (what printers print); read once per text, as every
    printer asks for the same few dimensions many times."""
    sizes = sorted(dimension_sizes(text))
    prefix = f"[{', '.join(sizes)}] -> " if sizes else ""
    return pw_aff_to_expr(isl.PwAff.read_from_str(isl.DEFAULT_CONTEXT, f"{prefix}{{ [({text})] }}"))
