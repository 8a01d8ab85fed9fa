"""Registers: which results stay in registers, which are stored, and when a later statement of the same
kernel reads a result from its register tile.

A statement whose result a later statement of the same kernel reads keeps it in registers (`_keep_store`);
outputs and temporaries read by a later kernel are stored to global memory.  A read takes the producer's
register tile (`_register`) only element for element: the same loops, the same lanes per axis at the same
offsets (equal as isl functions, `_same_offset`), in the same order, and every element written in the same
iteration of the producer's loops (`_same_iteration`).

`RegisterReuse` is mixed into `_KernelLowering` (compiler/lower/build.py) and reads its fields (`model`,
`kernel_of`, `index`, `temps`); `_Produced` is what the lowering records for each statement it has lowered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import islpy as isl

from tdsl.frontend import ast

from tdsl.compiler.model.isl_code import integer_bounds
from tdsl.compiler.model.program import Stmt
from tdsl.compiler.lower.tileir import Axis, Reg, Running, Tile
from tdsl.compiler.schedule.tree import pw_affs_to_map


@dataclass
class _Produced:
    """A statement already lowered in this kernel: where its tile lives and whether it stayed in registers."""

    stmt: Stmt
    tile: Tile
    keep: bool
    loops: list  # the enclosing loops at the point its value is final


class RegisterReuse:
    """Register tiles shared between the statements of one kernel (see the module docstring)."""

    def _keep_store(self, stmt: Stmt) -> tuple[bool, bool]:
        readers_here = [
            s for s in self.model.stmts
            if self.kernel_of[s.name] == self.index and any(r.tensor == stmt.name for r in s.reads)
        ]
        kind = self.model.tensors[stmt.name].kind
        store = kind == "output" or stmt.name in self.temps
        return bool(readers_here), store

    def _register(self, e: ast.Access, stmt: Stmt, tile: Tile, producer: _Produced, context) -> Optional[Reg]:
        """The producer's register tile, if this read takes it element for element."""
        if producer.loops != context[: len(producer.loops)]:  # the same loop objects, not only the same names
            return None
        positions = _lanes(e.indices, stmt, tile, producer.stmt, producer.tile)
        if positions is None or not self._same_iteration(producer, stmt, e):
            return None
        return Reg(producer.stmt.name, tuple(positions))

    def _running_read(self, e: ast.Access, stmt: Stmt, tile: Tile, context) -> Optional[Running]:
        """A read of a running maximum (`online`) by one of its exponentials, inside the loop that walks the
        maximum: its accumulator as it is now, element for element."""
        if e.tensor not in self.tree.online or e.tensor not in self.accumulating:
            return None
        if not any(s.rescale is not None and s.rescale.stat == e.tensor
                   and (s.rescale.exponential == stmt.name or (s.rescale.source is None and s.name == stmt.name))
                   for s in self.model.stmts):
            return None
        return self._running(e.tensor, e.indices, stmt, tile, context)

    def _running(self, stat: str, indices, stmt: Stmt, tile: Tile, context) -> Optional[Running]:
        """The maximum's accumulator as a reader inside a loop that walks its terms sees it; None when the reader
        is not in such a loop (in another program, or in the same iteration as the accumulator's start: there the
        maximum is complete, or not begun, in this iteration -- `online(m)` after `compute_at(m, l.ko)` puts all
        of m in the first iteration of ko, and an accumulator started afresh in each iteration would be read as
        -inf in the others: probe of the 26th session)."""
        acc_tile, acc_context = self.accumulating[stat]
        if acc_context != context[: len(acc_context)] or len(context) == len(acc_context):
            return None
        maximum = self.model.stmt(stat)
        positions = _lanes(indices, stmt, tile, maximum, acc_tile)
        if positions is None:
            return None
        return Running(stat, tuple(positions), maximum.dtype)

    def _same_iteration(self, producer: _Produced, stmt: Stmt, e: ast.Access) -> bool:
        """Was every element this read takes written by the producer in the same iteration of the producer's
        loops?  A register tile holds only the current iteration's values: in an iteration where the producer
        has no instance its tile is recomputed empty, so a value from an earlier iteration is gone."""
        if not producer.loops:
            return True
        access = _read_of(stmt, e)
        if access is None:
            return False
        prod = producer.stmt
        reader_times = pw_affs_to_map([pa for l in producer.loops for pa in l.exprs[stmt.name]], stmt.domain)
        writer_times = pw_affs_to_map([pa for l in producer.loops for pa in l.exprs[prod.name]], prod.domain)
        writers = access.relation.apply_range(prod.write.relation.reverse())  # reader instance -> writers
        return writers.apply_range(writer_times).is_subset(reader_times)


