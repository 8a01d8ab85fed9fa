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
  exactly where the program does (every store rounds to its dtype).
* reduction-grouping / segment-count: checked by rfactor
  (compiler/schedule/primitives/rfactor.py) with `check_grouping` below.
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.compiler.model.dependences import Dependence
from tdsl.compiler.errors import (
    AtomicCombine,
    CacheConflict,
    DependenceViolation,
    ParallelDependence,
    ParallelReduction,
    ReductionIncomplete,
    ReductionOrder,
    RoundingAdded,
    RoundingRemoved,
)
from tdsl.compiler.model.program import KernelModel, first_point
from tdsl.compiler.schedule.tree import Buffer, Loop, Tree, statements_under
from tdsl.compiler.model import reduce_ops


def check_dependences(model: KernelModel, deps: list[Dependence], tree: Tree, primitive: str) -> None:
    times = tree.time_maps(model)
    backward: dict[tuple[str, str], isl.Map] = {}  # (src, dst) -> the pairs of instances whose times do not increase
    for dep in deps:
        # The pairs that would not run forward (intersecting with lex_ge is the subtraction of lex_lt, and many
        # times faster on tiled, skewed maps; one lex_ge map serves every dependence between two statements).
        pair = (dep.src, dep.dst)
        if pair not in backward:
            backward[pair] = times[dep.src].lex_ge_map(times[dep.dst])
        broken = dep.relation.intersect(backward[pair])
        if broken.is_empty():
            continue
        src, dst, element = concrete_pair(model, dep, broken)
        cls = _violation_class(model, dep)
        detail = f"{dep.describe()}, but {dep.dst} would run first"
        explanation = None
        if cls is ReductionIncomplete:
            detail = f"{dep.dst} reads {dep.tensor} before the reduction {dep.src} has combined all its terms"
            explanation = statistic_explanation(model, dep.src)
            hint = online_hint(model, dep)
            if hint:
                explanation = (explanation or cls.explanation) + "; " + hint
        elif cls is ReductionOrder:
            detail = f"the updates of the reduction {dep.src} would be combined in a different order"
        example = f"{src} must run before {dst} ({_touch(dep, element)}) but would run after"
        raise cls(primitive, sorted({dep.src, dep.dst}), detail, example, explanation)
    from tdsl.compiler.legality.online import check_online

    check_online(model, tree, primitive)  # the orders of a running maximum that are not dependences


def carried_by(model: KernelModel, deps: list[Dependence], tree: Tree, loop: Loop, times=None) -> list[tuple]:
    """The dependences `loop` carries, each with its carried pairs (Dependence, isl.Map): instances in different
    iterations of `loop` within one iteration of its outer loops.  `times`: (inner, outer) from `_loop_times`."""
    inner, outer = times or _loop_times(model, tree, loop)
    under = set(statements_under(loop))
    carried = []
    for dep in deps:
        if dep.src not in under or dep.dst not in under:
            continue
        same_inner = inner[dep.src].apply_range(inner[dep.dst].reverse())
        rel = dep.relation.subtract(same_inner)
        if outer is not None:
            rel = rel.intersect(outer[dep.src].apply_range(outer[dep.dst].reverse()))
        if not rel.is_empty():
            carried.append((dep, rel))
    return carried


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
            f"{a} and {b} update {_element_of(stmt, coords[:n])} in different programs of {loop.name}{suffix}: "
            f"their partial results would be added in the order the programs finish",
        )


def check_cache_read(model: KernelModel, tree: Tree, buf: Buffer, primitive: str) -> None:
    """The cached tensor must not be written while the copy lives (inside one iteration of `at`)."""
    for stmt in statements_under(buf.at):
        writer = model.stmt(stmt)
        if writer.write.tensor == buf.tensor:
            params, coords = first_point(writer.domain)
            from tdsl.compiler.model.program import instance_text

            inst = instance_text(stmt, writer.iters, coords)
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


# ---------------------------------------------------------------- rounding of buffers

# Which dtypes hold every value of which: a copy in a wider type is exact.
_HOLDS = {
    "f32": {"f32", "bf16", "f16", "f8e4m3"},
    "bf16": {"bf16", "f8e4m3"},
    "f16": {"f16", "f8e4m3"},
    "f8e4m3": {"f8e4m3"},
}


def holds(wide: str, narrow: str) -> bool:
    """Every value of `narrow` is exactly a value of `wide`."""
    return narrow in _HOLDS.get(wide, {wide})


