"""Tile masks as whole-tile vector work on the 910B: affine comparisons -> `T.tile.compare` on lane indices.

A tile's mask (`tileir.Tile.mask`) is a conjunction of affine comparisons over the tile's iterators,
the enclosing loop variables and constants (`i <= 69`, `l_i >= j`).  The 910B vector core has no
per-lane predicates in whole-tile code, so each comparison becomes one of two things:

* it involves the tile's last (column) iterator with coefficient +-1: a test of the lane position
  `lane OP threshold`, where the threshold may depend on the row and the loop variables -- emitted as
  `T.tile.compare(mask, lanes, threshold, MODE)` against a buffer holding 0, 1, 2, ... (made with
  `T.tile.createvecindex`), whose bit mask then drives `T.tile.select`;
* it does not involve the column: a scalar condition, emitted as a Python `if` on the row.

Out-of-bounds lanes need no test where the data movement already clips them: T.copy between GM and an
on-chip buffer clips the GM region to the tensor (tilelang-ascend src/op/ascend.cc,
compute_valid_extent), so a mask that only states tensor bounds is free for loads and stores.
"""

from __future__ import annotations

from dataclasses import dataclass

from tdsl.compiler.lower import tileir as T
from tdsl.compiler.errors import BackendError

MODES = {"<=": "LE", ">=": "GE", "<": "LT", ">": "GT", "==": "EQ"}
_FLIP = {"<=": ">=", ">=": "<=", "<": ">", ">": "<", "==": "=="}
NEGATE = {"<=": ">", ">": "<=", "<": ">=", ">=": "<", "==": "!="}


def atoms(mask: T.Expr | None) -> list:
    """The comparisons of a conjunction."""
    if mask is None:
        return []
    if isinstance(mask, T.Bin) and mask.op == "and":
        return atoms(mask.lhs) + atoms(mask.rhs)
    if isinstance(mask, T.Bin) and mask.op in MODES:
        return [_without_cancelled(mask)]
    raise BackendError(
        f"the elements of this tile are chosen by {_shortened(expr_text(mask))} (l_x is loop x of the schedule), "
        f"which is not "
        f"a conjunction of comparisons: the 910B's vector core selects lanes by comparisons joined with 'and' only. "
        f"Such a condition usually comes from a statement computed at a loop where its instances fall at several "
        f"offsets (compute_at or recompute_at of a stencil's producer): keep that statement in a loop nest of its "
        f"own, or compile for ascend-950 or nvidia")


def _shortened(text: str, limit: int = 240) -> str:
    """A condition's text, cut where it is long (a compute_at stencil's several offsets gave 2,500 characters of
    disjunctions before the hint: probe II)."""
    return text if len(text) <= limit else f"{text[:limit]} ... ({len(text):,} characters)"


def _without_cancelled(atom: T.Bin) -> T.Bin:
    """An affine comparison in which a variable cancels (`j > j`, `i + j <= j`) written without it: it does not
    depend on that variable (`mentions`), so it is printed where the variable may have no name (a row's
    condition, when the variable is the tile's column)."""
    try:
        coefs, const = _difference(atom)
    except BackendError:
        return atom
    named = {v.name for side in (atom.lhs, atom.rhs) for v in T.expr_vars(side)}
    if named <= set(coefs):
        return atom
    return T.Bin(atom.op, expr_of((coefs, 0)), T.Const(-const))


def conjuncts(mask: T.Expr | None) -> list:
    """The parts of a conjunction, whatever each part is (a comparison, a disjunction, ...): never refuses."""
    if mask is None:
        return []
    if isinstance(mask, T.Bin) and mask.op == "and":
        return conjuncts(mask.lhs) + conjuncts(mask.rhs)
    return [mask]


def conjunction(parts: list) -> T.Expr | None:
    out = None
    for p in parts:
        out = p if out is None else T.Bin("and", out, p)
    return out


def linear(e: T.Expr) -> tuple | None:
    """(coefficients {name: int}, constant) of an affine integer expression, None if it is not affine."""
    if isinstance(e, T.Const) and isinstance(e.value, int):
        return {}, e.value
    if isinstance(e, T.Const) and isinstance(e.value, float) and e.value.is_integer():  # `where(t == 0, ...)`
        return {}, int(e.value)
    if isinstance(e, T.Var):
        return {e.name: 1}, 0
    if isinstance(e, T.Neg):
        inner = linear(e.operand)
        return None if inner is None else _scale(inner, -1)
    if isinstance(e, T.Bin) and e.op in ("+", "-"):
        a, b = linear(e.lhs), linear(e.rhs)
        if a is None or b is None:
            return None
        return _add(a, _scale(b, 1 if e.op == "+" else -1))
    if isinstance(e, T.Bin) and e.op == "*":
        a, b = linear(e.lhs), linear(e.rhs)
        if a is None or b is None:
            return None
        if not a[0]:
            return _scale(b, a[1])
        if not b[0]:
            return _scale(a, b[1])
    return None


