"""A product operand that only rounds another register tile to the operand dtype reads that tile instead.

FlashAttention's `P[i, j]: bf16 = E[i, j]` (examples/mha_fa.tdsl) is read by U's bf16 product from registers.
The printers hold P as f32 values rounded to bf16 and convert them to bf16 once more for the tensor cores: three
conversions per element where converting E once gives the same operand, because rounding to a dtype is
idempotent (bf16(f32(bf16(e))) = bf16(e)).  On the H200 the two extra conversions cost 4-9 % of the flash kernel
(benchmarks/RESULTS.md, "Closing the gap to the hand-written kernel").

The product's `RegOperand` of P becomes one of E when, in the body that holds the product,

* P's Compute comes before the product and its value is `Reg(E)` along P's own tile axes (a plain rounding of E,
  lane for lane) with P's dtype the operand dtype, bf16 or f16;
* E's Compute comes before P's, with the same tile axes, and is the only Compute of E in the body (E's registers
  still hold the tile P was formed from when the product reads them).

The operand's mask is kept; `RegOperand.rounds` names P (for comments and buffer names).  P's Compute is
dropped when nothing else reads it and it is not stored.  The Ascend printers keep P: their conversions to the
cube's operand go through UB copies this has not been measured for.
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.lower.tileir import (AccUpdate, Compute, Dot, Reg, RegOperand, SerialLoop, TileKernel, TileProgram,
                                        registers_read)


# the operand dtypes every printer converts f32 to by rounding to nearest, with no other step (E4M3 saturates, and
# its conversions differ between the printers)
NEAREST = ("bf16", "f16")


def read_rounded_sources(program: TileProgram) -> TileProgram:
    return replace(program, kernels=[_kernel(k) for k in program.kernels])


def _kernel(kernel: TileKernel) -> TileKernel:
    folded: set = set()
    body = _body(kernel.body, folded)
    if not folded:
        return kernel
    unread = folded - set().union(*(registers_read(op) for op in body))
    return replace(kernel, body=_drop(body, unread))


def _body(body: list, folded: set) -> list:
    """`body` with its products' rounded operands read from their sources; `folded` gets the rounded statements."""
    out = [replace(op, body=_body(op.body, folded)) if isinstance(op, SerialLoop) else op for op in body]
    for n, op in enumerate(out):
        if isinstance(op, AccUpdate) and isinstance(op.partial, Dot):
            dot = op.partial
            lhs, rhs = (_fold(x, dtype, out[:n], folded) for x, dtype in ((dot.lhs, dot.lhs_dtype),
                                                                           (dot.rhs, dot.rhs_dtype)))
            out[n] = replace(op, partial=replace(dot, lhs=lhs, rhs=rhs))
    return out


def _fold(operand, dtype: str, before: list, folded: set):
    if not isinstance(operand, RegOperand):
        return operand
    source = _rounding_source(operand.reg.stmt, dtype, before)
    if source is None:
        return operand
    folded.add(operand.reg.stmt)
    return replace(operand, reg=Reg(source, operand.reg.axes), rounds=operand.reg.stmt)


def _rounding_source(stmt: str, dtype: str, before: list):
    """The statement that `stmt` rounds to `dtype` lane for lane, when its registers still hold that tile."""
    computes: dict = {}
    for n, op in enumerate(before):
        if isinstance(op, Compute):
            computes.setdefault(op.stmt, []).append(n)
    if len(computes.get(stmt, ())) != 1:
        return None
    at = computes[stmt][0]
    rounding = before[at]
    value = rounding.value
    if dtype not in NEAREST or rounding.dtype != dtype or not isinstance(value, Reg) \
            or value.axes != tuple(range(len(rounding.tile.axes))):
        return None
    source = computes.get(value.stmt, ())
    if len(source) != 1 or source[0] > at:
        return None
    if before[source[0]].tile.axes != rounding.tile.axes:
        return None
    return value.stmt


def _drop(body: list, stmts: set) -> list:
    """`body` without the Computes of `stmts` that are not stored."""
    out = []
    for op in body:
        if isinstance(op, SerialLoop):
            out.append(replace(op, body=_drop(op.body, stmts)))
        elif not (isinstance(op, Compute) and op.stmt in stmts and not op.store):
            out.append(op)
    return out
