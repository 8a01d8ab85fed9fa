"""The functions of the language, each defined once.

*Primitives* are the functions every executor implements itself, with the f32 semantics of
docs/interpreter.md: `exp`, `exp2`, `log`, `sqrt`, `tanh`, `abs`, `fast_inverse` (one argument), `max`, `min`
(two) and `fma` (three: a·b + c rounded once, the fused multiply-add).  `exp2(x)` is 2^x: with `fma` a program
can declare FlashAttention's exponential, exp2(fma(S, c, -(m * c))), one FFMA and one MUFU instruction per
element on a GPU, where exp((S - m) * scale) is three steps and an exponential (docs/flash-attention.md).
`fast_inverse(x)` is 1 / x where a program declares that an approximate reciprocal will do: the interpreter
computes it as the IEEE division, a GPU with its approximate reciprocal (within 2 ulp for 2^-126 <= |x| <=
2^126; a subnormal result may flush to 0), so a kernel that uses it is compared with the interpreter within a
tolerance, as one that uses `exp` is.
Every other function is a *composition* of primitives and f32 arithmetic, written here once:

    rsqrt(x)        = 1 / sqrt(x)
    sigmoid(x)      = 1 / (1 + exp(-x))
    silu(x)         = x * (1 / (1 + exp(-x)))
    fast_sigmoid(x) = fast_inverse(1 + exp(-x))
    fast_silu(x)    = x * fast_inverse(1 + exp(-x))

Each step of a composition is an f32 operation rounded on its own (no fused multiply-add, no reordering).
A composition is written against a small algebra (`one`, `neg`, `add`, `mul`, `div`, `call`), so the same
definition builds the interpreter's code and every code generator's (`expand_tile` for the tile program):
a generated kernel computes exactly the steps the interpreter does.  Before this table the 910B backend
computed SiLU as x / (1 + exp(-x)), one rounding fewer than the interpreter.
"""

from __future__ import annotations

from typing import Callable

PRIMITIVES = {"exp": 1, "exp2": 1, "log": 1, "sqrt": 1, "tanh": 1, "abs": 1, "fast_inverse": 1, "max": 2, "min": 2,
              "fma": 3}


def _rsqrt(x, a):
    return a.div(a.one(), a.call("sqrt", x))


def _sigmoid(x, a):
    return a.div(a.one(), a.add(a.one(), a.call("exp", a.neg(x))))


def _silu(x, a):
    return a.mul(x, _sigmoid(x, a))


def _fast_sigmoid(x, a):
    return a.call("fast_inverse", a.add(a.one(), a.call("exp", a.neg(x))))


def _fast_silu(x, a):
    return a.mul(x, _fast_sigmoid(x, a))


COMPOSITIONS: dict[str, Callable] = {"rsqrt": _rsqrt, "sigmoid": _sigmoid, "silu": _silu,
                                     "fast_sigmoid": _fast_sigmoid, "fast_silu": _fast_silu}


class TileAlgebra:
    """Builds tile-program expressions (`compiler/lower/tileir.py`)."""

    def __init__(self):
        from tdsl.compiler.lower import tileir

        self.t = tileir

    def one(self):
        return self.t.Const(1.0)

    def neg(self, x):
        return self.t.Neg(x)

    def add(self, x, y):
        return self.t.Bin("+", x, y)

    def mul(self, x, y):
        return self.t.Bin("*", x, y)

    def div(self, x, y):
        return self.t.Bin("/", x, y)

    def call(self, func, x):
        return self.t.Call(func, (x,))


def expand_tile(func: str, x, algebra: TileAlgebra | None = None):
    """A composed function applied to a tile expression, as tile expressions of primitives (x appears as given,
    possibly several times: bind it to a name first where evaluating it twice costs), built by `algebra` (the
    lowering's folds constants as it builds)."""
    return COMPOSITIONS[func](x, algebra or TileAlgebra())


class PythonAlgebra:
    """Builds Python source over f32 scalars, for the reference interpreter (`one` is its `_ONE`, a primitive f
    its `_f`)."""

    def one(self):
        return "_ONE"

    def neg(self, x):
        return f"(-{x})"

    def add(self, x, y):
        return f"({x} + {y})"

    def mul(self, x, y):
        return f"({x} * {y})"

    def div(self, x, y):
        return f"({x} / {y})"

    def call(self, func, x):
        return f"_{func}({x})"


def python_source(func: str, x: str) -> str:
    """A composed function as interpreter source applied to the variable `x`."""
    return COMPOSITIONS[func](x, PythonAlgebra())