def _scale(form, k):
    return {n: c * k for n, c in form[0].items() if c * k}, form[1] * k


def _add(a, b):
    coefs = dict(a[0])
    for n, c in b[0].items():
        coefs[n] = coefs.get(n, 0) + c
    return {n: c for n, c in coefs.items() if c}, a[1] + b[1]


def expr_of(form) -> T.Expr:
    """An expression for a linear form (names become variables)."""
    out = None
    for name, c in sorted(form[0].items()):
        term = T.Var(name) if c == 1 else (T.Neg(T.Var(name)) if c == -1 else T.Bin("*", T.Const(c), T.Var(name)))
        out = term if out is None else T.Bin("+", out, term)
    if out is None:
        return T.Const(form[1])
    return out if form[1] == 0 else T.Bin("+", out, T.Const(form[1]))


def check_affine(atom: T.Bin) -> None:
    """Raise the 910B's refusal unless both sides of the comparison are affine in loop variables and sizes."""
    _difference(atom)


def _difference(atom: T.Bin):
    lhs, rhs = linear(atom.lhs), linear(atom.rhs)
    if lhs is None or rhs is None:
        raise BackendError(f"the mask comparison {_shortened(expr_text(atom))} is not affine (a piecewise bound, "
                           f"as a triangular range (`sum(k : k >= i)`) or `reverse` or `skew` of a loop, then "
                           f"`split`, give at some sizes; a comparison of values; or a division of indices); no "
                           f"ascend-910b form: keep the masked loop whole in one tile (do not split a triangular "
                           f"range's loop), split a loop before reversing or skewing it, or compile for ascend-950 "
                           f"or nvidia")
    return _add(lhs, _scale(rhs, -1))


@dataclass
class LaneTest:
    """`lane MODE threshold` for the lanes 0..size-1 of the column axis."""
    mode: str
    threshold: T.Expr


def lane_test(atom: T.Bin, column: str, offset: T.Expr) -> LaneTest | None:
    """The atom as a test of the lane position (column = offset + lane), or None if it does not involve column."""
    coefs, const = _difference(atom)
    a = coefs.pop(column, 0)
    if a == 0:
        return None
    if a not in (1, -1):
        raise BackendError(f"the mask comparison {expr_text(atom)} scales the tile's column {column} by {a}; only +-1 is "
                           f"generated for ascend-910b")
    off = linear(offset)
    if off is None:  # a tile that starts at a maximum (a triangular loop's first full tile): a run-time threshold
        # a * lane + a * offset + rest OP 0, with `rest` the atom's other terms
        if a == 1:
            return LaneTest(MODES[atom.op], T.Bin("-", expr_of(_scale((coefs, const), -1)), offset))
        return LaneTest(MODES[_FLIP[atom.op]], T.Bin("-", expr_of((coefs, const)), offset))
    rest = _add((coefs, const), _scale(off, a))  # a * lane + rest OP 0
    if a == 1:
        return LaneTest(MODES[atom.op], expr_of(_scale(rest, -1)))
    return LaneTest(MODES[_FLIP[atom.op]], expr_of(rest))


def implied_by_bounds(atom: T.Bin, indices: list, dims: list) -> bool:
    """Whether the atom holds for every element inside the tensor: `x <= c` with c >= dim - 1 or `x >= c` with
    c <= 0, where x is the index expression of one of the tensor's dimensions (a DMA clips exactly those)."""
    coefs, const = _difference(atom)
    # normalise to `form <= 0` (integers)
    form = {"<=": (coefs, const), "<": (coefs, const + 1)}.get(atom.op)
    if form is None and atom.op in (">=", ">"):
        neg = _scale((coefs, const), -1)
        form = neg if atom.op == ">=" else (neg[0], neg[1] + 1)
    if form is None:
        return False
    for x, dim in zip(indices, dims):
        xf = linear(x)
        if xf is None or not isinstance(dim, int):
            continue
        if form[0] == xf[0] and form[0]:  # x + (const - x_const) <= 0  ->  x <= c
            c = xf[1] - form[1]
            if c >= dim - 1:
                return True
        if _scale(form, -1)[0] == xf[0] and form[0]:  # -x + k <= 0  ->  x >= c
            c = form[1] + xf[1]
            if c <= 0:
                return True
    return False


