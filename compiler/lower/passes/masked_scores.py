"""A tile masked once: the lanes outside a finished register tile's mask set to -inf, so that what is computed
from it needs no mask of its own.

In a masked iteration of FlashAttention's key loop (causal attention's diagonal block, a ragged last block) each
statement masks its own reads: the row max reads `select(M, S, -inf)`, the row sum `select(M, E, 0)`, the product
P·V reads P under M.  The hand-written kernels set S to -inf outside M once instead: the maximum then ignores
those lanes, and E = exp2(fma(S, c, -(m·c))) is exactly 0 there, which is what the sum and the product needed.
On the H200 that is worth 3-8 % of the causal kernel (benchmarks/RESULTS.md, "Masking the scores once").

The rewrite is exact when E is 0 outside M on every row, and that needs the maximum E is computed with to be
finite: exp2(fma(-inf, c, -(m·c))) is 0 for a finite m but NaN for m = -inf, a row that has met no key yet (a
sliding window's rows before their window, the padding rows of a ragged tile).  An exponential reads its
`combine online` maximum as 0 where it is -inf (`NegInfAsZero`, compiler/model/online.py
`mark_exponent_reads`), so that value is finite on every row, at every iteration.

For a finished register tile X (an `AccFinish` kept on chip, not stored, with a mask M) in a loop body, the
values outside M are followed through the ops after it (`_outside`, an exact evaluation at the masked lanes):

* X is -inf there;
* a Compute with X's mask, of those values, is what its value gives: exp/exp2 of -inf is 0; -inf minus a finite
  value, times a positive constant, or fma(-inf, c > 0, finite) is -inf; a rounding keeps -inf and 0; a
  maximum read as 0 where it is -inf counts as finite (a +inf one leaves -inf minus it -inf; a NaN one makes
  its whole row NaN either way);
* a read `select(M, Y, v)` in a tile reduction, or a product operand of Y under M, drops its mask when Y is
  exactly v outside M.  A product with absent terms (`Dot.absent_terms`, P·V on the causal diagonal) keeps its
  operand's mask: its printer needs it to tell a 0 the program reads from a lane it does not.

Any other read of X or of a tile computed from it (unmasked, in another body, in a rescaling) leaves the body
unchanged.  Triton and TileLang print `AccFinish.fill`; the Ascend printers do not take this pass.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

from tdsl.compiler.lower.tileir import (AccFinish, AccUpdate, Bin, Call, Compute, Const, Dot, Neg, NegInfAsZero,
                                        Reduce, Reg, RegOperand, Round, Select, SerialLoop, TileKernel, TileProgram,
                                        registers_in, registers_read, value_operands)

FILL = float("-inf")  # the identity of max, and a zero of exp and exp2
FINITE = "finite"  # some finite value (not a number we know)


def mask_scores_once(program: TileProgram) -> TileProgram:
    return replace(program, kernels=[_kernel(k) for k in program.kernels])


def _kernel(kernel: TileKernel) -> TileKernel:
    return replace(kernel, body=_body(kernel.body))


def _body(body: list) -> list:
    out = [replace(op, body=_body(op.body)) if isinstance(op, SerialLoop) else op for op in body]
    for n in range(len(out)):
        op = out[n]
        if isinstance(op, AccFinish) and op.keep and not op.store and op.tile.mask is not None and op.fill is None:
            out = _masked_once(out, n) or out
    return out


def _masked_once(body: list, n: int) -> Optional[list]:
    """`body` with the tile finished at `n` masked once and the masks that became redundant dropped; None when
    some read of it or of a tile computed from it would see the new values unmasked."""
    finish = body[n]
    mask = finish.tile.mask
    known = {finish.stmt: FILL}  # statement -> what its tile holds outside the mask (a number, or FINITE)
    out, dropped = list(body), False
    for k in range(n + 1, len(body)):
        op = body[k]
        if not registers_read(op) & set(known):
            continue
        if isinstance(op, SerialLoop):  # a loop inside reads this iteration's tiles unmasked or not: not followed
            return None
        if isinstance(op, Compute) and not op.store and op.tile.mask == mask and op.stmt not in known:
            outside = _outside(op.value, known)
            if outside is None or outside == FINITE:
                return None
            known[op.stmt] = outside
        elif isinstance(op, AccUpdate) and (op.rescale is None or not (
                registers_in(op.rescale.current) | registers_in(op.rescale.factor)) & set(known)):
            partial = _unmasked(op, mask, known)
            if partial is None:
                return None
            dropped |= partial != op.partial
            out[k] = replace(op, partial=partial)
        else:
            return None
    if not dropped:
        return None
    out[n] = replace(finish, fill=FILL)
    return out


def _unmasked(op: AccUpdate, mask, known: dict):
    """The update's partial with the masked reads of tiles known outside `mask` unmasked where exact; None when
    it reads one of them without the mask."""
    partial = op.partial
    if isinstance(partial, Reduce):
        operand = _drop_select(partial.operand, mask, known)
        return None if operand is None else replace(partial, operand=operand)
    if isinstance(partial, Dot):
        # a product with absent terms keeps its operands' masks: its printers tell the lanes the program reads
        # from those it does not by them (tileir.Dot.absent_terms)
        sides = [_drop_operand(x, mask, known, keep=partial.absent_terms)
                 for x in (partial.lhs, partial.rhs)]
        return None if None in sides else replace(partial, lhs=sides[0], rhs=sides[1])
    return None


def _drop_select(e, mask, known: dict):
    """`select(mask, Y, v)` as Y where Y is exactly v outside the mask; other reads of known tiles only under
    the mask."""
    if isinstance(e, Select) and e.cond == mask:
        if isinstance(e.then, Reg) and e.then.stmt in known and isinstance(e.other, Const) \
                and known[e.then.stmt] == e.other.value:
            return e.then
        return e  # the mask still picks: new values outside it are not read
    if isinstance(e, Reg):
        return None if e.stmt in known else e
    if isinstance(e, RegOperand):
        return None if e.reg.stmt in known else e
    parts = value_operands(e)
    if not parts:
        return e
    new = [_drop_select(x, mask, known) for x in parts]
    if None in new:
        return None
    return _rebuild(e, new)


def _drop_operand(x, mask, known: dict, keep: bool = False):
    if not isinstance(x, RegOperand) or x.reg.stmt not in known:
        return None if registers_in(x) & set(known) else x
    if x.mask != mask:
        return None
    if keep:
        return x
    return replace(x, mask=None, mask_is_bounds=False) if known[x.reg.stmt] == 0.0 else x


def _outside(e, known: dict):
    """The value `e` takes at the lanes outside the mask (see the module docstring): a number, FINITE, or None
    if not known."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Reg):
        return known.get(e.stmt)
    if isinstance(e, NegInfAsZero):
        return FINITE
    parts = [_outside(x, known) for x in value_operands(e)]
    return None if None in parts else _apply(e, parts)