def rounding_witness(exact: str, rounded: str) -> Optional[float]:
    """A value that `exact` represents and rounding to `rounded` changes (1 + half an ulp of `rounded`, or a value
    out of its range), or None when every value of `exact` survives."""
    from tdsl.compiler.model import dtypes as dt

    candidates = [1.0 + 2.0 ** -dt.PRECISION_BITS.get(rounded, 24), 65536.0, 512.0, 2.0 ** -25, 1e38]
    for v in candidates:
        if float(dt.round_to(exact, v)) == v and float(dt.round_to(rounded, v)) != v:
            return v
    return None


def _value_text(v: float) -> str:
    return repr(float(v)) if abs(v) >= 1e-3 or v == 0 else f"2^{int(round(__import__('math').log2(v)))}"


def witness_text(exact: str, rounded: str, what: str = "value") -> str:
    v = rounding_witness(exact, rounded)
    if v is None:
        return ""
    from tdsl.compiler.model import dtypes as dt

    article = "a" if exact.startswith("b") else "an"
    return (f"{article} {exact} {what} such as {_value_text(v)} becomes {_value_text(float(dt.round_to(rounded, v)))} "
            f"in {rounded}")


def stored_dtype(model: KernelModel, tensor: str) -> str:
    """The dtype of the values a tensor holds in the program: its writer's store dtype, or an input's dtype."""
    for stmt in model.stmts:
        if stmt.write.tensor == tensor:
            return stmt.dtype
    return model.tensors[tensor].dtype


def check_buffer_rounding(model: KernelModel, tree: Tree, buf: Buffer, primitive: str) -> None:
    """A buffer in another dtype (cache_read / cache_write `dtype=`) must round exactly where the program rounds.

    A rounding the buffer adds or drops is harmless where the values already lie on that dtype's grid
    (compiler/legality/grids.py): then the rounding is the identity."""
    from tdsl.compiler.legality.grids import accumulator_grids, tensor_grids, value_grids

    dtype = getattr(buf, "dtype", None)
    if dtype is None:
        return
    if buf.kind == "read":
        values = stored_dtype(model, buf.tensor)
        if dtype in tensor_grids(model, buf.tensor):  # a wider copy, or values that already lie on its grid
            return
        reader, inst, element = _first_read(model, buf.stmts, buf.tensor)
        _raise_rounding(
            RoundingAdded, model, tree, primitive, [reader],
            f"the {buf.scope} copy of {buf.tensor} in {dtype} would round the {values} values of {buf.tensor} "
            f"that {', '.join(buf.stmts)} read{'s' * (len(buf.stmts) == 1)}",
            f"{inst} reads {element} through the copy: {witness_text(values, dtype)}",
        )
    writer = model.stmt(buf.stmts[0])
    store = writer.dtype
    readers = [s for s in statements_under(buf.at)
               if s != writer.name and any(r.tensor == buf.tensor for r in model.stmt(s).reads)]
    if writer.is_reduction:
        accum = writer.accum_dtype or "f32"
        if not (holds(dtype, accum) or _selecting_accumulator_on_grid(model, writer, dtype)):
            point = _first_instance(writer)
            _raise_rounding(
                RoundingAdded, model, tree, primitive, [writer.name],
                f"the {buf.scope} copy of {buf.tensor} in {dtype} would hold the {accum} accumulator of the "
                f"reduction {writer.name} and round it after every update",
                f"{point} adds a term to {_element_of(writer, _first_coords(writer))}: "
                f"{witness_text(accum, dtype, reduce_ops.PARTIAL[writer.reduce_op][0])}",
            )
        if readers and store not in accumulator_grids(model, writer):  # the store rounding is not the identity
            reader, inst, element = _first_read(model, readers, buf.tensor)
            _raise_rounding(
                RoundingRemoved, model, tree, primitive, [writer.name, reader],
                f"{reader} would read {buf.tensor} from the {dtype} {buf.scope} copy inside loop {buf.at.name}, "
                f"skipping the rounding of {writer.name} to {store}",
                f"{inst} reads {element}: the program rounds the {accum} sum to {store} before {reader} uses it; "
                f"{witness_text(dtype, store)}",
            )
        return
    exact = value_grids(model, writer.value, writer.iters)  # roundings to these dtypes change no value
    if readers and dtype != store and not {dtype, store} <= exact:
        reader, inst, element = _first_read(model, readers, buf.tensor)
        if holds(dtype, store):
            _raise_rounding(
                RoundingRemoved, model, tree, primitive, [writer.name, reader],
                f"{reader} would read {buf.tensor} from the {dtype} {buf.scope} copy inside loop {buf.at.name}, "
                f"skipping the rounding of {writer.name} to {store}",
                f"{inst} reads {element}: the program rounds it to {store} first; {witness_text(dtype, store)}",
            )
        _raise_rounding(
            RoundingAdded, model, tree, primitive, [writer.name, reader],
            f"{reader} would read {buf.tensor} from the {dtype} {buf.scope} copy inside loop {buf.at.name}, "
            f"rounded to {dtype} instead of {store}",
            f"{inst} reads {element}: {witness_text('f32', dtype)}",
        )
    if dtype not in (store, "f32") and dtype not in exact:
        point = _first_instance(writer)
        _raise_rounding(
            RoundingAdded, model, tree, primitive, [writer.name],
            f"the {dtype} {buf.scope} copy of {buf.tensor} would round the values of {writer.name} before they are "
            f"stored as {store} (two roundings)",
            f"{point} writes {_element_of(writer, _first_coords(writer))}: {witness_text('f32', dtype)} before "
            f"the store rounds it to {store}",
        )


