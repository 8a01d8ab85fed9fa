"""compute_at / reverse_compute_at: move a statement into another statement's loop.

``compute_at(P, C.ko)`` places producer P inside loop ko of its consumer
C, before C's work in that iteration; ``reverse_compute_at(Y, C.jo)``
places consumer Y inside loop jo of its producer C, after C's work::

    Before:                          After reverse_compute_at(Y, C.jo):
    for io: for jo:                  for io: for jo:
      for ko: ... C                    for ko: ... C
    for i: for j: Y                    for i: for j: Y     # i, j now run within the tile

Placement is per instance and exact (polyhedral): each instance of the
moved statement runs in the *first* iteration of the target loops that
touches the data it exchanges with the target statement (the first
consumer iteration that reads its result; the first producer iteration
that writes its input).  The moved statement keeps its own loops inside.
If later iterations also produce its input -- a reduction loop such as ko
-- the dependence check rejects the placement with a counterexample
(rule reduction-incomplete: SiLU applied to a partial sum).
"""

from __future__ import annotations

from functools import reduce

import islpy as isl

from tdsl.compiler.errors import LegalityError, ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.model.program import (element_at, first_point, fixed_point, instance_text, read_relation,
                                         write_relation_everywhere)
from tdsl.compiler.schedule.tree import Leaf, Loop, Node, pw_affs_to_map, statements_under, walks_reduction
from tdsl.compiler.schedule.primitives.common import (LoopLike, State, check_bindings_kept, check_buffers_in_place,
                                                     check_stmt, find_loop, fresh_loop_name, grid_bindings)
from tdsl.compiler.schedule.primitives.registry import LOOP, STMT, arg, primitive

# The statement to move, and the loop (of another statement) to move it into: `compute_at(P, C.ko)` or
# `compute_at(P, at=C.ko)`.
_MOVE = (arg("stmt", STMT), arg("loop", LOOP, text="TARGET.LOOP", alias="at", role="the target loop"))


@primitive(*_MOVE, rank=60)
def compute_at(state: State, stmt: str, loop: LoopLike) -> None:
    _move(state, "compute_at", stmt, loop, after=False)


@primitive(*_MOVE, rank=70)
def reverse_compute_at(state: State, stmt: str, loop: LoopLike) -> None:
    _move(state, "reverse_compute_at", stmt, loop, after=True)


def _move(state: State, primitive: str, stmt: str, loop: LoopLike, after: bool) -> None:
    stmt = check_stmt(state, primitive, stmt)
    target, target_stmt = find_loop(state, primitive, loop)
    tree, model = state.tree, state.model
    bindings = grid_bindings(tree, [stmt])
    moved = _exclusive_subtree(tree, stmt)
    if any(target is l for l in _loops_in(moved)):
        raise ScheduleError(primitive, f"loop {target.name} belongs to {stmt} itself")
    target_path = tree.enclosing_loops(target) + [target]
    partner = _partner(model, tree, stmt, target, target_stmt, after, primitive)
    exchanges = _exchanges(model, stmt, partner, target_path, after, state.deps)
    placement = _placement(model, stmt, target_path, exchanges, after, primitive)

    # Detach the moved subtree and drop the statement from loops it leaves.  Loops it shares with other
    # statements stay where they are; the moved statement takes a copy of its own dims of each (dropped below
    # if the placement pins them), so none of its instances lose their time coordinates.
    own_loops = _loops_in(moved)
    shared = [l for l in tree.path(stmt) if not any(l is o for o in own_loops)]
    tree.parent_body(moved).remove(moved)
    for loop_ in reversed(shared):
        moved = Loop(loop_.name, {stmt: list(loop_.exprs[stmt])}, [moved], loop_.kind)
    own_loops = _loops_in(moved)
    for node in _all_loops(tree):
        if stmt in node.exprs and not any(node is l for l in own_loops):
            del node.exprs[stmt]
    at_every_size = _pinned_at_every_size(model, stmt, partner, target_path, after)
    moved = _drop_determined_loops(tree, model.stmt(stmt), moved, placement, at_every_size)
    _rename_clashes(moved, {l.name for l in target_path}, stmt, set(model.sizes))
    if after:
        target.body.append(moved)
    else:
        target.body.insert(0, moved)
    for level, node in enumerate(target_path):
        node.exprs[stmt] = placement[level]
    check_buffers_in_place(state, primitive)  # a buffer left behind is a misuse, whatever the dependences say
    check_bindings_kept(state, primitive, bindings)
    try:
        check_dependences(model, state.deps, tree, primitive)
    except LegalityError as err:
        if err.pair is not None:
            try:
                err.placed = _placed(model, stmt, err.pair, target_stmt, target_path, exchanges, after)
            except isl.Error:  # an explanation beside the verdict: the verdict stands without it
                pass
        raise


