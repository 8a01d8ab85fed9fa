"""The reductions of the language -- `sum`, `max`, `min` -- decided once: what each accumulator starts from,
how two partial results combine, and whether the order of the terms can change the result.

The interpreter (compiler/reference), the lowering (compiler/lower/reductions.py) and every printer read these;
none spells an identity or a combining operation of its own.
"""

from __future__ import annotations

from tdsl.frontend.check_common import REDUCTIONS  # the language's reductions (docs/language.md#reductions)

# The accumulator's start: the value that leaves every term unchanged.
IDENTITY = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}

# How two partial results combine: a binary operation of the tile IR (`Bin`) and of the language's functions.
COMBINE = {"sum": "+", "max": "max", "min": "min"}

assert set(IDENTITY) == set(COMBINE) == set(REDUCTIONS)


def identity(op: str) -> float:
    return IDENTITY[op]


def combine(op: str) -> str:
    return COMBINE[op]


def order_independent(op: str) -> bool:
    """The result is the same bits in every order and grouping of the terms.

    True for `max` and `min`: under the interpreter's IEEE 754-2019 maximum / minimum (-0.0 < +0.0, any NaN
    gives the one canonical NaN) each is a commutative, associative, idempotent operation on f32 bit patterns,
    so the result is the extremum of the set of terms; and rounding the accumulator after each update commutes
    with it, because rounding is monotone and idempotent.  Not for `sum`: floating-point addition is not
    associative (docs/rules/reduction-order.md)."""
    return op in ("max", "min")


def selecting(op: str) -> bool:
    """Every value of the accumulator is one of the terms (rounded): a max or min accumulator.  So it lies on
    every dtype grid all its terms lie on (compiler/legality/grids.py)."""
    return op in ("max", "min")


# What a reduction's partial result is called in messages: (one, several)
PARTIAL = {"sum": ("partial sum", "partial sums"), "max": ("partial maximum", "partial maxima"),
           "min": ("partial minimum", "partial minima")}
# ... and its result
RESULT = {"sum": "sum", "max": "maximum", "min": "minimum"}
