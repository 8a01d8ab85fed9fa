"""Kernel structure: which loops of a kernel are grid axes, serial loops or the point loops of a tile, the
variable each loop has in the tile program, and its bounds.

* The chain of loops bound to grid axes at the top of a kernel are its program ids (`_grid_chain`,
  `_grid_axis`); a bound loop anywhere else, a grid loop that walks a reduction, or a `combine segments`
  reduction is refused here.
* A loop is serial (`_is_serial`, the rule of compiler/analysis/serial_loops.py, which the buffer plan shares)
  when it is a tile loop, pipelined, around several statements, walks a `sum` with an accumulator narrower
  than f32, or carries a recurrence (`_carried`); serial loops found
  inside point loops run around the tile (`_point_chain`).  A reduction's accumulator lives around the outermost serial loop that walks it
  (`_accumulation_loop`).
* Loop bounds come from isl, as functions of the enclosing loop variables (`_loop_bounds`), and
  `_emitted_bounds` is what the generated loops guarantee about their variables -- all a mask may assume.
* Loop variables get names nothing else in the program has (`_loop_variables`).

Host loops (`host`) are outside the kernel's root: they come first in every context, and their variables are
the kernel's arguments.

`KernelLoops` is mixed into `_KernelLowering` (compiler/lower/build.py) and reads its fields (`model`, `tree`,
`deps`, `root`, `host`, `bounds_cache`, `serial_paths`, `loop_vars`, `serial_loops`).
"""

from __future__ import annotations

import contextlib
from typing import Optional

import islpy as isl

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower.geometry import _pa_expr
from tdsl.compiler.lower.tileir import Bin, Const, Expr, GridAxis
from tdsl.compiler.model.dependences import any_order, order_independent
from tdsl.compiler.schedule.tree import (Leaf, Loop, Node, accumulation_loop, pw_affs_to_map, statements_under,
                                        walk_loops, walks_reduction)


