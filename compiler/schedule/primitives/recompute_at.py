"""recompute_at: compute a producer inside a consumer's tile loop, once per tile, for the elements the tile reads.

Before (B computed once, each element stored)::     After ``recompute_at(B, C.io)`` (B per tile of C)::

    for i: B[i] = f(A[i])                              for io:
    for io: for ii:                                      for i in 0 .. 33: B[io, i] = f(A[i + 32*io - 1])
      C[32*io+ii] = B[..-1] + B[..] + B[..+1]            for ii: C[32*io+ii] = B[io, ii] + B[io, ii+1] + B[io, ii+2]

`compute_at` places each producer instance once, in the first consumer iteration that reads it, so a tile that
reads its neighbour's elements (a stencil's halo) must wait for that neighbour: the tile loop cannot be bound to
the grid.  Halide's overlapped tiling recomputes instead: every tile computes its own copy of the elements it
reads, so tiles depend on nothing but their inputs.  The program is rewritten so that this is what it says:

* B gets the target loops as leading dimensions, `B[io, i]` (the copy of tile io), and one instance per element
  each tile reads (the footprint, computed with isl from C's reads and the schedule's tile loops), counted from
  the tile's origin: the narrowest affine lower bound of the footprint (`32*io - 1`), so a copy holds what its
  tile reads, not the whole tensor, and B's value reads its inputs at `i + origin`;
* each reader reads its own tile's copy: `B[i - 1]` becomes `B[i // 32, i - 1 - origin]` (the tile loops and
  the origin as functions of its iterators);
* B is then placed in the target loop as `compute_at` places it, each copy at its own tile.

The values are the same (the same expression of the same inputs, at the same elements); the work is not: the
elements tiles share are computed once per tile that reads them, which `tdsl cost` reports (instances against
elements).  Every dependence is computed again on the rewritten program and checked, now and at later steps; the
copies of different tiles share nothing, so binding the tile loop is legal where the consumer's own tiles are
independent.

Refused (`ScheduleError`): a reduction (its whole sum would be repeated per tile: rfactor or compute_at it), a
recurrence (a statement reading its own earlier elements: each copy would need all of them),
a kernel output (stored once, as the caller sees it), a statement of a `for` block, one with a storage
decision, a cache buffer or a running maximum, a reader outside the target loop (it would need the elements
computed once), tile loops that are not affine in a reader's iterators, or sizes left as run-time parameters.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import islpy as isl

from tdsl.frontend import ast
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.lower import tileir
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.model.isl_code import as_params, integer_bounds, pw_aff_to_expr
from tdsl.compiler.model.program import Access, KernelModel, Stmt, Tensor
from tdsl.compiler.schedule.primitives.common import (LoopLike, State, check_bindings_kept, check_expression_size,
                                                     check_stmt, find_loop, fresh_loop_name, grid_bindings)
from tdsl.compiler.schedule.primitives.compute_at import _move
from tdsl.compiler.schedule.primitives.compute_inline import _remove_leaf, rename_iterators
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
    bindings = grid_bindings(tree, [stmt])
    path = tree.enclosing_loops(target) + [target]
    readers = _readers(model, producer, target)
    tiles = _tile_names(producer, path, model)
    tile_of = {r.name: _tiles_of(r, path) for r in readers}  # each reader's instances -> its tile
    footprint = _footprint(producer, readers, tile_of, tiles)
    origins = [_origin(footprint, d) for d in range(len(producer.iters))]
    new_producer, tensor, shift = _per_tile_producer(model, producer, footprint, tiles, origins)
    stmts = [new_producer if s.name == stmt else
             (_read_own_tile(s, producer, path, tile_of[s.name], origins, shift) if s in readers else s)
             for s in model.stmts]
    state.model = replace(model, stmts=stmts, tensors={**model.tensors, stmt: tensor})
    _remove_leaf(state, stmt)
    tree.body.insert(0, _statement_nest(new_producer))  # moved into the target loop below
    state.deps = compute_dependences(state.model)
    rederive(state, NAME)
    _move(state, NAME, stmt, loop, after=False)
    check_bindings_kept(state, NAME, bindings)


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
    if any(r.tensor == name for r in producer.reads):
        raise ScheduleError(NAME, f"{name} reads its own earlier elements (a recurrence): a copy per tile would need "
                                  f"every element before the tile too; compute_at it")
    if t.fold or t.stored_in:
        raise ScheduleError(NAME, f"{name} has a storage decision (fold_storage); recompute it before folding its "
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


def _readers(model: KernelModel, producer: Stmt, target: Loop) -> list[Stmt]:
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
    return pw_affs_to_map([d for loop in path for d in loop.exprs[stmt.name]], _instances(stmt))


def _instances(stmt: Stmt) -> isl.Set:
    """The statement's instances; its whole space where it has none at the sizes given: such a reader is placed
    as at any size (compiler/schedule/empty_statements.py), and its formulas are its loops' at every point."""
    return stmt.domain if not stmt.domain.is_empty() else isl.Set.universe(stmt.domain.get_space())