def _selecting_accumulator_on_grid(model: KernelModel, writer, dtype: str) -> bool:
    """A `max` or `min` accumulator kept in `dtype` instead of its accum dtype holds the same values: both
    roundings are the identity on the extrema of its terms (the terms lie on both grids, and an extremum is one
    of its terms)."""
    from tdsl.compiler.legality.grids import value_grids

    if not reduce_ops.selecting(writer.reduce_op):
        return False
    terms = value_grids(model, writer.value, writer.iters)
    return {dtype, writer.accum_dtype or "f32"} <= terms


def _raise_rounding(cls, model, tree, primitive, statements, detail, example):
    err = cls(primitive, sorted(set(statements)), detail, example)
    err.rejected_model = buffer_semantics(model, tree)
    raise err


def buffer_semantics(model: KernelModel, tree: Tree) -> KernelModel:
    """The kernel as its buffers with a `dtype` would compute it (what a rejected buffer does, for the interpreter):
    a read copy rounds what its readers read, a write copy holds the written values (and a reduction's
    accumulator) in its dtype; readers outside the copy's loop read the value rounded to the store dtype."""
    from dataclasses import replace

    from tdsl.frontend import ast as tast

    stmts = {s.name: s for s in model.stmts}

    def cast_reads(stmt, tensor, dtype):
        def cast(e):
            if isinstance(e, tast.Access):
                return tast.Call(dtype, [e], e.span) if e.tensor == tensor else e
            return None

        init = None if stmt.init is None else tast.rewrite(stmt.init, cast)
        return replace(stmt, value=tast.rewrite(stmt.value, cast), init=init)

    for buf in tree.buffers:
        dtype = getattr(buf, "dtype", None)
        if dtype is None:
            continue
        if buf.kind == "read":
            for name in buf.stmts:
                stmts[name] = cast_reads(stmts[name], buf.tensor, dtype)
            continue
        writer = stmts[buf.stmts[0]]
        under = set(statements_under(buf.at))
        changes = {"dtype": dtype}
        if writer.is_reduction and not holds(dtype, writer.accum_dtype or "f32"):
            changes["accum_dtype"] = dtype
        stmts[writer.name] = replace(writer, **changes)
        for name, stmt in list(stmts.items()):
            if name != writer.name and name not in under and any(r.tensor == buf.tensor for r in stmt.reads):
                stmts[name] = cast_reads(stmt, buf.tensor, writer.dtype)
    return KernelModel(model.name, [stmts[s.name] for s in model.stmts], model.tensors, model.sizes,
                       model.params, model.ctx)


def _first_read(model: KernelModel, readers: list[str], tensor: str) -> tuple[str, str, str]:
    """The first reader instance of `tensor` among `readers`: (reader, 'Y(i=0, j=0)', 'C[0, 0]')."""
    from tdsl.compiler.model.program import first_pair

    for name in readers:
        for acc in model.stmt(name).reads:
            if acc.tensor == tensor and not acc.relation.is_empty():
                inst, element = first_pair(acc.relation)
                return name, inst, element
    return readers[0], readers[0], tensor


