"""Legality of a scheduled tree: every check raises a typed `LegalityError`
with the primitive, the statements, the rule and a concrete counterexample.

Rules (see docs/legality.md):
* dependence / reduction-incomplete / reduction-order: every dependence
  must still run forward: deps ⊆ { s -> t : time(s) <lex time(t) }.
* parallel-dependence / parallel-reduction: a loop bound to a grid axis
  carries no dependence.
* cache-conflict: an on-chip copy never goes stale.
* atomic-combine: a loop bound to grid axes that splits one element's
  updates needs atomics; only `combine reassoc` allows them.
* rounding-removed / rounding-added: a buffer in another dtype rounds
  exactly where the program does (every store rounds to its dtype):
  compiler/legality/rounding.py.
* pipeline-overlap: a warp-specialised loop's first product of the next
  iteration runs before its last group (compiler/legality/overlap.py).
* reduction-grouping / segment-count: checked by rfactor
  (compiler/schedule/primitives/rfactor.py) with `check_grouping` below.
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.compiler.model.dependences import Dependence
from tdsl.compiler.model.isl_memo import by_text
from tdsl.compiler.errors import (
    AtomicCombine,
    CacheConflict,
    DependenceViolation,
    ParallelDependence,
    ParallelReduction,
    ReductionIncomplete,
    ReductionOrder,
)
from tdsl.compiler.legality.overlap import check_overlap
from tdsl.compiler.legality.rounding import check_buffer_rounding, element_of, first_coords, first_instance
from tdsl.compiler.legality.start_values import check_start_values
from tdsl.compiler.model.program import KernelModel, element_at, first_point
from tdsl.compiler.schedule.tree import Buffer, Loop, Tree, statements_under


def check_dependences(model: KernelModel, deps: list[Dependence], tree: Tree, primitive: str) -> None:
    times = tree.time_maps(model)
    backward: dict[tuple[str, str], isl.Map] = {}  # (src, dst) -> the pairs of instances whose times do not increase
    for dep in deps:
        # The pairs that would not run forward (intersecting with lex_ge is the subtraction of lex_lt, and many
        # times faster on tiled, skewed maps; one lex_ge map serves every dependence between two statements).
        pair = (dep.src, dep.dst)
        if pair not in backward:
            backward[pair] = _not_forward(times[dep.src], times[dep.dst])
        if _none_of(dep.relation, backward[pair]):
            continue
        broken = dep.relation.intersect(backward[pair])
        cls = _violation_class(model, dep)
        if cls is ReductionIncomplete:
            partial = _after_some_terms(dep.relation, broken)
            if partial.is_empty():  # the reader runs before every term: the value does not exist yet at all
                cls = DependenceViolation
            else:
                broken = partial
        src, dst, element = concrete_pair(model, dep, broken)
        detail = f"{dep.describe()}, but {dep.dst} would run first"
        explanation = None
        if cls is ReductionIncomplete:
            detail = f"{dep.dst} reads {dep.tensor} before the reduction {dep.src} has combined all its terms"
            explanation = statistic_explanation(model, dep.src, dep.dst)
            hint = online_hint(model, dep)
            if hint:
                explanation = (explanation or cls.explanation) + "; " + hint
        elif cls is ReductionOrder:
            detail = f"the updates of the reduction {dep.src} would be combined in a different order"
        example = f"{src} must run before {dst} ({_touch(dep, element)}) but would run after"
        error = cls(primitive, sorted({dep.src, dep.dst}), detail, example, explanation)
        error.pair = pair_points(model, dep, broken)
        raise error
    check_start_values(model, tree, times, primitive)  # read before the walk over the terms, not at a term
    from tdsl.compiler.legality.online import check_online

    check_online(model, tree, primitive)  # the orders of a running maximum that are not dependences


# Every step checks every dependence again, and most statements' time maps did not change: the answers are cached
# (compiler/model/isl_memo.py).
@by_text(maxsize=4096)
def _not_forward(src_times: isl.Map, dst_times: isl.Map) -> isl.Map:
    """The pairs of instances whose times do not increase from src to dst."""
    return src_times.lex_ge_map(dst_times)


@by_text(maxsize=4096)
def _none_of(relation: isl.Map, pairs: isl.Map) -> bool:
    return relation.intersect(pairs).is_empty()


def carried_by(model: KernelModel, deps: list[Dependence], tree: Tree, loop: Loop, times=None) -> list[tuple]:
    """The dependences `loop` carries, each with its carried pairs (Dependence, isl.Map): instances in different
    iterations of `loop` within one iteration of its outer loops.  `times`: (inner, outer) from `_loop_times`."""
    inner, outer = times or _loop_times(model, tree, loop)
    under = set(statements_under(loop))
    carried = []
    for dep in deps:
        if dep.src not in under or dep.dst not in under:
            continue
        rel = _in_different_iterations(dep.relation, inner[dep.src], inner[dep.dst])
        if outer is not None:
            rel = _in_one_iteration(rel, outer[dep.src], outer[dep.dst])
        if not rel.is_empty():
            carried.append((dep, rel))
    return carried


@by_text(maxsize=4096)
def _in_different_iterations(relation: isl.Map, src_times: isl.Map, dst_times: isl.Map) -> isl.Map:
    """The pairs of `relation` whose times (down to a loop) differ."""
    return relation.subtract(src_times.apply_range(dst_times.reverse()))


@by_text(maxsize=4096)
def _in_one_iteration(relation: isl.Map, src_times: isl.Map, dst_times: isl.Map) -> isl.Map:
    """The pairs of `relation` whose times (down to a loop) are equal."""
    return relation.intersect(src_times.apply_range(dst_times.reverse()))


def check_parallel(model: KernelModel, deps: list[Dependence], tree: Tree, loop: Loop, primitive: str) -> None:
    """No dependence may connect two different iterations of `loop` within one iteration of its outer loops."""
    inner, outer = _loop_times(model, tree, loop)
    for dep, rel in carried_by(model, deps, tree, loop, (inner, outer))[:1]:
        src, dst, element = concrete_pair(model, dep, rel)
        cls = ParallelReduction if dep.kind == "reduction" else ParallelDependence
        detail = f"loop {loop.name} carries a dependence: {dep.describe()}"
        example = f"{src} and {dst} run in different iterations of {loop.name} ({_touch(dep, element)})"
        raise cls(primitive, sorted({dep.src, dep.dst}), detail, example)
    check_atomics(model, tree, loop, primitive, inner, outer)


def check_atomics(model: KernelModel, tree: Tree, loop: Loop, primitive: str, inner=None, outer=None) -> None:
    """A bound loop that puts updates of one reduction element in different programs combines them with atomics,
    in the order the programs finish.  Only `combine reassoc` allows that (a strict reduction is already
    rejected as parallel-reduction by its dependence), and any `max` or `min` reduction: an atomic max or min
    gives the same bits in every arrival order."""
    from tdsl.compiler.model.dependences import order_independent, policy

    if inner is None:
        inner = tree.time_maps(model, upto=loop, positions=False)
        outer_loop = _outer_of(tree, loop)
        outer = tree.time_maps(model, upto=outer_loop, positions=False) if outer_loop else None
    for name in statements_under(loop):
        stmt = model.stmt(name)
        kind, count = policy(stmt) if stmt.is_reduction else ("", None)
        if kind not in ("deterministic", "segments") or order_independent(stmt):
            continue
        same_element = stmt.write.relation.apply_range(stmt.write.relation.reverse())
        split = same_element.subtract(inner[name].apply_range(inner[name].reverse()))
        if outer is not None:
            split = split.intersect(outer[name].apply_range(outer[name].reverse()))
        if split.is_empty():
            continue
        params, coords = first_point(split.wrap())
        n = len(stmt.iters)
        from tdsl.compiler.model.program import instance_text

        a = instance_text(name, stmt.iters, coords[:n])
        b = instance_text(name, stmt.iters, coords[n:])
        suffix = (" with " + ", ".join(f"{k}={v}" for k, v in params.items())) if params else ""
        declared = f"combine {stmt.combine}"
        raise AtomicCombine(
            primitive,
            [name],
            f"the programs of loop {loop.name} would add their partial results of {name} with atomics, "
            f"but {name} declares `{declared}`",
            f"{a} and {b} update {element_of(stmt, coords[:n])} in different programs of {loop.name}{suffix}: "
            f"their partial results would be added in the order the programs finish",
        )


def check_cache_read(model: KernelModel, tree: Tree, buf: Buffer, primitive: str) -> None:
    """The cached tensor must not be written while the copy lives (inside one iteration of `at`)."""
    for stmt in statements_under(buf.at):
        writer = model.stmt(stmt)
        if writer.write.tensor == buf.tensor:
            inst = first_instance(writer)
            raise CacheConflict(
                primitive,
                [stmt] + buf.stmts,
                f"{stmt} writes {buf.tensor} inside loop {buf.at.name}, where {', '.join(buf.stmts)} would read a copy",
                f"{inst} writes {buf.tensor} while the {buf.scope} copy of {buf.tensor} is live",
            )


def check_cache_write(model: KernelModel, tree: Tree, buf: Buffer, primitive: str) -> None:
    """All updates of one element must happen in one iteration of `at`, so the copy is written back once, complete."""
    writer = model.stmt(buf.stmts[0])
    prefix = tree.time_maps(model, upto=buf.at, positions=False)[writer.name]
    same_element = writer.write.relation.apply_range(writer.write.relation.reverse())
    same_iteration = prefix.apply_range(prefix.reverse())
    split = same_element.subtract(same_iteration)
    if split.is_empty():
        return
    params, coords = first_point(split.wrap())
    n = len(writer.iters)
    from tdsl.compiler.model.program import instance_text

    a = instance_text(writer.name, writer.iters, coords[:n])
    b = instance_text(writer.name, writer.iters, coords[n:])
    raise CacheConflict(
        primitive,
        [writer.name],
        f"{writer.name} updates one element of {buf.tensor} in several iterations of loop {buf.at.name}; "
        f"the {buf.scope} copy would be written back before the element is complete",
        f"{a} and {b} write the same element in different iterations of {buf.at.name}",
    )


# ---------------------------------------------------------------- grouping of reductions (rfactor)


def check_grouping(model: KernelModel, stmt, sigma: isl.Map, primitive: str, size=None, partial: str = "") -> None:
    """Splitting `stmt`'s terms into the partial sums `sigma` (instance -> [element, segment]) and adding the partial
    sums in segment order must be allowed by its combine policy.  `size` = (name, value) when the number of
    segments is a problem size."""
    from tdsl.compiler.model.dependences import order_independent, policy, same_segment, segments
    from tdsl.compiler.errors import ReductionGrouping, SegmentCount
    from tdsl.compiler.model.program import instance_text

    kind, count = policy(stmt)
    if kind == "reassoc" or order_independent(stmt):
        return  # any grouping and any count, even one taken from a size, gives the same result
    n = len(stmt.iters)
    declared = f"`combine {stmt.combine}`" if stmt.combine else "no combine policy (strict order)"

    def pair(rel):
        params, coords = first_point(rel.wrap())
        suffix = (" with " + ", ".join(f"{k}={v}" for k, v in params.items())) if params else ""
        return (instance_text(stmt.name, stmt.iters, coords[:n]), instance_text(stmt.name, stmt.iters, coords[n:]),
                element_of(stmt, coords[:n]), suffix)

    same_part = sigma.apply_range(sigma.reverse())
    if kind == "strict":
        # The grouping changes iff some partial sum after the first of an element holds two terms: the program adds
        # the first of them to the running sum, rfactor adds it to the other term first.
        order = isl.Map.from_domain_and_range(stmt.domain, stmt.domain)
        ident = isl.Map.read_from_str(
            model.ctx, f"{{ {stmt.name}[{', '.join(stmt.iters)}] -> [{', '.join(stmt.iters)}] }}"
        ).align_params(stmt.domain.get_space()).intersect_domain(stmt.domain)
        later = ident.lex_lt_map(ident)
        together = same_part.intersect(later)
        earlier_part = sigma.lex_gt_map(sigma).intersect(stmt.write.relation.apply_range(stmt.write.relation.reverse()))
        if stmt.init is None:
            together = together.intersect_domain(earlier_part.domain())
        # (a sum from a value: the first partial sum is added to the start value too, so it regroups as well)
        regrouped = together.intersect(order)
        if regrouped.is_empty():
            return
        a, b, element, suffix = pair(regrouped)
        raise ReductionGrouping(
            primitive,
            [stmt.name],
            f"the reduction {stmt.name} would be split into partial sums{' ' + partial if partial else ''} that are "
            f"added afterwards, but {stmt.name} declares {declared}",
            f"{a} and {b} would be added to each other in one partial sum and then to the sum of the "
            f"{'start value and the ' if stmt.init is not None else ''}earlier terms of {element}; the program adds "
            f"{a} to that sum first{suffix}",
        )
    if size is not None:
        name, value, extent = size
        other = 1 if value != 1 else 2
        k = stmt.red_iters[0]

        def parts(n):
            return f"{n} partial sum{'s' * (n != 1)} of {-(-extent // n)} terms of {k}"

        raise SegmentCount(
            primitive,
            [stmt.name],
            f"the number of partial sums of {stmt.name} would be the size {name}, so its result would depend on "
            f"{name}; {stmt.name} declares {declared}",
            f"with {name}={value}, {element_of(stmt, first_coords(stmt))} would add {parts(value)}, "
            f"with {name}={other} {parts(other)}: the same row of inputs gives a different {stmt.name} when only "
            f"{name} changes",
        )
    if kind != "segments":
        return  # deterministic: any grouping fixed by the schedule
    seg = segments(stmt)
    if seg is None:
        raise SegmentCount(
            primitive, [stmt.name],
            f"{stmt.name} declares `combine {stmt.combine}` but the extent of {stmt.red_iters[0]} is left symbolic, "
            f"so its segments are not fixed",
            f"bind the size of {stmt.red_iters[0]} (--size) to check the partial sums against the segments",
        )
    same_element = stmt.write.relation.apply_range(stmt.write.relation.reverse())
    program = same_segment(stmt).intersect(same_element).intersect_domain(stmt.domain).intersect_range(stmt.domain)
    mine = same_part.intersect_domain(stmt.domain).intersect_range(stmt.domain)
    if program.is_equal(mine):
        return
    made = _count_of_parts(sigma)
    joined = mine.subtract(program)
    if not joined.is_empty():
        a, b, element, suffix = pair(joined)
        example = f"{a} and {b} would be in one partial sum, but in different segments of the program{suffix}"
    else:
        a, b, element, suffix = pair(program.subtract(mine))
        example = f"{a} and {b} are in one segment of the program but would be in different partial sums{suffix}"
    cut = f"{seg.count} segments of {seg.length} values of {seg.iterator}"
    detail = (f"{stmt.name} declares `combine {stmt.combine}` ({cut}), but {primitive} would cut its partial sums at "
              f"other values of {seg.iterator}" if made == f"{seg.count} partial sums" else  # same count (probe MM)
              f"{stmt.name} declares `combine {stmt.combine}` ({cut}), but {primitive} would make {made}")
    raise SegmentCount(primitive, [stmt.name], detail, example)


def _count_of_parts(sigma: isl.Map) -> str:
    """'16 partial sums' when the segment coordinate takes a fixed number of values, else 'different segments'."""
    last = sigma.range().dim(isl.dim_type.set) - 1
    top = sigma.range().dim_max(last)
    if top.is_cst():
        values = []
        top.foreach_piece(lambda _s, aff: values.append(aff.get_constant_val().to_python()))
        count = int(max(values)) + 1
        return f"{count} partial sums" if count != 1 else "one sum of all the terms"
    return "a number of partial sums that depends on a size"


# ---------------------------------------------------------------- row statistics


def statistic_reader(model: KernelModel, reduction: str, reader: str) -> Optional[str]:
    """The elementwise statement that applies the reduction's result to many elements (a row scale, a softmax
    normalisation): `reader` itself, or one it feeds through elementwise statements of the reduction's shape;
    None if there is none (a reduction that sums the statistic's values is no such use: probe HH)."""
    first = model.stmt(reduction)
    seen = set()
    todo = [(reduction, {reader})]  # (a tensor, the statements whose reads of it count)
    while todo:
        tensor, readers = todo.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        for stmt in model.stmts:
            if stmt.is_reduction or (readers is not None and stmt.name not in readers):
                continue
            for acc in stmt.reads:
                if acc.tensor != tensor:
                    continue
                if not acc.relation.is_injective():
                    return stmt.name
                if len(stmt.lhs_iters) == len(first.lhs_iters):
                    todo.append((stmt.write.tensor, None))
    return None


def statistic_explanation(model: KernelModel, reduction: str, reader: str) -> Optional[str]:
    """The why-line of reduction-incomplete when the reduction is a row statistic that `reader` (the dependence's
    reader, in the counterexample) applies (the E4M3 example of 5.4.3)."""
    user = statistic_reader(model, reduction, reader)
    if user is None:
        return None
    stmt = model.stmt(reduction)
    return (
        f"{reduction} is a statistic of a whole row ({stmt.reduce_op} over {', '.join(stmt.red_iters)}) that "
        f"{user} applies to every element of the row; a value computed with the statistic of the first block is "
        f"rounded for good, later blocks cannot correct it (chapter 5.4.3, example 5-7: quantizing 1 to E4M3 with "
        f"the first block's max 1 gives 1, with the row's max 10 it gives 44 * 10/448 = 55/56); compute the "
        f"statistic first, or keep running statistics that rescale earlier blocks (online softmax)"
    )


def online_hint(model: KernelModel, dep: Dependence) -> Optional[str]:
    """When the early reader could use the running maximum instead (online softmax), how to say so."""
    from tdsl.compiler.model.online import NotOnline, online_form

    src = model.stmt(dep.src)
    if src.reduce_op != "max":
        return None
    try:
        form = online_form(model, dep.src)
    except NotOnline:
        return None
    direct = [a for a, r in form.accumulators.items() if r.source is None]
    if dep.dst not in list(form.exponentials) + direct:
        return None
    declare = "" if src.combine == "online" else f"declare `combine online` on {dep.src} and "
    return (f"{dep.dst} exponentiates with {dep.src}: {declare}apply online({dep.src}) first to let it use the running "
            f"maximum, with the sums that read it rescaled (online softmax)")


def check_invariants(model: KernelModel, deps: list[Dependence], tree: Tree, primitive: str) -> None:
    """What earlier steps established must survive this one: bound loops stay parallel, buffers stay valid.

    (A later compute_at, fuse or reorder can move a dependence across a bound loop or a writer into a
    cached loop's scope.)"""
    from tdsl.compiler.schedule.tree import walk_loops

    loops = list(walk_loops(tree.body))
    for loop in loops:
        if loop.bind:
            check_parallel(model, deps, tree, loop, primitive)
        if loop.warp_specialize:
            check_overlap(model, deps, tree, loop, primitive)  # compiler/legality/overlap.py: rule pipeline-overlap
    for buf in tree.buffers:
        if not any(buf.at is l for l in loops):
            from tdsl.compiler.errors import ScheduleError

            raise ScheduleError(primitive, f"the loop of the {buf.scope} buffer of {buf.tensor} no longer exists")
        under = statements_under(buf.at)
        if buf.kind == "read":
            buf.stmts = [s for s in under if any(r.tensor == buf.tensor for r in model.stmt(s).reads)] or buf.stmts
            check_cache_read(model, tree, buf, primitive)
        else:
            check_cache_write(model, tree, buf, primitive)
        check_buffer_rounding(model, tree, buf, primitive)


# ---------------------------------------------------------------- helpers


def _violation_class(model: KernelModel, dep: Dependence):
    if dep.kind in ("running", "final"):
        from tdsl.compiler.errors import OnlineOrder

        return OnlineOrder
    if dep.kind == "reduction":
        return ReductionOrder
    if dep.kind == "flow" and model.stmt(dep.src).is_reduction:
        return ReductionIncomplete
    return DependenceViolation


def _after_some_terms(relation: isl.Map, broken: isl.Map) -> isl.Map:
    """The broken pairs (a term of a reduction -> a reader of its result that would run before that term) whose
    reader runs after some other term of the same element: the reader would take a partial result."""
    return broken.intersect_range(relation.subtract(broken).range())


def _loop_times(model: KernelModel, tree: Tree, loop: Loop) -> tuple:
    """The time maps up to `loop` and up to the loop around it (None at the top)."""
    outer_loop = _outer_of(tree, loop)
    return (tree.time_maps(model, upto=loop, positions=False),
            tree.time_maps(model, upto=outer_loop, positions=False) if outer_loop else None)


def _outer_of(tree: Tree, loop: Loop):
    enclosing = tree.enclosing_loops(loop)
    return enclosing[-1] if enclosing else None


def pair_points(model: KernelModel, dep: Dependence, rel: isl.Map) -> tuple:
    """The smallest violating pair: ((src, its point), (dst, its point), the sizes it is at)."""
    params, coords = first_point(rel.wrap())
    n = len(model.stmt(dep.src).iters)
    return (dep.src, coords[:n]), (dep.dst, coords[n:]), params


def concrete_pair(model: KernelModel, dep: Dependence, rel: isl.Map) -> tuple[str, str, str]:
    """The smallest violating pair as text: 'C(i=0, j=0, k=32)', 'Y(i=0, j=0)', and the element 'C[0, 0]'."""
    from tdsl.compiler.model.program import instance_text

    (_, src_pt), (_, dst_pt), params = pair_points(model, dep, rel)
    src, dst = model.stmt(dep.src), model.stmt(dep.dst)
    element = _element(model, dep, src_pt)
    suffix = ""
    if params:
        suffix = " with " + ", ".join(f"{k}={v}" for k, v in params.items())
    return (
        instance_text(src.name, src.iters, src_pt),
        instance_text(dst.name, dst.iters, dst_pt) + suffix,
        element,
    )


def _element(model: KernelModel, dep: Dependence, src_point: list[int]) -> str:
    """The tensor element the source instance touches (its write for flow/output, its read for anti)."""
    src = model.stmt(dep.src)
    access = dep.access or (src.write if dep.kind != "anti" else next(a for a in src.reads if a.tensor == dep.tensor))
    return f"{access.tensor}[{', '.join(map(str, element_at(access.relation, src_point)))}]"


def _touch(dep: Dependence, element: str) -> str:
    return {
        "flow": f"{dep.dst} reads {element}",
        "anti": f"{dep.dst} overwrites {element}",
        "output": f"both write {element}",
        "reduction": f"both update {element}",
        "running": f"{dep.dst} subtracts {element}, which must already hold its own term",
        "final": f"{dep.dst} reads {dep.tensor} rescaled to {element}",
    }[dep.kind]
