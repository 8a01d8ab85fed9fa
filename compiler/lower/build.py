"""Tile lowering: a scheduled tree -> a backend-neutral tile program (`tileir`).

Each top-level node of the tree is one kernel launch.  Inside it:

* the chain of loops bound to grid axes (`bind`) at the top are the
  program ids;
* unbound loops made by `split`/`tile` (kind "tile") or pipelined loops are
  serial loops every program runs;
* everything below them -- point loops and the statement -- becomes one
  *tile*: the statement's instances inside one iteration of the enclosing
  loops.  isl gives its shape: for each iterator, the smallest value as a
  function of the enclosing loop variables (the axis offset) and how many
  values it takes (the axis size, rounded up to a power of two); lanes
  outside the instance set are masked (partial tiles, causal triangles).

Reductions keep an accumulator from just before the outermost serial loop
that walks their reduction iterators to just after it; a `sum` of a product
of two 2-D tiles becomes a `Dot` (hardware matrix multiply, f32
accumulation), any other reduction a tile `Reduce`.  A statement whose
result a later statement of the same kernel reads with the same tile stays
in registers (rounded to its dtype, as the store would); a result read by a
later kernel is stored to global memory.

What a backend cannot express raises `BackendError` with the reason.

Size: one class, `_KernelLowering`, doing one job (a scheduled kernel -> tile ops); its isl geometry
(masks, offsets, register reuse) is what every backend relies on, and splitting it would spread one
derivation over several files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from tdsl.frontend import ast

from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.model.functions import COMPOSITIONS, expand_tile
from tdsl.compiler.model.isl_code import integer_bounds, pw_aff_to_expr, set_to_expr
from tdsl.compiler.model.program import KernelModel, Stmt
from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.lower.tileir import (
    BufferDecl,
    AccFinish,
    AccInit,
    AccUpdate,
    Axis,
    Bin,
    Call,
    Compute,
    Const,
    Dot,
    Expr,
    GridAxis,
    Load,
    Neg,
    Reduce,
    Reg,
    Round,
    Select,
    SerialLoop,
    TensorArg,
    Tile,
    TileKernel,
    TileProgram,
    Var,
)
from tdsl.compiler.schedule.tree import Leaf, Loop, Node, global_tensors, pw_affs_to_map, statements_under, walk_loops, walks_reduction

# Largest tile (elements) one statement may hold in registers; beyond it the schedule must split more.
MAX_TILE_ELEMENTS = 1 << 16
CASTS = {"bf16", "f16", "f32", "f8e4m3"}


def lower(schedule: Schedule) -> TileProgram:
    model, tree = schedule.model, schedule.tree
    kernel_of = {s: k for k, node in enumerate(tree.body) for s in statements_under(node)}
    crossing = global_tensors(model, tree)  # temporaries written by one launch and read by another
    temps = [s.name for s in model.stmts if model.tensors[s.name].kind == "temp" and s.name in crossing]
    plans = _buffer_plans(schedule)
    kernels = []
    for k, node in enumerate(tree.body):
        lowering = _KernelLowering(model, tree, node, f"{model.name}_{k}", kernel_of, k, temps, plans[k])
        kernels.append(lowering.run())
    inputs = [_tensor_arg(model, t.name, "input") for t in model.inputs()]
    outputs = [_tensor_arg(model, t.name, "output") for t in model.outputs()]
    temp_args = [_tensor_arg(model, name, "temp") for name in temps]
    statements = {s.name: _statement_text(s) for s in model.stmts}
    return TileProgram(model.name, kernels, inputs, outputs, temp_args, dict(model.sizes), str(schedule.trace),
                       statements)


def _buffer_plans(schedule: Schedule) -> list[list]:
    """Per kernel, the buffers the schedule creates (compiler/analysis/buffer_plan.py); none while a size is unbound (the
    plan needs every size; only the Triton backend generates kernels for run-time sizes, and it needs none)."""
    if schedule.model.params:
        return [[] for _ in schedule.tree.body]
    from tdsl.compiler.analysis.buffer_plan import plan_kernels

    return [[b for b in k.buffers if b.kind != "tile"] for k in plan_kernels(schedule)]


def _buffer_decl(b) -> BufferDecl:
    return BufferDecl(b.tensor, b.kind, b.scope, b.loop, tuple(b.shape), b.dtype, b.stages)


def _statement_text(stmt: Stmt) -> str:
    from tdsl.frontend.printer import expr_text

    head = f"{stmt.name}[{', '.join(stmt.lhs_iters)}]: {stmt.dtype} = "
    if not stmt.is_reduction:
        return head + expr_text(stmt.value)
    return head + f"{stmt.reduce_op}({', '.join(stmt.red_iters)}) {expr_text(stmt.value)} accum {stmt.accum_dtype}"


def _tensor_arg(model: KernelModel, name: str, role: str) -> TensorArg:
    t = model.tensors[name]
    return TensorArg(name, t.dtype, list(t.shape), role)


@dataclass
class _Produced:
    """A statement already lowered in this kernel: where its tile lives and whether it stayed in registers."""

    stmt: Stmt
    tile: Tile
    keep: bool
    loops: list  # the enclosing loops at the point its value is final


@dataclass
class _KernelLowering:
    model: KernelModel
    tree: object
    root: Node
    name: str
    kernel_of: dict
    index: int
    temps: list
    planned: list  # compiler.memory.PlannedBuffer of this kernel (schedule-created buffers only)
    produced: dict = field(default_factory=dict)
    bounds_cache: dict = field(default_factory=dict)
    geometry_cache: dict = field(default_factory=dict)
    loop_vars: dict = field(default_factory=dict)  # (loop name, dim) -> its variable, made by _var on first use

    # ------------------------------------------------------------ kernel structure

    def _var(self, loop: Loop, d: int) -> str:
        """The variable of a loop dim in the tile program (see `_loop_variables`: `io`, `io_0` for a dim of a
        fused loop, `l_i` when a statement iterator is also called `i`)."""
        if not self.loop_vars:  # one naming for all the loops of the kernel
            iters = {it for s in statements_under(self.root) for it in self.model.stmt(s).iters}
            self.loop_vars.update(_loop_variables(list(walk_loops([self.root])), iters, self.model.sizes))
        return self.loop_vars[(loop.name, d if loop.n_dims > 1 else None)]

    def run(self) -> TileKernel:
        grid_loops, body = self._grid_chain()
        grid = [self._grid_axis(loop) for loop in grid_loops]
        ops = self._lower_body(body, list(grid_loops))
        stmts = statements_under(self.root)
        tensors = self._tensors(stmts)
        stages = [l.pipeline for l in _loops(self.root) if l.pipeline]
        return TileKernel(
            name=self.name,
            grid=grid,
            tensors=tensors,
            sizes=list(self.model.params),
            body=ops,
            num_warps=self._warps(),
            num_stages=max(stages) if stages else 2,
            comment=f"statements {', '.join(stmts)}",
            buffers=[_buffer_decl(b) for b in self.planned if not self._is_serial_at(b.at)],
        )

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
            if loop.bind:
                raise BackendError(
                    f"loop {loop.name} is bound to grid.{loop.bind} but is not directly inside the other grid loops "
                    f"of its kernel; bound loops must be the outermost loops"
                )
        for stmt_name in statements_under(self.root):
            policy = self.model.stmt(stmt_name).combine or ""
            if policy.startswith("segments"):
                raise BackendError(
                    f"reduction {stmt_name} declares `combine {policy}`: its terms must be summed in those segments; "
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
        """Smallest and largest value of a loop dim over every statement below it, as functions of `outer`."""
        lo, hi = self._loop_bounds(loop, d, outer)
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

    def _emitted_bounds(self, context: list[Loop]) -> isl.Set:
        """What the generated code guarantees about the loop variables of `context` (a set over their names).

        Each variable runs within the bounds it is emitted with -- wherever isl defines those bounds; for outer
        values without instances below, the emitted formula gives some range we know nothing about -- and
        nothing ties variables of different loops together: a fused grid axis launches every combination of
        its variables' ranges, a serial loop runs for every value of the loops around it.  Masks may only
        assume these facts and the sizes' positivity; anything more (which combinations hold instances) must
        be tested by the mask itself."""
        key = tuple(id(l) for l in context)
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
                within = var.ge_set(lo).intersect(var.le_set(hi)).union(lo.domain().complement())
                # (outer variables, this one) -> every variable of the context
                within = within.insert_dims(isl.dim_type.set, n_outer, pos - n_outer)
                within = within.add_dims(isl.dim_type.set, len(names) - pos - 1)
                for p, n in enumerate(names):
                    within = within.set_dim_name(isl.dim_type.set, p, n)
                facts = facts.intersect(within.align_params(facts.get_space()))
                pos += 1
        self.bounds_cache[key] = facts.coalesce()
        return self.bounds_cache[key]

    def _warps(self) -> int:
        return (self.root.warps if isinstance(self.root, Loop) else None) or 4

    def _tensors(self, stmts: list[str]) -> list[TensorArg]:
        used: list[str] = []
        for s in stmts:
            stmt = self.model.stmt(s)
            for name in [stmt.name] + [r.tensor for r in stmt.reads]:
                if name not in used:
                    used.append(name)
        args = []
        for name in used:
            t = self.model.tensors[name]
            if t.kind == "temp" and name not in self.temps:
                continue  # lives in registers only
            args.append(TensorArg(name, t.dtype, list(t.shape), t.kind))
        return args

    # ------------------------------------------------------------ body

    def _lower_body(self, body: list, context: list[Loop]) -> list:
        ops: list = []
        for node in body:
            if isinstance(node, Loop) and self._is_serial(node):
                ops.extend(self._serial(node, context))
            elif isinstance(node, _Hoisted):
                ops.extend(self._serial(node.loops[0], context, [_Hoisted(node.loops[1:], node.leaf)])
                           if node.loops else self._tile_statement(node.leaf, context))
            else:
                ops.extend(self._tile_statement(node, context))
        return ops

    def _serial(self, loop: Loop, context: list[Loop], body: Optional[list] = None) -> list:
        if loop.n_dims != 1:
            raise BackendError(f"serial loop {loop.name} is a fused loop; only grid loops may be fused")
        lo, hi = self._loop_range(loop, 0, outer=[l for l in context])
        starts = [s for s in statements_under(loop) if self._accumulation_loop(s, context + [loop]) is loop]
        before = [self._acc_init(s, context) for s in starts]
        inner = SerialLoop(self._var(loop, 0), lo, Bin("+", hi, Const(1)), loop.pipeline,
                           self._lower_body(loop.body if body is None else body, context + [loop]),
                           self._loop_note(loop), [_buffer_decl(b) for b in self.planned if b.at is loop])
        after = [self._acc_finish(s, context) for s in starts]
        return before + [inner] + after

    def _is_serial(self, loop: Loop) -> bool:
        """Does every program run this loop's iterations one after another (rather than as lanes of a tile)?

        Tile loops (from split / tile) and pipelined loops are serial; so is a loop around several statements
        (a tile holds one statement: the loop's iterations run each statement's tile in turn, in program
        order), and every loop that walks a `sum` whose accumulator is narrower than f32: the program rounds
        that accumulator after every term, so one step may add only one term (lanes of a tile would be added
        at f32 precision, then rounded once)."""
        if loop.bind:
            return False
        if loop.kind == "tile" or loop.pipeline is not None:
            return True
        under = statements_under(loop)
        return len(under) > 1 or any(self._rounds_every_term(s, loop) for s in under)

    def _rounds_every_term(self, stmt_name: str, loop: Loop) -> bool:
        stmt = self.model.stmt(stmt_name)
        return (stmt.reduce_op == "sum" and (stmt.accum_dtype or "f32") != "f32"
                and any(walks_reduction(stmt, pa) for pa in loop.exprs[stmt_name]))

    def _point_chain(self, node: Node) -> tuple[Leaf, list[Loop]]:
        """The statement under a chain of point loops (vectorised as one tile), and the serial loops found inside
        the chain, outermost first.  Those run around the tile: a serial loop inside point loops becomes a
        loop over tiles, which keeps every element's order as long as no point loop outside it walks the
        statement's reduction (that would interleave the terms of one element differently)."""
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
                if walking and self.model.stmt(stmt).is_reduction:
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

    def _loop_note(self, loop: Loop) -> str:
        parts = [f"cache_{b.kind} {b.tensor} -> {b.scope}" for b in self.tree.buffers if b.at is loop]
        if loop.pipeline:
            parts.append(f"pipeline stages={loop.pipeline}")
        return f"loop {loop.name}" + (f": {'; '.join(parts)}" if parts else "")

    def _accumulation_loop(self, stmt_name: str, context: list[Loop]) -> Optional[Loop]:
        """The outermost serial loop of `context` that walks the reduction iterators of `stmt_name`."""
        stmt = self.model.stmt(stmt_name)
        if not stmt.is_reduction:
            return None
        for loop in context:
            if loop.bind:
                continue
            if any(walks_reduction(stmt, pa) for pa in loop.exprs[stmt_name]):
                return loop
        return None

    def _tile_statement(self, node: Node, context: list[Loop]) -> list:
        leaf, hoisted = self._point_chain(node)
        if hoisted:
            return self._lower_body([_Hoisted(hoisted, leaf)], context)
        stmt = self.model.stmt(leaf.stmt)
        if not stmt.is_reduction:
            tile = self._tile(stmt, context, stmt.iters)
            value = self._value(stmt.value, stmt, tile, context)
            keep, store = self._keep_store(stmt)
            self.produced[stmt.name] = _Produced(stmt, tile, keep, list(context))
            return [Compute(stmt.name, tile, value, stmt.dtype, store, keep, tuple(stmt.lhs_iters))]
        ops = []
        outer = self._accumulation_loop(stmt.name, context)
        if outer is None:
            ops.append(self._acc_init(stmt.name, context))
        tile = self._tile(stmt, context, stmt.iters, check_size=False)
        partial = self._partial(stmt, tile, context)
        ops.append(AccUpdate(stmt.name, tile, partial, stmt.reduce_op, stmt.accum_dtype))
        if outer is None:
            ops.append(self._acc_finish(stmt.name, context))
        return ops

    def _acc_init(self, stmt_name: str, context: list[Loop]) -> AccInit:
        stmt = self.model.stmt(stmt_name)
        tile = self._tile(stmt, context, stmt.lhs_iters)
        return AccInit(stmt.name, tile, stmt.reduce_op, stmt.accum_dtype)

    def _acc_finish(self, stmt_name: str, context: list[Loop]) -> AccFinish:
        stmt = self.model.stmt(stmt_name)
        tile = self._tile(stmt, context, stmt.lhs_iters)
        keep, store = self._keep_store(stmt)
        self.produced[stmt.name] = _Produced(stmt, tile, keep, list(context))
        return AccFinish(stmt.name, tile, stmt.dtype, store, keep, tuple(stmt.lhs_iters))

    def _keep_store(self, stmt: Stmt) -> tuple[bool, bool]:
        readers_here = [
            s for s in self.model.stmts
            if self.kernel_of[s.name] == self.index and any(r.tensor == stmt.name for r in s.reads)
        ]
        kind = self.model.tensors[stmt.name].kind
        store = kind == "output" or stmt.name in self.temps
        return bool(readers_here), store

    # ------------------------------------------------------------ tiles (isl)

    def _tile(self, stmt: Stmt, context: list[Loop], iters: list[str], check_size: bool = True) -> Tile:
        """The instances of `stmt` inside one iteration of `context`, projected onto `iters`."""
        g = self._geometry(stmt, context, iters)
        axes, scalars = [], {}
        for it, lo, size in zip(g.iters, g.offsets, g.sizes):
            if size == 1:
                scalars[it] = _pa_expr(lo)
            else:
                axes.append(Axis(it, _pa_expr(lo), size, lo))
        order = {it: n for n, it in enumerate(iters)}
        tile = Tile(sorted(axes, key=lambda a: order[a.iter]), scalars, self._mask(g))
        if check_size:
            _check_size(stmt, tile)
        return tile

    def _geometry(self, stmt: Stmt, context: list[Loop], iters: list[str]) -> "_Geometry":
        """Where the tile of `stmt` (projected onto `iters`) lies as a function of the loop variables (cached)."""
        key = (stmt.name, tuple(id(l) for l in context), tuple(iters))
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
            lo = rel.dim_min(pos)
            span = rel.dim_max(pos).sub(lo).coalesce()
            extent = integer_bounds(span)[1]
            if not extent.is_int():
                raise BackendError(
                    f"the tile of {stmt.name} along {it} has no fixed size ({span}): "
                    f"split the loop over {it} (tiles must have constant sizes)"
                )
            size = extent.to_python() + 1
            offsets.append(lo)
            sizes.append(1 if size == 1 else 1 << (size - 1).bit_length())
        members = rel.wrap().flatten()
        for pos, n in enumerate(names + kept):
            members = members.set_dim_name(isl.dim_type.set, pos, n)
        total = [_total(lo) for lo in offsets]
        exact = all(t is not None for t in total)
        facts = self._emitted_bounds(context)
        box = _lane_box(members.get_space(), names, facts if exact else rel.domain(),
                        total if exact else offsets, sizes)
        return _Geometry(stmt, names, kept, offsets, sizes, rel, members, facts, box, exact)

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
        valid = rel.domain().align_params(facts.get_space())
        facts = facts.align_params(valid.get_space())
        if facts.is_subset(valid):
            return None
        return set_to_expr(_to_params(valid.gist(facts).coalesce()), _to_params(facts))

    def _in_bounds(self, stmt: Stmt, node: ast.Access, g: "_Geometry") -> Optional[isl.Set]:
        """The lanes of `g` at which the access `node` reads inside its tensor (a set over the loop variables and
        `g.iters`), or None when the access is not one affine function of the iterators."""
        access = next((r for r in stmt.reads if r.node is node), None)
        function = _total_map(access.relation) if access is not None else None
        if function is None:
            return None
        box = self.model.tensors[access.tensor].box
        inside = function.intersect_range(box.align_params(function.get_space().range())).domain()
        inside = _project_onto(inside, stmt.iters, g.iters)
        return _embed(inside, g.iters, g.loop_names + g.iters).align_params(g.box.get_space())

    # ------------------------------------------------------------ values

    def _value(self, e: ast.Expr, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        v = lambda x: self._value(x, stmt, tile, context)  # noqa: E731
        if isinstance(e, ast.FloatLit):
            return Const(float(e.value))
        if isinstance(e, ast.IntLit):
            return Const(float(e.value))
        if isinstance(e, ast.Name):
            return self._name(e.name, stmt, value=True)
        if isinstance(e, ast.Neg):
            return _folded(Neg(v(e.operand)))
        if isinstance(e, ast.BinOp):
            if e.op in ("//", "%"):
                raise BackendError(f"'{e.op}' is only allowed in indices")
            return _folded(Bin(e.op, v(e.lhs), v(e.rhs)))
        if isinstance(e, ast.Compare):
            return Bin(e.op, v(e.lhs), v(e.rhs))
        if isinstance(e, ast.Call):
            if e.func in CASTS:
                return _folded(Round(e.func, v(e.args[0]))) if e.func != "f32" else v(e.args[0])
            if e.func == "where":
                return Select(v(e.args[0]), v(e.args[1]), v(e.args[2]))
            if e.func in COMPOSITIONS:  # backends implement primitives only (compiler/model/functions.py)
                return expand_tile(e.func, v(e.args[0]))
            return Call(e.func, tuple(v(a) for a in e.args))
        if isinstance(e, ast.Access):
            return self._access(e, stmt, tile, context)
        raise BackendError(f"cannot lower expression {e!r}")

    def _name(self, name: str, stmt: Stmt, value: bool) -> Expr:
        if name in stmt.iters:
            return Var(name)
        size = self.model.sizes.get(name)
        if size is None and name in self.model.params:
            return Var(name)
        if isinstance(size, float) or value:
            return Const(float(size) if value else size)
        return Const(size)

    def _index(self, e: ast.Expr, stmt: Stmt) -> Expr:
        if isinstance(e, ast.IntLit):
            return Const(e.value)
        if isinstance(e, ast.Name):
            return self._name(e.name, stmt, value=False)
        if isinstance(e, ast.Neg):
            return Neg(self._index(e.operand, stmt))
        if isinstance(e, ast.BinOp):
            return Bin(e.op, self._index(e.lhs, stmt), self._index(e.rhs, stmt))
        raise BackendError(f"index expression {e!r} is not affine")

    def _access(self, e: ast.Access, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        producer = self.produced.get(e.tensor)
        if producer is not None and producer.keep:
            reg = self._register(e, stmt, tile, producer, context)
            if reg is not None:
                return reg
        if self.kernel_of.get(e.tensor) == self.index:
            # Inside one kernel a value passes only through registers: a store by one program is not ordered
            # with a load by another, nor with the other threads of the same program.
            if e.tensor not in self.produced:
                raise BackendError(self._early_read(stmt.name, e.tensor, context))
            raise BackendError(
                f"{stmt.name} reads {e.tensor} with a different tile than the one {e.tensor} is computed in, "
                f"inside the same kernel; place {stmt.name} where it reads {e.tensor}'s tile element for element, "
                f"or leave them in separate kernels"
            )
        mask, bounds = self._access_mask(e, stmt, tile, context)
        return Load(e.tensor, tuple(self._index(i, stmt) for i in e.indices), mask, mask_is_bounds=bounds)

    def _early_read(self, reader: str, reduction: str, context: list[Loop]) -> str:
        """Why `reader` cannot read `reduction` here: inside the loop that walks it, the value is an accumulator."""
        loop = self._accumulation_loop(reduction, context)
        if loop is None:
            return f"{reader} reads {reduction} before {reduction} is computed in this kernel"
        around = context[: context.index(loop)]
        fix = f"reverse_compute_at({reader}, {reduction}.{around[-1].name})" if around else "a separate kernel"
        return (f"{reader} reads {reduction} inside loop {loop.name}, which walks the reduction of {reduction}: in a "
                f"kernel its accumulator is final only after that loop; place {reader} after it ({fix})")

    def _access_mask(self, e: ast.Access, stmt: Stmt, tile: Tile, context) -> tuple[Optional[Expr], bool]:
        """Which lanes of a load may read memory: those whose index lies inside the tensor (and whether the mask
        is exactly that).

        A lane's value matters only where the statement has an instance, and there the index is inside (the
        model checked every read); every other lane is masked where the statement stores, reduces or keeps
        its value, so it may read anything -- as long as the read stays inside the tensor.  Over the lanes the
        pointer tile spans (the iterators the access uses), simplified against what the code guarantees: a
        read that never leaves its tensor has no mask."""
        used = {n.name for i in e.indices for n in ast.walk(i) if isinstance(n, ast.Name)} & set(stmt.iters)
        if not used:
            return None, True
        g = self._geometry(stmt, context, [it for it in stmt.iters if it in used])
        inside = self._in_bounds(stmt, e, g)
        if inside is None:  # not one affine function: the instances' lanes are inside, and only they are read
            return self._mask(g), False
        return _mask_expr(inside, g.box), True

    def _register(self, e: ast.Access, stmt: Stmt, tile: Tile, producer: _Produced, context) -> Optional[Reg]:
        """The producer's register tile, if this read takes it element for element."""
        if producer.loops != context[: len(producer.loops)]:  # the same loop objects, not only the same names
            return None
        consumer_axes = {a.iter: a for a in tile.axes}
        for p_iter, index in zip(producer.stmt.lhs_iters, e.indices):
            if not isinstance(index, ast.Name) or index.name not in stmt.iters:
                return None
            c_iter = index.name
            p_axis = next((a for a in producer.tile.axes if a.iter == p_iter), None)
            if p_axis is None:
                if c_iter in consumer_axes or tile.scalars.get(c_iter) != producer.tile.scalars.get(p_iter):
                    return None
                continue
            c_axis = consumer_axes.get(c_iter)
            if c_axis is None or c_axis.size != p_axis.size or not _same_offset(c_axis, p_axis):
                return None
        positions = []
        for p_axis in producer.tile.axes:
            index = e.indices[producer.stmt.lhs_iters.index(p_axis.iter)]
            positions.append([a.iter for a in tile.axes].index(index.name))
        if positions != sorted(positions):
            return None  # a transposed register tile: not supported
        if not self._same_iteration(producer, stmt, e):
            return None
        return Reg(producer.stmt.name, tuple(positions))

    def _same_iteration(self, producer: _Produced, stmt: Stmt, e: ast.Access) -> bool:
        """Was every element this read takes written by the producer in the same iteration of the producer's
        loops?  A register tile holds only the current iteration's values: in an iteration where the producer
        has no instance its tile is recomputed empty, so a value from an earlier iteration is gone."""
        if not producer.loops:
            return True
        access = next((r for r in stmt.reads if r.node is e), None)
        if access is None:
            return False
        prod = producer.stmt
        reader_times = pw_affs_to_map([pa for l in producer.loops for pa in l.exprs[stmt.name]], stmt.domain)
        writer_times = pw_affs_to_map([pa for l in producer.loops for pa in l.exprs[prod.name]], prod.domain)
        writers = access.relation.apply_range(prod.write.relation.reverse())  # reader instance -> writers
        return writers.apply_range(writer_times).is_subset(reader_times)

    def _partial(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        dot = self._dot(stmt, tile, context)
        if dot is not None:
            return dot
        _check_size(stmt, tile)
        body = self._value(stmt.value, stmt, tile, context)
        identity = Const(0.0) if stmt.reduce_op == "sum" else Const(float("-inf"))
        if tile.mask is not None:
            body = Select(tile.mask, body, identity)
        red_axes = tuple(k for k, a in enumerate(tile.axes) if a.iter in stmt.red_iters)
        if not red_axes:
            return body
        return Reduce(stmt.reduce_op, body, red_axes)

    def _dot(self, stmt: Stmt, tile: Tile, context: list[Loop]) -> Optional[Dot]:
        """A matrix product (`placement.matrix_operands`) over a tile with axes (i, j, k), each at least 16 wide
        (k at least 32 for 8-bit operands) -> a tile `Dot`; which unit runs it is decided per backend later."""
        operands = matrix_operands(stmt)
        if operands is None:
            return None
        names = [a.iter for a in tile.axes]
        if len(names) != 3 or any(a.size < 16 for a in tile.axes):
            return None
        k = stmt.red_iters[0]
        if names[2:] != [k]:  # the tile's axes must be (i, j, k), k the reduction's only iterator
            return None
        i, j = names[:2]
        lhs, rhs = operands
        if not (_plain(lhs, {i, k}) and _plain(rhs, {k, j})):
            lhs, rhs = rhs, lhs
            if not (_plain(lhs, {i, k}) and _plain(rhs, {k, j})):
                return None
        if tile.mask is not None and not self._separable(stmt, context, i, j, k):
            return None
        if any(self.kernel_of.get(x.tensor) == self.index for x in (lhs, rhs)):
            return None  # an operand computed in this kernel lives in registers: a tile product reads it there
        dtypes = (self.model.tensors[lhs.tensor].dtype, self.model.tensors[rhs.tensor].dtype)
        if "f8e4m3" in dtypes and tile.axes[2].size < 32:
            return None  # 8-bit matrix instructions (sm_90 wgmma) take k in steps of 32
        a = self._operand_load(stmt, context, [i, k], lhs, i)
        b = self._operand_load(stmt, context, [k, j], rhs, j)
        return Dot(a, b, *dtypes)

    def _operand_load(self, stmt: Stmt, context, iters, node: ast.Access, outer: str) -> Load:
        """The load of a matrix-product operand over (`outer`, k): the lanes that must hold their values, the
        rest 0.

        For every row (or column) `outer` of the accumulator that holds an instance -- in any step of the
        loops that walk the reduction, not only this one -- the lanes of k outside the reduction must be 0 so
        that the product adds nothing for them; rows with no instance at all are masked where the product is
        stored, so there a lane only has to stay inside the tensor.  When those lanes are exactly the ones
        inside the tensor, `mask_is_bounds` says so (a clipped copy then loads the operand)."""
        indices = tuple(self._index(x, stmt) for x in node.indices)
        g = self._geometry(stmt, context, iters)
        inside = self._in_bounds(stmt, node, g)
        if inside is None:
            return Load(node.tensor, indices, self._mask(g))
        around = self._anchor(stmt, context)
        rows = self._geometry(stmt, context if around is None else around, [outer])
        rows = _embed(rows.members, rows.loop_names + [outer], g.loop_names + g.iters)
        needed = g.members.union(inside.subtract(rows.align_params(inside.get_space())))
        lanes = _mask_expr(needed, g.box)
        valid = None if g.exact else self._valid_loop_values(g.rel, g.facts)
        mask = lanes if valid is None else valid if lanes is None else Bin("and", valid, lanes)
        box = g.box.align_params(inside.get_space())
        bounds = valid is None and inside.intersect(box).is_subset(needed.align_params(inside.get_space()))
        return Load(node.tensor, indices, mask, mask_is_bounds=bounds)

    def _separable(self, stmt: Stmt, context, i, j, k) -> bool:
        """The reduction range of every (i, j) is what the operand masks allow: (i,k) and (k,j) constraints only."""
        full = self._instances(stmt, context, [i, j, k])
        ik = self._instances(stmt, context, [i, k])
        kj = self._instances(stmt, context, [k, j])
        ij = self._instances(stmt, context, [i, j])
        n_loop = full.dim(isl.dim_type.set) - 3
        rebuilt = (ij.insert_dims(isl.dim_type.set, n_loop + 2, 1)
                   .intersect(ik.insert_dims(isl.dim_type.set, n_loop + 1, 1))
                   .intersect(kj.insert_dims(isl.dim_type.set, n_loop, 1)))
        return rebuilt.is_subset(full)

    def _instances(self, stmt: Stmt, context, iters) -> isl.Set:
        dims = [pa for loop in context for pa in loop.exprs[stmt.name]]
        rel = pw_affs_to_map(dims, stmt.domain).reverse() if dims else isl.Map.from_range(stmt.domain)
        keep = [stmt.iters.index(x) for x in iters]
        for p in reversed(range(len(stmt.iters))):
            if p not in keep:
                rel = rel.project_out(isl.dim_type.out, p, 1)
        order = sorted(keep)
        flat = rel.wrap().flatten()
        n_loop = len(dims)
        # reorder the kept iterators into the order asked for
        if [stmt.iters[p] for p in order] != iters:
            perm = [order.index(stmt.iters.index(x)) for x in iters]
            text = ", ".join(f"x{p}" for p in range(n_loop + len(iters)))
            target = ", ".join([f"x{p}" for p in range(n_loop)] + [f"x{n_loop + p}" for p in perm])
            m = isl.Map.read_from_str(flat.get_ctx(), f"{{ [{text}] -> [{target}] }}")
            flat = flat.apply(m.align_params(flat.get_space()))
        return flat


# ---------------------------------------------------------------- helpers


def _loops(node: Node) -> list[Loop]:
    return list(walk_loops(node.body)) if isinstance(node, Loop) else []


@dataclass
class _Hoisted:
    """Serial loops found inside a statement's point loops, to be run around its tile (outermost first)."""

    loops: list
    leaf: Leaf


def _same_offset(a: Axis, b: Axis) -> bool:
    """Equal as functions of the loop variables wherever both tiles exist (isl, not syntax)."""
    if a.offset == b.offset:
        return True
    if a.offset_isl is None or b.offset_isl is None:
        return False
    try:
        diff = a.offset_isl.sub(b.offset_isl).coalesce()
    except isl.Error:
        return False
    if diff.is_empty():
        return True
    lo, hi = integer_bounds(diff)
    return lo.is_zero() and hi.is_zero()


def _check_size(stmt: Stmt, tile: Tile) -> None:
    elements = 1
    for a in tile.axes:
        elements *= a.size
    if elements > MAX_TILE_ELEMENTS:
        shape = " x ".join(f"{a.iter}:{a.size}" for a in tile.axes)
        raise BackendError(
            f"the tile of {stmt.name} would hold {elements} elements ({shape}); split its loops so that one "
            f"tile holds at most {MAX_TILE_ELEMENTS}"
        )


# ---------------------------------------------------------------- loop variable names (see _KernelLowering._var)

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


def _plain(e: ast.Expr, iters: set) -> bool:
    return (
        isinstance(e, ast.Access)
        and len(e.indices) == 2
        and all(isinstance(x, ast.Name) for x in e.indices)
        and {x.name for x in e.indices} == iters
    )


def _to_params(s: isl.Set) -> isl.Set:
    n = s.dim(isl.dim_type.set)
    return s.move_dims(isl.dim_type.param, s.dim(isl.dim_type.param), isl.dim_type.set, 0, n).params()


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


def _total_map(m: isl.Map) -> Optional[isl.Map]:
    """A relation given by one quasi-affine function, extended to every input; None for several pieces."""
    pieces = []
    m.as_pw_multi_aff().foreach_piece(lambda _set, ma: pieces.append(ma))
    return isl.Map.from_multi_aff(pieces[0]) if len(pieces) == 1 else None


def _params_of_space(space: isl.Space) -> str:
    n = space.dim(isl.dim_type.param)
    names = [space.get_dim_name(isl.dim_type.param, i) for i in range(n)]
    return f"[{', '.join(names)}] -> " if names else ""


def _folded(e: Expr) -> Expr:
    """Arithmetic and roundings of constants, computed now with the program's f32 semantics (each operation
    rounded to f32; a cast rounds to its dtype), so no backend evaluates them in another precision (Python
    floats are f64) or has to apply a rounding helper to a plain number."""
    import numpy as np

    from tdsl.compiler.model import dtypes

    def value(x):
        return np.float32(x.value) if isinstance(x, Const) else None

    with np.errstate(all="ignore"):
        if isinstance(e, Neg) and value(e.operand) is not None:
            return Const(float(-value(e.operand)))
        if isinstance(e, Round) and value(e.operand) is not None:
            return Const(float(dtypes.round_to(e.dtype, value(e.operand))))
        if isinstance(e, Bin) and e.op in _F32_OPS and value(e.lhs) is not None and value(e.rhs) is not None:
            return Const(float(_F32_OPS[e.op](value(e.lhs), value(e.rhs))))
    return e


_F32_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}


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

