"""rfactor: split a reduction into partial sums kept in a buffer, then combine them in a second statement.

``rfactor(C.ko)`` where ``ko, kk = split(C.k, 32)``::

    Before:                                    After:
    C[i, j] = sum(k) A[i, k] * W[k, j]         C_rf[i, j, ko] = sum(kk) A[i, 32*ko + kk] * W[32*ko + kk, j]
                                               C[i, j] = sum(ko) C_rf[i, j, ko]        # in ko order, new nest

``rfactor(C.k, segments=8)`` first splits k into 8 contiguous segments of
ceil(K/8) terms (the loop names are split's: ko, kk).  ``segments=`` may
name a size (``segments=M``): then the count depends on that size.

The partial sums of different segments are different elements of C_rf, so
C_rf's loop ko carries no dependence and can be bound to a grid axis
(split-K with a deterministic second pass instead of atomics).  C_rf takes
C's place in the tree (same loops); the combining statement gets its own
loop nest right after it.  C_rf is stored in C's accumulator dtype, unless
``dtype=`` says otherwise (a narrower one is rule rounding-added, unless
the partial results already lie on its grid: partial maxima of values of
that dtype, compiler/legality/grids.py).

Legality depends on the reduction's `combine` policy (docs/legality.md):

* strict (default): only if the grouping does not change (one segment, or
  segments of one term) and the sum starts from no value (0 + t is +0.0
  for a term of -0.0, which a start value of -0.0 would keep) -- else rule
  reduction-grouping;
* reassoc: always;
* deterministic: if the segment count does not depend on a size
  (``segments=M``) -- else rule segment-count;
* segments(N): if the partial sums are exactly the program's N segments --
  else rule segment-count.  Then the rfactored kernel computes bit for bit
  what the program defines.

A `max` reduction may be rfactored under every policy, into any partial
maxima: max gives the same bits in every grouping
(`dependences.order_independent`).
"""

from __future__ import annotations

import re
from dataclasses import replace

import islpy as isl

from tdsl.frontend import ast

from tdsl.compiler.model.dependences import compute_dependences, policy
from tdsl.compiler.model.isl_code import dimension_text
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_dependences, check_grouping
from tdsl.compiler.model.program import Access, KernelModel, Stmt, Tensor, collect_accesses, start_reads
from tdsl.compiler.schedule.tree import Leaf, Loop, iterator_aff, statements_under, walk_loops
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop, positive_int
from tdsl.compiler.schedule.primitives.compute_inline import rename_iterators
from tdsl.compiler.legality.storage import check_storage_order
from tdsl.compiler.schedule.primitives.online import rederive
from tdsl.compiler.schedule.primitives.registry import COUNT, DTYPE, LOOP, arg, option, primitive
from tdsl.compiler.schedule.primitives.split import split
from tdsl.compiler.model.recurrences import self_reads
from tdsl.compiler.model import reduce_ops


@primitive(arg("loop", LOOP), option("segments", COUNT, None, omit_default=True),
           option("dtype", DTYPE, None, omit_default=True), rank=140)
