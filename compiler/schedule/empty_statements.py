"""Statements with no instance at the bound sizes, dropped before analysis and lowering.

A statement may have instances at some sizes and none at others: PolyBench trisolv's updates of the later
rows, `P[j, i : i > j]`, have none at N = 1.  The model keeps such a statement, so that the schedule's steps
that name it (`split(P.i, 32)`) still apply and their legality is checked as at any size.  What computes
nothing needs no loops, tiles, buffers or kernel, though: the buffer planner, the cost model and the lowering
see the schedule with those statements removed (`without_empty_statements`), made once per schedule state so
that each of them sees the same tree.

A tensor only an empty statement writes stays a tensor of the model: a result keeps its place among the
kernel's arguments, and a temporary is read only in `where` branches no instance takes (the model's bounds
check refuses any other read of an element no instance writes), which the lowering reads as nothing.
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.schedule.tree import Leaf, Node, Tree, statements_under, walk_loops


def empty_statements(model) -> list[str]:
    """The statements with no instance at the model's sizes."""
    return [s.name for s in model.stmts if s.domain.is_empty()]


def without_empty_statements(schedule):
    """`schedule` itself when every statement has an instance; else a copy without the empty ones (the same
    copy for every call on the same state, so plans and costs made from it refer to one tree)."""
    state = schedule.state
    key = (id(state.model), id(state.tree))  # a step makes a new state; this also notices a state edited in place
    memo = getattr(state, "_without_empty", None)
    if memo is None or memo[0] != key:  # each of lower, plan_kernels, analyze, refusal asks: isl answers once
        empty = set(empty_statements(state.model))
        unread = unread_copies(state.model, state.tree)
        memo = (key, _pruned(schedule, empty, unread) if empty or unread else None)  # None: nothing to leave out
        state._without_empty = memo
    return memo[1] or schedule


def unread_copies(model, tree: Tree) -> set:
    """The positions in `tree.buffers` of cache_read copies that no instance reads: their statements read the
    tensor only in `where` branches no instance takes at these sizes (a time loop's reads of the step before,
    at one step: probe LL, 'buffer of T at loop uo is empty')."""
    def read(buf) -> bool:
        return any(not a.relation.is_empty() for s in buf.stmts
                   for a in model.stmt(s).reads if a.tensor == buf.tensor)

    return {n for n, buf in enumerate(tree.buffers) if buf.kind == "read" and not read(buf)}


def _pruned(schedule, empty: set, unread: set = frozenset()):
    made = schedule.copy()
    state = schedule.state
    made.state.model = replace(state.model, stmts=[s for s in state.model.stmts if s.name not in empty])
    made.state.tree = _pruned_tree(state.tree, empty, unread)
    made.state.deps = [d for d in state.deps if d.src not in empty and d.dst not in empty]
    return made


def _pruned_tree(tree: Tree, empty: set, unread: set = frozenset()) -> Tree:
    """The tree without the leaves of `empty`, without loops left with no statement, and without the buffers
    that only those statements used, that copy what only they write (a reader's copy of nothing), or that no
    instance reads (`unread`: positions in `tree.buffers`)."""
    pruned = tree.copy()
    pruned.body = _pruned_body(pruned.body, empty)
    kept = {id(loop) for loop in walk_loops(pruned.body)}
    buffers = []
    for n, buf in enumerate(pruned.buffers):
        buf.stmts = [s for s in buf.stmts if s not in empty]
        if buf.stmts and id(buf.at) in kept and buf.tensor not in empty and n not in unread:
            buffers.append(buf)
    pruned.buffers = buffers
    pruned.online = [name for name in pruned.online if name not in empty]
    return pruned


def _pruned_body(body: list[Node], empty: set) -> list[Node]:
    kept = []
    for node in body:
        if isinstance(node, Leaf):
            if node.stmt not in empty:
                kept.append(node)
            continue
        node.body = _pruned_body(node.body, empty)
        if not statements_under(node):
            continue
        for name in empty:
            node.exprs.pop(name, None)
        kept.append(node)
    return kept