def _first_coords(stmt) -> list[int]:
    return first_point(stmt.domain)[1]


def _first_instance(stmt) -> str:
    from tdsl.compiler.model.program import instance_text

    return instance_text(stmt.name, stmt.iters, _first_coords(stmt))


def _element_of(stmt, coords: list[int]) -> str:
    rel = stmt.write.relation
    for pos, value in enumerate(coords):
        rel = rel.fix_val(isl.dim_type.in_, pos, isl.Val.int_from_si(rel.get_ctx(), value))
    _, element = first_point(rel.range())
    return f"{stmt.write.tensor}[{', '.join(map(str, element))}]"


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
                _element_of(stmt, coords[:n]), suffix)

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
            f"with {name}={value}, {_element_of(stmt, first_point(stmt.domain)[1])} would add {parts(value)}, "
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
    raise SegmentCount(
        primitive,
        [stmt.name],
        f"{stmt.name} declares `combine {stmt.combine}` ({seg.count} segments of {seg.length} terms of "
        f"{seg.iterator}), but {primitive} would make {made}",
        example,
    )


def _count_of_parts(sigma: isl.Map) -> str:
    """'16 partial sums' when the segment coordinate takes a fixed number of values, else 'different segments'."""
    last = sigma.range().dim(isl.dim_type.set) - 1
    top = sigma.range().dim_max(last)
    if top.is_cst():
        values = []
        top.foreach_piece(lambda _s, aff: values.append(aff.get_constant_val().to_python()))
        return f"{int(max(values)) + 1} partial sums"
    return "a number of partial sums that depends on a size"


# ---------------------------------------------------------------- row statistics


def statistic_reader(model: KernelModel, reduction: str) -> Optional[str]:
    """The elementwise statement that applies the reduction's result to many elements (a row scale, a softmax
    normalisation), directly or through elementwise statements of the reduction's shape; None if there is none."""
    first = model.stmt(reduction)
    seen = set()
    todo = [reduction]
    while todo:
        tensor = todo.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        for stmt in model.stmts:
            if stmt.is_reduction:
                continue
            for acc in stmt.reads:
                if acc.tensor != tensor:
                    continue
                if not acc.relation.is_injective():
                    return stmt.name
                if len(stmt.lhs_iters) == len(first.lhs_iters):
                    todo.append(stmt.write.tensor)
    return None


def statistic_explanation(model: KernelModel, reduction: str) -> Optional[str]:
    """The why-line of reduction-incomplete when the reduction is a row statistic (the E4M3 example of 5.4.3)."""
    user = statistic_reader(model, reduction)
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


def _loop_times(model: KernelModel, tree: Tree, loop: Loop) -> tuple:
    """The time maps up to `loop` and up to the loop around it (None at the top)."""
    outer_loop = _outer_of(tree, loop)
    return (tree.time_maps(model, upto=loop, positions=False),
            tree.time_maps(model, upto=outer_loop, positions=False) if outer_loop else None)


def _outer_of(tree: Tree, loop: Loop):
    enclosing = tree.enclosing_loops(loop)
    return enclosing[-1] if enclosing else None


def concrete_pair(model: KernelModel, dep: Dependence, rel: isl.Map) -> tuple[str, str, str]:
    """The smallest violating pair as text: 'C(i=0, j=0, k=32)', 'Y(i=0, j=0)', and the element 'C[0, 0]'."""
    from tdsl.compiler.model.program import instance_text

    params, coords = first_point(rel.wrap())
    src, dst = model.stmt(dep.src), model.stmt(dep.dst)
    n = len(src.iters)
    src_pt, dst_pt = coords[:n], coords[n:]
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
    rel = access.relation
    for pos, value in enumerate(src_point):
        rel = rel.fix_val(isl.dim_type.in_, pos, isl.Val.int_from_si(rel.get_ctx(), value))
    _, coords = first_point(rel.range())
    return f"{access.tensor}[{', '.join(map(str, coords))}]"


def _touch(dep: Dependence, element: str) -> str:
    return {
        "flow": f"{dep.dst} reads {element}",
        "anti": f"{dep.dst} overwrites {element}",
        "output": f"both write {element}",
        "reduction": f"both update {element}",
        "running": f"{dep.dst} subtracts {element}, which must already hold its own term",
        "final": f"{dep.dst} reads {dep.tensor} rescaled to {element}",
    }[dep.kind]
