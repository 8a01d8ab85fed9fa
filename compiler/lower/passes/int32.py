"""Index arithmetic fits 32-bit integers: a check every backend's program passes before it is printed.

Generated kernels compute indices, masks and addresses in 32-bit integers (Triton's program ids and
`tl.arange`, TileLang's and the Ascend dialects' index expressions).  A value past 2^31 - 1 wraps on the GPU
-- a silently wrong kernel -- so `check_int32` bounds every integer expression of the tile program with
interval arithmetic over the ranges of its variables (grid and serial loop variables from their bounds, a
tile's iterators from its offset and size) and refuses a program in which one might leave the int32 range,
saying where.  Expressions over run-time sizes are not bounded (a kernel compiled for every size is not
refused for the largest).  Huge split factors are the usual cause: a tile of factor 2^31 - 1
makes coefficients that size.
"""

from __future__ import annotations

import math
from typing import Optional

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T

INT32_MAX = (1 << 31) - 1


def check_int32(program: T.TileProgram) -> T.TileProgram:
    """The program unchanged, or BackendError naming the first expression that may overflow 32 bits."""
    for kernel in program.kernels:
        _check_tensors(kernel)
        # run-time sizes stay unbounded here (unchecked): a kernel for every size cannot be refused for its largest
        ranges = {name: (value, value) for name, value in program.sizes.items() if isinstance(value, int)}
        for axis in kernel.grid:
            for var, extent, lower in zip(axis.vars, axis.extents, axis.lowers):
                lo, n = _range(lower, ranges, f"the start of grid variable {var}"), _range(extent, ranges)
                if lo is not None and n is not None:
                    ranges[var] = (lo[0], lo[1] + max(n[1], 1) - 1)
        _check_ops(kernel.body, ranges, kernel)
    return program


def _check_tensors(kernel: T.TileKernel) -> None:
    """Every tensor a kernel reads or writes in global memory is addressed with 32-bit offsets (parameters are
    checked when the program is built; a statement's tensor only here, where a kernel keeps it)."""
    for t in kernel.tensors:
        if all(isinstance(d, int) for d in t.shape) and math.prod(t.shape) > INT32_MAX:
            dims = " x ".join(map(str, t.shape))
            raise BackendError(f"{kernel.name} keeps {t.name} in global memory, {math.prod(t.shape)} elements ({dims}); "
                               f"generated kernels address at most {INT32_MAX} (2^31 - 1): fuse {t.name} into its "
                               f"readers (compute_at) so it stays on chip, or choose smaller sizes")


def _check_ops(ops, ranges: dict, kernel: T.TileKernel) -> None:
    for op in ops:
        if isinstance(op, T.SerialLoop):
            lo = _range(op.lower, ranges, f"the lower bound of loop {op.var}")
            hi = _range(op.upper, ranges, f"the upper bound of loop {op.var}")
            inner = dict(ranges)
            if lo is not None and hi is not None:
                inner[op.var] = (lo[0], max(lo[0], hi[1] - 1))
            _check_ops(op.body, inner, kernel)
            continue
        if isinstance(op, T.Barrier):
            continue
        inner = dict(ranges)
        name = getattr(op, "stmt", None) or f"preload {op.name}"  # a Preload (passes/hoist.py) has no statement
        for it, value in op.tile.scalars.items():
            bounds = _range(value, ranges, f"iterator {it} of {name}")
            if bounds is not None:
                inner[it] = bounds
        for axis in op.tile.axes:
            bounds = _range(axis.offset, ranges, f"the tile offset of {name} along {axis.iter}")
            if bounds is not None:
                inner[axis.iter] = (bounds[0], bounds[1] + axis.size - 1)
        where = f"statement {name}"
        if op.tile.mask is not None:
            _range(op.tile.mask, inner, f"the mask of {where}")
        for e in T.op_expressions(op):
            _check_loads(e, inner, kernel, where)


def _check_loads(e, ranges: dict, kernel: T.TileKernel, where: str) -> None:
    """Every load's indices, mask and address, and every comparison of index values, inside a value."""
    if isinstance(e, T.Load):
        for x in e.indices:
            _range(x, ranges, f"an index of {e.tensor} in {where}")
        if e.mask is not None:
            _range(e.mask, ranges, f"the mask of a load of {e.tensor} in {where}")
        _check_address(e, ranges, kernel, where)
        return
    if isinstance(e, T.Select):
        _check_loads(e.then, ranges, kernel, where)
        _check_loads(e.other, ranges, kernel, where)
        if _is_index(e.cond):
            _range(e.cond, ranges, f"a condition in {where}")
        else:
            _check_loads(e.cond, ranges, kernel, where)
        return
    for child in T.value_operands(e):
        _check_loads(child, ranges, kernel, where)


