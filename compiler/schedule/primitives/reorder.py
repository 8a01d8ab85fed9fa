"""reorder: permute loops of one perfectly nested chain.

Before::                              After ``reorder(C, io, jo, ko, ii, jj, kk)``::

    for io: for ii: for jo: for jj:       for io: for jo: for ko:
      for ko: for kk: C                     for ii: for jj: for kk: C

The named loops must lie on one statement's path, and every loop between
the outermost and the innermost named one must enclose nothing but the
next loop (a perfect nest).  Loops of the chain that are not named keep
their places.  Legal when every dependence still runs forward (e.g.
moving the reduction loop k outside i and j is legal: each C[i, j] still
sums its k in order).
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.schedule.primitives.common import LoopLike, State, as_ref, find_loop, ref_text
from tdsl.compiler.schedule.primitives.registry import LOOP, primitive, rest


@primitive(rest("loops", LOOP, text="STMT, L1, L2, ...",
                role="a statement then loops on its path, or loops STMT.L of one statement"), rank=30)
def reorder(state: State, *loops: LoopLike) -> None:
    reorder_loops(state, loops, "reorder")


def reorder_loops(state: State, loops, step: str) -> None:
    """The rewrite of `reorder`, its errors named after `step` (`tile` reorders through it)."""
    if len(loops) < 2:
        raise ScheduleError(step, "name at least two loops")
    stmt, refs = _statement_and_loops(state, loops, step)
    path = state.tree.path(stmt)
    for ref in refs:  # an unknown loop is named before the count is judged
        node, owner = find_loop(state, step, _on(stmt, ref, step))
        if node not in path:
            raise ScheduleError(step, f"loop {ref_text(ref)} does not enclose statement {stmt}; reorder the loops of one statement")
    if len(refs) < 2:
        raise ScheduleError(step, "name at least two loops")
    nodes = [find_loop(state, step, _on(stmt, ref, step))[0] for ref in refs]
    if len({id(n) for n in nodes}) != len(nodes):
        raise ScheduleError(step, "a loop is named twice")
    path = state.tree.path(stmt)
    depth = {id(n): path.index(n) for n in nodes}
    top, bottom = min(depth.values()), max(depth.values())
    chain = path[top : bottom + 1]
    if any(n.host for n in chain):
        host = next(n for n in chain if n.host)
        raise ScheduleError(step, f"loop {host.name} runs on the host, where the loops stay in their order; reorder "
                                  f"before host(...), or reorder loops inside it")
    for node in chain[:-1]:
        if len(node.body) != 1:
            others = [c for c in node.body if c is not (path[path.index(node) + 1])]
            raise ScheduleError(
                step,
                f"loops {chain[0].name}..{chain[-1].name} are not perfectly nested: loop {node.name} also encloses "
                f"{_describe(others)}",
            )
    slots = sorted(depth[id(n)] for n in nodes)
    new_chain = list(chain)
    for slot, node in zip(slots, nodes):
        new_chain[slot - top] = node
    _relink(state, chain, new_chain)
    check_dependences(state.model, state.deps, state.tree, step)


def _on(stmt: str, ref, step: str) -> LoopLike:
    """A loop argument as a reference on `stmt`'s path: a bare name `io` means `stmt.io`."""
    parsed = as_ref(ref, step)
    return ref if parsed.stmt else f"{stmt}.{parsed.loop}"


def _statement_and_loops(state: State, loops, step: str):
    """`reorder(C, io, jo)` names the statement first; `reorder(C.io, C.jo)` does not."""
    first = loops[0]
    if isinstance(first, str) and "." not in first and first in state.tree.leaves():
        return first, loops[1:]
    _, stmt = find_loop(state, step, first)
    return stmt, loops


def _relink(state: State, old: list, new: list) -> None:
    innermost_body = old[-1].body
    if old[0] is not new[0]:  # the kernel's launch configuration belongs to the outermost loop
        new[0].warps, old[0].warps = old[0].warps, None
        new[0].group, old[0].group = old[0].group, None
        new[0].persistent, old[0].persistent = old[0].persistent, False
    parent = state.tree.parent_body(old[0])
    parent[parent.index(old[0])] = new[0]
    for outer, inner in zip(new, new[1:]):
        outer.body = [inner]
    new[-1].body = innermost_body


def _describe(nodes) -> str:
    from tdsl.compiler.schedule.tree import Leaf, statements_under

    return ", ".join(
        f"statement {n.stmt}" if isinstance(n, Leaf) else f"loop {n.name} (of {', '.join(statements_under(n))})"
        for n in nodes)
