"""Tile geometry: where a statement's tile lies and which of its lanes hold instances, from isl.

A statement's tile inside one iteration of its enclosing loops is, for each iterator, an offset (the
smallest value, a function of the loop variables) and a lane count (how many values it takes, rounded up
to a power of two); `_tile` turns that into a tileir `Tile`.  Inside the loops that walk a reduction the
output lanes are the accumulator's, anchored to the loops around it (`_anchor`, `_anchored`).  The domain
mask (`_mask`) is the instance set simplified against what the generated code guarantees: the loops'
emitted bounds and lane n at offset + n (partial tiles, causal triangles, fused grid axes past the end).
A tile holds at most `MAX_TILE_ELEMENTS` elements (both rules: compiler/lower/tile_rules.py).

The isl helpers at the end (`_lane_box`, `_embed`, `_mask_expr`, `_pa_expr`, ...) are shared with the loads
(compiler/lower/loads.py) and the loop bounds (compiler/lower/loops.py).

`TileGeometry` is mixed into `_KernelLowering` (compiler/lower/build.py) and reads its fields (`model`,
`geometry_cache`) and the loop structure (`_var`, `_emitted_bounds`, `_accumulation_loop`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import islpy as isl

from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.model.isl_code import integer_bounds, pw_aff_to_expr, set_to_expr
from tdsl.compiler.model.program import Stmt
from tdsl.compiler.lower.tileir import Axis, Bin, Expr, Tile
from tdsl.compiler.lower.tile_rules import MAX_TILE_ELEMENTS, lanes, too_many_elements
from tdsl.compiler.schedule.tree import Loop, pw_affs_to_map, uses_iterators


class TileGeometry:
    """The tiles of one kernel's statements and their masks (see the module docstring)."""

    def _tile(self, stmt: Stmt, context: list[Loop], iters: list[str], check_size: bool = True) -> Tile:
        """The instances of `stmt` inside one iteration of `context`, projected onto `iters`."""
        g = self._geometry(stmt, context, iters)
        axes, scalars, scalars_isl = [], {}, {}
        for it, lo, size in zip(g.iters, g.offsets, g.sizes):
            if size == 1:
                scalars[it], scalars_isl[it] = _pa_expr(lo), lo
            else:
                axes.append(Axis(it, _pa_expr(lo), size, lo))
        order = {it: n for n, it in enumerate(iters)}
        tile = Tile(sorted(axes, key=lambda a: order[a.iter]), scalars, self._mask(g), scalars_isl, g.rel.domain())
        if check_size:
            _check_size(stmt, tile)
        return tile

    def _geometry(self, stmt: Stmt, context: list[Loop], iters: list[str]) -> "_Geometry":
        """Where the tile of `stmt` (projected onto `iters`) lies as a function of the loop variables (cached)."""
        key = (stmt.name, tuple(id(l) for l in context), tuple(iters), self._restriction_key())
        if key not in self.geometry_cache:
            self.geometry_cache[key] = self._measure(stmt, context, iters)
        return self.geometry_cache[key]

    def _measure(self, stmt: Stmt, context: list[Loop], iters: list[str]) -> "_Geometry":
        dims, names = [], []
        for loop in context:
            for d, pa in enumerate(loop.exprs[stmt.name]):
                dims.append(pa)
                names.append(self._var(loop, d))
        keep = [stmt.iters.index(i) for i in iters]
        domain = stmt.domain
        if dims:
            rel = pw_affs_to_map(dims, domain).reverse()  # loop values -> instances
        else:
            rel = isl.Map.from_range(domain)
        for pos, n in enumerate(names):
            rel = rel.set_dim_name(isl.dim_type.in_, pos, n)
        drop = [p for p in range(len(stmt.iters)) if p not in keep]
        for p in reversed(drop):
            rel = rel.project_out(isl.dim_type.out, p, 1)
        kept = [stmt.iters[p] for p in sorted(keep)]  # the order isl keeps them in
        for out_pos, it in enumerate(kept):
            rel = rel.set_dim_name(isl.dim_type.out, out_pos, it)
        offsets, sizes = [], []
        anchor = self._anchor(stmt, context)
        for pos, it in enumerate(kept):
            if anchor is not None and it in stmt.lhs_iters:
                # Inside the loops that walk a reduction, its output lanes are the accumulator's: the partial
                # result of each step is added lane for lane, so the lanes must not move with those loops.
                lo, size = self._anchored(stmt, anchor, it, names)
                offsets.append(lo)
                sizes.append(size)
                continue
            lo = self._aligned_offset(stmt, context, it, names)
            if lo is None:
                lo = rel.dim_min(pos)
            span = rel.dim_max(pos).sub(lo.align_params(rel.get_space().domain())).coalesce()
            extent = integer_bounds(span)[1]
            if not extent.is_int():
                raise BackendError(self._no_fixed_size(stmt, it, span))
            size = extent.to_python() + 1
            offsets.append(lo)
            sizes.append(lanes(size))
        members = rel.wrap().flatten()
        for pos, n in enumerate(names + kept):
            members = members.set_dim_name(isl.dim_type.set, pos, n)
        total = [_total(lo) for lo in offsets]
        exact = all(t is not None for t in total)
        facts = self._emitted_bounds(context)
        box = _lane_box(members.get_space(), names, facts if exact else rel.domain(),
                        total if exact else offsets, sizes)
        if not exact and names:
            box = box.union(self._idle_lanes(facts, rel, names, kept, box))
        return _Geometry(stmt, names, kept, offsets, sizes, rel, members, facts, box, exact)

    def _no_fixed_size(self, stmt: Stmt, it: str, span: isl.PwAff) -> str:
        """Why a tile has no constant size along `it`, and what to change: split the loop that walks it, where
        one of the statement's loops is that iterator; else (a skewed or fused loop walks it with another
        iterator) bind the sizes it depends on."""
        sizes = _sizes_in_values(span) or _sizes_in_values(span, domains=True)
        depends = f"its extent depends on {', '.join(sizes)}" if sizes else "its extent depends on the loops around it"
        loops = [l.name for l in self.tree.path(stmt.name)]
        if it in loops:
            advice = f"split loop {it} of {stmt.name} by a constant"
        else:
            given = ", ".join(f"{n}=..." for n in sizes) or "..."
            advice = (f"no loop of {stmt.name} ({', '.join(loops) or 'none'}) walks {it} alone, so give the sizes "
                      f"values (--size {given})")
        return f"the tile of {stmt.name} along {it} has no fixed size ({depends}): {advice} (tiles must have constant sizes)"

    @staticmethod
    def _idle_lanes(facts: isl.Set, rel: isl.Map, names: list, kept: list, box: isl.Set) -> isl.Set:
        """The loop values the code runs where the statement has no instance (a loop's emitted range may cover
        them: `_emitted_bounds`), with every lane: offsets that are not one total function are not defined there,
        so nothing is known about the lanes, and a mask may not assume they stay inside."""
        ran = _embed(facts, names, names)
        busy = _embed(rel.domain().reset_tuple_id() if rel.domain().has_tuple_id() else rel.domain(), names, names)
        idle = ran.subtract(busy.align_params(ran.get_space()))
        return _embed(idle, names, names + kept).align_params(box.get_space())

    def _aligned_offset(self, stmt: Stmt, context: list[Loop], it: str, names: list[str]) -> Optional[isl.PwAff]:
        """The offset of a tile along `it` as a function of the loops that walk `it` only (the loops up to the last
        one whose expression uses it), lifted to all of `names`; None when that is the whole context.

        Inner loops that walk other iterators can still narrow the instances along `it` in some of their
        iterations (the diagonal key block of causal attention with 128 queries and 64 keys holds rows 64-127
        only): the tightest offset would then move with those loops, and two statements of one iteration (the
        scores and their row maximum, whose accumulator is anchored to the rows) would lie on different lanes.
        Anchored this way, every statement's lanes along `it` are the same wherever the loops that walk `it`
        are; the lanes an iteration does not use are masked."""
        position = stmt.iters.index(it)
        walks = [k for k, loop in enumerate(context) if any(uses_iterators(pa, position, 1) for pa in loop.exprs[stmt.name])]
        prefix = context[: walks[-1] + 1] if walks else []
        if len(prefix) == len(context):
            return None
        g = self._geometry(stmt, prefix, [it])
        space = isl.Space.create_from_names(self.model.ctx, set=names).align_params(g.offsets[0].get_domain_space())
        return g.offsets[0].align_params(space).pullback_multi_aff(_selection(space, names, g.loop_names))

    def _anchor(self, stmt: Stmt, context: list[Loop]) -> Optional[list[Loop]]:
        """For a reduction inside the loops that walk it, the loops around its accumulator (else None)."""
        outer = self._accumulation_loop(stmt.name, context) if stmt.is_reduction else None
        return None if outer is None else context[: context.index(outer)]

    def _anchored(self, stmt: Stmt, anchor: list[Loop], it: str, names: list[str]) -> tuple[isl.PwAff, int]:
        """The accumulator's offset (a function of the `anchor` loops, lifted to all of `names`) and lane count
        for the output iterator `it`."""
        g = self._geometry(stmt, anchor, [it])
        lo = g.offsets[0]
        space = isl.Space.create_from_names(self.model.ctx, set=names).align_params(lo.get_domain_space())
        lifted = lo.align_params(space).pullback_multi_aff(_selection(space, names, g.loop_names))
        return lifted, g.sizes[0]

    def _mask(self, g: "_Geometry") -> Optional[Expr]:
        """Which lanes of the tile box hold instances: the instance set simplified against what the code
        guarantees.

        The generated code guarantees the loop variables' emitted bounds (`_emitted_bounds`) and that lane n
        of an axis is its offset formula + n.  When every offset is one affine formula, the mask is the
        instance set gisted against exactly those facts, so it holds for every combination of loop values the
        code runs, including combinations with no instances (a fused grid axis past a partial tile, the empty
        tiles of a triangle).  Otherwise the offsets are only known where instances exist: the mask is gisted
        against that, and a condition on the loop values says where that is."""
        lanes = _mask_expr(g.members, g.box)
        valid = None if g.exact else self._valid_loop_values(g.rel, g.facts)
        if valid is None:
            return lanes
        return valid if lanes is None else Bin("and", valid, lanes)

    def _valid_loop_values(self, rel: isl.Map, facts: isl.Set) -> Optional[Expr]:
        """The condition on the loop variables under which a tile holds instances at all, beyond what the
        emitted loops guarantee (`facts`); None when the loops guarantee it."""
        if facts.dim(isl.dim_type.set) == 0:
            return None
        return loop_condition(rel.domain(), facts)


