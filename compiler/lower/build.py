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

This module holds the entry point `lower` and the walk over a kernel (`_KernelLowering`: `run`,
`_lower_body`, `_serial`, `_tile_statement`).  `_KernelLowering` is one object per kernel; what it decides
lives in one module per concern, mixed into it:

* compiler/lower/loops.py -- grid axes, serial and point loops, loop variables and bounds (`KernelLoops`);
* compiler/lower/geometry.py -- a statement's tile and its domain mask, from isl (`TileGeometry`);
* compiler/lower/loads.py -- tile expressions, loads and their masks (`ValueLowering`);
* compiler/lower/registers.py -- register reuse across statements, keep / store (`RegisterReuse`);
* compiler/lower/reductions.py -- accumulators, `Dot` or `Reduce` (`ReductionLowering`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

from tdsl.compiler.analysis.serial_loops import SerialLoops
from tdsl.compiler.analysis.zero_signs import ZeroSigns
from tdsl.compiler.errors import BackendError
from tdsl.compiler.model.storage import overwritable, stored_shape
from tdsl.compiler.model.program import KernelModel, Stmt
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.lower.geometry import TileGeometry
from tdsl.compiler.lower.loads import NeedsMemory, ValueLowering
from tdsl.compiler.lower.loops import KernelLoops
from tdsl.compiler.lower.reductions import ReductionLowering
from tdsl.compiler.lower.registers import RegisterReuse, _Produced
from tdsl.compiler.lower.tileir import (
    AccFinish,
    AccUpdate,
    Barrier,
    Bin,
    BufferDecl,
    Compute,
    Const,
    HostLoop,
    Load,
    SerialLoop,
    TensorArg,
    TileKernel,
    TileProgram,
    WarpSpecialized,
    nodes_in,
    values_read,
    walk_ops,
)
from tdsl.compiler.model.recurrences import self_reads
from tdsl.compiler.legality.overlap import overlap_groups
from tdsl.compiler.schedule.empty_statements import without_empty_statements
from tdsl.compiler.schedule.tree import (Leaf, Loop, Node, global_tensors, kernel_of as kernel_index, launches,
                                        loop_walks_reduction, statements_under, walk_loops)


def lower(schedule: Schedule) -> TileProgram:
    schedule = without_empty_statements(schedule)  # what computes nothing at these sizes has no code
    model, tree = schedule.model, schedule.tree
    units = launches(tree)
    kernel_of = kernel_index(tree)
    crossing = global_tensors(model, tree)  # temporaries written by one launch and read by another
    # temporaries in global memory: those passed between launches, and recurrences (they read their own earlier
    # elements back from memory)
    temps = [s.name for s in model.stmts if model.tensors[s.name].kind == "temp"
             and (s.name in crossing or self_reads(s))]
    serial = SerialLoops.of(schedule)  # one rule for the plan and every kernel's lowering
    plans = _buffer_plans(schedule, serial)
    signs = ZeroSigns(model)  # where a max's zero can be seen: once for every kernel
    while True:
        try:
            kernels = [_KernelLowering(model, tree, launch.node, f"{model.name}_{k}", kernel_of, k, temps, plans[k],
                                       deps=schedule.deps, host=list(launch.host), serial_loops=serial,
                                       zero_signs=signs).run()
                       for k, launch in enumerate(units)]
            break
        except NeedsMemory as need:
            # a temporary read back from memory in its own kernel (compiler/lower/loads.py): stored, then again
            temps = [s.name for s in model.stmts if s.name in temps or s.name == need.tensor]
    inputs = [_tensor_arg(model, t.name, "input") for t in model.inputs()]
    outputs = [_tensor_arg(model, t.name, "output") for t in model.outputs()]
    temp_args = [_tensor_arg(model, name, "temp") for name in temps]
    statements = {s.name: _statement_text(s) for s in model.stmts}
    return TileProgram(model.name, kernels, inputs, outputs, temp_args, dict(model.sizes), str(schedule.trace),
                       statements, model.size_limit)


def _buffer_plans(schedule: Schedule, serial: SerialLoops) -> list[list]:
    """Per kernel, the buffers the schedule creates (compiler/analysis/buffer_plan.py); none while a size is unbound (the
    plan needs every size; only the Triton backend generates kernels for run-time sizes, and it needs none)."""
    if schedule.model.params:
        return [[] for _ in launches(schedule.tree)]
    from tdsl.compiler.analysis.buffer_plan import plan_kernels

    return [[b for b in k.buffers if b.kind != "tile"] for k in plan_kernels(schedule, serial=serial)]


def _buffer_decl(b) -> BufferDecl:
    return BufferDecl(b.tensor, b.kind, b.scope, b.loop, tuple(b.shape), b.dtype, b.stages)


def _statement_text(stmt: Stmt) -> str:
    from tdsl.frontend.printer import expr_text

    head = f"{stmt.name}[{', '.join(stmt.lhs_iters)}]: {stmt.dtype} = "
    if not stmt.is_reduction:
        return head + expr_text(stmt.value)
    start = f" from {expr_text(stmt.init)}" if stmt.init is not None else ""
    return head + (f"{stmt.reduce_op}({', '.join(stmt.red_iters)}) {expr_text(stmt.value)}{start} "
                   f"accum {stmt.accum_dtype}")


def _tensor_arg(model: KernelModel, name: str, role: str) -> TensorArg:
    t = model.tensors[name]
    return TensorArg(name, t.dtype, stored_shape(t), role, t.fold, t.stored_in)


@dataclass
class _KernelLowering(KernelLoops, TileGeometry, ValueLowering, RegisterReuse, ReductionLowering):
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
    serial_paths: dict = field(default_factory=dict)  # statement -> the serial loops around it (loops.py)
    geometry_cache: dict = field(default_factory=dict)
    loop_vars: dict = field(default_factory=dict)  # (loop name, dim) -> its variable, made by _var on first use
    accumulating: dict = field(default_factory=dict)  # reduction -> (accumulator tile, loops around its init)
    rescaled: set = field(default_factory=set)  # sums that follow a maximum running beside them (reductions.py)
    forms: dict = field(default_factory=dict)  # statement -> its placement.product_form (None: not a product)
    restricted: dict = field(default_factory=dict)  # id(loop) -> (its range's part as an isl set, "full" | "rest")
    split_points: dict = field(default_factory=dict)  # id(loop) -> (first iteration with a partial tile, its context)
    deps: list = field(default_factory=list)  # the schedule's dependences (legality computed them)
    serial_loops: Optional[SerialLoops] = None  # which loops run serially: the plan's rule, passed by lower()
    memory_reads: set = field(default_factory=set)  # tensors of this kernel read back from memory (loads.py)
    host: list = field(default_factory=list)  # the host loops around this kernel, outermost first (Launch.host)
    zero_signs: Optional[ZeroSigns] = None  # where a max's zero can be seen (compiler/analysis/zero_signs.py)

    # ------------------------------------------------------------ kernel

    def run(self) -> TileKernel:
        host = [self._host_loop(loop, k) for k, loop in enumerate(self.host)]
        grid_loops, body = self._grid_chain()
        grid = [self._grid_axis(loop) for loop in grid_loops]
        ops = self._lower_body(body, self.host + list(grid_loops))
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
            grid_group=self._grid_group(grid),
            persistent=bool(isinstance(self.root, Loop) and self.root.persistent and grid),
            num_stages=max(stages) if stages else 2,
            comment=f"statements {', '.join(stmts)}",
            buffers=[_buffer_decl(b) for b in self.planned if not self._is_serial_at(b.at)],
            host=host,
        )

    def _host_loop(self, loop: Loop, k: int) -> HostLoop:
        """A loop the launcher runs around this kernel (`host`): its variable is a kernel argument."""
        for stmt_name in statements_under(self.root):
            if loop_walks_reduction(self.model, stmt_name, loop):
                raise BackendError(f"loop {loop.name} runs on the host but walks the reduction of {stmt_name}: its "
                                   f"accumulator cannot live from one launch to the next")
        lo, hi = self._loop_range(loop, 0, outer=self.host[:k])
        return HostLoop(self._var(loop, 0), lo, Bin("+", hi, Const(1)), id(loop))

    def _grid_group(self, grid: list) -> int:
        """`launch(group=G)`: the kernel's programs start in groups of G along grid.x (1: linear order)."""
        group = (self.root.group if isinstance(self.root, Loop) else None) or 1
        if group > 1 and not {"x", "y"} <= {axis.axis for axis in grid}:
            raise BackendError(f"kernel {self.name} is launched in groups (launch(group={group})) but has no loops "
                               f"bound to both grid.x and grid.y; bind them, or drop group=")
        return group

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
            args.append(_tensor_arg(self.model, name, t.kind))
        return args

    # ------------------------------------------------------------ body

    def _lower_body(self, body: list, context: list[Loop]) -> list:
        ops: list = []
        stored: set = set()  # tensors stored by the ops so far since the last barrier
        loaded: set = set()  # arrays loaded since the last barrier that a later statement may overwrite
        for node in body:
            before = set(self.memory_reads)
            self.memory_reads.clear()
            if isinstance(node, Loop) and self._is_serial(node):
                node_ops = self._serial(node, context)
            elif isinstance(node, _Hoisted):
                node_ops = (self._serial(node.loops[0], context, [_Hoisted(node.loops[1:], node.leaf)])
                            if node.loops else self._tile_statement(node.leaf, context))
            else:
                node_ops = self._tile_statement(node, context)
            ops.extend(self._synchronised(node_ops, stored, self.memory_reads, loaded))
            self.memory_reads |= before
        return ops

    def _synchronised(self, ops: list, stored: set, reads: set, loaded: set) -> list:
        """A node's ops, after a barrier when they read back from memory what an earlier node of the same body
        stored in this iteration (`stored`, updated with what these ops store), or store into an array an earlier
        node loaded (`loaded`: an input an output is stored in, a folded plane), which other threads may not
        have read yet.  What an earlier iteration stored is ordered by the barrier that ends each iteration of the
        loop carrying it (`SerialLoop.barrier`)."""
        stores = _stores(ops)
        passed = sorted(stored & reads)
        overwritten = sorted({self._array(t) for t in stores} & loaded)
        if passed or overwritten:
            stored.clear()
            loaded.clear()
            ops = [Barrier(tuple(passed), tuple(overwritten))] + ops
        stored.update(stores)
        loaded.update(a for a in map(self._array, _loads(ops)) if a in self._overwritable)
        return ops

    def _reads_back(self, ops: list) -> bool:
        """Whether a loop body loads an array it also stores.  A tile is a box around its instances, and its
        lanes that no instance takes load too: a later iteration's may read what an earlier one stored even where
        the loop carries no dependence (a wavefront `w = skew(D.j, D.i, 1)` split along i: the lanes off the
        diagonal), so the iteration ends with a barrier -- their values are never used, but a load must not race
        the store it overlaps (the Ascend cores' copy pipes, probe Q of the 27th session)."""
        return bool({self._array(t) for t in _stores(ops)} & {self._array(t) for t in _loads(ops)})

    def _array(self, tensor: str) -> str:
        """The array a tensor's elements are stored in (an output `store_in` an input: the input's)."""
        return self.model.tensors[tensor].stored_in or tensor

    @cached_property
    def _overwritable(self) -> set:
        """Arrays whose elements a kernel may store over after reading them (storage.py `overwritable`)."""
        return overwritable(self.model.tensors.values())

    def _serial(self, loop: Loop, context: list[Loop], body: Optional[list] = None) -> list:
        if loop.n_dims != 1:
            raise BackendError(f"serial loop {loop.name} is a fused loop; only grid loops may be fused")
        if loop.pipeline and self._carried(loop):
            names = ", ".join(sorted({d.tensor for d, _ in self._carried(loop)}))
            raise BackendError(f"loop {loop.name} carries {names} through memory (a recurrence, or a value one step "
                               f"of a `for` block passes to the next): a pipelined loop loads an iteration's elements "
                               f"before the previous iterations have stored them; remove pipeline({loop.name}) or "
                               f"pipeline a loop that does not carry it")
        lo, hi = self._loop_range(loop, 0, outer=[l for l in context])
        starts = [s for s in statements_under(loop) if self._accumulation_loop(s, context + [loop]) is loop]
        before = [self._acc_init(s, context) for s in starts]
        split = self._full_prefix(loop, context)
        parts = [(None, lo, Bin("+", hi, Const(1)))] if split is None else [("full", lo, split), ("rest", split, Bin("+", hi, Const(1)))]
        loops = []
        for part, start, stop in parts:
            with self._restrict(loop, part):
                # The masked rest of a split loop is a few iterations (the diagonal blocks, the ragged end): a
                # pipeline over them only adds its prologue, and a second pipelined copy of the loop would need
                # its own staging buffers per stage (TileLang allocates them per pipelined loop).
                stages = None if part == "rest" else loop.pipeline
                note = self._loop_note(loop, pipelined=bool(stages)) + {
                    None: "", "full": ": the iterations with full tiles (no masks)",
                    "rest": ": the other iterations (masked" + ("; not pipelined)" if loop.pipeline else ")")}[part]
                body_ops = self._lower_body(loop.body if body is None else body, context + [loop])
                loops.append(SerialLoop(self._var(loop, 0), start, stop, stages, body_ops,
                                        note, [_buffer_decl(b) for b in self.planned if b.at is loop],
                                        barrier=bool(self._carried(loop)) or self._reads_back(body_ops),
                                        warp_specialized=_warp_specialized(loop, part)))
        after = [self._acc_finish(s, context) for s in starts]
        return before + loops + after

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
        self._check_recurrence_stored(stmt, outer, context)
        if outer is None:
            ops.append(self._acc_init(stmt.name, context))
        tile = self._tile(stmt, context, stmt.iters, check_size=False)
        partial = self._partial(stmt, tile, context)
        rescale = self._rescaling(stmt, context) if stmt.name in self.rescaled else None
        ops.append(AccUpdate(stmt.name, tile, partial, stmt.reduce_op, stmt.accum_dtype, rescale=rescale,
                             zeros=self.zero_signs.reduction(stmt.name)))
        if outer is None:
            ops.append(self._acc_finish(stmt.name, context))
        return ops

    def _check_recurrence_stored(self, stmt: Stmt, outer: Optional[Loop], context: list[Loop]) -> None:
        """A sum that reads its own finished elements (a recurrence) reads them from memory, where a kernel stores an
        element's sum only after the loop that walks its terms (`outer`): a loop carrying the recurrence at or
        inside `outer` would read an element before it is stored."""
        if outer is None or not self_reads(stmt):
            return
        inside = context[context.index(outer):]
        carrying = next((loop for loop in inside if self._carried(loop)), None)
        if carrying is not None:
            where = "walks its terms too" if carrying is outer else f"is inside loop {outer.name}, which walks its terms"
            raise BackendError(
                f"{stmt.name} reads its own finished elements (a recurrence) in loop {carrying.name}, which {where}: "
                f"a kernel stores each element's sum only after that loop, so the read would come first; place the "
                f"loop that carries the recurrence outside the loops over {', '.join(stmt.red_iters)} (reorder), or "
                f"keep the reduction in one tile")


# ---------------------------------------------------------------- helpers


def _warp_specialized(loop: Loop, part: Optional[str]) -> Optional[WarpSpecialized]:
    """The schedule's `pipeline(..., warp_specialize=true)`: both parts of a split loop carry it, so that the
    arrangement walks them as one loop (the producer loads every block, the consumers take the rest's masks)."""
    if not loop.warp_specialize:
        return None
    first, last = overlap_groups(loop)
    return WarpSpecialized(loop.pipeline, tuple(first), tuple(last), part or "")


def _loops(node: Node) -> list[Loop]:
    return list(walk_loops(node.body)) if isinstance(node, Loop) else []


@dataclass
class _Hoisted:
    """Serial loops found inside a statement's point loops, to be run around its tile (outermost first)."""

    loops: list
    leaf: Leaf


def _stores(ops) -> set:
    """The tensors `ops` store to global memory."""
    return {op.stmt for op in walk_ops(ops) if isinstance(op, (Compute, AccFinish)) and op.store}


def _loads(ops) -> set:
    """The tensors `ops` load from global memory (their values, select conditions, rescalings, preloads)."""
    return {load.tensor for op in walk_ops(ops) for e in values_read(op) for load in nodes_in(e, Load)}