def rfactor(state: State, loop: LoopLike, segments=None, dtype=None) -> None:
    node, name = find_loop(state, "rfactor", loop)
    model, tree = state.model, state.tree
    stmt = model.stmt(name)
    if not stmt.is_reduction:
        raise ScheduleError("rfactor", f"{name} is not a reduction")
    if self_reads(stmt):
        raise ScheduleError("rfactor", f"{name} is a recurrence (it reads its own finished elements): its partial "
                                       f"sums would read elements the final sum has not stored yet")
    for b in tree.buffers:
        if b.tensor == name or name in b.stmts:
            raise ScheduleError("rfactor", f"the {b.scope} buffer of {b.tensor} at loop {b.at.name} serves {name}; "
                                           f"rfactor before caching")
    from tdsl.compiler.schedule.primitives.cache import _dtype

    dtype = _dtype("rfactor", dtype) or stmt.accum_dtype or "f32"
    k = stmt.red_iters[0]
    size = None
    if segments is not None:
        count, size = _count(model, segments)
        if _factor(node, stmt, k) != 1:
            raise ScheduleError("rfactor", f"segments= cuts the reduction loop itself ({name}.{k}), not loop {node.name}")
        extent = count if stmt.domain.is_empty() else _extent(stmt, k)  # no instance at these sizes: any cut
        if extent is None:
            raise ScheduleError("rfactor", f"segments= needs a fixed extent of {k}; bind its size with --size")
        size = size and size + (extent,)
        split(state, f"{name}.{node.name}", -(-extent // count))  # `node` becomes the outer (segment) loop
    factor = _factor(node, stmt, k)
    if factor is None:
        raise ScheduleError("rfactor", f"loop {node.name} of {name} is {_text(node.exprs[name])}; rfactor takes the "
                                       f"loop over the first reduction iterator {k}, or the outer loop of a split of "
                                       f"it (floor({k}/F)){_outer_hint(tree, stmt, k, node)}")
    rf = f"{name}_rf"
    if rf in model.tensors:
        raise ScheduleError("rfactor", f"a tensor named {rf} already exists, and rfactor names {name}'s partial sums "
                                       f"{rf}: rename that tensor in the program")
    if rf in model.sizes:
        raise ScheduleError("rfactor", f"rfactor names the partial results {rf}, and '{rf}' is a size of the kernel: "
                                       f"rename the size")

    seg_it = node.name
    inner_it = _inner_name(tree, model, stmt, k, factor, node)
    taken = set(stmt.iters) - {k}
    for n in (seg_it, inner_it):
        if n in taken:
            raise ScheduleError("rfactor", f"loop name {n} is also an iterator of {name}; rename the split loops")
    lhs, reds = stmt.lhs_iters, stmt.red_iters[1:]
    rf_iters = lhs + [seg_it, inner_it] + reds
    ctx = model.ctx
    prefix = f"[{', '.join(model.params)}] -> " if model.params else ""
    orig_index = lhs + [f"{factor}*{seg_it} + {inner_it}"] + reds
    to_orig = isl.Map.read_from_str(
        ctx, f"{prefix}{{ {rf}[{', '.join(rf_iters)}] -> {name}[{', '.join(orig_index)}] : 0 <= {inner_it} < {factor} }}")
    to_orig = to_orig.align_params(stmt.domain.get_space())
    rf_domain = to_orig.intersect_range(stmt.domain).domain()
    to_orig = to_orig.intersect_domain(rf_domain)
    sub = ast.BinOp("+", ast.BinOp("*", ast.IntLit(factor), ast.Name(seg_it)), ast.Name(inner_it))
    value = rename_iterators(stmt.value, {k: sub})
    # each read keeps the node the partial's value holds (re-indexed by factor*seg + inner), as the lowering sees it
    renamed = {id(old): new for old, new in zip(collect_accesses(stmt.value), collect_accesses(value))}

    part_shape = list(model.tensors[name].shape) + [_count_of(rf_domain, len(lhs))]
    rf_write = _map(ctx, prefix, rf, rf_iters, rf, lhs + [seg_it]).intersect_domain(rf_domain)
    partial = Stmt(
        name=rf,
        lhs_iters=lhs + [seg_it],
        red_iters=[inner_it] + reds,
        domain=rf_domain,
        value=value,
        dtype=dtype,
        reduce_op=stmt.reduce_op,
        accum_dtype=stmt.accum_dtype,
        combine=_policy_after(stmt),
        # the partial sums start from zero: the start value's reads go to the combining sum
        reads=[replace(a, relation=to_orig.apply_range(a.relation), node=renamed.get(id(a.node), a.node))
               for a in stmt.reads if not a.start],
        write=Access(rf, rf_write),
        span=stmt.span,
    )
    nl = len(lhs)
    c_domain = rf_domain.project_out(isl.dim_type.set, nl + 1, 1 + len(reds)).set_tuple_name(name)
    c_iters = lhs + [seg_it]
    read_node = ast.Access(rf, [ast.Name(x) for x in c_iters])
    combine = replace(
        stmt,
        red_iters=[seg_it],
        domain=c_domain,
        value=read_node,
        combine=_policy_after(stmt),
        reads=([Access(rf, _map(ctx, prefix, name, c_iters, rf, c_iters).intersect_domain(c_domain), read_node)]
               + _combiner_start_reads(stmt, c_domain, c_iters, ctx, prefix)),
        write=Access(name, _map(ctx, prefix, name, c_iters, name, lhs).intersect_domain(c_domain)),
    )
    stmts = []
    for s in model.stmts:
        stmts.extend([partial, combine] if s is stmt else [s])
    # '__' names are the compiler's (no size can be called so): a dimension named like a size would be the size
    box = isl.Set.read_from_str(ctx, f"{prefix}{{ {rf}[{', '.join(f'__a{n}' for n in range(len(part_shape)))}] }}")
    tensors = dict(model.tensors)
    tensors[rf] = Tensor(rf, dtype, part_shape, "temp", box.intersect(rf_write.range()).coalesce())
    state.model = replace(model, stmts=stmts, tensors=tensors, ctx=ctx)

    # The tree: C_rf takes C's place, with C's loops re-expressed over its iterators; C gets a nest of its own.
    ma = isl.MultiAff.read_from_str(ctx, f"{prefix}{{ {rf}[{', '.join(rf_iters)}] -> {name}[{', '.join(orig_index)}] }}")
    for l in walk_loops(tree.body):
        if name in l.exprs:
            l.exprs[rf] = [_simplified(pa.pullback_multi_aff(ma.align_params(pa.get_space())), rf_domain)
                           for pa in l.exprs.pop(name)]
    top = next(n for n in tree.body if name in statements_under(n))
    _rename_leaf(top, name, rf)
    nest: Loop | Leaf = Leaf(name)
    for it in reversed(c_iters):
        nest = Loop(it, {name: [iterator_aff(c_domain, it)]}, [nest])
    tree.body.insert(tree.body.index(top) + 1, nest)
    check_storage_order(state.model, "rfactor", state.tree)  # folded or shared storage, in the new program
    state.deps = compute_dependences(state.model)
    rederive(state, "rfactor")  # a running maximum's readers and sums, in the new program

    sigma = isl.Map.read_from_str(
        ctx, f"{prefix}{{ {name}[{', '.join(stmt.iters)}] -> [{', '.join(lhs)}, floor({k}/{factor})] }}"
    ).align_params(stmt.domain.get_space()).intersect_domain(stmt.domain)
    check_grouping(model, stmt, sigma, "rfactor", size, f"{rf}[{', '.join(lhs + [seg_it])}]")
    _lone_terms(model, stmt, sigma)
    if dtype != (stmt.accum_dtype or "f32"):
        _partial_rounding(model, stmt, dtype)
    check_dependences(state.model, state.deps, tree, "rfactor")


def _simplified(pa: isl.PwAff, domain: isl.Set) -> isl.PwAff:
    """floor((4ko + kk)/4) -> ko on 0 <= kk < 4: try the iterators themselves, then isl's gist."""
    pa = pa.intersect_domain(domain)
    space = domain.get_space()
    for pos in range(space.dim(isl.dim_type.set)):
        it = iterator_aff(domain, space.get_dim_name(isl.dim_type.set, pos)).intersect_domain(domain)
        if pa.is_equal(it):
            return it
    return pa.gist(domain).intersect_domain(domain).coalesce()


def _count(model: KernelModel, segments):
    """segments=8 -> (8, None); segments=M -> (value of M, ("M", value))."""
    if isinstance(segments, str):
        if segments not in model.sizes:
            raise ScheduleError("rfactor", f"segments={segments}: no size named {segments}")
        value = model.sizes[segments]
        if not isinstance(value, int):
            raise ScheduleError("rfactor", f"segments={segments}: give {segments} a value with --size")
        return positive_int("rfactor", "segments", value), (segments, value)
    return positive_int("rfactor", "segments", segments), None


def _extent(stmt: Stmt, k: str):
    top = stmt.domain.dim_max(stmt.iters.index(k))
    if not top.is_cst():
        return None
    values = []
    top.foreach_piece(lambda _s, aff: values.append(aff.get_constant_val().to_python()))
    return int(max(values)) + 1 if values else None


def _outer_hint(tree, stmt: Stmt, k: str, node: Loop) -> str:
    """Which loop to pass instead, where the statement has one that rfactor takes (the split's outer loop)."""
    loops = [loop for loop in tree.path(stmt.name) if loop is not node]
    fit = next((loop for loop in loops if _factor(loop, stmt, k) is not None), None)
    if fit is None:
        return f": split {stmt.name}'s loop over {k} and pass its outer loop"
    return f": rfactor({stmt.name}.{fit.name})"


def _factor(node: Loop, stmt: Stmt, k: str):
    """F when the loop's expression for stmt is floor(k/F) (1 when it is k), else None."""
    exprs = node.exprs.get(stmt.name)
    if exprs is None or len(exprs) != 1:
        return None
    pa = exprs[0]
    candidates = [1] + [int(f) for f in re.findall(r"/\s*(\d+)\)", str(pa))]
    for f in candidates:
        want = iterator_aff(stmt.domain, k if f == 1 else f"floor({k}/{f})").intersect_domain(stmt.domain)
        if pa.intersect_domain(stmt.domain).is_equal(want):
            return f
    return None


def _inner_name(tree, model, stmt: Stmt, k: str, factor: int, segment_loop: Loop) -> str:
    """The name of the loop over k mod F (the split's inner loop), or a fresh one.  The segment loop itself is
    never it, even where it takes one value (an extent of 1 makes k and k mod F the same function).  A fresh name
    is no size or tensor of the kernel: it becomes an iterator of the partial sums, and an iterator named like a
    size is that size in isl's text (a size `k_in` made a legal schedule compute wrong values: probe of the 25th
    session)."""
    want = iterator_aff(stmt.domain, f"{k} mod {factor}").intersect_domain(stmt.domain)
    path = tree.path(stmt.name)
    for l in path if factor > 1 else []:  # k mod 1 is 0: no loop is "the inner one", whatever is constant
        exprs = l.exprs.get(stmt.name)
        if l is not segment_loop and exprs and len(exprs) == 1 and exprs[0].intersect_domain(stmt.domain).is_equal(want):
            return l.name
    taken = {l.name for l in path} | set(stmt.iters) | set(model.sizes) | set(model.tensors)  # sizes hold the params
    name = f"{k}_in"
    while name in taken:
        name += "_"
    return name


def _policy_after(stmt: Stmt):
    """The partial and the combining statement keep reassoc / deterministic; a segment is summed in order."""
    name, _ = policy(stmt)
    return stmt.combine if name in ("reassoc", "deterministic") else None


def _count_of(domain: isl.Set, position: int):
    top = domain.dim_max(position)
    if top.is_cst():
        values = []
        top.foreach_piece(lambda _s, aff: values.append(aff.get_constant_val().to_python()))
        return int(max(values)) + 1 if values else 1  # no instance at these sizes: a partial sum never stored
    return dimension_text(top.add_constant_val(isl.Val.one(top.get_ctx())))


def _combiner_start_reads(stmt: Stmt, c_domain: isl.Set, c_iters: list, ctx, prefix: str) -> list:
    """The reads of the value a sum starts from, as reads of the statement that adds the partial sums (which starts
    from it; the partial sums start from zero): each instance reads what the element's instances read."""
    if stmt.init is None:
        return []
    same_element = _map(ctx, prefix, stmt.name, c_iters, stmt.name, stmt.iters).align_params(
        c_domain.get_space()).intersect_domain(c_domain).intersect_range(stmt.domain)
    return [replace(r, relation=same_element.apply_range(r.relation)) for r in start_reads(stmt)]



def _map(ctx, prefix, src, src_iters, dst, dst_index) -> isl.Map:
    return isl.Map.read_from_str(ctx, f"{prefix}{{ {src}[{', '.join(src_iters)}] -> {dst}[{', '.join(dst_index)}] }}")


def _rename_leaf(node, old: str, new: str) -> None:
    if isinstance(node, Leaf):
        if node.stmt == old:
            node.stmt = new
        return
    for child in node.body:
        _rename_leaf(child, old, new)


def _text(exprs) -> str:
    from tdsl.compiler.schedule.tree_view import expr_text

    return ", ".join(expr_text(e) for e in exprs)


def _lone_terms(model: KernelModel, stmt: Stmt, sigma: isl.Map) -> None:
    """A strict sum keeps its grouping only when every partial sum after an element's first holds one term
    (check_grouping; every partial sum, when the sum starts from a value).  Such a term then passes through the
    partial's accumulator on its own, 0 + t, before it meets the running sum, which the program adds it to
    directly.  That is exact only without a start value (`_signed_zero`) and for a term on the accumulator's
    grid (`_lone_terms_rounded`)."""
    from tdsl.compiler.model.dependences import order_independent, policy

    if policy(stmt)[0] != "strict" or order_independent(stmt):
        return
    if stmt.init is not None:
        _signed_zero(stmt)
    _lone_terms_rounded(model, stmt, sigma)


def _signed_zero(stmt: Stmt) -> None:
    """0 + t is t except for t = -0.0 (IEEE round to nearest: +0.0 + -0.0 = +0.0).  The program adds -0.0 to a
    start value of -0.0 and keeps -0.0; the rfactored sum adds +0.0 and gives +0.0.  Without a start value the
    running sum starts at +0.0 and never becomes -0.0, so adding +0.0 or -0.0 to it is the same."""
    from tdsl.compiler.errors import ReductionGrouping
    from tdsl.compiler.legality.rounding import first_instance
    from tdsl.frontend.printer import expr_text

    start = expr_text(stmt.init)
    raise ReductionGrouping(
        "rfactor",
        [stmt.name],
        f"{stmt.name} starts from {start} and declares no combine policy (strict order): each partial sum adds "
        f"its one term to zero first, which turns a term of -0.0 into +0.0, where the program adds the term "
        f"itself to the running sum",
        f"{first_instance(stmt)} with {start} = -0.0 and a term of -0.0: the program gives -0.0 + -0.0 = -0.0; "
        f"the partial sum is 0 + -0.0 = +0.0, and -0.0 + +0.0 = +0.0",
    )


def _lone_terms_rounded(model: KernelModel, stmt: Stmt, sigma: isl.Map) -> None:
    """A lone term rounded to the partial's accumulator, which the program adds unrounded: exact only if the
    term already lies on the accumulator's grid (always, for an f32 accumulator)."""
    from tdsl.compiler.errors import RoundingAdded
    from tdsl.compiler.legality.grids import statement_grids
    from tdsl.compiler.legality.rounding import first_instance, witness_text

    accum = stmt.accum_dtype or "f32"
    if accum in statement_grids(model, stmt):
        return
    same_element = stmt.write.relation.apply_range(stmt.write.relation.reverse())
    if same_element.is_subset(sigma.apply_range(sigma.reverse())):
        return  # one partial sum per element: the program's own running sum (from zero, as the partial starts)
    raise RoundingAdded(
        "rfactor",
        [stmt.name],
        f"the partial sums of {stmt.name} after the first hold one term each and pass through its {accum} "
        f"accumulator on their own: each such term would be rounded to {accum} before it is added, which the "
        f"program does not do",
        f"{first_instance(stmt)} adds a term: {witness_text('f32', accum, 'term')}",
    )


def _partial_rounding(model: KernelModel, stmt: Stmt, dtype: str) -> None:
    from tdsl.compiler.errors import RoundingAdded
    from tdsl.compiler.legality.grids import accumulator_grids
    from tdsl.compiler.legality.rounding import first_instance, holds, witness_text

    accum = stmt.accum_dtype or "f32"
    if holds(dtype, accum):  # a wider buffer: exact, nothing is rounded differently
        return
    if dtype in accumulator_grids(model, stmt):  # partial maxima that already lie on the buffer's grid
        return
    if reduce_ops.selecting(stmt.reduce_op) and dtype == stmt.dtype:
        # rounding is monotone and the store rounds to this dtype anyway: r(max(r(a), r(b))) = r(max(a, b)), so the
        # partial maxima rounded to the result's own dtype change no bit of it (probe V of the 28th session)
        return
    part, parts = reduce_ops.PARTIAL[stmt.reduce_op]
    raise RoundingAdded(
        "rfactor",
        [stmt.name],
        f"the {parts} of {stmt.name} would be stored as {dtype}, rounding the {accum} accumulator "
        f"before the {parts} are combined",
        f"{first_instance(stmt)} adds to a {part}: {witness_text(accum, dtype, part)}",
    )
