"""Which dtype grids a value is guaranteed to lie on: where rounding to a dtype changes nothing.

A value *lies on the grid of* dtype D when rounding it to D gives back the same f32 bits.  Then a rounding to D
at that place is the identity, and a step may drop it (`compute_inline(T, round=false)`) or add it (a buffer with
`dtype=D`) without changing any result.  The analysis is exact and deliberately small:

* a read of an input lies on the grid of its dtype (inputs are rounded when loaded); a read of a stored tensor
  on the grids its stored values lie on (`tensor_grids`);
* `abs`, `-x`, `max`, `min` and `where` return one of their operands, up to the sign bit, or the canonical NaN
  (`max` / `min`, see docs/interpreter.md), which lies on every grid: they keep the grids all operands share;
* a constant lies on the grids that represent it; a cast `D(x)` lies on D's grid (and on x's grids when x
  already lies on D's grid, since the cast is then the identity);
* an integer value -- iterators, integer constants and sizes combined by `+ - *`, `abs`, `max`, `min`, `where`
  and casts -- lies on every grid that holds each integer it takes over the statement's domain
  (compiler/legality/integers.py): `T[i]: f8e4m3 = i` for i < 17 stores exactly what it computes;
* anything else (arithmetic, exp, ...) only on the f32 grid, which holds every value.

The grids nest exactly (checked bit for bit over every value of every dtype in tests/legality/test_relaxations.py):
f8e4m3 lies on the bf16 and the f16 grid (its smallest subnormal 2^-9 is a normal number of both, its largest
value 448 is in range of both, and its NaN is the canonical quiet NaN), bf16 and f16 lie on the f32 grid; bf16
and f16 do not lie on each other's (bf16 has 8 significant bits, f16 has 11 and a smaller range; f16's subnormals
such as 1023 * 2^-24 need 10 bits).  A set of grids is therefore always closed upwards: a value on the f8e4m3
grid is on all four.

NaNs: a bf16 store canonicalises a NaN to the quiet NaN (+-0x7FC00000), so a NaN read from a bf16 tensor is one of
those two, and rounding it to bf16 again keeps its bits; abs and negation only change the sign bit.  An f16 NaN
keeps its payload through f16 rounding.  So the bit-level claim holds for NaNs too.
"""

from __future__ import annotations

import numbers

import numpy as np

from tdsl.frontend import ast

from tdsl.compiler.legality.integers import integer_grids, iterator_ranges
from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.model import reduce_ops

# Every grid a value of the key dtype lies on (the key's grid and the wider ones that hold it exactly).
_CLOSURE = {
    "f8e4m3": frozenset({"f8e4m3", "bf16", "f16", "f32"}),
    "bf16": frozenset({"bf16", "f32"}),
    "f16": frozenset({"f16", "f32"}),
    "f32": frozenset({"f32"}),
}

ONLY_F32 = _CLOSURE["f32"]
DTYPE_NAMES = tuple(_CLOSURE)

# Functions that return one of their value operands unchanged, or its negation / absolute value, or the
# canonical NaN: the result lies on every grid that all those operands lie on.
_SELECTING = ("abs", "max", "min")


def closure(dtype: str) -> frozenset:
    """The grids every value of `dtype` lies on."""
    return _CLOSURE.get(dtype, frozenset({dtype}) | ONLY_F32)


def rounded(grids: frozenset, dtype: str) -> frozenset:
    """The grids of a value on `grids` after rounding it to `dtype`: unchanged when the rounding is the identity,
    else the grids of `dtype` (the value may have changed)."""
    return grids if dtype in grids else closure(dtype)


def constant_grids(value) -> frozenset:
    """The grids an f32 constant lies on: every dtype whose rounding keeps its bits."""
    with np.errstate(all="ignore"):
        c = np.float32(value)  # as the interpreter evaluates it
        backs = {dtype: np.float32(dt.scalar_rounder(dtype)(c)) for dtype in DTYPE_NAMES}
    bits = c.view(np.uint32)
    return frozenset(d for d, back in backs.items() if back.view(np.uint32) == bits) | ONLY_F32


def value_grids(model, expr, iters=(), _visiting: frozenset = frozenset()) -> frozenset:
    """The grids the value of `expr` lies on, whatever the inputs.  `iters` are the statement's iterators: their
    names, or `iterator_ranges(stmt)`, which lets an integer value of the iterators lie on narrow grids."""
    integers = integer_grids(model, expr, iters)
    if integers is not None:
        return integers | ONLY_F32
    if isinstance(expr, (ast.IntLit, ast.FloatLit)):
        return constant_grids(expr.value)
    if isinstance(expr, ast.Name):
        return _name_grids(model, expr.name, iters)
    if isinstance(expr, ast.Neg):
        return value_grids(model, expr.operand, iters, _visiting)
    if isinstance(expr, ast.Access):
        return tensor_grids(model, expr.tensor, _visiting)
    if isinstance(expr, ast.Call):
        return _call_grids(model, expr, iters, _visiting)
    return ONLY_F32  # + - * /, comparisons: a new value


def statement_grids(model, stmt, _visiting: frozenset = frozenset()) -> frozenset:
    """The grids a statement's value (a reduction's body) lies on, its iterators' ranges known."""
    return value_grids(model, stmt.value, iterator_ranges(stmt), _visiting)


def tensor_grids(model, tensor: str, _visiting: frozenset = frozenset()) -> frozenset:
    """The grids every value the program stores in `tensor` lies on (an input: its dtype's)."""
    writer = next((s for s in model.stmts if s.write.tensor == tensor), None)
    if writer is None:
        return closure(model.tensors[tensor].dtype)
    if tensor in _visiting:  # a statement that reads what it writes: only its store dtype is known
        return closure(writer.dtype)
    visiting = _visiting | {tensor}
    if writer.is_reduction:
        return rounded(accumulator_grids(model, writer, visiting), writer.dtype)
    return rounded(statement_grids(model, writer, visiting), writer.dtype)


def accumulator_grids(model, stmt, _visiting: frozenset = frozenset()) -> frozenset:
    """The grids every accumulator value of a reduction lies on, after its first update.

    A `max` or `min` accumulator is the rounded extremum of body values (the initial -inf / +inf is never stored:
    the first update replaces it by a body value), so it keeps the grids of the body when the accumulator
    rounding is the identity on them; a `sum` accumulator is a new value, on the grids of its accumulator
    dtype."""
    accum = stmt.accum_dtype or "f32"
    if not reduce_ops.selecting(stmt.reduce_op):
        return closure(accum)
    return rounded(statement_grids(model, stmt, _visiting), accum)


# ---------------------------------------------------------------- helpers


def _name_grids(model, name: str, iters) -> frozenset:
    if name in iters:
        return ONLY_F32  # an iterator of unknown range (`integer_range` took those it knows)
    value = model.sizes.get(name)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return constant_grids(value)
    return ONLY_F32


def _call_grids(model, call: ast.Call, iters, visiting) -> frozenset:
    f, args = call.func, call.args
    if f in dt.NUMPY_DTYPES and len(args) == 1:
        return rounded(value_grids(model, args[0], iters, visiting), f)
    if f in _SELECTING:
        return _shared(model, args, iters, visiting)
    if f == "where" and len(args) == 3:
        return _shared(model, args[1:], iters, visiting)  # the condition only chooses
    return ONLY_F32


def _shared(model, operands, iters, visiting) -> frozenset:
    """The grids all operands lie on."""
    grids = frozenset(DTYPE_NAMES)
    for operand in operands:
        grids &= value_grids(model, operand, iters, visiting)
    return grids if operands else ONLY_F32
