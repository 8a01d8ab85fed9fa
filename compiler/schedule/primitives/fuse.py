"""fuse: merge two loops into one.

Nested loops (the second is the only child of the first) become one loop
that runs over both, in the same order (`fuse(C.io, C.jo)`: the 16×192
output tiles become 3072 iterations); this is always legal::

    for io: for jo: C          ->    for io_jo: C      # (io, jo) in lexicographic order

Adjacent sibling loops become one loop whose body is the first body then
the second (loop fusion, `fuse(C.i, Y.i)`)::

    for i: C(i)                ->    for i:
    for i: Y(i)                        C(i)
                                       Y(i)

Sibling fusion is legal only if no dependence runs backwards across the
fused iterations (Y(i) may not read what C writes in a later iteration).
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.schedule.tree import Loop, statements_under, walk_loops
from tdsl.compiler.schedule.primitives.common import (LoopLike, State, check_bindings_kept, check_new_names, find_loop,
                                                     grid_bindings, ref_text, single_name)
from tdsl.compiler.schedule.primitives.registry import LOOP, arg, primitive


@primitive(arg("first", LOOP, text="STMT.L1"), arg("second", LOOP, text="STMT.L2"), new_loops=True, rank=40)
def fuse(state: State, first: LoopLike, second: LoopLike, names=None) -> str:
    name = single_name("fuse", names)
    a, _ = find_loop(state, "fuse", first)
    b, _ = find_loop(state, "fuse", second)
    if a is b:
        raise ScheduleError("fuse", f"cannot fuse loop {a.name} with itself")
    for loop in (a, b):
        if loop.host:
            raise ScheduleError("fuse", f"loop {loop.name} runs on the host; fuse loops before host(...)")
    if a.body == [b]:
        return _fuse_nested(state, a, b, name)  # same lexicographic order: legal by construction
    bindings = grid_bindings(state.tree, statements_under(a) + statements_under(b))
    result = _fuse_siblings(state, a, b, name, (ref_text(first, "fuse"), ref_text(second, "fuse")))
    check_bindings_kept(state, "fuse", bindings)  # the fused loop is the first: a binding of the second is refused
    check_dependences(state.model, state.deps, state.tree, "fuse")
    return result



def _fuse_nested(state: State, outer: Loop, inner: Loop, name) -> str:
    if outer.bind or inner.bind:
        raise ScheduleError("fuse", "fuse loops before binding them to grid axes")
    new_name = name if name is not None else f"{outer.name}_{inner.name}"
    check_new_names(state, "fuse", [outer, inner], [new_name], defaults=name is None)
    outer.exprs = {s: outer.exprs[s] + inner.exprs[s] for s in outer.exprs}
    outer.body = inner.body
    outer.name = new_name
    outer.kind = "tile" if "tile" in (outer.kind, inner.kind) else outer.kind
    outer.pipeline = outer.pipeline or inner.pipeline
    outer.warp_specialize = outer.warp_specialize or inner.warp_specialize  # re-checked (and refused: 2 dims)
    for buf in state.tree.buffers:
        if buf.at is inner:
            buf.at = outer
    return new_name


def _fuse_siblings(state: State, a: Loop, b: Loop, name, written: tuple[str, str]) -> str:
    body = state.tree.parent_body(a)
    if not any(n is b for n in body) or body.index(b) != body.index(a) + 1:
        raise ScheduleError(
            "fuse",
            f"loops {written[0]} and {written[1]} are neither nested (the second the only child of the first) "
            f"nor adjacent siblings",
        )
    if a.n_dims != b.n_dims:
        raise ScheduleError("fuse", f"loop {a.name} has {a.n_dims} dimensions and {b.name} has {b.n_dims}")
    new_name = name if name is not None else a.name
    _check_inner_names(a, b, new_name, name is None)
    check_new_names(state, "fuse", [a, b], [new_name], defaults=name is None)
    a.exprs = {**a.exprs, **b.exprs}
    a.body = a.body + b.body
    a.name = new_name
    for buf in state.tree.buffers:
        if buf.at is b:
            buf.at = a
    body.remove(b)
    return new_name


def _check_inner_names(a: Loop, b: Loop, new_name: str, default: bool) -> None:
    """The fused loop encloses the loops of both bodies: none of them may have its name."""
    for loop in (a, b):
        for inner in walk_loops(loop.body):
            if inner.name == new_name:
                fix = "name the fused loop: f = fuse(...)" if default else "choose another name"
                raise ScheduleError("fuse", f"statement {statements_under(inner)[0]} would have two loops named "
                                            f"{new_name}; {fix}")