class KernelLoops:
    """The loop structure of one kernel (see the module docstring)."""

    def _var(self, loop: Loop, d: int) -> str:
        """The variable of a loop dim in the tile program (see `_loop_variables`: `io`, `io_0` for a dim of a
        fused loop, `l_i` when a statement iterator is also called `i`)."""
        if not self.loop_vars:  # one naming for all the loops of the kernel
            iters = {it for s in statements_under(self.root) for it in self.model.stmt(s).iters}
            loops = list(self.host) + list(walk_loops([self.root]))
            self.loop_vars.update(_loop_variables(loops, iters, self.model.sizes))
        return self.loop_vars[(loop.name, d if loop.n_dims > 1 else None)]

    def _is_serial_at(self, loop: Optional[Loop]) -> bool:
        """Is the buffer's loop one the lowering emits as a `SerialLoop` (which then owns the buffer)?"""
        return loop is not None and not loop.bind and self._is_serial(loop) and loop.n_dims == 1

    def _grid_chain(self) -> tuple[list[Loop], list[Node]]:
        chain: list[Loop] = []
        node = self.root
        while isinstance(node, Loop) and node.bind:
            chain.append(node)
            if len(node.body) == 1 and isinstance(node.body[0], Loop) and node.body[0].bind:
                node = node.body[0]
                continue
            break
        body = chain[-1].body if chain else [self.root]
        for loop in walk_loops(body):
            if loop.host:
                raise BackendError(f"loop {loop.name} runs on the host but is inside a loop a kernel runs; host loops "
                                   f"must be the outermost loops")
            if loop.bind:
                raise BackendError(
                    f"loop {loop.name} is bound to grid.{loop.bind} but is not directly inside the other grid loops "
                    f"of its kernel; bound loops must be the outermost loops of a kernel (or run the loops around "
                    f"it on the host: host(...), each iteration then launches the kernels inside)"
                )
        for stmt_name in statements_under(self.root):
            policy = self.model.stmt(stmt_name).combine or ""
            # a max / min gives the same bits in any grouping: its segments need no kernel of their own (probe MM)
            if policy.startswith("segments") and not order_independent(self.model.stmt(stmt_name)):
                raise BackendError(
                    f"reduction {stmt_name} declares `combine {policy}`: its terms must be combined in those segments; "
                    f"apply rfactor({stmt_name}.<loop>, segments=...) so the kernel computes exactly them")
        for loop in chain:
            for stmt_name in statements_under(loop):
                stmt = self.model.stmt(stmt_name)
                if stmt.is_reduction and any(walks_reduction(stmt, pa) for pa in loop.exprs[stmt_name]):
                    raise BackendError(
                        f"grid loop {loop.name} walks the reduction of {stmt_name}: its programs would each hold a "
                        f"partial result and combining them needs atomics or a second pass (split-K), which this "
                        f"backend does not generate; keep reduction loops serial")
        axes = [l.bind for l in chain]
        if len(set(axes)) != len(axes):
            raise BackendError(f"grid axes bound twice in one kernel: {', '.join(axes)}")
        return chain, body

    def _grid_axis(self, loop: Loop) -> GridAxis:
        vars_, extents, lowers = [], [], []
        for d in range(loop.n_dims):
            lo, hi = self._loop_range(loop, d, outer=[])
            vars_.append(self._var(loop, d))
            lowers.append(lo)
            extents.append(Bin("+", Bin("-", hi, lo), Const(1)))
        return GridAxis(loop.bind, vars_, extents, lowers)

    def _loop_range(self, loop: Loop, d: int, outer: list[Loop]) -> tuple[Expr, Expr]:
        """Smallest and largest value of a loop dim over every statement below it, as functions of `outer`, as
        the code emits them (`_empty_outside`)."""
        lo, hi = _empty_outside(*self._loop_bounds(loop, d, outer))
        return _pa_expr(lo), _pa_expr(hi)

    def _loop_bounds(self, loop: Loop, d: int, outer: list[Loop]) -> tuple[isl.PwAff, isl.PwAff]:
        """`_loop_range` as isl functions of the outer loop variables (defined where some instance lies below)."""
        image = None
        for stmt_name in statements_under(loop):
            stmt = self.model.stmt(stmt_name)
            dims = [e for l in outer for e in l.exprs[stmt_name]] + [loop.exprs[stmt_name][d]]
            m = pw_affs_to_map(dims, stmt.domain).range()
            image = m if image is None else image.union(m)
        image = image.coalesce()
        names = [self._var(l, k) for l in outer for k in range(l.n_dims)] + ["v_"]
        for pos, n in enumerate(names):
            image = image.set_dim_name(isl.dim_type.set, pos, n)
        # outer loop values -> this dim's values
        as_map = isl.Map.from_range(image).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, len(names) - 1)
        return as_map.dim_min(0), as_map.dim_max(0)

    # ------------------------------------------------------------ full iterations first (index-set splitting)

    def _full_prefix(self, loop: Loop, context: list[Loop]) -> Optional[Expr]:
        """Where to split the range of a serial loop that walks a one-pass softmax (`online`): its iterations
        before the split have every tile of every statement under it full, so that copy of the loop needs no mask
        (the key blocks below the diagonal of causal attention, and all but the last of a ragged row).  None: no
        split (not such a loop, or no outer value has a full iteration)."""
        under = statements_under(loop)
        if not any(self.model.stmt(s).rescale is not None for s in under) or loop.bind:
            return None
        lo, hi = self._loop_bounds(loop, 0, context)
        names = [self._var(l, k) for l in context for k in range(l.n_dims)] + ["v_"]
        ragged = None
        for name in under:
            g = self._geometry(self.model.stmt(name), context + [loop], self.model.stmt(name).iters)
            empty_lanes = g.box.subtract(g.members.align_params(g.box.get_space()))
            on_loops = empty_lanes.project_out(isl.dim_type.set, len(g.loop_names), len(g.iters))
            for pos, n in enumerate(names):
                on_loops = on_loops.set_dim_name(isl.dim_type.set, pos, n)
            ragged = on_loops if ragged is None else ragged.union(on_loops.align_params(ragged.get_space()))
        as_map = isl.Map.from_range(ragged.coalesce()).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0,
                                                                  len(names) - 1)
        # Only ragged values the loop walks matter; outside [lo, hi] the set may be unbounded (no lexmin).
        as_map = as_map.intersect(_between(lo, hi).align_params(as_map.get_space()))
        first_ragged = as_map.lexmin_pw_multi_aff().get_pw_aff(0) if not as_map.is_empty() else None
        end = hi.add(isl.PwAff.val_on_domain(hi.domain(), isl.Val.one(hi.get_ctx())))
        split = end if first_ragged is None else first_ragged.align_params(end.get_space()).union_min(end)
        split = split.intersect_domain(hi.domain()).coalesce()
        if split.le_set(lo).is_equal(hi.domain()) or split.is_equal(end):
            return None  # no outer value has a full iteration, or every iteration is full: nothing to split
        self.split_points[id(loop)] = (split, list(context))
        return _pa_expr(split)

    @contextlib.contextmanager
    def _restrict(self, loop: Loop, part: Optional[str]):
        """While lowering one copy of a split loop ("full" or "rest"): its variable runs over the part's range only,
        which the masks may assume (`_emitted_bounds`)."""
        if part is None:
            yield
            return
        split, outer = self.split_points[id(loop)]
        names = [self._var(l, k) for l in outer for k in range(l.n_dims)] + ["v_"]
        side = "v < s" if part == "full" else "v >= s"
        relation = isl.Map.from_pw_aff(split).apply_range(
            isl.Map.read_from_str(self.model.ctx, f"{{ [s] -> [v] : {side} }}").align_params(split.get_space()))
        keep = relation.wrap().flatten()
        for pos, n in enumerate(names):
            keep = keep.set_dim_name(isl.dim_type.set, pos, n)
        self.restricted[id(loop)] = (keep, part)
        try:
            yield
        finally:
            del self.restricted[id(loop)]

    def _restriction_key(self) -> tuple:
        """What the geometry and bounds caches must tell apart: the parts of split loops being lowered."""
        return tuple(sorted((k, part) for k, (_, part) in self.restricted.items()))

    def _emitted_bounds(self, context: list[Loop]) -> isl.Set:
        """What the generated code guarantees about the loop variables of `context` (a set over their names).

        Each variable runs within the bounds it is emitted with -- wherever isl defines those bounds; for outer
        values without instances below, the emitted formula gives some range we know nothing about -- and
        nothing ties variables of different loops together: a fused grid axis launches every combination of
        its variables' ranges, a serial loop runs for every value of the loops around it.  Masks may only
        assume these facts and the sizes' positivity; anything more (which combinations hold instances) must
        be tested by the mask itself."""
        key = (tuple(id(l) for l in context), self._restriction_key())
        if key in self.bounds_cache:
            return self.bounds_cache[key]
        names = [self._var(l, d) for l in context for d in range(l.n_dims)]
        facts = isl.Set.universe(isl.Space.create_from_names(self.model.ctx, set=names, params=self.model.params))
        if self.model.params:
            positive = " and ".join(f"{p} > 0" for p in self.model.params)
            facts = facts.intersect_params(isl.Set.read_from_str(
                self.model.ctx, f"[{', '.join(self.model.params)}] -> {{ : {positive} }}"))
        pos = 0
        for k, loop in enumerate(context):
            outer = [] if loop.bind else context[:k]
            n_outer = sum(l.n_dims for l in outer)
            for d in range(loop.n_dims):
                lo, hi = self._loop_bounds(loop, d, outer)
                lo, hi = (f.insert_dims(isl.dim_type.in_, n_outer, 1) for f in (lo, hi))
                var = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(lo.get_domain_space()), isl.dim_type.set,
                                              n_outer)
                inside = var.ge_set(lo).intersect(var.le_set(hi))
                part = self.restricted.get(id(loop))
                if part is not None:  # one copy of a split loop runs only its part of the range
                    inside = inside.set_dim_name(isl.dim_type.set, n_outer, "v_")
                    inside = inside.intersect(part[0].align_params(inside.get_space()))
                within = inside.union(lo.domain().complement())
                # (outer variables, this one) -> every variable of the context
                within = within.insert_dims(isl.dim_type.set, n_outer, pos - n_outer)
                within = within.add_dims(isl.dim_type.set, len(names) - pos - 1)
                for p, n in enumerate(names):
                    within = within.set_dim_name(isl.dim_type.set, p, n)
                facts = facts.intersect(within.align_params(facts.get_space()))
                pos += 1
        self.bounds_cache[key] = facts.coalesce()
        return self.bounds_cache[key]

    def _is_serial(self, loop: Loop) -> bool:
        """Does every program run this loop's iterations one after another (rather than as lanes of a tile)?
        compiler/analysis/serial_loops.py holds the rule, which the buffer plan sizes its tiles by."""
        return self.serial_loops(loop)

    def _carried(self, loop: Loop) -> list:
        """The dependences between instances under `loop` that it carries, each with its pairs (serial_loops.py):
        its iterations must run one after the other, and the values pass from one to the next through memory
        (registers hold one iteration's tile)."""
        return self.serial_loops.carried(loop)

    def _point_chain(self, node: Node) -> tuple[Leaf, list[Loop]]:
        """The statement under a chain of point loops (vectorised as one tile), and the serial loops found inside
        the chain, outermost first.  Those run around the tile: a serial loop inside point loops becomes a
        loop over tiles, which keeps every element's order as long as no point loop outside it walks the
        statement's reduction (that would interleave the terms of one element differently: refused unless the
        terms may combine in any order, `any_order`)."""
        stmt = statements_under(node)[0]
        hoisted: list[Loop] = []
        points: list[Loop] = []
        while isinstance(node, Loop):
            if len(node.body) != 1:
                names = ", ".join(statements_under(node))
                raise BackendError(
                    f"loop {node.name} holds several statements ({names}) but is not a serial loop; the tile "
                    f"backends vectorise point loops one statement at a time: split it (the outer loop becomes "
                    f"serial) or keep the statements in separate loops"
                )
            if self._is_serial(node):
                walking = [p for p in points if walks_reduction(self.model.stmt(stmt), p.exprs[stmt][0])]
                if walking and self.model.stmt(stmt).is_reduction and not any_order(self.model.stmt(stmt)):
                    raise BackendError(
                        f"serial loop {node.name} is inside point loop {walking[0].name}, which walks the reduction "
                        f"of {stmt}: a tile over {walking[0].name} would add the terms of one element in another "
                        f"order; reorder so that {node.name} encloses {walking[0].name}, or split "
                        f"{walking[0].name} (its outer loop is serial)")
                hoisted.append(node)
            else:
                points.append(node)
            node = node.body[0]
        return node, hoisted

    def _loop_note(self, loop: Loop, pipelined: bool = True) -> str:
        parts = [f"cache_{b.kind} {b.tensor} -> {b.scope}" for b in self.tree.buffers if b.at is loop]
        if loop.pipeline and pipelined:
            parts.append(f"pipeline stages={loop.pipeline}" + (
                " warp_specialize=true (TileLang's arrangement; the other backends run the loop pipelined)"
                if loop.warp_specialize else ""))
        return f"loop {loop.name}" + (f": {'; '.join(parts)}" if parts else "")

    def _accumulation_loop(self, stmt_name: str, context: list[Loop]) -> Optional[Loop]:
        """The serial loop of `context` the reduction's accumulator lives across (schedule/tree.py
        `accumulation_loop`; a reader's context may hold loops the reduction is not in)."""
        kernel = [s.name for s in self.model.stmts if self.kernel_of.get(s.name) == self.index]
        inside = [loop for loop in self._serial_path(stmt_name) if not any(loop is c for c in context)]
        return accumulation_loop(self.model, stmt_name, context, kernel, deeper=inside)

    def _serial_path(self, stmt_name: str) -> list:
        """The serial loops of the kernel around a statement (once per statement: the tree does not change while
        a kernel is lowered)."""
        if stmt_name not in self.serial_paths:
            self.serial_paths[stmt_name] = [loop for loop in self.tree.path(stmt_name)
                                            if not loop.host and self._is_serial(loop)]
        return self.serial_paths[stmt_name]