def _exclusive_subtree(tree, stmt: str) -> Node:
    """The largest subtree holding only `stmt`: its own loops and the leaf."""
    path = tree.path(stmt)
    node: Node = next(n for n in (path[-1].body if path else tree.body) if isinstance(n, Leaf) and n.stmt == stmt)
    for loop in reversed(path):
        if statements_under(loop) == [stmt]:
            node = loop
        else:
            break
    return node


def _partner(model, tree, stmt, target, target_stmt, after, primitive) -> list[str]:
    """Statements under the target loop that exchange data with `stmt` (producers if after, consumers if not)."""
    moved = model.stmt(stmt)
    found = []
    for other in statements_under(target):
        if other == stmt:
            continue
        o = model.stmt(other)
        if after and any(r.tensor == o.write.tensor for r in moved.reads):
            found.append(other)
        if not after and any(r.tensor == moved.write.tensor for r in o.reads):
            found.append(other)
    if not found:
        role = "writes anything it reads" if after else "reads what it writes"
        raise ScheduleError(primitive, f"no statement under loop {target.name} {role}: {stmt} has nothing to be placed next to")
    return found


def _exchanges(model, stmt, partners, target_path, after, deps) -> dict:
    """Each partner -> (moved instance -> the partner's instances it exchanges data with, partner instance -> its
    coordinates on the target loops).

    An exponential and its running maximum (`online`) exchange through their running dependence: the update of
    the maximum that took the exponential's own term in, not every update of the element it reads."""
    moved = model.stmt(stmt)
    found = {}
    for other in partners:
        o = model.stmt(other)
        running = _running(deps, other, stmt) if after else _running(deps, stmt, other)
        if running is not None:
            rel = running.reverse() if after else running
        elif after:  # moved consumer instance -> producer instances writing what it reads
            rel = _union([r.relation for r in moved.reads if r.tensor == o.write.tensor]).apply_range(
                o.write.relation.reverse())
        else:  # moved producer instance -> consumer instances reading what it writes
            rel = moved.write.relation.apply_range(
                _union([r.relation for r in o.reads if r.tensor == moved.write.tensor]).reverse())
        found[other] = (rel, pw_affs_to_map([d for loop in target_path for d in loop.exprs[other]], o.domain))
    return found


def _placement(model, stmt, target_path, exchanges: dict, after: bool, primitive) -> list[list[isl.PwAff]]:
    """For each target loop, the moved statement's coordinates: the lexmin over related partner instances."""
    moved = model.stmt(stmt)
    first = _first(exchanges)
    uncovered = moved.domain.subtract(first.domain())
    if not uncovered.is_empty():
        raise ScheduleError(primitive, _unplaced(model, stmt, list(exchanges), uncovered, after))
    pma = first.as_pw_multi_aff() if hasattr(first, "as_pw_multi_aff") else first.lexmin_pw_multi_aff()
    components = [pma.get_pw_aff(i).intersect_domain(moved.domain).coalesce() for i in range(pma.dim(isl.dim_type.out))]
    placement, k = [], 0
    for loop in target_path:
        placement.append(components[k : k + loop.n_dims])
        k += loop.n_dims
    return placement


def _first(exchanges: dict) -> isl.Map:
    """Moved instance -> the first coordinates on the target loops of a partner instance it exchanges with."""
    return _union([rel.apply_range(coords) for rel, coords in exchanges.values()]).lexmin()


def _placed(model, stmt: str, pair, target_stmt: str, target_path, exchanges: dict, after: bool) -> str:
    """Where the placement put the moved statement's instance of a violating pair, and which partner instance
    decided it: the partner is not always the other statement of the pair (a consumer of two producers runs in
    the first iteration where either writes what it reads: probe LL).  Empty where `stmt` is not in the pair."""
    (src, src_pt), (dst, dst_pt), params = pair
    if stmt not in (src, dst):
        return ""
    moved = model.stmt(stmt)
    moved_pt = src_pt if src == stmt else dst_pt
    point = fixed_point(moved.domain, moved_pt, params)
    at = _first(exchanges).intersect_domain(point).range()
    for other, (rel, coords) in exchanges.items():
        chosen = rel.intersect_domain(point).range().intersect(coords.intersect_range(at).domain())
        if chosen.is_empty():
            continue
        partner_pt, values, where = first_point(chosen)[1], first_point(at)[1], []
        for loop in target_path:
            part, values = values[: loop.n_dims], values[loop.n_dims:]
            where.append(f"{loop.name}={part[0]}" if len(part) == 1 else f"{loop.name}=({', '.join(map(str, part))})")
        o = model.stmt(other)
        # the element they exchange: what the partner writes (a consumer moved) or the moved producer writes
        access = o.write if after else moved.write
        coords = element_at(access.relation, partner_pt if after else moved_pt, params)
        element = f"{access.tensor}[{', '.join(map(str, coords))}]"
        verb, its = ("writes", "reads") if after else ("reads", "writes")
        return (f"{instance_text(stmt, moved.iters, moved_pt)} runs in {target_stmt}'s iteration {', '.join(where)}, "
                f"the first that {verb} a value it {its}: {instance_text(other, o.iters, partner_pt)} {verb} "
                f"{element} there")
    return ""