def _footprint(producer: Stmt, readers: list[Stmt], tile_of: dict, tiles: list[str]) -> isl.Map:
    """Tile (the target loops' values, named `tiles`) -> the producer instances whose elements the tile reads."""
    footprint = None
    for r in readers:
        reads = [a.relation for a in r.reads if a.tensor == producer.name]
        rel = reads[0]
        for a in reads[1:]:
            rel = rel.union(a)
        per_tile = tile_of[r.name].reverse().apply_range(rel).apply_range(producer.write.relation.reverse())
        footprint = per_tile if footprint is None else footprint.union(per_tile)
    for k, tile in enumerate(tiles):
        footprint = footprint.set_dim_name(isl.dim_type.in_, k, tile)
    return footprint.coalesce()


def _origin(footprint: isl.Map, d: int) -> Optional[isl.PwAff]:
    """Where a tile's copy starts along the producer's dimension d: one affine function of the tile at or below
    the first element every tile reads (32*io - 1 for a 3-point stencil on 32-wide tiles; the clamp at the
    tensor's edge, max(0, ...), is left out so the copy's index stays one formula), the narrowest such; None
    when the copies start at 0."""
    lo, hi = footprint.dim_min(d), footprint.dim_max(d)
    tiles = footprint.domain()
    best, width = None, integer_bounds(hi)[1]  # starting at 0
    pieces = []
    lo.foreach_piece(lambda _set, aff: pieces.append(aff))
    for aff in pieces:
        start = isl.PwAff.from_aff(aff).intersect_domain(tiles)
        if not start.gt_set(lo).is_empty():
            continue  # above the first element of some tile
        try:
            _affine_ast(start)
        except ValueError:
            continue  # not one index formula: the copy's index could not be written with it
        w = integer_bounds(hi.sub(start))[1]
        if w.lt(width):
            best, width = start, w
    return best


def _per_tile_producer(model: KernelModel, producer: Stmt, footprint: isl.Map, tiles: list[str],
                       origins: list) -> tuple[Stmt, Tensor, isl.Map]:
    """The producer with the tile dimensions in front, and its own dimensions counted from each tile's origin:
    P[t, x - origin(t)].  Also the map from (tile, element) to the copy's element."""
    name, ctx = producer.name, model.ctx
    iters = tiles + producer.iters
    pairs = footprint.wrap().flatten().set_tuple_name(name)  # [tile, instance] for every element a tile reads
    for k, it in enumerate(iters):
        pairs = pairs.set_dim_name(isl.dim_type.set, k, it)
    shift = _shift(ctx, name, tiles, producer.iters, pairs, origins)
    domain = shift.range().coalesce()
    shape = _copy_shape(domain, tiles, len(producer.iters))
    back = shift.reverse().apply_range(_drop_tiles(ctx, name, tiles, producer.iters, pairs))  # copy -> original
    reads = [replace(a, relation=back.apply_range(a.relation)) for a in producer.reads]
    write = isl.Map.read_from_str(ctx, f"{{ {name}[{', '.join(iters)}] -> {name}[{', '.join(iters)}] }}")
    starts = {it: ast.BinOp("+", ast.Name(it), _affine_ast(o)) for it, o in zip(producer.iters, origins)
              if o is not None}
    value = rename_iterators(producer.value, starts)
    check_expression_size(NAME, name, [value], "compute_at it")
    new = replace(producer, lhs_iters=list(iters), domain=domain, value=value, reads=reads,
                  write=Access(name, write.intersect_domain(domain)))
    box = isl.Set.read_from_str(ctx, "{ %s[%s] : %s }" % (
        name, ", ".join(f"a{k}" for k in range(len(shape))),
        " and ".join(f"0 <= a{k} < {n}" for k, n in enumerate(shape))))
    copied = int(footprint.range().count_val().to_python())
    return new, replace(model.tensors[name], shape=shape, box=box, copies=len(tiles), copied=copied), shift


def _copy_shape(domain: isl.Set, tiles: list[str], width_dims: int) -> list[int]:
    """The copy's extent along each tile loop, then its width along each of the producer's dimensions; one
    element each where no instance lies (at these sizes the producer computes nothing: nothing writes the copy)."""
    if domain.is_empty():
        return [1] * (len(tiles) + width_dims)
    for k, tile in enumerate(tiles):
        lo = domain.dim_min_val(k)
        if lo.is_neg():
            raise ScheduleError(NAME, f"loop {tile} of the target takes negative values ({lo}); recompute at a loop "
                                      f"that counts from 0")
    return [int(domain.dim_max_val(d).to_python()) + 1 for d in range(len(tiles) + width_dims)]


