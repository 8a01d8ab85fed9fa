"""The checks of the online-softmax rewrite that depend on the schedule, run with the dependences by every step
that changes the order of instances (`check_dependences`): no term goes stale, and no sum ends before its maximum.

An accumulator rescales itself with the running maximum's *current* value (compiler/model/online.py).  So a
term must be added before the maximum moves on: if m takes another element into the row between the
exponential P(x) that read it and the accumulator's update that adds P(x) (or a value derived from it, such
as its rounding), the update would rescale as if P(x) had used the new maximum, and the result would be off
by exp((m_old - m_new)·c).  The kernels keep no maximum per term, so the order, not the arithmetic, must
exclude it.  Likewise the last update of a sum must
come after the maximum's, or its readers would see it rescaled to an older maximum.  (The other orders the
rewrite needs, own term first and complete maximum before a reader of the sums, are dependences: kinds
`running` and `final` of compiler/model/dependences.py.)
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.errors import OnlineOrder
from tdsl.compiler.model.isl_memo import by_text
from tdsl.compiler.model.online import term_origin
from tdsl.compiler.model.program import KernelModel, first_point, instance_text
from tdsl.compiler.schedule.tree import Tree


def check_online(model: KernelModel, tree: Tree, primitive: str) -> None:
    rescaled = [s for s in model.stmts if s.rescale is not None]
    if not rescaled:
        return
    times = tree.time_maps(model)
    for acc in rescaled:
        _check_last_update(model, acc, times, primitive)
    for acc in [s for s in rescaled if s.rescale.source is not None]:
        exp_stmt, m = model.stmt(acc.rescale.exponential), model.stmt(acc.rescale.stat)
        adds = term_origin(model, acc, acc.rescale).reverse()  # P instance -> the update adding it (or its rounding)
        same_row = _exponential_row(model, exp_stmt, m)  # P instance -> the updates of its element of m
        moved_on, stale = _late_terms(same_row, adds, times[exp_stmt.name], times[m.name], times[acc.name])
        if stale.is_empty():
            continue
        _, coords = first_point(stale.wrap())
        n = len(exp_stmt.iters)
        p_inst = instance_text(exp_stmt.name, exp_stmt.iters, coords[:n])
        a_inst = instance_text(acc.name, acc.iters, coords[n:])
        m_coords = first_point(_updates_between(moved_on, times, m, acc, exp_stmt, coords, n))[1]
        raise OnlineOrder(
            primitive,
            sorted({exp_stmt.name, m.name, acc.name}),
            f"{acc.name} would add a term of {exp_stmt.name} after the running maximum {m.name} has moved on",
            f"{p_inst} uses {m.name} as it is then, {instance_text(m.name, m.iters, m_coords)} raises it, and only "
            f"then {a_inst} adds the term, rescaled as if it had used the new maximum",
        )


def _check_last_update(model: KernelModel, acc, times: dict, primitive: str) -> None:
    """The last update of each element of a rescaled sum comes after every update of the maximum it follows: it
    then holds the sum rescaled to the complete maximum, which is what its readers must see.  (A sum whose
    terms end before the maximum's, or partial sums made by rfactor, would be read at an older maximum.)"""
    from tdsl.compiler.model.online import accumulator_maximum

    m = model.stmt(acc.rescale.stat)
    element_max = acc.write.relation.reverse().apply_range(accumulator_maximum(model, acc, acc.rescale))
    stale = _stale_elements(acc.write.relation, element_max, m.write.relation, times[acc.name], times[m.name])
    if stale.is_empty():
        return
    _, coords = first_point(stale)
    element = f"{acc.name}[{', '.join(map(str, coords))}]"
    raise OnlineOrder(
        primitive,
        sorted({acc.name, m.name}),
        f"the last update of {acc.name} would come before the running maximum {m.name} is complete",
        f"{element} would be read rescaled to a maximum that {m.name} raises later (its last term is added first)",
    )


# The checks run after every step on time maps that mostly did not change: cached (compiler/model/isl_memo.py).
@by_text(maxsize=4096)
def _late_terms(same_row: isl.Map, adds: isl.Map, exp_times: isl.Map, m_times: isl.Map,
                acc_times: isl.Map) -> tuple[isl.Map, isl.Map]:
    """(exponential instance -> the updates of its maximum after it, the terms added after the maximum their
    exponential used has moved on: exponential instance -> accumulator instance)."""
    moved_on = same_row.intersect(exp_times.lex_lt_map(m_times))
    return moved_on, moved_on.apply_range(m_times.lex_lt_map(acc_times)).intersect(adds)


@by_text(maxsize=4096)
def _stale_elements(acc_write: isl.Map, element_max: isl.Map, m_write: isl.Map, acc_times: isl.Map,
                    m_times: isl.Map) -> isl.Set:
    """The elements of a rescaled sum whose last update comes before an update of their maximum."""
    last = acc_write.reverse().apply_range(acc_times).lexmax()  # element -> its last update's time
    max_times = element_max.apply_range(m_write.reverse()).apply_range(m_times)
    later = last.lex_lt_map(max_times)  # element -> elements whose maximum is updated after the first's last update
    return later.intersect(isl.Map.identity(later.get_space())).domain()  # ... the same element


def _exponential_row(model: KernelModel, exp_stmt, m):
    """Exponential instance -> every update of the element of m it reads."""
    m_read = next(r.relation for r in exp_stmt.reads if r.tensor == m.name)
    return m_read.apply_range(m.write.relation.reverse())


def _point(stmt, coords):
    text = f"{{ {stmt.name}[{', '.join(str(c) for c in coords)}] }}"
    return isl.Set.read_from_str(stmt.domain.get_ctx(), text).align_params(stmt.domain.get_space())


def _updates_between(moved_on, times, m, acc, exp_stmt, coords, n):
    """The updates of m after the exponential instance and before the accumulator instance of the witness."""
    after_p = moved_on.intersect_domain(_point(exp_stmt, coords[:n])).range()
    before_a = times[m.name].lex_lt_map(times[acc.name]).intersect_range(_point(acc, coords[n:])).domain()
    return after_p.intersect(before_a)