def loop_condition(values: isl.Set, facts: isl.Set) -> Optional[Expr]:
    """Membership in `values` (a set over the loop variables, named as `facts` names them) as a condition on
    those variables beyond what the emitted loops guarantee (`facts`); None when they guarantee it."""
    values = values.align_params(facts.get_space())
    facts = facts.align_params(values.get_space())
    if facts.is_subset(values):
        return None
    return set_to_expr(_to_params(values.gist(facts).coalesce()), _to_params(facts))


def _check_size(stmt: Stmt, tile: Tile) -> None:
    elements = 1
    for a in tile.axes:
        elements *= a.size
    if too_many_elements(elements):
        shape = " x ".join(f"{a.iter}:{a.size}" for a in tile.axes)
        raise BackendError(
            f"the tile of {stmt.name} would hold {elements} elements ({shape}); split its loops so that one "
            f"tile holds at most {MAX_TILE_ELEMENTS}"
        )


@dataclass
class _Geometry:
    """A statement's tile inside one iteration of its enclosing loops, in isl terms.

    `members` is the instance set over (loop variables, `iters`); `box` is what the generated code covers:
    the loop variables within their emitted bounds and each iterator from its offset over `sizes` lanes
    (when `exact`; otherwise only where instances exist, see `_mask`)."""

    stmt: Stmt
    loop_names: list
    iters: list  # the kept iterators, in the statement's order
    offsets: list  # isl functions of the loop variables, where instances exist
    sizes: list  # lanes per iterator (a power of two, or 1 for a scalar)
    rel: isl.Map  # loop values -> kept iterators of the instances
    members: isl.Set
    facts: isl.Set  # what the loops guarantee (`_emitted_bounds`)
    box: isl.Set
    exact: bool


