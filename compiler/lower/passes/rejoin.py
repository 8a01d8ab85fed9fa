"""Rejoin a split key loop into one loop whose masks hold only from the split on (TileLang on NVIDIA).

The lowering splits the loop of a one-pass softmax where its tiles stop being full (build.py, `_full_prefix`):
the first copy runs the iterations whose tiles are all full, without masks, and is pipelined; the second runs the
rest (the diagonal key block of causal attention) with masks, not pipelined.  For Triton that is what
FlashAttention does.  TileLang compiles the two copies of the body into one program, and with both copies of the
softmax's registers live the consumers of a warp-specialised kernel spill (188 bytes per thread for causal
attention with 128 x 128 blocks, and the kernel runs at 0.44x SDPA where one loop runs at 0.74x;
benchmarks/RESULTS.md).

So for TileLang the two copies become one loop over both ranges, pipelined as the first was, with the second's
body: each of its masks M becomes `var < split or M`.  That is exact: an iteration before the split has every
lane of every tile inside the domain (that is where the split is put), so M holds there anyway, and after it the
mask is the second copy's own.  The uniform test `var < split` is decided once per iteration, so the full
iterations do not evaluate M.

Rejoined only when the two bodies are the same apart from their masks, and no load of the second copy is masked
(a masked load -- the ragged end of the keys -- would make every iteration's copy an element-wise one instead
of a bulk copy).  Otherwise the split stays.
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.lower.tileir import (AccFinish, AccInit, AccUpdate, Bin, Call, Compute, Dot, Load, Neg, Reduce,
                                        RegOperand, Round, Select, SerialLoop, TileKernel, TileProgram, Var)

_OPS = (Compute, AccInit, AccUpdate, AccFinish)


def rejoin_split_loops(program: TileProgram) -> TileProgram:
    return replace(program, kernels=[_kernel(k) for k in program.kernels])


def _kernel(kernel: TileKernel) -> TileKernel:
    return replace(kernel, body=_body(kernel.body))


def _body(body) -> list:
    out: list = []
    for op in body:
        if isinstance(op, SerialLoop):
            op = replace(op, body=_body(op.body))
            previous = out[-1] if out else None
            if (op.part == "rest" and isinstance(previous, SerialLoop) and previous.part == "full"
                    and previous.var == op.var and _rejoinable(previous, op)):
                out[-1] = _rejoined(previous, op)
                continue
        out.append(op)
    return out


def _rejoinable(full: SerialLoop, rest: SerialLoop) -> bool:
    return _rejoined_body(full, rest) is not None


def _rejoined(full: SerialLoop, rest: SerialLoop) -> SerialLoop:
    note = full.note.replace(": the iterations with full tiles (no masks)", "")
    return replace(full, upper=rest.upper, body=_rejoined_body(full, rest), part="",
                   note=note + ": one loop for the full and the masked blocks (masked from the split on)",
                   barrier=full.barrier or rest.barrier)


def _rejoined_body(full: SerialLoop, rest: SerialLoop):
    """The second copy's body with each of its masks M as `var < split or M`, or None when the two bodies differ
    in more than their masks (or the second masks a load)."""
    if len(full.body) != len(rest.body) or not all(isinstance(op, _OPS) for op in (*full.body, *rest.body)):
        return None
    guard = Bin("<", Var(full.var), full.upper)  # the iterations before the split: every lane inside
    try:
        return [_paired_op(f, r, guard) for f, r in zip(full.body, rest.body)]
    except _Differ:
        return None


class _Differ(Exception):
    """The two copies differ in more than their masks."""


def _paired_op(f, r, guard):
    """`r` with its masks guarded, after checking that it is `f` but for them."""
    if type(f) is not type(r):
        raise _Differ
    changes = {"tile": _paired_tile(f.tile, r.tile, guard)}
    for name in ("value", "partial", "start"):
        a, b = getattr(f, name, None), getattr(r, name, None)
        if (a is None) != (b is None):
            raise _Differ
        if b is not None:
            changes[name] = _paired(a, b, guard)
    if replace(f, **changes) != replace(r, **changes):
        raise _Differ  # any other field (statement, dtype, store, rescaling ...) differs
    return replace(r, **changes)


def _paired_tile(f, r, guard):
    if replace(f, mask=None) != replace(r, mask=None):
        raise _Differ
    return r if r.mask is None else replace(r, mask=Bin("or", guard, r.mask))


def _paired(f, r, guard):
    """The second copy's expression `r`, where the first copy has `f`, with its masks guarded.

    A mask of the second copy is a select the first does not have (`M ? x : identity` where the first has x:
    lanes outside the domain contribute nothing), or the mask of a load or of a register operand."""
    if isinstance(r, Select) and not (isinstance(f, Select) and f.cond == r.cond):
        return Select(Bin("or", guard, r.cond), _paired(f, r.then, guard), r.other)
    if type(f) is not type(r):
        raise _Differ
    if isinstance(r, Load) and r.mask is not None:
        raise _Differ  # a masked load: every iteration's copy would become an element-wise one
    if isinstance(r, (Load, RegOperand)):
        if replace(f, mask=None, mask_is_bounds=False) != replace(r, mask=None, mask_is_bounds=False):
            raise _Differ
        return r if r.mask is None else replace(r, mask=Bin("or", guard, r.mask))
    children_f, children_r = _children(f), _children(r)
    if len(children_f) != len(children_r):
        raise _Differ
    paired = [_paired(a, b, guard) for a, b in zip(children_f, children_r)]
    rebuilt = _rebuild(r, paired)
    if _rebuild(f, paired) != rebuilt:
        raise _Differ  # the node itself differs (an operator, a function, a dtype, reduced axes ...)
    return rebuilt


def _children(e) -> list:
    if isinstance(e, Bin):
        return [e.lhs, e.rhs]
    if isinstance(e, (Neg, Round, Reduce)):
        return [e.operand]
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Select):
        return [e.cond, e.then, e.other]
    if isinstance(e, Dot):
        return [e.lhs, e.rhs]
    return []


def _rebuild(e, children: list):
    if isinstance(e, Bin):
        return replace(e, lhs=children[0], rhs=children[1])
    if isinstance(e, (Neg, Round, Reduce)):
        return replace(e, operand=children[0])
    if isinstance(e, Call):
        return replace(e, args=tuple(children))
    if isinstance(e, Select):
        return replace(e, cond=children[0], then=children[1], other=children[2])
    if isinstance(e, Dot):
        return replace(e, lhs=children[0], rhs=children[1])
    return e
