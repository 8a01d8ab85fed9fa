"""recompute_at: compute a producer inside a consumer's tile loop, once per tile, for the elements the tile reads.

Before (B computed once, each element stored)::     After ``recompute_at(B, C.io)`` (B per tile of C)::

    for i: B[i] = f(A[i])                              for io:
    for io: for ii:                                      for i in 32*io-1 .. 32*io+32: B[io, i] = f(A[i])
      C[32*io+ii] = B[..-1] + B[..] + B[..+1]            for ii: C[32*io+ii] = B[io, ..-1] + B[io, ..] + B[io, ..+1]

`compute_at` places each producer instance once, in the first consumer iteration that reads it, so a tile that
reads its neighbour's elements (a stencil's halo) must wait for that neighbour: the tile loop cannot be bound to
the grid.  Halide's overlapped tiling recomputes instead: every tile computes its own copy of the elements it
reads, so tiles depend on nothing but their inputs.  The program is rewritten so that this is what it says:

* B gets the target loops as leading dimensions, `B[io, i]` (the copy of tile io), and one instance per element
  each tile reads: its domain is { B[io, i] : C's tile io reads B[i] } (the footprint, computed with isl from
  C's reads and the schedule's tile loops);
* each reader reads its own tile's copy: `B[i - 1]` becomes `B[i // 32, i - 1]` (the tile loops as functions of
  its iterators);
* B is then placed in the target loop as `compute_at` places it, each copy at its own tile.

The values are the same (the same expression of the same inputs, at the same elements); the work is not: the
elements tiles share are computed once per tile that reads them, which `tdsl cost` reports (instances against
elements).  Every dependence is computed again on the rewritten program and checked, now and at later steps; the
copies of different tiles share nothing, so binding the tile loop is legal where the consumer's own tiles are
independent.

Refused (`ScheduleError`): a reduction (its whole sum would be repeated per tile: rfactor or compute_at it),
a kernel output (stored once, as the caller sees it), a statement of a `for` block, one with a storage
decision, a cache buffer or a running maximum, a reader outside the target loop (it would need the elements
computed once), tile loops that are not affine in a reader's iterators, or sizes left as run-time parameters.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from tdsl.frontend import ast
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.lower import tileir
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.model.isl_code import as_params, pw_aff_to_expr
from tdsl.compiler.model.program import Access, KernelModel, Stmt, Tensor
from tdsl.compiler.schedule.primitives.common import LoopLike, State, check_stmt, find_loop, fresh_loop_name
from tdsl.compiler.schedule.primitives.compute_at import _move
from tdsl.compiler.schedule.primitives.compute_inline import _remove_leaf
from tdsl.compiler.schedule.primitives.online import rederive
from tdsl.compiler.schedule.primitives.registry import LOOP, STMT, arg, primitive
from tdsl.compiler.schedule.tree import Loop, _statement_nest, pw_affs_to_map, statements_under

NAME = "recompute_at"


@primitive(arg("stmt", STMT), arg("loop", LOOP, text="TARGET.LOOP", alias="at", role="the target loop"), rank=65)
def recompute_at(state: State, stmt: str, loop: LoopLike) -> None:
    stmt = check_stmt(state, NAME, stmt)
    target, _ = find_loop(state, NAME, loop)
    model, tree = state.model, state.tree
    producer = model.stmt(stmt)
    _check_producer(state, producer, target)
    path = tree.enclosing_loops(target) + [target]
    readers = _readers(model, tree, producer, target)
    tiles = _tile_names(producer, path, model)
    new_producer, tensor = _per_tile_producer(model, producer, readers, path, tiles)
    stmts = [new_producer if s.name == stmt else (_read_own_tile(s, producer, path) if s in readers else s)
             for s in model.stmts]
    state.model = KernelModel(model.name, stmts, {**model.tensors, stmt: tensor}, model.sizes, model.params,
                              model.ctx)
    _remove_leaf(state, stmt)
    tree.body.insert(0, _statement_nest(new_producer))  # moved into the target loop below
    state.deps = compute_dependences(state.model)
    rederive(state, NAME)
    _move(state, NAME, stmt, loop, after=False)


def _check_producer(state: State, producer: Stmt, target: Loop) -> None:
    model, tree = state.model, state.tree
    name = producer.name
    t = model.tensors[name]
    if producer.is_reduction:
        raise ScheduleError(NAME, f"{name} is a reduction: recomputing it would repeat its whole sum for every tile; "
                                  f"compute_at it, or rfactor it first")
    if t.kind != "temp":
        raise ScheduleError(NAME, f"{name} is an output of the kernel, stored once as the caller sees it; recompute a "
                                  f"temporary")
    if producer.loops:
        raise ScheduleError(NAME, f"{name} is a statement of a `for` block (over {', '.join(producer.loops)}); "
                                  f"recompute_at takes a statement of the kernel's body")
    if t.fold or t.stored_in:
        raise ScheduleError(NAME, f"{name} has a storage decision (fold_storage); recompute it before deciding its "
                                  f"storage")
    if model.params:
        raise ScheduleError(NAME, f"the sizes {', '.join(model.params)} are run-time parameters; the copies per tile "
                                  f"need bound sizes (--size or const)")
    if name in statements_under(target):
        raise ScheduleError(NAME, f"{name} is already inside loop {target.name}")
    if any(b.tensor == name or name in b.stmts for b in tree.buffers):
        raise ScheduleError(NAME, f"a cache buffer of the schedule holds {name}; recompute it before caching it")
    if name in tree.online or producer.rescale is not None:
        raise ScheduleError(NAME, f"{name} takes part in a running maximum (online)")


def _readers(model: KernelModel, tree, producer: Stmt, target: Loop) -> list[Stmt]:
    under = set(statements_under(target))
    readers = [s for s in model.stmts if s is not producer and any(r.tensor == producer.name for r in s.reads)]
    outside = [s.name for s in readers if s.name not in under]
    if outside:
        raise ScheduleError(NAME, f"{', '.join(outside)} also read{'s' if len(outside) == 1 else ''} {producer.name} "
                                  f"outside loop {target.name}; its elements would be needed once there too "
                                  f"(compute_at, or move the reader into the loop)")
    if not readers:
        raise ScheduleError(NAME, f"nothing under loop {target.name} reads {producer.name}")
    return readers


def _tile_names(producer: Stmt, path: list[Loop], model: KernelModel) -> list[str]:
    """A name for each dimension of the target loops: the loop's own, or a fresh one where it is taken."""
    taken = set(producer.iters) | set(model.sizes) | set(model.tensors)
    names = []
    for loop in path:
        for d in range(loop.n_dims):
            base = loop.name if loop.n_dims == 1 else f"{loop.name}{d}"
            names.append(fresh_loop_name(base, taken))
            taken.add(names[-1])
    return names