def _check_address(load: T.Load, ranges: dict, kernel: T.TileKernel, where: str) -> None:
    """The element offset sum(index * stride) the printers compute for the load (its lanes, masked or not)."""
    arg = next((t for t in kernel.tensors if t.name == load.tensor), None)
    if arg is None:
        return
    stride, lo, hi = 1, 0, 0
    for index, dim in reversed(list(zip(load.indices, arg.shape))):
        bounds = _range(index, ranges)
        if bounds is None:
            return  # an index not bounded here
        a, b = bounds
        lo, hi = lo + min(a * stride, b * stride), hi + max(a * stride, b * stride)
        if max(abs(lo), abs(hi)) > INT32_MAX:
            raise _overflow(f"the address of {load.tensor} in {where}", (lo, hi))
        if isinstance(dim, str) and dim not in ranges:
            return  # a run-time size: strides unknown here
        stride *= ranges[dim][1] if isinstance(dim, str) else dim


def _range(e, ranges: dict, what: Optional[str] = None) -> Optional[tuple[int, int]]:
    """The interval of an integer (or boolean: 0..1) expression, None when it is not bounded here (a value, a
    run-time size, a printer's own variable); with `what`, every bounded intermediate is checked."""
    e = T.simplify(e)
    if isinstance(e, T.Const):
        if not math.isfinite(e.value) or not float(e.value).is_integer():
            return None  # a value constant, not index arithmetic
        out = (int(e.value), int(e.value))
    elif isinstance(e, T.Var):
        out = ranges.get(e.name)
    elif isinstance(e, T.Neg):
        inner = _range(e.operand, ranges, what)
        out = None if inner is None else (-inner[1], -inner[0])
    elif isinstance(e, T.Bin) and e.op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
        _range(e.lhs, ranges, what)
        _range(e.rhs, ranges, what)
        return 0, 1
    elif isinstance(e, T.Bin):
        left, right = _range(e.lhs, ranges, what), _range(e.rhs, ranges, what)
        out = None if left is None or right is None else _binary(e.op, *left, *right)
    elif isinstance(e, T.Select):
        _range(e.cond, ranges, what)
        then, other = _range(e.then, ranges, what), _range(e.other, ranges, what)
        out = None if then is None or other is None else (min(then[0], other[0]), max(then[1], other[1]))
    else:  # a value (load, register, call): not integer index arithmetic
        return None
    if what is not None and out is not None and max(abs(out[0]), abs(out[1])) > INT32_MAX:
        raise _overflow(what, out, e)
    return out


def _binary(op: str, a: int, b: int, c: int, d: int) -> Optional[tuple[int, int]]:
    if op == "+":
        return a + c, b + d
    if op == "-":
        return a - d, b - c
    if op == "*":
        products = (a * c, a * d, b * c, b * d)
        return min(products), max(products)
    if op == "//":
        if c > 0:  # floor division by a positive divisor is monotone in the dividend
            return min(a // c, a // d), max(b // c, b // d)
        return -max(abs(a), abs(b)), max(abs(a), abs(b))
    if op == "%":
        return (0, max(abs(c), abs(d)) - 1) if c > 0 else (-max(abs(c), abs(d)), max(abs(c), abs(d)))
    if op == "min":
        return min(a, c), min(b, d)
    if op == "max":
        return max(a, c), max(b, d)
    return None  # value arithmetic (/)


def _overflow(what: str, interval: tuple, e=None) -> BackendError:
    from tdsl.compiler.lower.tileir_text import expr_text

    shown = f" ({expr_text(e)})" if e is not None else ""
    return BackendError(
        f"{what}{shown} may reach {interval[0] if abs(interval[0]) > abs(interval[1]) else interval[1]}, past "
        f"32-bit integers, which the generated kernel computes indices in; use smaller split or tile factors "
        f"(or sizes)")


def _is_index(e) -> bool:
    if isinstance(e, (T.Var, T.Const)):
        return True
    if isinstance(e, T.Neg):
        return _is_index(e.operand)
    if isinstance(e, T.Bin):
        return _is_index(e.lhs) and _is_index(e.rhs)
    return False
