"""Legality of a scheduled tree: every check raises a typed `LegalityError`
with the primitive, the statements, the rule and a concrete counterexample.

Rules (see docs/legality.md):
* dependence / reduction-incomplete / reduction-order: every dependence
  must still run forward: deps ⊆ { s -> t : time(s) <lex time(t) }.
* parallel-dependence / parallel-reduction: a loop bound to a grid axis
  carries no dependence.
* cache-conflict: an on-chip copy never goes stale.
"""

from __future__ import annotations

import islpy as isl

from .dependences import Dependence
from .errors import (
    CacheConflict,
    DependenceViolation,
    ParallelDependence,
    ParallelReduction,
    ReductionIncomplete,
    ReductionOrder,
)
from .model import KernelModel, first_point
from .tree import Buffer, Loop, Tree, statements_under


def check_dependences(model: KernelModel, deps: list[Dependence], tree: Tree, primitive: str) -> None:
    times = tree.time_maps(model)
    for dep in deps:
        forward = times[dep.src].lex_lt_map(times[dep.dst])
        broken = dep.relation.subtract(forward)
        if broken.is_empty():
            continue
        src, dst, element = concrete_pair(model, dep, broken)
        cls = _violation_class(model, dep)
        detail = f"{dep.describe()}, but {dep.dst} would run first"
        if cls is ReductionIncomplete:
            detail = f"{dep.dst} reads {dep.tensor} before the reduction {dep.src} has combined all its terms"
        elif cls is ReductionOrder:
            detail = f"the updates of the reduction {dep.src} would be combined in a different order"
        example = f"{src} must run before {dst} ({_touch(dep, element)}) but would run after"
        raise cls(primitive, sorted({dep.src, dep.dst}), detail, example)


def check_parallel(model: KernelModel, deps: list[Dependence], tree: Tree, loop: Loop, primitive: str) -> None:
    """No dependence may connect two different iterations of `loop` within one iteration of its outer loops."""
    inner = tree.time_maps(model, upto=loop, positions=False)
    outer_loop = _outer_of(tree, loop)
    outer = tree.time_maps(model, upto=outer_loop, positions=False) if outer_loop else None
    under = set(statements_under(loop))
    for dep in deps:
        if dep.src not in under or dep.dst not in under:
            continue
        same_inner = inner[dep.src].apply_range(inner[dep.dst].reverse())
        rel = dep.relation.subtract(same_inner)
        if outer is not None:
            rel = rel.intersect(outer[dep.src].apply_range(outer[dep.dst].reverse()))
        if rel.is_empty():
            continue
        src, dst, element = concrete_pair(model, dep, rel)
        cls = ParallelReduction if dep.kind == "reduction" else ParallelDependence
        detail = f"loop {loop.name} carries a dependence: {dep.describe()}"
        example = f"{src} and {dst} run in different iterations of {loop.name} ({_touch(dep, element)})"
        raise cls(primitive, sorted({dep.src, dep.dst}), detail, example)


def check_cache_read(model: KernelModel, tree: Tree, buf: Buffer, primitive: str) -> None:
    """The cached tensor must not be written while the copy lives (inside one iteration of `at`)."""
    for stmt in statements_under(buf.at):
        writer = model.stmt(stmt)
        if writer.write.tensor == buf.tensor:
            params, coords = first_point(writer.domain)
            from .model import instance_text

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
    from .model import instance_text

    a = instance_text(writer.name, writer.iters, coords[:n])
    b = instance_text(writer.name, writer.iters, coords[n:])
    raise CacheConflict(
        primitive,
        [writer.name],
        f"{writer.name} updates one element of {buf.tensor} in several iterations of loop {buf.at.name}; "
        f"the {buf.scope} copy would be written back before the element is complete",
        f"{a} and {b} write the same element in different iterations of {buf.at.name}",
    )


def check_invariants(model: KernelModel, deps: list[Dependence], tree: Tree, primitive: str) -> None:
    """What earlier steps established must survive this one: bound loops stay parallel, buffers stay valid.

    (A later compute_at, fuse or reorder can move a dependence across a bound loop or a writer into a
    cached loop's scope.)"""
    from .tree import walk_loops

    loops = list(walk_loops(tree.body))
    for loop in loops:
        if loop.bind:
            check_parallel(model, deps, tree, loop, primitive)
    for buf in tree.buffers:
        if not any(buf.at is l for l in loops):
            from .errors import ScheduleError

            raise ScheduleError(primitive, f"the loop of the {buf.scope} buffer of {buf.tensor} no longer exists")
        under = statements_under(buf.at)
        if buf.kind == "read":
            buf.stmts = [s for s in under if any(r.tensor == buf.tensor for r in model.stmt(s).reads)] or buf.stmts
            check_cache_read(model, tree, buf, primitive)
        else:
            check_cache_write(model, tree, buf, primitive)


# ---------------------------------------------------------------- helpers


def _violation_class(model: KernelModel, dep: Dependence):
    if dep.kind == "reduction":
        return ReductionOrder
    if dep.kind == "flow" and model.stmt(dep.src).is_reduction:
        return ReductionIncomplete
    return DependenceViolation


def _outer_of(tree: Tree, loop: Loop):
    enclosing = tree.enclosing_loops(loop)
    return enclosing[-1] if enclosing else None


def concrete_pair(model: KernelModel, dep: Dependence, rel: isl.Map) -> tuple[str, str, str]:
    """The smallest violating pair as text: 'C(i=0, j=0, k=32)', 'Y(i=0, j=0)', and the element 'C[0, 0]'."""
    from .model import instance_text

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
    access = src.write if dep.kind != "anti" else next(a for a in src.reads if a.tensor == dep.tensor)
    rel = access.relation
    for pos, value in enumerate(src_point):
        rel = rel.fix_val(isl.dim_type.in_, pos, isl.Val.int_from_si(rel.get_ctx(), value))
    _, coords = first_point(rel.range())
    return f"{dep.tensor}[{', '.join(map(str, coords))}]"


def _touch(dep: Dependence, element: str) -> str:
    return {
        "flow": f"{dep.dst} reads {element}",
        "anti": f"{dep.dst} overwrites {element}",
        "output": f"both write {element}",
        "reduction": f"both update {element}",
    }[dep.kind]
