"""Index arithmetic of the Triton printer: how the tile program's integer expressions (offsets, masks, bounds,
strides) print inside one tile (`Frame`: iterators as broadcast vectors or scalars) or in the launcher."""

from __future__ import annotations

from dataclasses import dataclass

from tdsl.compiler.errors import InternalError
from tdsl.compiler.lower import tileir as T


@dataclass
class Frame:
    """How the tile program's variables print inside one tile: an iterator as a broadcast 1-D vector per axis
    or a scalar; a loop variable or run-time size as its identifier (`variables`, from the module's names)."""

    axes: list  # iterator names, one per tile axis
    vectors: dict  # iterator -> 1-D variable name
    scalars: dict  # iterator -> scalar variable name
    variables: dict  # loop variable / run-time size -> identifier

    def var(self, name: str) -> str:
        if name in self.vectors:
            rank = len(self.axes)
            if rank == 1:
                return self.vectors[name]
            pos = self.axes.index(name)
            index = ", ".join(":" if k == pos else "None" for k in range(rank))
            return f"{self.vectors[name]}[{index}]"
        if name in self.scalars:
            return self.scalars[name]
        if name in self.variables:
            return self.variables[name]
        raise InternalError(f"variable {name} has no name here")


def index_code(e: T.Expr, frame: Frame, python: bool = False, block: bool = False) -> str:
    """Integer/boolean index arithmetic (offsets, masks, bounds).  `block`: the code is the mask of a block
    pointer, so every comparison in it must give a block (see below)."""
    if isinstance(e, T.Const):
        return repr(e.value)
    if isinstance(e, T.Var):
        return frame.var(e.name)
    if isinstance(e, T.Neg):
        return f"(-{index_code(e.operand, frame, python, block)})"
    if isinstance(e, T.Select):
        c = condition_code(e.cond, frame, python, block)
        a, b = (index_code(x, frame, python, block) for x in (e.then, e.other))
        return f"({a} if {c} else {b})" if python else f"tl.where({c}, {a}, {b})"
    if isinstance(e, T.Bin) and e.op in _STRICT and not python and frame is not None and not _varies(e.rhs, frame):
        e = T.Bin(_STRICT[e.op], e.lhs, _plus_one(e.rhs))
    if isinstance(e, T.Bin):
        if e.op in ("and", "or"):
            a, b = (condition_code(x, frame, python, block) for x in (e.lhs, e.rhs))
        else:
            a, b = index_code(e.lhs, frame, python, block), index_code(e.rhs, frame, python, block)
        if e.op in ("min", "max"):
            return f"{e.op}({a}, {b})" if python else f"tl.{e.op}imum({a}, {b})"
        if e.op == "and":
            return f"({a} and {b})" if python else f"({a}) & ({b})"
        if e.op == "or":
            return f"({a} or {b})" if python else f"({a}) | ({b})"
        if e.op in _COMPARISONS and block and not _varies(e, frame):
            # A comparison of scalars in the mask of a block pointer: the Triton interpreter gives it an int32
            # value that it then refuses as a mask, so it is made on a one-lane block (free on the GPU).
            a = f"({a} + tl.zeros([1], tl.int32))"
        if e.op in ("//", "%") and not python:
            return _floor_code(e.op, a, b)
        return f"({a} {e.op} {b})"
    raise TypeError(f"not an index expression: {e!r}")


def _floor_code(op: str, a: str, b: str) -> str:
    """The language's `//` and `%` (floor division, a remainder with the divisor's sign: the divisor is a
    positive literal) in Triton, whose `//` and `%` truncate toward zero like C's: `(-1) // 4` is 0 there and
    -1 in tdsl.  The truncated remainder lies in (-b, b), so adding b and taking it again gives the floor
    remainder, and the dividend minus that remainder divides exactly."""
    mod = f"((({a}) % ({b}) + ({b})) % ({b}))"
    return mod if op == "%" else f"((({a}) - {mod}) // ({b}))"


def condition_code(e: T.Expr, frame: Frame, python: bool = False, block: bool = False) -> str:
    """A condition: index code, where a constant prints as True or False.  The lowering writes a lane set that
    is empty (or whole) as the integer 0 (or 1), and Triton takes only a boolean as the condition of tl.where
    or the mask of a load or store: `tl.where(0, ...)` does not compile on the GPU (the interpreter takes it;
    GPU fuzz seed 38, a tile with no lane in the domain)."""
    if isinstance(e, T.Const):
        return repr(bool(e.value))
    return index_code(e, frame, python, block)


def mask_code(mask: T.Expr, frame: Frame, indices) -> str:
    """The mask of a load or store whose pointer is built from `indices` (a block pointer when they vary)."""
    block = frame is not None and any(_varies(ix, frame) for ix in indices)
    return condition_code(mask, frame, block=block)


_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")

# Triton proves a mask constant over runs of lanes, and so loads and stores those lanes as one vector, only for
# `x < b` and `x >= b` with x contiguous and b the same in every lane (its AxisInfo of comparisons): `x <= 12287`
# masks lane by lane, and a SwiGLU tile of 8192 masked so ran 2.5x slower on the H200.  An index comparison is
# integer, so `x <= b` is printed `x < b + 1` and `x > b` as `x >= b + 1`, the 1 folded into b.
_STRICT = {"<=": "<", ">": ">="}


def _plus_one(e: T.Expr) -> T.Expr:
    """e + 1, folded into a constant term: 12287 -> 12288, N - 1 -> N, 64 * ko + 63 -> 64 * ko + 64."""
    if isinstance(e, T.Const) and isinstance(e.value, int):
        return T.Const(e.value + 1)
    if isinstance(e, T.Bin) and e.op in ("+", "-") and isinstance(e.rhs, T.Const) and isinstance(e.rhs.value, int):
        c = e.rhs.value + 1 if e.op == "+" else e.rhs.value - 1
        if c == 0:
            return e.lhs
        return T.Bin(e.op, e.lhs, T.Const(c))
    return T.Bin("+", e, T.Const(1))


def _varies(e: T.Expr, frame: "Frame") -> bool:
    """Does an index expression use an iterator that is a vector (a tile axis) in this frame?"""
    if isinstance(e, T.Var):
        return e.name in frame.vectors
    return any(_varies(x, frame) for x in _children(e))


def _children(e: T.Expr) -> tuple:
    if isinstance(e, T.Bin):
        return e.lhs, e.rhs
    if isinstance(e, T.Neg):
        return (e.operand,)
    if isinstance(e, T.Select):
        return e.cond, e.then, e.other
    return ()


def strides(shape) -> list[str]:
    strides, acc = [], "1"
    for dim in reversed(shape):
        strides.append(acc)
        acc = str(dim) if acc == "1" else (f"{acc} * {dim}" if not (isinstance(dim, int) and acc.isdigit()) else str(int(acc) * dim))
    strides = list(reversed(strides))
    return strides