def _empty_outside(lo: isl.PwAff, hi: isl.PwAff) -> tuple[isl.PwAff, isl.PwAff]:
    """Piecewise bounds that give an empty loop where no instance lies below.  isl defines a loop's bounds only
    at the outer values that hold work; elsewhere the emitted formula takes one of its pieces.  The programs of
    a wavefront outside its current band walked such a loop of a skewed, tiled stencil as `range(-75, 4)`:
    tens of masked, empty iterations each.  There the loop now runs no iteration; where isl defines the bounds
    they are unchanged, and so is what `_emitted_bounds` assumes.  Single-piece bounds stay as they are (one
    affine formula, no extra test), and so do a grid's (no outer loops)."""
    if lo.dim(isl.dim_type.in_) == 0 or (lo.n_piece() < 2 and hi.n_piece() < 2):
        return lo, hi
    outside = lo.domain().complement()
    if outside.is_empty():
        return lo, hi
    ctx = lo.get_ctx()
    return (lo.union_max(isl.PwAff.val_on_domain(outside, isl.Val.zero(ctx))).coalesce(),
            hi.union_min(isl.PwAff.val_on_domain(outside, isl.Val.negone(ctx))).coalesce())


def _between(lo: isl.PwAff, hi: isl.PwAff) -> isl.Map:
    """{outer loop values -> v : lo <= v <= hi}: the values a loop walks, as a map from its outer loops."""
    lo_map, hi_map = isl.Map.from_pw_aff(lo), isl.Map.from_pw_aff(hi)
    values = lo_map.get_space().range()
    return lo_map.apply_range(isl.Map.lex_le(values)).intersect(hi_map.apply_range(isl.Map.lex_ge(values)))