def _tiles_of(stmt: Stmt, path: list[Loop]) -> isl.Map:
    """A statement's instances -> the iteration of the target loops it runs in."""
    return pw_affs_to_map([d for loop in path for d in loop.exprs[stmt.name]], stmt.domain)


def _per_tile_producer(model: KernelModel, producer: Stmt, readers: list[Stmt], path: list[Loop],
                       tiles: list[str]) -> tuple[Stmt, Tensor]:
    """The producer with the tile dimensions in front: its instances are the elements each tile reads."""
    name, ctx = producer.name, model.ctx
    footprint = None  # tile -> producer instance that writes an element the tile reads
    for r in readers:
        reads = [a.relation for a in r.reads if a.tensor == name]
        rel = reads[0]
        for a in reads[1:]:
            rel = rel.union(a)
        per_tile = _tiles_of(r, path).reverse().apply_range(rel).apply_range(producer.write.relation.reverse())
        footprint = per_tile if footprint is None else footprint.union(per_tile)
    iters = tiles + producer.iters
    domain = footprint.wrap().flatten().set_tuple_name(name)
    for k, it in enumerate(iters):
        domain = domain.set_dim_name(isl.dim_type.set, k, it)
    domain = domain.coalesce()
    extents = []
    for k, tile in enumerate(tiles):
        lo, hi = domain.dim_min_val(k), domain.dim_max_val(k)
        if lo.is_neg():
            raise ScheduleError(NAME, f"loop {tile} of the target takes negative values ({lo}); recompute at a loop "
                                      f"that counts from 0")
        extents.append(int(hi.to_python()) + 1)
    drop = _drop_tiles(ctx, name, tiles, producer.iters, domain)
    reads = [Access(a.tensor, drop.apply_range(a.relation), a.node) for a in producer.reads]
    write = isl.Map.read_from_str(ctx, f"{{ {name}[{', '.join(iters)}] -> {name}[{', '.join(tiles + producer.lhs_iters)}] }}")
    new = replace(producer, lhs_iters=tiles + producer.lhs_iters, domain=domain, reads=reads,
                  write=Access(name, write.intersect_domain(domain)))
    old = model.tensors[name]
    shape = extents + list(old.shape)
    box = isl.Set.read_from_str(ctx, "{ %s[%s] : %s }" % (
        name, ", ".join(f"a{k}" for k in range(len(shape))),
        " and ".join(f"0 <= a{k} < {n}" for k, n in enumerate(shape))))
    return new, replace(old, shape=shape, box=box, copies=len(tiles))