def _lane_box(space: isl.Space, loop_names: list, loops: isl.Set, offsets: list, sizes: list) -> isl.Set:
    """The points (loop values, lanes) the code covers: `loops` for the loop variables, and lane n of each
    iterator at offset + n."""
    names = [space.get_dim_name(isl.dim_type.set, p) for p in range(space.dim(isl.dim_type.set))]
    proj = _selection(space, names, loop_names)
    box = isl.Set.universe(space)
    if loop_names:
        box = box.intersect(loops.align_params(space).preimage_multi_aff(proj))
    ls = isl.LocalSpace.from_space(space)
    for k, (lo, size) in enumerate(zip(offsets, sizes)):
        var = isl.PwAff.var_on_domain(ls, isl.dim_type.set, len(loop_names) + k)
        start = lo.pullback_multi_aff(proj)
        end = start.add(_const_like(start, size))
        box = box.intersect(var.ge_set(start)).intersect(var.lt_set(end))
    return box


def _selection(space: isl.Space, names: list, chosen: list) -> isl.MultiAff:
    """[names] -> [chosen]: picks some dims (by name) of a set in `space`."""
    return isl.MultiAff.read_from_str(
        space.get_ctx(), f"{_params_of_space(space)}{{ [{', '.join(names)}] -> [{', '.join(chosen)}] }}"
    ).align_params(space)