def _unplaced(model, stmt: str, partners, uncovered: isl.Set, after: bool) -> str:
    """Why instances of `stmt` cannot be placed: the first one, with the run-time sizes it exists at, and, where
    every such instance exists only at sizes at which the partners have none, a note that says so (a halo
    stencil's consumer has no instance at N = 1: probe HH)."""
    params, coords = first_point(uncovered)
    inst = instance_text(stmt, model.stmt(stmt).iters, coords)
    sizes = f" at {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""
    what = "reads nothing the target loop produces" if after else "is read by nothing under the target loop"
    text = f"{inst}{sizes} {what}; it cannot be placed in that loop"
    if params:
        busy = reduce(isl.Set.intersect, (model.stmt(p).domain.params() for p in partners))  # sizes all have instances
        if uncovered.intersect_params(busy).is_empty():
            text += (f": only sizes at which {', '.join(partners)} {'has' if len(partners) == 1 else 'have'} no "
                     f"instance leave it so (given a size at which {'it has' if len(partners) == 1 else 'they have'} "
                     f"instances, e.g. with --size, it is placed)")
    return text


def _running(deps, src: str, dst: str):
    return next((d.relation for d in deps if d.kind == "running" and d.src == src and d.dst == dst), None)


def _union(maps):
    out = maps[0]
    for m in maps[1:]:
        out = out.union(m)
    return out


def _all_loops(tree):
    from tdsl.compiler.schedule.tree import walk_loops

    return list(walk_loops(tree.body))


def _loops_in(node: Node) -> list[Loop]:
    from tdsl.compiler.schedule.tree import walk_loops

    return [node] + list(walk_loops(node.body)) if isinstance(node, Loop) else []


def _drop_determined_loops(tree, stmt, moved: Node, placement, at_every_size) -> Node:
    """Own loops with one iteration per placement (e.g. s.i under Y.i) are redundant: remove them.  Never a loop
    over the statement's reduction: a reader's placement cannot pin it (the reader takes the finished value), only
    a size of 1 can (`m.j` under Y.i at N = 1), and a later step of a schedule written for every size names it
    (`split(m.j, 4)` after `compute_at(m, Y.i)`).  Likewise a loop of one iteration at these sizes is removed only
    where the placement pins it at every size (`P.b` under `U.b` at B = 1, not `e.j` under `s.i` at N = 1): the
    tree keeps the shape it has at other sizes."""
    outer = pw_affs_to_map([d for dims in placement for d in dims], stmt.domain)
    kept: list[Loop] = []
    for loop in _loops_in(moved):
        own = pw_affs_to_map(loop.exprs[stmt.name], stmt.domain)
        pinned = outer.reverse().apply_range(own).is_single_valued() and not any(
            walks_reduction(stmt, pa) for pa in loop.exprs[stmt.name])
        if pinned and _one_value(own):
            pinned = at_every_size(loop.exprs[stmt.name])
        if not (pinned and not any(b.at is loop for b in tree.buffers)):
            kept.append(loop)
    leaf: Node = Leaf(stmt.name)
    for loop in reversed(kept):
        loop.body = [leaf]
        leaf = loop
    return leaf


def _one_value(own: isl.Map) -> bool:
    values = own.range()
    return values.lexmin().is_equal(values)


# The structural test lets every iterator range over [-_BOX, _BOX]: far more than any split factor, so a
# loop's dependence on the iterators shows as it does at large sizes.
_BOX = 1 << 20


