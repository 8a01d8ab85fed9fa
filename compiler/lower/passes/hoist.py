"""Load a product operand once, before the serial loops whose iterations all read the same tile of it.

In FlashAttention the block of queries Q is the same in every key block: loading it again in each iteration
of the key loop costs as much memory traffic as K (and Triton does not move loads out of loops).  A `Dot`
operand inside a `SerialLoop` is hoisted before the loop when

* the product's operands have one dtype (both loaded in their storage type) and it has no absent terms
  (`Dot.absent_terms`: its printers read the operands' masks where they multiply),
* its tensor is an input of the kernel (no statement writes it, so every iteration reads the same values),
* the schedule does not place a copy of it in the loop (a `cache_read` at the loop stays where it was put),
* its indices and mask do not use the loop's variable, and
* the tile axes it is built from do not move with the loop (their offsets do not use the variable);

it becomes a `Preload` op before the loop and `Preloaded(name)` in the product.  The preload reads only if the
loop runs at least once (its `guard`): the operand's mask may have been simplified with what holds inside the
loop (a copy of a split loop runs only where every tile is full, compiler/lower/loops.py), which need not hold
when it runs zero times.  Nothing else changes: the same lanes are read, with the same mask, so the values are
the same.
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.lower.tileir import (AccUpdate, Axis, Bin, Dot, Load, Preload, Preloaded, SerialLoop, Tile,
                                        TileKernel, TileProgram, expr_vars)


def hoist_invariant_operands(program: TileProgram) -> TileProgram:
    return replace(program, kernels=[_kernel(k) for k in program.kernels])


def _kernel(kernel: TileKernel) -> TileKernel:
    written = {t.name for t in kernel.tensors if t.role != "input"}
    counter = iter(range(1_000_000))
    return replace(kernel, body=_body(kernel.body, written, counter))


def _body(body, written: set, counter) -> list:
    out: list = []
    for op in body:
        if not isinstance(op, SerialLoop):
            out.append(op)
            continue
        inner = _body(op.body, written, counter)
        hoisted: list = []
        inner = [_hoist(x, op, written, hoisted, counter) for x in inner]
        out.extend(hoisted)
        out.append(replace(op, body=inner))
    return out


def _hoist(op, loop: SerialLoop, written: set, hoisted: list, counter):
    if not (isinstance(op, AccUpdate) and isinstance(op.partial, Dot)) or op.partial.lhs_dtype != op.partial.rhs_dtype:
        return op  # a product of operands of two dtypes widens them where it multiplies: left as it is
    if op.partial.absent_terms:
        return op  # its printers read each operand's mask where it multiplies (tileir.Dot.absent_terms)
    dot, var = op.partial, loop.var
    operands = []
    for load, rows_cols in ((dot.lhs, (0, 2)), (dot.rhs, (2, 1))):
        if not (isinstance(load, Load) and load.tensor not in written) or _cached_in(loop, load.tensor):
            operands.append(load)
            continue
        axes = [op.tile.axes[p] for p in rows_cols]
        if any(_uses(x, var) for x in (*load.indices, load.mask) if x is not None) or any(
                _uses(a.offset, var) for a in axes):
            operands.append(load)
            continue
        used = {v.name for x in (*load.indices, load.mask) if x is not None for v in expr_vars(x)}
        scalars = {it: v for it, v in op.tile.scalars.items() if it in used}
        if any(_uses(v, var) for v in scalars.values()):
            operands.append(load)
            continue
        tile = Tile([Axis(a.iter, a.offset, a.size) for a in axes], scalars, None)
        name = f"pre{next(counter)}"
        dtype = dot.lhs_dtype if load is dot.lhs else dot.rhs_dtype
        hoisted.append(Preload(name, load, tile, dtype, Bin("<", loop.lower, loop.upper)))
        operands.append(Preloaded(name))
    return replace(op, partial=replace(dot, lhs=operands[0], rhs=operands[1]))


def _cached_in(loop: SerialLoop, tensor: str) -> bool:
    """Does the schedule place a copy of `tensor` in each iteration of `loop` (a cache_read there)?"""
    return any(b.tensor == tensor and b.kind == "read" for b in loop.buffers)


def _uses(e, var: str) -> bool:
    return any(v.name == var for v in expr_vars(e))
