"""online: let the readers of a row maximum use its running value, rescaling the sums built from them.

``online(m)`` rewrites softmax into its one-pass form (online softmax, FlashAttention).  Nothing moves: it
changes which orders the later steps may choose.  Before, an exponential P reads the complete maximum, so P
cannot run inside m's loop over the keys; after, P may run as soon as m holds P's own element, and every sum
of P (l, U) is rescaled by exp((m_old - m_new)·c) whenever the maximum grows::

    m[i] = max(j) S[i, j] combine online          for jo:                               # after online(m)
    P[i, j] = exp((S[i, j] - m[i]) * c)              m_new = max(m, rowmax(S[:, jo]))   #   and fusing the
    l[i] = sum(j) P[i, j]                            P = exp((S[:, jo] - m_new) * c)    #   statements into
    U[i, e] = sum(j) P[i, j] * V[j, e]               l = l * exp((m - m_new) * c) + rowsum(P)    # l.jo
                                                     U = U * exp((m - m_new) * c) + P @ V[jo]
                                                     m = m_new

Which statements it applies to is found in the program (compiler/model/online.py): exponentials
exp((X - m)·c) whose readers are all sums linear in them, and such sums.  The interpreter executes the
rescaled form exactly (docs/interpreter.md), so a kernel is compared with its own semantics.

Legal only if the program declares `combine online` on the maximum (rule online-policy: the rescaling moves
roundings).  Readers that cannot be rescaled keep reading the complete maximum; if none can, the step is
refused (rule online-rescale).  Later steps are checked against the rewritten dependences (rule online-order:
own term first, no stale term, complete maximum before a reader of the sums).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tdsl.frontend import ast
from tdsl.compiler.errors import OnlinePolicy, OnlineRescale, ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.model.program import KernelModel
# the interpreter's functions: the counterexamples are its numbers
from tdsl.compiler.reference.runtime import _exp, _exp2, _fma
from tdsl.compiler.model.online import (CASTS, MAX, REF, NotOnline, OnlineForm, online_form, running_dependences,
                                       with_rescales)
from tdsl.compiler.schedule.primitives.common import State, check_stmt
from tdsl.compiler.schedule.primitives.registry import STMT, arg, primitive
from tdsl.compiler.model.recurrences import self_reads


@primitive(arg("stmt", STMT, role="the row maximum (a max reduction)"), rank=150)
def online(state: State, stmt: str) -> None:
    stmt = check_stmt(state, "online", stmt)
    model = state.model
    if stmt in state.tree.online:
        raise ScheduleError("online", f"{stmt} is already a running maximum")
    if model.stmt(stmt).reduce_op != "max":
        raise ScheduleError("online", f"{stmt} is not a max reduction; online(STMT) takes the row maximum that "
                                      f"the exponentials subtract")
    state.model, state.deps, form = _rewrite(model, state.deps, stmt, "online")
    recurrences = [s for s in [stmt, *form.accumulators] if self_reads(model.stmt(s))]
    if recurrences:
        raise ScheduleError("online", f"{', '.join(recurrences)} read{'s' * (len(recurrences) == 1)} "
                                      f"{'its' if len(recurrences) == 1 else 'their'} own earlier elements (a "
                                      f"recurrence), which a running maximum would rescale after they were read")
    if model.stmt(stmt).combine != "online":
        readers = ", ".join(sorted({r.source or a for a, r in form.accumulators.items()}))
        raise OnlinePolicy("online", [stmt, *form.accumulators],
                           f"{stmt} declares {_declared(model.stmt(stmt))}, so its readers must see the complete "
                           f"maximum (the rewrite would let {readers} read the running one and rescale "
                           f"{', '.join(form.accumulators)})", _policy_example(model, form))
    state.tree.online.append(stmt)
    check_dependences(state.model, state.deps, state.tree, "online")


def rederive(state: State, primitive: str) -> None:
    """After a step that rewrites the program (compute_inline, rfactor) and recomputes its dependences: every
    running maximum of the schedule found again in the new program -- which statements read it, which sums are
    rescaled, the running dependences -- or the step refused if the rewrite no longer applies."""
    if not state.tree.online:
        return
    model = replace(state.model, stmts=[replace(s, rescale=None) for s in state.model.stmts])
    deps = state.deps
    for stat in state.tree.online:
        model, deps, _ = _rewrite(model, deps, stat, primitive)
    state.model, state.deps = model, deps


def _rewrite(model: KernelModel, deps: list, stat: str, primitive: str) -> tuple:
    """(model with the sums' Rescale, dependences with the running ones, the form) for the maximum `stat`; the
    step is refused (online-rescale) when the program does not have the form."""
    try:
        form = online_form(model, stat)
        deps = running_dependences(model, form, deps)
    except NotOnline as err:
        reason = err.reason if primitive == "online" else f"after {primitive}, {err.reason}"
        raise OnlineRescale(primitive, err.statements, reason, _stale_example(stat)) from None
    return with_rescales(model, form), deps, form


def _declared(stmt) -> str:
    return f"`combine {stmt.combine}`" if stmt.combine else "no combine policy"


# ---------------------------------------------------------------- counterexamples, computed in f32


_FUNCTIONS = {"exp": _exp, "exp2": _exp2, "fma": _fma}  # what a rescaling factor calls (model/online.py)


def _evaluate(model, e: ast.Expr, names: dict) -> np.float32:
    """A rescaling factor exp((REF - MAX) * c) evaluated as the interpreter does: every step rounded to f32."""
    from tdsl.compiler.model.online import constant

    if isinstance(e, ast.Name) and e.name in names:
        return names[e.name]
    if isinstance(e, ast.Call) and e.func in _FUNCTIONS:
        return np.float32(_FUNCTIONS[e.func](*(_evaluate(model, a, names) for a in e.args)))
    if isinstance(e, ast.BinOp):
        a, b = _evaluate(model, e.lhs, names), _evaluate(model, e.rhs, names)
        return np.float32({"+": a + b, "-": a - b, "*": a * b, "/": a / b}[e.op])
    if isinstance(e, ast.Neg):
        return np.float32(-_evaluate(model, e.operand, names))
    return np.float32(constant(model, e))


def _terms_are_roundings(model, name: str, rescale) -> bool:
    """Each statement from the sum back to the exponential reads the next one bare or cast (no other factor)."""

    def bare(e, tensor):
        while isinstance(e, ast.Call) and e.func in CASTS and len(e.args) == 1:
            e = e.args[0]
        return isinstance(e, ast.Access) and e.tensor == tensor

    readers = [name, *rescale.chain]
    return all(bare(model.stmt(r).value, t) for r, t in zip(readers, rescale.chain))


def _policy_example(model, form: OnlineForm) -> str:
    """A row whose sum differs: three values, the first two in one block and the third in the next."""
    # a sum whose terms are the exponential's values, rounded by each store on the way (no other factor)
    name = next((a for a, r in form.accumulators.items() if _terms_are_roundings(model, a, r)),
                next(iter(form.accumulators)))
    rescale = form.accumulators[name]

    from tdsl.compiler.model import dtypes

    def term(x, m):
        value = _evaluate(model, rescale.factor, {REF: np.float32(x), MAX: np.float32(m)})
        for stored in [model.stmt(s).dtype for s in reversed(rescale.chain)] or ["f32"]:
            value = dtypes.round_to(stored, value)  # the exponential's store, then each derived one's
        return np.float32(value)

    for a, b, d in _candidates():
        exact = np.float32(np.float32(term(a, d) + term(b, d)) + term(d, d))
        first = np.float32(term(a, b) + term(b, b))
        factor = _evaluate(model, rescale.factor, {REF: np.float32(b), MAX: np.float32(d)})
        running = np.float32(np.float32(first * factor) + term(d, d))
        if exact != running:
            return (f"a row of {form.values} holding {a}, {b} (one block) and {d} (the next): the sum {name} is "
                    f"{float(exact)!r} with the complete maximum {d} and {float(running)!r} with the running one "
                    f"({b}, then rescaled by {_factor_text(rescale.factor, b, d)})")
    return f"{name} changes its roundings"


def _factor_text(factor: ast.Expr, ref: float, now: float) -> str:
    from tdsl.frontend.printer import expr_text

    values = {REF: ref, MAX: now}
    shown = ast.rewrite(factor, lambda e: ast.FloatLit(values[e.name]) if isinstance(e, ast.Name) and e.name in values
                        else None)
    return expr_text(shown)


def _candidates():
    """Rows a < b < d of values every float dtype holds exactly (at most 7 significant bits)."""
    for a in (0.125, 0.375, 0.6875, 1.0625, 1.8125):
        for b in (0.5, 1.3125, 2.5, 3.75):
            for d in (4.125, 5.25, 6.75, 9.875):
                if a < b < d:
                    yield a, b, d


def _stale_example(stmt: str) -> str:
    late = float(_exp(np.float32(-1.0)))
    return (f"a row whose first block holds 0 and a later block 1: exp(x - {stmt}) of its first element is "
            f"exp(0 - 0) = 1 with the partial maximum 0 and exp(0 - 1) = {late!r} with the row's maximum 1; a sum of "
            f"it can be multiplied by exp(0 - 1) when the maximum grows, a value already normalised, quantized or "
            f"stored cannot")