def _embed(s: isl.Set, names: list, into: list) -> isl.Set:
    """A set over dims `names` as a set over dims `into` (a superset of names, any order): new dims are free."""
    space = isl.Space.create_from_names(s.get_ctx(), set=into).align_params(s.get_space())
    return s.align_params(space).preimage_multi_aff(_selection(space, into, names))


def _project_onto(s: isl.Set, names: list, kept: list) -> isl.Set:
    """Project a set over dims `names` onto the dims `kept` (kept in the order of `names`)."""
    for p in reversed(range(len(names))):
        if names[p] not in kept:
            s = s.project_out(isl.dim_type.set, p, 1)
    s = s.reset_tuple_id()
    for p, n in enumerate(x for x in names if x in kept):
        s = s.set_dim_name(isl.dim_type.set, p, n)
    return s


def _mask_expr(s: isl.Set, box: isl.Set) -> Optional[Expr]:
    """A lane condition: membership in `s`, simplified against `box` (None when every lane of the box is in)."""
    simplified = s.align_params(box.get_space()).gist(box).coalesce()
    if simplified.plain_is_universe():
        return None
    return set_to_expr(_to_params(simplified), _to_params(box))


def _to_params(s: isl.Set) -> isl.Set:
    n = s.dim(isl.dim_type.set)
    return s.move_dims(isl.dim_type.param, s.dim(isl.dim_type.param), isl.dim_type.set, 0, n).params()


def _total_map(m: isl.Map) -> Optional[isl.Map]:
    """A relation given by one quasi-affine function, extended to every input; None for several pieces."""
    pieces = []
    m.as_pw_multi_aff().foreach_piece(lambda _set, ma: pieces.append(ma))
    return isl.Map.from_multi_aff(pieces[0]) if len(pieces) == 1 else None


def _params_of_space(space: isl.Space) -> str:
    n = space.dim(isl.dim_type.param)
    names = [space.get_dim_name(isl.dim_type.param, i) for i in range(n)]
    return f"[{', '.join(names)}] -> " if names else ""


def _total(pa: isl.PwAff) -> Optional[isl.PwAff]:
    """A function given by one affine formula, extended to every value of its inputs (the formula the code
    evaluates everywhere); None for a function of several pieces."""
    pieces = []
    pa.foreach_piece(lambda _set, aff: pieces.append(aff))
    return isl.PwAff.from_aff(pieces[0]) if len(pieces) == 1 else None


def _const_like(pa: isl.PwAff, value: int) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(pa.get_domain_space())
    return isl.PwAff.from_aff(isl.Aff.val_on_domain(ls, isl.Val.int_from_si(pa.get_ctx(), value)))


def _pa_expr(pa: isl.PwAff) -> Expr:
    return pw_aff_to_expr(_pa_params(pa))


def _pa_params(pa: isl.PwAff) -> isl.PwAff:
    """Move a function's input dims (loop variables) into named parameters."""
    n = pa.dim(isl.dim_type.in_)
    if n == 0:
        return pa
    names = [pa.get_dim_name(isl.dim_type.in_, i) for i in range(n)]
    if any(x is None for x in names):
        raise InternalError(f"unnamed loop dimension in {pa}")
    return pa.move_dims(isl.dim_type.param, pa.dim(isl.dim_type.param), isl.dim_type.in_, 0, n)


def _sizes_in_values(span: isl.PwAff, domains: bool = False) -> list[str]:
    """The sizes (params) `span`'s values depend on, or with `domains` those its pieces' conditions name: the
    conditions name every size of the statement's domain (M >= 1 of a softmax row), which the extent along j
    need not depend on (probe KK: 'its extent depends on M, N' for a loop over N)."""
    space = span.get_space()
    found: set = set()

    def piece(where: isl.Set, value: isl.Aff) -> None:
        for k in range(space.dim(isl.dim_type.param)):
            if (where if domains else value).involves_dims(isl.dim_type.param, k, 1):
                found.add(k)

    span.foreach_piece(piece)
    return [space.get_dim_name(isl.dim_type.param, k) for k in sorted(found)]