def _drop_tiles(ctx, name: str, tiles: list[str], iters: list[str], pairs: isl.Set) -> isl.Map:
    """{ P[tiles, iters] -> P[iters] } on `pairs`: a tile's element -> the original instance."""
    text = f"{{ {name}[{', '.join(tiles + iters)}] -> {name}[{', '.join(iters)}] }}"
    return isl.Map.read_from_str(ctx, text).intersect_domain(pairs)


def _shift(ctx, name: str, tiles: list[str], iters: list[str], pairs: isl.Set, origins: list) -> isl.Map:
    """{ P[t, x] -> P[t, x - origin(t)] } on `pairs`: a tile's element -> its place in the tile's copy."""
    space = pairs.get_space()
    ls = isl.LocalSpace.from_space(space)
    to_tiles = isl.MultiAff.read_from_str(ctx, f"{{ {name}[{', '.join(tiles + iters)}] -> [{', '.join(tiles)}] }}")
    parts = [isl.PwAff.var_on_domain(ls, isl.dim_type.set, k) for k in range(len(tiles))]
    for d, origin in enumerate(origins):
        x = isl.PwAff.var_on_domain(ls, isl.dim_type.set, len(tiles) + d)
        parts.append(x if origin is None else x.sub(origin.pullback_multi_aff(to_tiles)))
    shift = pw_affs_to_map(parts, pairs).set_tuple_name(isl.dim_type.out, name)
    for k, it in enumerate(tiles + iters):
        shift = shift.set_dim_name(isl.dim_type.out, k, it)
    return shift


def _read_own_tile(reader: Stmt, producer: Stmt, path: list[Loop], tiles: isl.Map, origins: list,
                   shift: isl.Map) -> Stmt:
    """The reader with every read of the producer turned into a read of its own tile's copy:
    P[e] -> P[t(c), e - origin(t(c))]."""
    on_tiles = isl.PwMultiAff.from_map(tiles)
    index = [_reader_ast(reader, on_tiles.get_pw_aff(k), path) for k in range(tiles.dim(isl.dim_type.out))]
    starts = [None if o is None else _reader_ast(reader, o.pullback_pw_multi_aff(on_tiles), path) for o in origins]
    fresh = {}

    def own_tile(e):
        if not isinstance(e, ast.Access):
            return None
        if e.tensor != producer.name:
            return e  # kept as it is: the reads refer to their nodes
        local = [x if s is None else ast.BinOp("-", x, s) for x, s in zip(e.indices, starts)]
        fresh[id(e)] = ast.Access(e.tensor, index + local, e.span, e.neg_inf_as_zero)
        return fresh[id(e)]

    value = ast.rewrite(reader.value, own_tile)
    init = None if reader.init is None else ast.rewrite(reader.init, own_tile)
    check_expression_size(NAME, reader.name, [value, init], f"compute_at {producer.name}")
    reads = []
    for a in reader.reads:
        if a.tensor != producer.name:
            reads.append(a)
            continue
        pair = tiles.range_product(a.relation).flatten_range().set_tuple_name(isl.dim_type.out, producer.name)
        reads.append(replace(a, relation=pair.apply_range(shift), node=fresh.get(id(a.node), a.node)))
    return replace(reader, value=value, init=init, reads=reads)


def _reader_ast(reader: Stmt, pa: isl.PwAff, path: list[Loop]) -> ast.Expr:
    """A function of the reader's iterators (a target loop, a copy's origin) as an index expression
    (`i // 32`)."""
    where = _instances(reader)
    try:
        return _affine_ast(pa.intersect_domain(where), as_params(where))
    except ValueError:
        loops = ", ".join(loop.name for loop in path)
        raise ScheduleError(NAME, f"the target loops {loops} are not an affine index of {reader.name}'s iterators "
                                  f"({pa}); recompute at loops made by split or tile") from None


def _affine_ast(pa: isl.PwAff, context: Optional[isl.Set] = None) -> ast.Expr:
    """A quasi-affine function of named dimensions as an index expression over those names (ValueError when it
    is not one formula of + - * // %)."""
    n = pa.dim(isl.dim_type.in_)
    on_params = pa.move_dims(isl.dim_type.param, pa.dim(isl.dim_type.param), isl.dim_type.in_, 0, n)
    where = isl.Set.universe(on_params.get_domain_space())
    if context is not None:
        where = where.intersect_params(context)
    return _to_ast(pw_aff_to_expr(on_params.align_params(where.get_space()), where))


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