def _apply(e, args: list):
    if isinstance(e, Neg):
        return FINITE if _finite(args[0]) else None
    if isinstance(e, Round):
        return args[0] if args[0] in (FILL, 0.0) else None
    if isinstance(e, Call) and e.func in ("exp", "exp2"):
        return 0.0 if args[0] == FILL else None
    if isinstance(e, Call) and e.func == "fma":
        a, b, c = args
        if _finite(c) and ((a == FILL and _positive(b)) or (b == FILL and _positive(a))):
            return FILL
        return FINITE if all(_finite(x) for x in args) else None
    if isinstance(e, Bin) and e.op in ("+", "-", "*", "/"):
        a, b = args
        if e.op in ("+", "-") and a == FILL and _finite(b) or e.op == "+" and b == FILL and _finite(a):
            return FILL
        if e.op in ("*", "/") and a == FILL and _positive(b) or e.op == "*" and b == FILL and _positive(a):
            return FILL
        if _finite(a) and _finite(b) and not (e.op == "/" and b in (0, 0.0, FINITE)):
            return FINITE
    return None


def _finite(v) -> bool:
    return v == FINITE or (isinstance(v, (int, float)) and math.isfinite(v))


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _rebuild(e, parts: list):
    """An elementwise expression with new operands (a partial's operand holds no reduction or product)."""
    if isinstance(e, Bin):
        return replace(e, lhs=parts[0], rhs=parts[1])
    if isinstance(e, (Neg, Round)):
        return replace(e, operand=parts[0])
    if isinstance(e, Call):
        return replace(e, args=tuple(parts))
    if isinstance(e, Select):
        return replace(e, then=parts[0], other=parts[1])
    return e