# ---------------------------------------------------------------- loop variable names (see KernelLoops._var)

# The isl name `_loop_bounds` gives the value of the loop being bounded, next to the loop variables.
_BOUND_VALUE = "v_"


def _loop_variables(loops: list, iters: set, sizes) -> dict:
    """(loop name, dim or None for a loop of one dim) -> its variable in the tile program.

    Loop variables share the tile program's `Var` names with statement iterators and run-time sizes, and
    are isl dimension names next to both, so each must be a name nothing else has: a loop keeps its name
    (a dim of a fused loop `io`: `io_0`) when no iterator, size or other loop variable has it, else takes
    the first free of `l_<name>`, `l_<name>_1`, ...  Loops are named in tree order, those that keep their
    name first, so a loop `i` beside an iterator `i` and a loop `l_i` gives `l_i_1` and `l_i`.  Loops of one
    name share one variable (sibling loops made by one step).  The backends map these names to Python
    identifiers (backends/common/names.py)."""
    keys = []
    for loop in loops:
        for d in range(loop.n_dims):
            key = (loop.name, d if loop.n_dims > 1 else None)
            if key not in keys:
                keys.append(key)
    natural = {key: key[0] if key[1] is None else f"{key[0]}_{key[1]}" for key in keys}  # a fused loop's dims: io_0, io_1
    taken = set(iters) | set(sizes) | {_BOUND_VALUE}
    out = {}
    for key in keys:  # first the loops that keep their names
        if natural[key] not in taken:
            out[key] = natural[key]
            taken.add(natural[key])
    for key in keys:
        if key not in out:
            name, n = f"l_{natural[key]}", 0
            while name in taken:
                n += 1
                name = f"l_{natural[key]}_{n}"
            out[key] = name
            taken.add(name)
    return out
