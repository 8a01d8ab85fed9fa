"""Print AST expressions back as .tdsl source text (for messages, traces and generated comments)."""

from __future__ import annotations

from tdsl.frontend import ast

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}


def expr_text(e: ast.Expr, parent_prec: int = 0) -> str:
    if isinstance(e, ast.IntLit):
        return str(e.value)
    if isinstance(e, ast.FloatLit):
        return "inf" if e.value == float("inf") else repr(e.value)
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Neg):
        return f"-{expr_text(e.operand, 3)}"
    if isinstance(e, ast.BinOp):
        prec = _PRECEDENCE[e.op]
        # Left-associative: the right operand needs parentheses at equal precedence.
        text = f"{expr_text(e.lhs, prec)} {e.op} {expr_text(e.rhs, prec + 1)}"
        return f"({text})" if prec < parent_prec else text
    if isinstance(e, ast.Compare):
        return f"{expr_text(e.lhs)} {e.op} {expr_text(e.rhs)}"
    if isinstance(e, ast.Access):
        return f"{e.tensor}[{', '.join(expr_text(i) for i in e.indices)}]"
    if isinstance(e, ast.Call):
        return f"{e.func}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, ast.Reduce):
        head = ", ".join(n.name for n in e.iters)
        if e.conditions:
            head += " : " + " and ".join(expr_text(c) for c in e.conditions)
        text = f"{e.op}({head}) {expr_text(e.body)}"
        if e.init is not None:
            text += f" from {expr_text(e.init)}"
        if e.accum:
            text += f" accum {e.accum}"
        if e.combine:
            text += f" combine {e.combine}"
        return text
    raise TypeError(f"not an expression: {e!r}")
