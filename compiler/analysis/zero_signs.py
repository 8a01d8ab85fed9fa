"""Where a use can tell the zero a max or min returns, +0.0 or -0.0.

`max` and `min` are IEEE 754-2019's maximum and minimum (docs/interpreter.md): -0.0 below +0.0.  A GPU's or an
NPU's max compares, and returns either of two equal zeros; the backends print the IEEE form where it matters,
which costs instructions per term (on the H100 about 15 % of the flash-attention kernels, whose row maximum has
128 terms per row and key block).  Where no use can tell the two zeros apart, the hardware's max gives the same
results: the online softmax's row maximum reaches its results only through exp(S - m).

What a use can tell of a value is one of three levels, found from the results down to the leaves:

* NOTHING: the value does not reach a result;
* MAGNITUDE: every change of it but that of a zero's sign can be seen.  exp and exp2 (1), log (-inf), abs (+0.0),
  sigmoid (0.5) and a comparison (-0.0 == +0.0, also in a `where`'s condition) give their argument this level;
* ALL: also the sign of a zero.  A kernel result has it.

Negation, sums, products, a numerator, fma, casts, sqrt, tanh, silu, max and min pass their own level to their
operands: they map a change of a zero's sign to at most a change of a zero's sign (x + -0.0 and x + +0.0 differ
only where x is a zero).  A divisor, and the argument of a reciprocal (rsqrt, fast_inverse), have ALL whatever
the level of their result: 1 / +0.0 and 1 / -0.0 are +inf and -inf, which exp, log, sigmoid or a comparison tell
apart (probe AA of the 29th session: exp(1.0 / m[i]) was +inf or 0 by the row maximum's zero).  A tensor has the
highest level of its reads, and its statement gives its value that level; a max / min needs its IEEE form where
its level is ALL.

The answer is per statement (a max / min reduction stores its result) and per `max(a, b)` / `min(a, b)` call of
a value (by the node's identity in the scheduled model's expressions).
"""

from __future__ import annotations

from tdsl.frontend import ast
from tdsl.compiler.model.online import MAX, REF
from tdsl.compiler.model.program import KernelModel, Stmt

NOTHING, MAGNITUDE, ALL = 0, 1, 2

# Their argument's zero sign does not reach their value (one value for +0.0 and -0.0); other changes do.
SIGN_BLIND = frozenset({"exp", "exp2", "log", "abs", "sigmoid", "fast_sigmoid"})
# Their argument's zero becomes an infinity of its sign: its sign reaches their value as a magnitude.
RECIPROCALS = frozenset({"rsqrt", "fast_inverse"})


class ZeroSigns:
    """Which stored tensors and which max / min calls of a kernel's values have a zero sign some use can see."""

    def __init__(self, model: KernelModel):
        self.model = model
        self.levels = self._tensor_levels()
        self.shown_tensors = {name for name, level in self.levels.items() if level == ALL}
        self.shown_calls: set[int] = set()
        for stmt in model.stmts:
            for root, names in _roots(stmt):
                _walk(root, self.levels.get(stmt.name, NOTHING), names, self.shown_calls, lambda tensor, level: None)

    def reduction(self, stmt: str) -> bool:
        """Whether the zero a max / min reduction stores can be seen (its IEEE form is needed)."""
        return stmt in self.shown_tensors

    def call(self, node: ast.Call) -> bool:
        """Whether the zero this `max(a, b)` / `min(a, b)` of a value returns can be seen."""
        return id(node) in self.shown_calls

    def _tensor_levels(self) -> dict[str, int]:
        """Each tensor's level (NOTHING when absent): the kernel results ALL, every other the highest level of its
        reads, to a fixed point (a statement reads tensors of earlier statements, and a recurrence its own)."""
        levels = {t.name: ALL for t in self.model.outputs()}

        def raise_to(tensor: str, level: int) -> None:
            if level > levels.get(tensor, NOTHING):
                levels[tensor] = level
                nonlocal changed
                changed = True

        changed = True
        while changed:
            changed = False
            for stmt in self.model.stmts:
                for root, names in _roots(stmt):
                    _walk(root, levels.get(stmt.name, NOTHING), names, set(), raise_to)
        return levels


def _walk(e: ast.Expr, level: int, names: dict, calls: set, read) -> None:
    """Visit `e`, of which a use can tell `level`: `read(tensor, level)` for each tensor read, each max / min call
    whose zero can be seen into `calls` (`names`: the tensors a rescale factor's REF and MAX stand for)."""
    if level == NOTHING:
        return
    if isinstance(e, ast.Access):
        read(e.tensor, level)
    elif isinstance(e, ast.Name):
        if e.name in names:
            read(names[e.name], level)
    elif isinstance(e, ast.Call):
        _walk_call(e, level, names, calls, read)
    elif isinstance(e, ast.Neg):
        _walk(e.operand, level, names, calls, read)
    elif isinstance(e, ast.BinOp):
        _walk(e.lhs, level, names, calls, read)
        _walk(e.rhs, ALL if e.op == "/" else level, names, calls, read)  # a divisor's zero is an infinity's sign
    elif isinstance(e, ast.Compare):
        _walk(e.lhs, MAGNITUDE, names, calls, read)
        _walk(e.rhs, MAGNITUDE, names, calls, read)
    # literals, iterators and sizes read no tensor


def _walk_call(e: ast.Call, level: int, names: dict, calls: set, read) -> None:
    if e.func in ("max", "min") and level == ALL:
        calls.add(id(e))
    if e.func == "where":  # the condition compares; each branch is the value where it is taken
        _walk(e.args[0], MAGNITUDE, names, calls, read)
        for branch in e.args[1:]:
            _walk(branch, level, names, calls, read)
        return
    inner = MAGNITUDE if e.func in SIGN_BLIND else ALL if e.func in RECIPROCALS else level
    for arg in e.args:
        _walk(arg, inner, names, calls, read)


def _roots(stmt: Stmt) -> list:
    """The expressions whose value the statement stores, each with the tensors its special names stand for: its
    value (a reduction's term), the value a sum starts from, the factor an online sum is rescaled by."""
    roots = [(stmt.value, {})]
    if stmt.init is not None:
        roots.append((stmt.init, {}))
    if stmt.rescale is not None:
        roots.append((stmt.rescale.factor, {REF: stmt.rescale.stat, MAX: stmt.rescale.stat}))
    return roots
