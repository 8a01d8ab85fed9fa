"""A tile masked once: the lanes outside a finished register tile's mask set to -inf, so that what is computed
from it needs no mask of its own.

In a masked iteration of FlashAttention's key loop (causal attention's diagonal block, a ragged last block) each
statement masks its own reads: the row max reads `select(M, S, -inf)`, the row sum `select(M, E, 0)`, the product
P·V reads P under M.  The hand-written kernels set S to -inf outside M once instead: the maximum then ignores
those lanes, and E = exp2(fma(S, c, -(m·c))) is exactly 0 there, which is what the sum and the product needed.
On the H200 that is worth 3-8 % of the causal kernel (benchmarks/RESULTS.md, "Masking the scores once").

The rewrite is exact when E is 0 outside M on every row that matters, and that needs the running maximum m to
be finite there: exp2(fma(-inf, c, -(m·c))) is 0 for a finite m but NaN for m = -inf, a row that has met no key
yet.  The lowering proves that with isl (`Running.met`, compiler/lower/registers.py `_met_every_row`): every row
with a term has met one at every iteration the code runs.  Causal attention's rows meet key 0 in the first
block; a sliding window's rows do not, and keep their masks.

For a finished register tile X (an `AccFinish` kept on chip, not stored, with a mask M) in a loop body, the
values outside M are followed through the ops after it (`_outside`, an exact evaluation at the masked lanes):

* X is -inf there;
* a Compute with X's mask, of those values, is what its value gives: exp/exp2 of -inf is 0; -inf minus a finite
  value, times a positive constant, or fma(-inf, c > 0, finite) is -inf; a rounding keeps -inf and 0; a running
  maximum with `met` is finite on the rows that have a term (and only there: the rows it stands for are noted);
* a read `select(M, Y, v)` in a tile reduction, or a product operand of Y under M, drops its mask when Y is
  exactly v outside M.  Where Y's value holds only on rows with a term, the reduction must not run along those
  rows (padding rows with no term may hold NaN; they stay in their own rows, which no store writes).  A
  product with absent terms (`Dot.absent_terms`, P·V on the causal diagonal) keeps its operand's mask: its
  printer needs it to tell a 0 the program reads from a lane it does not.

Any other read of X or of a tile computed from it (unmasked, in another body, in a rescaling) leaves the body
unchanged.  Triton and TileLang print `AccFinish.fill`; the Ascend printers do not take this pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from tdsl.compiler.lower.tileir import (AccFinish, AccInit, AccUpdate, Bin, Call, Compute, Const, Dot, Neg, Reduce,
                                        Reg, RegOperand, Round, Running, Select, SerialLoop, TileKernel, TileProgram,
                                        registers_in, registers_read, value_operands, walk_ops)

FILL = float("-inf")  # the identity of max, and a zero of exp and exp2
FINITE = "finite"  # some finite value (not a number we know)


@dataclass(frozen=True)
class _Outside:
    """What a tile holds outside the mask: `value` (a number, or FINITE), exact on every lane, or, when `rows`
    is not empty, only on the rows with a term of the running maxima at those tile positions."""

    value: object
    rows: frozenset = frozenset()


def mask_scores_once(program: TileProgram) -> TileProgram:
    return replace(program, kernels=[_kernel(k) for k in program.kernels])


def _kernel(kernel: TileKernel) -> TileKernel:
    sums = {op.stmt: {a.iter for a in op.tile.axes} for op in walk_ops(kernel.body) if isinstance(op, AccInit)}
    return replace(kernel, body=_body(kernel.body, sums))


def _body(body: list, sums: dict) -> list:
    out = [replace(op, body=_body(op.body, sums)) if isinstance(op, SerialLoop) else op for op in body]
    for n in range(len(out)):
        op = out[n]
        if isinstance(op, AccFinish) and op.keep and not op.store and op.tile.mask is not None and op.fill is None:
            out = _masked_once(out, n, sums) or out
    return out


def _masked_once(body: list, n: int, sums: dict) -> Optional[list]:
    """`body` with the tile finished at `n` masked once and the masks that became redundant dropped; None when
    some read of it or of a tile computed from it would see the new values unmasked."""
    finish = body[n]
    mask = finish.tile.mask
    known = {finish.stmt: _Outside(FILL)}
    out, dropped = list(body), False
    for k in range(n + 1, len(body)):
        op = body[k]
        if not registers_read(op) & set(known):
            continue
        if isinstance(op, SerialLoop):  # a loop inside reads this iteration's tiles unmasked or not: not followed
            return None
        if isinstance(op, Compute) and not op.store and op.tile.mask == mask and op.stmt not in known:
            updated = {o.stmt for o in body[:k] if isinstance(o, AccUpdate)}  # maxima this iteration's terms are in
            outside = _outside(op.value, known, updated)
            if outside is None or outside.value == FINITE:
                return None
            known[op.stmt] = outside
        elif isinstance(op, AccUpdate) and (op.rescale is None or not (
                registers_in(op.rescale.current) | registers_in(op.rescale.factor)) & set(known)):
            partial = _unmasked(op, mask, known, sums.get(op.stmt, set()))
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


def _unmasked(op: AccUpdate, mask, known: dict, acc_iters: set):
    """The update's partial with the masked reads of tiles known outside `mask` unmasked where exact; None when
    it reads one of them without the mask."""
    partial = op.partial
    if isinstance(partial, Reduce):
        reduced = {op.tile.axes[p].iter for p in partial.axes}
        operand = _drop_select(partial.operand, mask, known, op, reduced)
        return None if operand is None else replace(partial, operand=operand)
    if isinstance(partial, Dot):
        reduced = {a.iter for a in op.tile.axes} - acc_iters
        # a product with absent terms keeps its operands' masks: its printers tell the lanes the program reads
        # from those it does not by them (tileir.Dot.absent_terms)
        sides = [_drop_operand(x, mask, known, op, reduced, keep=partial.absent_terms)
                 for x in (partial.lhs, partial.rhs)]
        return None if None in sides else replace(partial, lhs=sides[0], rhs=sides[1])
    return None


def _drop_select(e, mask, known: dict, op: AccUpdate, reduced: set):
    """`select(mask, Y, v)` as Y where Y is exactly v outside the mask; other reads of known tiles only under
    the mask."""
    if isinstance(e, Select) and e.cond == mask:
        if isinstance(e.then, Reg) and e.then.stmt in known and isinstance(e.other, Const) \
                and _exact(known[e.then.stmt], e.then, e.other.value, op, reduced):
            return e.then
        return e  # the mask still picks: new values outside it are not read
    if isinstance(e, Reg):
        return None if e.stmt in known else e
    if isinstance(e, RegOperand):
        return None if e.reg.stmt in known else e
    parts = value_operands(e)
    if not parts:
        return e
    new = [_drop_select(x, mask, known, op, reduced) for x in parts]
    if None in new:
        return None
    return _rebuild(e, new)


def _drop_operand(x, mask, known: dict, op: AccUpdate, reduced: set, keep: bool = False):
    if not isinstance(x, RegOperand) or x.reg.stmt not in known:
        return None if registers_in(x) & set(known) else x
    if x.mask != mask:
        return None
    if keep:
        return x
    return replace(x, mask=None, mask_is_bounds=False) if _exact(known[x.reg.stmt], x.reg, 0.0, op, reduced) else x


def _exact(outside: _Outside, reg: Reg, value: float, op: AccUpdate, reduced: set) -> bool:
    """Is the tile `reg` reads exactly `value` outside the mask, wherever this update combines its lanes?"""
    if outside.value != value:
        return False
    rows = {op.tile.axes[reg.axes[p]].iter for p in outside.rows}
    return not rows & reduced  # lanes of padding rows stay in their own rows of the sum


def _outside(e, known: dict, updated: set) -> Optional[_Outside]:
    """The value `e` takes at the lanes outside the mask (see the module docstring), or None if not known.  A
    running maximum counts as finite only after its update in this iteration (`updated`): `Running.met` is about
    the maximum with this iteration's terms in."""
    if isinstance(e, Const):
        return _Outside(e.value)
    if isinstance(e, Reg):
        if e.stmt not in known:
            return None
        inner = known[e.stmt]
        return _Outside(inner.value, frozenset(e.axes[p] for p in inner.rows))
    if isinstance(e, Running):
        return _Outside(FINITE, frozenset(e.axes)) if e.met and e.stmt in updated else None
    parts = [_outside(x, known, updated) for x in value_operands(e)]
    if None in parts:
        return None
    rows = frozenset().union(*(p.rows for p in parts))
    value = _apply(e, [p.value for p in parts])
    return None if value is None else _Outside(value, rows)


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
