"""Integer expressions of sizes as Python: the launchers' host loops and tensor shapes, the Triton strides, the
shapes of the fakes that torch.compile traces.  Python's // and % floor, as tdsl's do.

A tensor dimension that is not a number is the model's affine text in isl's syntax (`(N + 1)`, `floor((N)/2)`);
it is read into the expression tree once (compiler/model/isl_code.py `dimension_expr`) and printed here, never
copied as text (`floor` reached a generated module as a name: probe of the 25th session).
"""

from __future__ import annotations

from tdsl.compiler.lower.tileir import Bin, Const, Expr, Neg, Select, Var
from tdsl.compiler.model.isl_code import dimension_expr


def python_text(e: Expr, name=lambda n: n) -> str:
    """An integer expression as Python; `name` spells a variable."""
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Var):
        return name(e.name)
    if isinstance(e, Neg):
        return f"(-{python_text(e.operand, name)})"
    if isinstance(e, Select):
        c, a, b = (python_text(x, name) for x in (e.cond, e.then, e.other))
        return f"({a} if {c} else {b})"
    if isinstance(e, Bin):
        a, b = python_text(e.lhs, name), python_text(e.rhs, name)
        return f"{e.op}({a}, {b})" if e.op in ("min", "max") else f"({a} {e.op} {b})"
    raise TypeError(f"not an index expression: {e!r}")


def dimension_python(d, name=lambda n: n) -> str:
    """A tensor dimension as Python: a number, or the model's text of sizes; `name` spells a size."""
    return str(d) if isinstance(d, int) else python_text(dimension_expr(str(d)), name)