def _drop_tiles(ctx, name: str, tiles: list[str], iters: list[str], domain: isl.Set) -> isl.Map:
    """{ P[tiles, iters] -> P[iters] }: a copy's instance -> the original instance it repeats."""
    text = f"{{ {name}[{', '.join(tiles + iters)}] -> {name}[{', '.join(iters)}] }}"
    return isl.Map.read_from_str(ctx, text).intersect_domain(domain)


def _read_own_tile(reader: Stmt, producer: Stmt, path: list[Loop]) -> Stmt:
    """The reader with every read of the producer turned into a read of its own tile's copy."""
    tiles = _tiles_of(reader, path)
    index = [_index_expr(reader, tiles, k, path) for k in range(tiles.dim(isl.dim_type.out))]
    fresh = {}

    def own_tile(e):
        if not isinstance(e, ast.Access):
            return None
        if e.tensor != producer.name:
            return e  # kept as it is: the reads refer to their nodes
        fresh[id(e)] = ast.Access(e.tensor, index + list(e.indices), e.span)
        return fresh[id(e)]

    value = ast.rewrite(reader.value, own_tile)
    init = None if reader.init is None else ast.rewrite(reader.init, own_tile)
    reads = []
    for a in reader.reads:
        if a.tensor != producer.name:
            reads.append(a)
            continue
        rel = tiles.range_product(a.relation).flatten_range().set_tuple_name(isl.dim_type.out, producer.name)
        reads.append(Access(a.tensor, rel, fresh.get(id(a.node), a.node)))
    return replace(reader, value=value, init=init, reads=reads)


def _index_expr(reader: Stmt, tiles: isl.Map, k: int, path: list[Loop]) -> ast.Expr:
    """Dimension k of the target loops as an index expression of the reader's iterators (`i // 32`)."""
    pa = isl.PwMultiAff.from_map(tiles).get_pw_aff(k).intersect_domain(reader.domain)
    n = pa.dim(isl.dim_type.in_)
    on_params = pa.move_dims(isl.dim_type.param, pa.dim(isl.dim_type.param), isl.dim_type.in_, 0, n)
    context = isl.Set.universe(on_params.get_domain_space()).intersect_params(as_params(reader.domain))
    try:
        return _to_ast(pw_aff_to_expr(on_params.align_params(context.get_space()), context))
    except ValueError:
        loops = ", ".join(loop.name for loop in path)
        raise ScheduleError(NAME, f"the target loops {loops} are not an affine index of {reader.name}'s iterators "
                                  f"({pa}); recompute at loops made by split or tile") from None


def _to_ast(e: tileir.Expr) -> ast.Expr:
    if isinstance(e, tileir.Const):
        if int(e.value) != e.value:
            raise ValueError(e)
        return ast.IntLit(int(e.value)) if e.value >= 0 else ast.Neg(ast.IntLit(-int(e.value)))
    if isinstance(e, tileir.Var):
        return ast.Name(e.name)
    if isinstance(e, tileir.Neg):
        return ast.Neg(_to_ast(e.operand))
    if isinstance(e, tileir.Bin) and e.op in ("+", "-", "*", "//", "%"):
        return ast.BinOp(e.op, _to_ast(e.lhs), _to_ast(e.rhs))
    raise ValueError(e)