def upper_bound_on(atom: T.Bin, name: str) -> bool:
    """Whether the comparison bounds `name` from above (it fails for every value above one that fails it)."""
    return _bound_side(atom, name) > 0


def lower_bound_on(atom: T.Bin, name: str) -> bool:
    """Whether the comparison bounds `name` from below (it fails for every value below one that fails it)."""
    return _bound_side(atom, name) < 0


def _bound_side(atom: T.Bin, name: str) -> int:
    """+1 if the comparison bounds `name` from above, -1 from below, 0 if it does not mention it."""
    coefs, _ = _difference(atom)
    c = coefs.get(name, 0)
    below = atom.op in ("<=", "<")  # the difference lhs - rhs stays below a constant
    return 0 if c == 0 or atom.op not in ("<=", "<", ">=", ">") else (1 if (c > 0) == below else -1)


def substitute(e: T.Expr, name: str, value: T.Expr) -> T.Expr:
    """e with the variable `name` replaced by `value`."""
    if isinstance(e, T.Var):
        return value if e.name == name else e
    if isinstance(e, T.Bin):
        return T.Bin(e.op, substitute(e.lhs, name, value), substitute(e.rhs, name, value))
    if isinstance(e, T.Neg):
        return T.Neg(substitute(e.operand, name, value))
    if isinstance(e, T.Select):
        return T.Select(substitute(e.cond, name, value), substitute(e.then, name, value),
                        substitute(e.other, name, value))
    return e


def always_holds(atom: T.Bin, lowers: dict, uppers: dict | None = None) -> bool:
    """Whether the comparison holds for all values of its variables, each at least its lower bound in `lowers`
    (a loop's first value) and, where `uppers` is given, at most its upper bound there (a loop's last value):
    `l_i >= 0` for a loop from 0, `64 * qo < 4096` for qo up to 63.  False for a comparison that is not affine
    (a bound with a `where`, the maximum of two loop-dependent bounds): nothing is proven, the test stays."""
    try:
        coefs, const = _difference(atom)  # lhs - rhs = sum(coefs * vars) + const
    except BackendError:
        return False
    sign = {">=": 1, ">": 1, "<=": -1, "<": -1}.get(atom.op)
    if sign is None:
        return False
    least = sign * const  # the smallest value of sign * diff: each term at the bound that makes it least
    for n, c in coefs.items():
        bound = lowers.get(n) if sign * c >= 0 else (uppers or {}).get(n)
        if bound is None:
            return False
        least += sign * c * bound
    return least >= 0 if atom.op in (">=", "<=") else least > 0


def mentions(atom: T.Bin, name: str) -> bool:
    """Whether the comparison depends on the variable `name`; for one that is not affine, whether it names it."""
    try:
        return _difference(atom)[0].get(name, 0) != 0
    except BackendError:
        if not (_index_only(atom.lhs) and _index_only(atom.rhs)):
            raise  # a comparison of values: the refusal says so
        return any(v.name == name for side in (atom.lhs, atom.rhs) for v in T.expr_vars(side))


def _index_only(e) -> bool:
    """Whether an expression is index arithmetic (variables, integers, `where` of them), not values."""
    if isinstance(e, (T.Var, T.Const)):
        return True
    if isinstance(e, T.Bin):
        return _index_only(e.lhs) and _index_only(e.rhs)
    if isinstance(e, T.Neg):
        return _index_only(e.operand)
    if isinstance(e, T.Select):
        return _index_only(e.cond) and _index_only(e.then) and _index_only(e.other)
    return False


def expr_text(e) -> str:
    """A tile-program expression, readably (for messages)."""
    if isinstance(e, T.Const):
        return repr(e.value)
    if isinstance(e, T.Var):
        return e.name
    if isinstance(e, T.Load):
        return f"{e.tensor}[{', '.join(expr_text(i) for i in e.indices)}]"
    if isinstance(e, T.Reg):
        return e.stmt
    if isinstance(e, T.Bin):
        return f"({expr_text(e.lhs)} {e.op} {expr_text(e.rhs)})"
    if isinstance(e, T.Neg):
        return f"-{expr_text(e.operand)}"
    if isinstance(e, T.Call):
        return f"{e.func}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, T.Round):
        return f"{e.dtype}({expr_text(e.operand)})"
    if isinstance(e, T.Select):
        return f"where({expr_text(e.cond)}, {expr_text(e.then)}, {expr_text(e.other)})"
    return type(e).__name__
