"""Where a use can tell the zero a max or min returns, +0.0 or -0.0.

`max` and `min` are IEEE 754-2019's maximum and minimum (docs/interpreter.md): -0.0 below +0.0.  A GPU's or an
NPU's max compares, and returns either of two equal zeros; the backends print the IEEE form where it matters,
which costs instructions per term (on the H100 about 15 % of the flash-attention kernels, whose row maximum has
128 terms per row and key block).  It matters only where the sign of that zero can reach a result: through
1 / x, a product, a sum of zeros, a store of a kernel result.  It cannot where every path from the max to a
result passes through an operation that gives the same value for +0.0 and -0.0 -- exp and exp2 (1), log (-inf),
abs (+0.0), sigmoid (0.5), a comparison (-0.0 == +0.0), a `where`'s condition: the online softmax's row maximum
reaches its results only through exp(S - m).  There the hardware's max gives the same results.

The answer is per statement (a max / min reduction stores its result) and per `max(a, b)` / `min(a, b)` call of
a value (by the node's identity in the scheduled model's expressions).  Conservative: a zero's sign is taken to
pass through every other operation, into the tensor a statement stores and to every statement reading it;
a kernel result shows it.
"""

from __future__ import annotations

from tdsl.frontend import ast
from tdsl.compiler.model.online import MAX, REF
from tdsl.compiler.model.program import KernelModel, Stmt

# A zero's sign does not reach the result of these (one value for +0.0 and -0.0).
SIGN_BLIND = frozenset({"exp", "exp2", "log", "abs", "sigmoid", "fast_sigmoid"})


class ZeroSigns:
    """Which stored tensors and which max / min calls of a kernel's values have a zero sign some use can see."""

    def __init__(self, model: KernelModel):
        self.model = model
        self.shown_tensors = self._tensors()
        self.shown_calls: set[int] = set()
        for stmt in model.stmts:
            shown = stmt.name in self.shown_tensors
            for root, names in _roots(stmt):
                _walk(root, shown, names, self.shown_calls, lambda tensor: None)

    def reduction(self, stmt: str) -> bool:
        """Whether the zero a max / min reduction stores can be seen (its IEEE form is needed)."""
        return stmt in self.shown_tensors

    def call(self, node: ast.Call) -> bool:
        """Whether the zero this `max(a, b)` / `min(a, b)` of a value returns can be seen."""
        return id(node) in self.shown_calls

    def _tensors(self) -> set[str]:
        """The tensors whose stored zeros' signs reach a kernel result, to a fixed point (a statement reads tensors
        of earlier statements, and a recurrence its own)."""
        shown = {t.name for t in self.model.outputs()}
        changed = True
        while changed:
            changed = False
            for stmt in self.model.stmts:
                if stmt.name not in shown:
                    continue
                reached: set[str] = set()
                for root, names in _roots(stmt):
                    _walk(root, True, names, set(), reached.add)
                new = reached - shown
                if new:
                    shown |= new
                    changed = True
        return shown


def _walk(e: ast.Expr, shown: bool, names: dict, calls: set, read) -> None:
    """Visit `e`, whose own zero sign is seen if `shown`: `read(tensor)` for each tensor whose sign reaches it
    (`names`: the tensors a rescale factor's REF and MAX stand for), each max / min call whose sign does into
    `calls`."""
    if not shown:
        return  # nothing under it can be seen through it
    if isinstance(e, ast.Access):
        read(e.tensor)
    elif isinstance(e, ast.Name):
        if e.name in names:
            read(names[e.name])
    elif isinstance(e, ast.Call):
        if e.func in ("max", "min"):
            calls.add(id(e))
        if e.func == "where":  # the condition compares: only the two branches pass a sign
            for branch in e.args[1:]:
                _walk(branch, True, names, calls, read)
        elif e.func not in SIGN_BLIND:
            for arg in e.args:
                _walk(arg, True, names, calls, read)
    elif isinstance(e, ast.Neg):
        _walk(e.operand, True, names, calls, read)
    elif isinstance(e, ast.BinOp):
        _walk(e.lhs, True, names, calls, read)
        _walk(e.rhs, True, names, calls, read)
    # literals, iterators, sizes and comparisons pass no tensor's zero


def _roots(stmt: Stmt) -> list:
    """The expressions whose value the statement stores, each with the tensors its special names stand for: its
    value (a reduction's term), the value a sum starts from, the factor an online sum is rescaled by."""
    roots = [(stmt.value, {})]
    if stmt.init is not None:
        roots.append((stmt.init, {}))
    if stmt.rescale is not None:
        roots.append((stmt.rescale.factor, {REF: stmt.rescale.stat, MAX: stmt.rescale.stat}))
    return roots
