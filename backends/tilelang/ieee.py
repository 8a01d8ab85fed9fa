"""Where the TileLang printers hide an operand from TVM's simplifier.

TileLang runs TVM's arithmetic simplifier over every kernel, and its rewrite rules treat float arithmetic as
exact: `x - x` and `(x * y) - (x * y)` become 0, `(x + y) - x` becomes `y`, `x - (x + y)` becomes `0 - y`,
`x * 0` and `0 / x` become 0, `x + 0` becomes `x`, `x == x` true and `x != x` false.  None of these holds in
IEEE arithmetic: `inf - inf` is NaN, `(1e8 + 1) - 1e8` is 0 in f32, `-0.0 + 0.0` is +0.0.  (Seen on the GPU:
a min over `(S3[i] - S3[i]) * ...` came out 0 where S3 is infinite, GPU fuzz seed 33; and on the CPU, the
lowered CUDA of `(X[i] + Y[i]) - X[i]` reads Y alone.)

Every rule that relates the two operands of a subtraction or a comparison needs an expression that appears on
both sides (or constants on both, which it folds). So the printer hides one operand of any such operation
whose sides share a tensor, a variable or a constant (`side_to_hide`): behind a round trip TVM does not see
through and nvcc removes (the printer's `HIDDEN`), or, where a side is constants only, as a kernel variable
(`T.alloc_var`), which TVM does not fold.  A literal zero operand of any `+ - * /` is read from such a
variable too (`is_zero`): TVM folds `x * 0`, `0 / x` and `x + 0`; `x - 0` and `0 - x` go the same way for
uniformity.  Sums, products and quotients of shared operands are left as they are: TVM has no float rule for
them (`(a - b) + b`, `a * a`, `a / a` and `2a + 3a` come out as written).
"""

from __future__ import annotations

from tdsl.compiler.lower import tileir as T

COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
CONSTANT = ("constant",)  # the one key of every constant (_leaves): rules fold constants into each other


def _leaves(e: T.Expr) -> set:
    """What an expression reads, as the keys two sides must share for a TVM rule to relate them: a tensor or a
    statement's value by name (a load of it in memory and in registers alike, any index: TVM normalises indices
    before it compares), a variable by name, and any constant as one key (rules fold constants together)."""
    if isinstance(e, T.Const):
        return {CONSTANT}
    if isinstance(e, T.Var):
        return {("variable", e.name)}
    if isinstance(e, T.Load):
        return {("value", e.tensor)}
    if isinstance(e, (T.Reg, T.Running, T.Reference)):
        return {("value", e.stmt)}
    if isinstance(e, T.Neg):
        return _leaves(e.operand)
    if isinstance(e, T.Bin):
        return _leaves(e.lhs) | _leaves(e.rhs)
    if isinstance(e, T.Select):
        return _leaves(e.cond) | _leaves(e.then) | _leaves(e.other)
    if isinstance(e, T.Call):
        return set().union(*(_leaves(a) for a in e.args))
    if isinstance(e, T.Round):
        return _leaves(e.operand)
    return {("opaque", id(e))}  # anything else is printed by its own path, never as one of these operands


def side_to_hide(lhs: T.Expr, rhs: T.Expr) -> str:
    """Which operand of a subtraction or comparison the printer hides: "rhs" where the sides share what they
    read, or "lhs" where the right one is constants only (a round trip of a constant folds away, so the
    other side goes through it); "both constant" where each side is constants only (the left one is then
    computed into a kernel variable: TVM would fold the pair in double precision, not in the program's f32);
    "" where nothing is shared, so no TVM rule relates them."""
    left, right = _leaves(lhs), _leaves(rhs)
    if not left & right:
        return ""
    if right - {CONSTANT}:
        return "rhs"
    return "lhs" if left - {CONSTANT} else "both constant"


def is_zero(e: T.Expr) -> bool:
    """A literal +0.0 or -0.0 (or integer 0) operand."""
    return isinstance(e, T.Const) and not isinstance(e.value, bool) and float(e.value) == 0.0
