"""What the parts of the 910B printer share: its index code, operands, the constants of the API, and small
walks over tile-program values."""

from __future__ import annotations

from dataclasses import dataclass
import math

from tdsl.backends.common.dtypes import ASCEND_910B
from tdsl.backends.tilelang.emit import index_code as _tilelang_index_code
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.tileir import expr_vars
from tdsl.compiler.lower.tileir import simplify


TL_DTYPES = ASCEND_910B  # no FP8 type: E4M3 tensors are bytes (backends/common/dtypes.py)

# Variables this printer adds to the tile program's expressions ('__' names: no program name starts so).
ROW = "__row"  # the row of a tile computed row by row


def index_code(e: T.Expr, names: dict) -> str:
    """TileLang's index code in the calls tilelang-ascend 0.1.4 has (backends/ascend910b/api.py): T.And but no
    T.Or and no T.if_then_else, so `a or b` is a comparison of the conditions as integers and `x if c else y`
    is y + (x - y) * c."""
    return _tilelang_index_code(_integral(e), names, disjunction='(T.Cast("int32", {}) + T.Cast("int32", {}) > 0)',
                                select='({2} + ({1} - {2}) * T.Cast("int32", {0}))')


def _integral(e: T.Expr) -> T.Expr:
    """Integral float constants as integers (`where(t == 0, ...)` compares an iterator with 0.0): index code is
    int32, and TIR does not compare an int32 with a float."""
    if isinstance(e, T.Const) and isinstance(e.value, float) and e.value.is_integer():
        return T.Const(int(e.value))
    if isinstance(e, T.Bin):
        return T.Bin(e.op, _integral(e.lhs), _integral(e.rhs))
    if isinstance(e, T.Neg):
        return T.Neg(_integral(e.operand))
    if isinstance(e, T.Select):
        return T.Select(_integral(e.cond), _integral(e.then), _integral(e.other))
    return e


@dataclass
class _Opnd:
    kind: str  # tile | scalar
    code: str  # a UB buffer name (tile) or a scalar PrimExpr


def _exact_reciprocal(code: str) -> str | None:
    """1/c as code when c is a literal power of two whose reciprocal is a normal f32 (then x / c == x * (1/c))."""
    try:
        c = float(code.strip("()"))
    except ValueError:
        return None
    m, e = math.frexp(abs(c)) if c else (0.0, 0)
    if m != 0.5 or not -125 <= 1 - e <= 127:
        return None
    return repr(1.0 / c)


def _and_code(conds: list) -> str:
    out = conds[0]
    for c in conds[1:]:
        out = f"T.And({out}, {c})"
    return out


def _atom_text(atom: T.Bin) -> str:
    """A mask comparison as the program's names spell it (for messages)."""
    names = {v.name: v.name for side in (atom.lhs, atom.rhs) for v in expr_vars(side)}
    return f"{index_code(simplify(atom.lhs), names)} {atom.op} {index_code(simplify(atom.rhs), names)}"


def _loop_bounds(kernel: T.TileKernel) -> tuple[dict, dict]:
    """(loop variable -> its first value, loop variable -> its last value), each where it is a constant (grid
    axes and serial loops)."""
    lowers, uppers = {}, {}

    def add(var, lower, end):  # end: one past the last value
        lower, end = simplify(lower), simplify(end)
        if isinstance(lower, T.Const):
            lowers[var] = lower.value
        if isinstance(end, T.Const):
            uppers[var] = end.value - 1

    for axis in kernel.grid:
        for var, lower, n in zip(axis.vars, axis.lowers, axis.extents):
            add(var, lower, T.Bin("+", lower, n))

    def walk(ops):
        for op in ops:
            if isinstance(op, T.SerialLoop):
                add(op.var, op.lower, op.upper)
                walk(op.body)

    walk(kernel.body)
    return lowers, uppers


def _load_uses(op) -> dict:
    """repr(load) -> how often the op's expression reads it (a load read once may be overwritten by its reader)."""
    uses: dict = {}

    def walk(e):
        if isinstance(e, T.Load):
            uses[repr(e)] = uses.get(repr(e), 0) + 1
        elif isinstance(e, T.Dot):
            walk(e.lhs)
            walk(e.rhs)
        elif isinstance(e, T.Reduce):
            walk(e.operand)
        elif isinstance(e, T.Select):  # a comparison of values reads its loads too
            walk(e.cond)
        for c in subexpressions(e):
            walk(c)

    for expr in T.op_expressions(op):
        walk(expr)
    return uses


def subexpressions(e):
    """The operands of an elementwise value (tileir.value_operands); a tile reduction or product is a whole
    step of its own, not looked into here."""
    return [] if isinstance(e, (T.Reduce, T.Dot)) else T.value_operands(e)