def _pinned_at_every_size(model, stmt: str, partners: list[str], target_path: list[Loop], after: bool):
    """A test of whether the placement pins a loop of `stmt` whatever the sizes: the placement computed as in
    `_placement`, but with each statement's iterators ranging independently over a large box and the accesses
    read off their indices (at a size of 1 isl writes `e[i, j = 0] -> X[i, 0]`, and which loop the partner's
    placement follows no longer shows).  A partner placed by an earlier step (its loop expressions were simplified
    on its domain) takes the coordinates of the statements under the target loop it exchanges data with
    (`_coordinates_everywhere`); partners exchanging through a running dependence (`online`) by their accesses.
    A partner for which that cannot be told is left out (an access that is not its indices' formula, a loop
    expression in pieces); where none is left, the answer is yes: the decision at these sizes stands.  Computed
    on first use: at most sizes no loop has one iteration."""
    moved = model.stmt(stmt)
    moved_box = _box(moved.domain)
    under = [s for s in statements_under(target_path[-1]) if s != stmt]
    cache: dict = {}

    def first():
        if "first" not in cache:
            times, known = None, {stmt: None}
            for other in partners:  # by their accesses also where they exchange through a running dependence
                exchange = _exchange_everywhere(model, moved, model.stmt(other), after)
                coords = _coordinates_everywhere(model, other, target_path, under, known)
                if exchange is None or coords is None:
                    continue
                part = exchange.intersect_domain(moved_box).apply_range(coords)
                times = part if times is None else times.union(part)
            cache["first"] = None if times is None else times.lexmin()
        return cache["first"]

    def pinned(exprs: list[isl.PwAff]) -> bool:
        own = [_everywhere(pa) for pa in exprs]
        placement = first()
        if placement is None or any(o is None for o in own):
            return True
        return placement.reverse().apply_range(pw_affs_to_map(own, moved_box)).is_single_valued()

    return pinned


def _coordinates_everywhere(model, name: str, target_path: list[Loop], under: list[str], known: dict):
    """Instance of `name` (over its box) -> its coordinates in the target loops, whatever the sizes: its own loop
    expressions where they are formulas over its whole space, else (a statement an earlier step placed) the first
    coordinates of the statements under the target loop it exchanges data with, found the same way; None where
    none can be told.  `known` holds the answers found so far (None also while one is being found: a cycle of
    placed statements tells nothing), so each statement is looked at once."""
    if name in known:
        return known[name]
    known[name] = None
    stmt = model.stmt(name)
    box = _box(stmt.domain)
    dims = [_everywhere(pa) for loop in target_path for pa in loop.exprs[name]]
    if all(d is not None for d in dims):
        known[name] = pw_affs_to_map(dims, box)
        return known[name]
    times = None
    for other in under:
        coords = None if other == name else _coordinates_everywhere(model, other, target_path, under, known)
        if coords is None:
            continue
        for after in (True, False):  # it reads what the other writes; the other reads what it writes
            exchange = _exchange_everywhere(model, stmt, model.stmt(other), after)
            if exchange is not None:
                part = exchange.intersect_domain(box).apply_range(coords)
                times = part if times is None else times.union(part)
    known[name] = None if times is None else times.lexmin()
    return known[name]


def _exchange_everywhere(model, moved, partner, after: bool):
    """Moved instance -> partner instances it exchanges data with, over every point of their spaces; None where an
    access is not the formula of its indices (a copy's read, rewritten by recompute_at)."""
    if after:  # the moved consumer reads what the partner writes
        reads = _reads_everywhere(model, moved, partner.write.tensor)
        write = _write_everywhere(partner)
        return None if reads is None or write is None else reads.apply_range(write.reverse())
    write = _write_everywhere(moved)
    reads = _reads_everywhere(model, partner, moved.write.tensor)
    return None if reads is None or write is None else write.apply_range(reads.reverse())


def _reads_everywhere(model, stmt, tensor: str):
    maps = []
    for access in (r for r in stmt.reads if r.tensor == tensor):
        if access.node is None:
            return None
        everywhere = read_relation(model, stmt, access.node, everywhere=True)
        if not access.relation.is_subset(everywhere):
            return None
        maps.append(everywhere)
    return _union(maps) if maps else None


def _write_everywhere(stmt):
    everywhere = write_relation_everywhere(stmt)
    return everywhere if stmt.write.relation.is_subset(everywhere) else None


def _everywhere(pa: isl.PwAff):
    """A loop's expression over every point of its statement's space, or None where it is not one formula there:
    in pieces, or simplified on the statement's domain (a placement: isl writes `j` as 0 where j = 0)."""
    pieces = pa.get_pieces()
    if len(pieces) != 1 or not pieces[0][0].plain_is_universe():
        return None
    return isl.PwAff.from_aff(pieces[0][1])


def _box(domain: isl.Set) -> isl.Set:
    box = isl.Set.universe(domain.get_space())
    for k in range(box.dim(isl.dim_type.set)):
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val(-_BOX)).upper_bound_val(isl.dim_type.set, k, isl.Val(_BOX))
    return box


def _rename_clashes(moved: Node, taken: set[str], stmt: str, sizes: set[str]) -> None:
    """The moved statement's own loops keep their names unless they collide with the target's; a colliding loop
    becomes `STMT_loop`, or the first free valid variant of it that is not a size (the trace names it later)."""
    own = _loops_in(moved)
    used = taken | sizes | {loop.name for loop in own}
    for loop in own:
        if loop.name in taken:
            loop.name = fresh_loop_name(f"{stmt}_{loop.name}", used)
            used.add(loop.name)