def _read_of(stmt: Stmt, e: ast.Access):
    """The statement's read that `e` is: by identity, or (compute_inline copies and re-indexes the nodes it
    substitutes) the one equal to it, or the only read of its tensor."""
    same = [r for r in stmt.reads if r.tensor == e.tensor]
    found = next((r for r in same if r.node is e), None) or next((r for r in same if r.node == e), None)
    return found if found is not None else (same[0] if len(same) == 1 else None)


def _lanes(indices, stmt: Stmt, tile: Tile, producer: Stmt, p_tile: Tile) -> Optional[list]:
    """Where a read at `indices` (of `stmt`, over `tile`) finds the producer's tile element for element: the
    position in `tile` of each producer axis; None when it does not (other sizes, offsets or an order change)."""
    consumer_axes = {a.iter: a for a in tile.axes}
    for p_iter, index in zip(producer.lhs_iters, indices):
        if not isinstance(index, ast.Name) or index.name not in stmt.iters:
            return None
        c_iter = index.name
        p_axis = next((a for a in p_tile.axes if a.iter == p_iter), None)
        if p_axis is None:
            if c_iter in consumer_axes or not _same_scalar(tile, c_iter, p_tile, p_iter):
                return None
            continue
        c_axis = consumer_axes.get(c_iter)
        if c_axis is None or c_axis.size != p_axis.size or not _same_offset(c_axis, p_axis):
            return None
    positions = []
    for p_axis in p_tile.axes:
        index = indices[producer.lhs_iters.index(p_axis.iter)]
        positions.append([a.iter for a in tile.axes].index(index.name))
    if positions != sorted(positions):
        return None  # a transposed register tile: not supported
    return positions


def _same_offset(a: Axis, b: Axis) -> bool:
    """Equal as functions of the loop variables wherever both tiles exist (isl, not syntax)."""
    return a.offset == b.offset or _same_function(a.offset_isl, b.offset_isl)


def _same_scalar(tile: Tile, it: str, p_tile: Tile, p_it: str) -> bool:
    """The reader's one value of `it` is the producer's of `p_it` wherever both tiles exist: the same expression,
    or the same function of the loop variables (a statement computed at a loop that fixes its row to that loop's
    value, `i = p` where `p == i`, beside a reader whose row is `i`)."""
    value, p_value = tile.scalars.get(it), p_tile.scalars.get(p_it)
    return value == p_value or _same_function(_where_held(tile.scalars_isl.get(it), tile),
                                              _where_held(p_tile.scalars_isl.get(p_it), p_tile))


def _where_held(value, tile: Tile):
    """A tile's scalar as a function defined only where the tile holds instances (an accumulator's anchored
    row is a function of every loop value); None where isl will not line the two up."""
    if value is None or tile.held_isl is None:
        return None
    try:
        held = tile.held_isl.reset_tuple_id().align_params(value.get_domain_space())
        return value.align_params(held.get_space()).intersect_domain(held)
    except isl.Error:
        return None


def _on_common_loops(a, b) -> tuple:
    """The two functions over the same loop variables: one of the outer loops only (a producer computed in loop j,
    beside a reader inside j's loop i) taken as a function of the inner ones too, on which it does not depend.
    Functions of loops that do not nest are returned as they are (isl refuses to compare them: not proved)."""
    short, long = (a, b) if a.dim(isl.dim_type.in_) <= b.dim(isl.dim_type.in_) else (b, a)
    outer, inner = short.dim(isl.dim_type.in_), long.dim(isl.dim_type.in_)
    if outer == inner or _loop_names(long)[:outer] != _loop_names(short):
        return a, b
    extended = short.insert_dims(isl.dim_type.in_, outer, inner - outer)
    for position in range(outer, inner):
        extended = extended.set_dim_id(isl.dim_type.in_, position, long.get_dim_id(isl.dim_type.in_, position))
    return (extended, long) if short is a else (long, extended)


def _loop_names(f) -> list:
    return [f.get_dim_name(isl.dim_type.in_, n) for n in range(f.dim(isl.dim_type.in_))]


def _same_function(a, b) -> bool:
    """Two isl functions of the loop variables equal wherever both are defined (False where either is None)."""
    if a is None or b is None:
        return False
    try:
        a, b = _on_common_loops(a, b)
        diff = a.sub(b).coalesce()
    except isl.Error:
        return False
    if diff.is_empty():
        return True
    lo, hi = integer_bounds(diff)
    return lo.is_zero() and hi.is_zero()
