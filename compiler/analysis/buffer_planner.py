"""The plan of one kernel (`_KernelPlanner`): which buffers and data movements it has -- the schedule's
cache_read / cache_write copies, fused intermediates, the tiles of uncached tensors at their load and store
levels, and the fills of each copy -- with their regions, shapes, dtypes, scopes and live ranges (the model is
described in compiler/analysis/buffer_plan.py).  Which of them share memory, the working sets and the capacity
check are `_WorkingSets` (compiler/analysis/buffer_sharing.py), which the planner extends.
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.frontend import ast

from tdsl.compiler.errors import BackendError
from tdsl.compiler.model.isl_code import integer_bounds
from tdsl.compiler.analysis.buffer_records import KernelPlan, PlannedBuffer, TileAccess
from tdsl.compiler.analysis.buffer_sharing import _WorkingSets
from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.analysis.serial_loops import SerialLoops
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import (Buffer, Loop, Node, accumulation_loop, global_tensors, loop_walks_reduction,
                                        pw_affs_to_map, statements_under, uses_iterators, walk_loops)

DEFAULT_WARPS = 4  # the backends' launch default (Triton num_warps)


# ---------------------------------------------------------------- the planner


class _KernelPlanner(_WorkingSets):
    def __init__(self, schedule: Schedule, target, index: int, root: Node, serial: SerialLoops):
        self.model = schedule.model
        self.tree = schedule.tree
        self.target = target
        self.index = index
        self.root = root
        self.stmts = statements_under(root)
        self.pos = {s: n for n, s in enumerate(self.stmts)}
        self.name = f"{self.model.name}_{index}"
        self.globals = global_tensors(self.model, self.tree)
        self.produced = {self.model.stmt(s).write.tensor for s in self.stmts}
        self.default_scope = target.default_scope if target is not None else "register"
        self.buffers: list[PlannedBuffer] = []
        self.accesses: list[TileAccess] = []
        self.tree_buffers = [b for b in self.tree.buffers if set(b.stmts) & set(self.stmts)]
        self._planned: dict[int, PlannedBuffer] = {}  # id(tree Buffer) -> its plan
        self.slots: list[list[PlannedBuffer]] = []  # set by _working_sets
        self.serial = serial  # which loops run serially: the rule the tile lowering follows
        self.memory_reads: set = set()  # (tensor, reader): a tensor of this kernel read back from global memory
        self._anchors: dict = {}  # statement -> its tile-level loops outside its accumulation loop (`_anchor`)

    # ------------------------------------------------------------ driver

    def run(self) -> KernelPlan:
        for buf in self.tree_buffers:
            self._explicit(buf)
        self._temps()
        self._memory_temps()
        self._rescale_factors()
        self._reads()
        self._writes()
        self._fills()
        working, peaks = self._working_sets()
        violations = self._violations(working, peaks)
        grid = []
        node = self.root
        while isinstance(node, Loop) and node.bind:
            grid.append(node)
            node = node.body[0] if len(node.body) == 1 else None
        warps = (self.root.warps if isinstance(self.root, Loop) else None) or DEFAULT_WARPS
        serial = tuple(l for l in walk_loops([self.root]) if self.serial(l))
        return KernelPlan(self.index, self.name, self.root, self.stmts, self.buffers, self.accesses, working, peaks,
                          warps, grid, violations, self.slots, serial, self._read_back())

    # ------------------------------------------------------------ loops and regions

    def path(self, stmt: str) -> list[Loop]:
        return self.tree.path(stmt)

    def _prefix(self, stmt: str, loop: Optional[Loop]) -> isl.Map:
        """Statement instance -> values of the loops from the kernel's root down to `loop` (None: no loop).  At a
        tile-level loop these are the tile-level loops: a point loop between them holds lanes of the tile (the
        lowering runs a serial loop found inside point loops around the tile, compiler/lower/loops.py
        `_point_chain`), so it fixes nothing.  At a loop of a scalar loop nest (no tile-level loop: the chapter's
        program order, one element at a time) they are all the loops."""
        domain = self.model.stmt(stmt).domain
        if loop is None:
            return pw_affs_to_map([], domain)
        upto = self._levels(stmt, loop)
        return pw_affs_to_map([d for l in upto[: _index(upto, loop) + 1] for d in l.exprs[stmt]], domain)

    def _levels(self, stmt: str, loop: Loop) -> list[Loop]:
        """The loops of the statement's path that can hold a tile at `loop`'s level: the tile-level ones where
        `loop` is one, else (a scalar loop nest) every loop."""
        path = self.path(stmt)
        if not self.is_tile_level(loop):
            return path
        return [l for l in path if self.is_tile_level(l)]

    def touched(self, stmts: list[str], tensor: str, loop: Optional[Loop], write: bool = False) -> isl.Map:
        """Loop values -> the elements of `tensor` the statements read (or write) in that iteration."""
        region = None
        for stmt_name in stmts:
            stmt = self.model.stmt(stmt_name)
            rels = [stmt.write.relation] if write else [a.relation for a in stmt.reads if a.tensor == tensor]
            prefix = self._prefix(stmt_name, loop)
            for rel in rels:
                part = prefix.reverse().apply_range(rel)
                region = part if region is None else region.union(part)
        return region.coalesce()

    def _shape(self, region: isl.Map, what: str) -> list[int]:
        shape = []
        for d in range(region.dim(isl.dim_type.out)):
            span = _largest_span(region, d)
            if span.is_nan():  # no instance touches the tensor: an empty statement domain
                raise BackendError(f"{what} is empty: the statements that use it have no instances")
            if not span.is_int():
                raise BackendError(f"{what} has no fixed size along dimension {d}")
            shape.append(span.to_python() + 1)
        return shape

    def is_tile_level(self, loop: Loop) -> bool:
        """A loop bound to the grid or run serially (compiler/analysis/serial_loops.py): what is inside the
        innermost such loop of a statement is one tile."""
        return bool(loop.bind) or self.serial(loop)

    def tile_level(self, stmt: str) -> Optional[Loop]:
        tiles = self._tile_loops(stmt)
        if tiles:
            return tiles[-1]
        path = self.path(stmt)
        return path[-1] if path else None  # a scalar loop nest: every iteration of its innermost loop

    def _tile_loops(self, stmt: str) -> list[Loop]:
        """The statement's tile-level loops, outermost first: the loops that index its tiles."""
        return [l for l in self.path(stmt) if self.is_tile_level(l)]

    def _anchored(self, stmt: str) -> list[Loop]:
        """The tile-level loops that place a statement's output lanes: for a reduction, those outside the loop its
        accumulator lives across (the lowering anchors the accumulator there, compiler/lower/geometry.py
        `_anchor`: the loops inside move none of its output lanes); else all of them."""
        anchor = self._anchor(stmt)
        return anchor if anchor is not None else self._tile_loops(stmt)

    def _anchor(self, stmt: str) -> Optional[list[Loop]]:
        """A reduction's tile-level loops outside the loop its accumulator lives across; None where there is no
        such loop (compiler/lower/geometry.py `_anchor`)."""
        if stmt not in self._anchors:
            loops = self._tile_loops(stmt)
            across = accumulation_loop(self.model, stmt, loops, self.stmts)
            self._anchors[stmt] = loops[: _index(loops, across)] if across is not None else None
        return self._anchors[stmt]

    def _lane_loops(self, stmt: str, it: str, loops: list[Loop]) -> list[Loop]:
        """The loops (a prefix of `loops`, the statement's tile-level loops) whose values place its tile's lanes
        along iterator `it`, as the lowering places them (compiler/lower/geometry.py `_measure`): the loops up to
        the last one that walks `it` (`_aligned_offset`), for an output iterator of a reduction only among the
        loops around its accumulator (`_anchored`).  Inner loops that only narrow the instances along `it` --
        the diagonal key block of causal attention with 128 queries and 64 keys holds rows 64-127 -- move no
        lane."""
        anchor = self._anchor(stmt)
        if anchor is not None and it in self.model.stmt(stmt).lhs_iters:
            loops = loops[: len(anchor)]
        n = self.model.stmt(stmt).iters.index(it)
        walks = [k for k, loop in enumerate(loops) if any(uses_iterators(pa, n, 1) for pa in loop.exprs[stmt])]
        return loops[: walks[-1] + 1] if walks else []

    def store_level(self, stmt_name: str) -> Optional[Loop]:
        """Where a statement's result tile is stored: its tile level, or for a reduction the innermost tile
        loop outside the loops that walk the reduction (the accumulator is stored once it is complete)."""
        stmt = self.model.stmt(stmt_name)
        if not stmt.is_reduction:
            return self.tile_level(stmt_name)
        path = self.path(stmt_name)
        cut = next((n for n, l in enumerate(path) if loop_walks_reduction(self.model, stmt_name, l)), len(path))
        outside = path[:cut]
        if any(self.is_tile_level(l) for l in path):
            tiles = [l for l in outside if self.is_tile_level(l)]
            return tiles[-1] if tiles else None
        return outside[-1] if outside else None

    def _live(self, loop: Optional[Loop], users: list[str], whole: bool = False) -> tuple[int, int]:
        """Positions of the first and last statement of the children of `loop` that hold a user."""
        children = loop.body if loop is not None else [self.root]
        spans = []
        for child in children:
            under = statements_under(child)
            if whole or set(under) & set(users):
                spans.append((self.pos[under[0]], self.pos[under[-1]]))
        return min(s[0] for s in spans), max(s[1] for s in spans)

    def _scope(self, name: str) -> str:
        return self.target.scope_name(name) if self.target is not None else name

    def _buffer_scope(self, buf: Buffer, stmts: list[str]) -> str:
        """On a target with a matrix unit fed from L1 and accumulating in L0C (Ascend's cube), the operands of a
        matrix product staged in `shared` live in L1 and its accumulator in L0C, as the backends place them;
        everything else takes the scope the schedule names (resolved through the target's aliases)."""
        scopes = set(self.target.scopes) if self.target is not None else set()
        if {"L1", "L0C"} <= scopes and buf.scope in ("shared", "register", "local"):
            operands = [matrix_operands(self.model.stmt(s), self.model.sizes) for s in stmts]
            matrix = [pair for pair in operands if pair is not None]
            if matrix and buf.kind == "read" and buf.scope == "shared" and any(
                    buf.tensor in (lhs.tensor, rhs.tensor) for lhs, rhs in matrix):
                return "L1"
            if matrix and buf.kind == "write":
                return "L0C"
        return self._scope(buf.scope)

    def _add(self, buf: PlannedBuffer, loop: Optional[Loop], users: list[str], whole: bool = False) -> PlannedBuffer:
        buf.kernel = self.index
        buf.live = self._live(loop, users, whole)
        ordered = sorted(users, key=self.pos.get)
        buf.first, buf.last = ordered[0], ordered[-1]
        self.buffers.append(buf)
        return buf

    # ------------------------------------------------------------ explicit buffers

    def _explicit(self, buf: Buffer) -> None:
        stmts = [s for s in buf.stmts if s in self.pos]
        write = buf.kind == "write"
        region = self.touched(stmts, buf.tensor, buf.at, write=write)
        shape = self._shape(region, f"buffer of {buf.tensor} at loop {buf.at.name}")
        dtype = getattr(buf, "dtype", None)
        if dtype is None:
            dtype = self.model.tensors[buf.tensor].dtype
            if write:
                writer = self.model.stmt(stmts[0])
                dtype = writer.accum_dtype if writer.is_reduction else writer.dtype
        stages = buf.at.pipeline or 1
        users = list(stmts)
        if write:  # readers of the tensor under the loop read the copy
            users += [s for s in statements_under(buf.at)
                      if any(r.tensor == buf.tensor for r in self.model.stmt(s).reads) and s not in users]
        planned = PlannedBuffer(buf.tensor, self._buffer_scope(buf, stmts), buf.kind, buf.at.name, shape, dtype,
                                stages, list(stmts), at=buf.at)
        self._add(planned, buf.at, users, whole=stages > 1)
        self._planned[id(buf)] = planned

    # ------------------------------------------------------------ fused intermediates

    def _temps(self) -> None:
        cached = {b.tensor for b in self.tree_buffers if b.kind == "write"}
        for stmt_name in self.stmts:
            stmt = self.model.stmt(stmt_name)
            tensor = stmt.write.tensor
            if tensor in self.globals or tensor in cached:
                continue
            readers = [s for s in self.stmts if any(r.tensor == tensor for r in self.model.stmt(s).reads)]
            users = [stmt_name] + [r for r in readers if r != stmt_name]
            loop = _common_loop([self.path(s) for s in users])
            region = self.touched([stmt_name], tensor, loop, write=True)
            reads = None
            for r in readers:
                part = self.touched([r], tensor, loop)
                reads = part if reads is None else reads.union(part)
            if reads is not None:
                region = region.union(reads).coalesce()
            shape = self._shape(region, f"intermediate {tensor}")
            dtype = stmt.accum_dtype if stmt.is_reduction else stmt.dtype
            buf = PlannedBuffer(tensor, self.default_scope, "temp", loop.name if loop else "", shape, dtype, 1,
                                [stmt_name] + [r for r in readers if r != stmt_name], at=loop)
            self._add(buf, loop, users)

    # ------------------------------------------------------------ intermediates read back from memory
    # The tile lowering's register-reuse rule (compiler/lower/registers.py, loads.py), stated on isl regions;
    # the fuzzer's "plan" oracle checks that the two agree.

    def _memory_temps(self) -> None:
        """A tensor produced in this kernel (a temporary, one staged by cache_write, or a global tensor such as a
        time loop's step or a factorisation's column) is read from its producer's register tile only lane for
        lane (`_reads_producer_tile`).  Any other read (a row produced whole and read in segments, a tile
        produced in segments and read whole, a shifted window) goes through global memory: the producer stores the
        tensor and the reader loads its tile back (compiler/lower/loads.py).  A read that no instance takes at
        these sizes (a `where` branch) is lowered as a constant: it moves nothing and decides nothing."""
        for producer in self.stmts:
            tensor = self.model.stmt(producer).write.tensor
            for reader in self.stmts:
                reads = [r for r in self.model.stmt(reader).reads if r.tensor == tensor and not r.relation.is_empty()]
                if reader == producer or not reads:
                    continue
                if self._reads_running(tensor, reader) and not self._running_rewalked(producer, reader, tensor):
                    continue
                if not self._reads_producer_tile(producer, reader, reads):
                    self.memory_reads.add((tensor, reader))

    def _read_back(self) -> frozenset:
        """The tensors some reader takes back from memory (`KernelPlan.read_back`)."""
        return frozenset(tensor for tensor, _ in self.memory_reads)

    def _reads_running(self, tensor: str, reader: str) -> bool:
        """A running maximum (`online`) read by an exponential it rescales (or by the sum that inlined it) takes
        the accumulator as it is, in registers (compiler/lower/registers.py `_running_read`)."""
        if tensor not in self.tree.online:
            return False
        return any(s.rescale is not None and s.rescale.stat == tensor
                   and (s.rescale.exponential == reader or (s.rescale.source is None and s.name == reader))
                   for s in self.model.stmts) and self._inside_accumulator(tensor, reader)

    def _inside_accumulator(self, stat: str, reader: str) -> bool:
        """Whether the reader runs inside the loops around the maximum's accumulator (`_anchored`), as the lowering
        asks before it reads the accumulator as it is (compiler/lower/registers.py `_running`).  Elsewhere, as
        where a loop of one iteration leaves the maximum no loop to accumulate across and it is finished within
        each row (`reverse_compute_at(l, m.i)` at L <= 128: CPU fuzz seed 5568), the reader takes the finished
        maximum like any other value."""
        held, loops = self._anchored(stat), self._tile_loops(reader)
        return len(loops) > len(held) and all(a is b for a, b in zip(held, loops))

    def _running_rewalked(self, producer: str, reader: str, tensor: str) -> bool:
        """Whether a reader of a running maximum walks its rows by a tile-level loop inside the maximum's
        accumulator (E moved under a serial loop over the query rows): the lowering's running read takes the
        accumulator's lanes as they are, so such a reader loads the maximum back from memory
        (compiler/lower/registers.py `_running`).  A reader that is itself a reduction keeps its lanes anchored
        outside its own accumulation loop (compiler/lower/geometry.py `_anchor`): loops inside that move nothing."""
        held = self._anchored(producer)  # the loops around the maximum's accumulator
        below = [loop for loop in self._anchored(reader) if not any(loop is h for h in held)]
        return any(self._rewalked(access, reader, below)
                   for access in self.model.stmt(reader).reads if access.tensor == tensor)

    def _tile_prefix(self, stmt: str, loop: Optional[Loop]) -> isl.Map:
        """Statement instance -> values of the tile-level loops from the kernel's root down to `loop`."""
        path = self.path(stmt)
        upto = path[: _index(path, loop) + 1] if loop is not None else []
        return self._loops_prefix(stmt, [l for l in upto if self.is_tile_level(l)])

    def _rewalked(self, access, reader: str, below: list, outer: Optional[list] = None) -> bool:
        """Whether a tile-level loop of the reader inside the producer's final level walks an iterator the read
        indexes by: the reader's tile then moves along a dimension the producer's tile holds whole (a row read in
        segments), or places it by another loop's variable than the producer's.  A loop that takes one value for
        the reader walks nothing: the lowering writes that value as a constant.  Nor does one that takes one value
        in each iteration of the `outer` loops (the tile-level loops around the producer's final level): a
        consumer moved under its producer's loop that keeps its own loop over the same index is placed by a
        function of the outer loops, which the lowering finds equal to the producer's where both have instances
        (compiler/lower/registers.py `_same_function`).  Nor does a loop whose expression uses the
        iterator only beside others that an outer loop fixes (a skew `jo = floor((2i + j)/4)` inside the loop over
        i): the tile's offset along the iterator, as the lowering derives it, does not use that loop."""
        stmt = self.model.stmt(reader)
        indexed = [stmt.iters.index(i.name) for i in access.node.indices]
        walking = [loop for loop in below if self.is_tile_level(loop) and not self._one_value(loop, reader, outer)]
        return any(self._offset_uses(reader, n, loop) for loop in walking for n in indexed
                   if any(uses_iterators(pa, n, 1) for pa in loop.exprs[reader]))

    def _offset_uses(self, reader: str, n: int, loop: Loop) -> bool:
        """Whether the reader's tile offset along its iterator n uses `loop`'s variables, the offset taken as the
        tile lowering takes it: the smallest n of one iteration of the loops that place its lanes (`_lane_loops`)."""
        stmt = self.model.stmt(reader)
        loops = self._lane_loops(reader, stmt.iters[n], self._tile_loops(reader))
        if not any(l is loop for l in loops):
            return False
        rel = pw_affs_to_map([pa for l in loops for pa in l.exprs[reader]], stmt.domain).reverse()
        rel = rel.project_out(isl.dim_type.out, n + 1, len(stmt.iters) - n - 1).project_out(isl.dim_type.out, 0, n)
        start = sum(l.n_dims for l in loops[: _index(loops, loop)])
        return any(aff.involves_dims(isl.dim_type.in_, start, loop.n_dims)
                   for _, aff in rel.dim_min(0).get_pieces())

    def _copied(self, stmt: str) -> bool:
        """Whether the statement is computed again per tile (`recompute_at`)."""
        return bool(self.model.tensors[self.model.stmt(stmt).write.tensor].copies)

    def _one_value(self, loop: Loop, stmt: str, outer: Optional[list] = None) -> bool:
        """Whether every instance of the statement has the same value of the loop (the tile lowering then
        writes that value as a constant, not the loop's variable); with `outer` loops, the same value in each of
        their iterations."""
        domain = self.model.stmt(stmt).domain
        values = pw_affs_to_map(list(loop.exprs[stmt]), domain)
        if not outer:
            return values.range().is_singleton()
        around = pw_affs_to_map([pa for l in outer for pa in l.exprs[stmt]], domain)
        return around.reverse().apply_range(values).is_single_valued()

    def _final_level(self, producer: str) -> Optional[Loop]:
        """The innermost loop at which the producer's tile is complete: its store level, or for a reduction the
        loop around the outermost unbound loop in which all its instances share one iteration (a loop over key
        blocks that a small size leaves with one block) and which a reader of this kernel runs after: its
        accumulator lives across that loop (the tile lowering's `_accumulation_loop`)."""
        stored = self.store_level(producer)
        stmt = self.model.stmt(producer)
        if not stmt.is_reduction or stored is None:
            return stored
        path = self.path(producer)
        inside = [loop for loop in path[_index(path, stored) + 1:] if self.serial(loop)]
        across = accumulation_loop(self.model, producer, path[: _index(path, stored) + 1], self.stmts, deeper=inside)
        if across is None:  # no loop around the store level holds the accumulator
            return stored
        n = _index(path, across)
        return path[n - 1] if n else None

    def _reads_producer_tile(self, producer: str, reader: str, reads: list) -> bool:
        """Whether each of `reads` (the reader's reads of the producer's tensor), at each iteration of the
        reader's tile level, takes lane for lane the tile that `producer` completed at its final level (which must
        enclose the reader)."""
        stored, level = self._final_level(producer), self.tile_level(reader)
        path = self.path(reader)
        at_stored, at_level = _index_or_none(path, stored), _index_or_none(path, level)
        if at_stored is None or at_level is None or at_level < at_stored:
            return False
        # a tile is everything inside one iteration of the tile-level loops: point loops around a serial one are
        # its lanes (the lowering hoists the serial loop out of them), so only tile-level loops index the tiles
        tiles = self._tile_loops(reader)  # down to its tile level, the innermost
        kept = sum(l.n_dims for l in path[: at_stored + 1] if self.is_tile_level(l))
        inner = sum(l.n_dims for l in tiles) - kept
        written = self._tile_prefix(producer, stored).reverse().apply_range(
            self.model.stmt(producer).write.relation).coalesce()
        prefix = self._tile_prefix(reader, level)
        for access in reads:  # each read by itself: a shifted one has other lanes
            if not _plain_lanes(access, self.model.stmt(reader), self.model.stmt(producer)):
                return False
            if self._copied(reader) != self._copied(producer) and not _read_as_written(access, self.model.stmt(reader)):
                # a recompute_at copy is indexed by its tile's local coordinates, the tensor it reads or the reader
                # of the copy by the tensor's: the lanes meet only where the two coincide
                return False
            outer = [loop for loop in path[: at_stored + 1] if self.is_tile_level(loop)]
            if self._rewalked(access, reader, path[at_stored + 1: at_level + 1], outer):
                return False
            if access.relation.is_empty():  # a branch never taken at these sizes: lowered all the same, by its lanes
                continue
            read = prefix.reverse().apply_range(access.relation).coalesce()
            lifted = written.insert_dims(isl.dim_type.in_, kept, inner).intersect_domain(read.domain())
            wrote = self._written_lanes(producer, stored, read.domain())
            if not _same_lanes(read, self._lanes(access, reader, read.domain()), lifted, wrote):
                return False
            if _transposed(access, self.model.stmt(reader), wrote):
                return False
        return True

    def _lanes(self, access, reader: str, where: isl.Set) -> list:
        """Per dimension of a plain read, the lanes the reader's tile holds at each iteration of its tile-level
        loops (`where` it reads: a `where` branch taken at some of them is lowered lane for lane all the same),
        placed by the loops `_lane_loops` names: along an output iterator of a reduction its accumulator's, the
        same at every iteration of the loops inside the one it accumulates across."""
        stmt = self.model.stmt(reader)
        every = _tile_lanes(access, stmt)
        loops = self._tile_loops(reader)
        return [self._held(reader, self._lane_loops(reader, index.name, loops), every, where)
                for index in access.node.indices]

    def _written_lanes(self, producer: str, stored: Loop, where: isl.Set) -> list:
        """Per dimension of the producer's result, the lanes its tile holds at each iteration of a reader's
        tile-level loops (`where`; the producer's down to `stored` come first), placed as `_lane_loops` says."""
        stmt = self.model.stmt(producer)
        path = self.path(producer)
        loops = [l for l in path[: _index(path, stored) + 1] if self.is_tile_level(l)]
        return [self._held(producer, self._lane_loops(producer, it, loops), stmt.write.relation, where)
                for it in stmt.lhs_iters]

    def _held(self, stmt: str, loops: list, elements: isl.Map, where: isl.Set) -> isl.Map:
        """Values of `where`'s loops -> the elements (of `elements`: instance -> element) that the statement's
        instances in that iteration of `loops` (a prefix of where's loops) touch."""
        held = self._loops_prefix(stmt, loops).reverse().apply_range(elements)
        held = held.insert_dims(isl.dim_type.in_, held.dim(isl.dim_type.in_),
                                where.dim(isl.dim_type.set) - held.dim(isl.dim_type.in_))
        return held.intersect_domain(where).coalesce()

    def _loops_prefix(self, stmt: str, loops: list) -> isl.Map:
        """Statement instance -> values of `loops` (some of its loops, outermost first).  No loop gives a map to
        the 0-dimensional space, not `pw_affs_to_map`'s single point in time: the callers count the dimensions
        as the loops' `n_dims`."""
        domain = self.model.stmt(stmt).domain
        if not loops:
            return isl.Map.from_domain(domain)
        return pw_affs_to_map([d for l in loops for d in l.exprs[stmt]], domain)

    def _rescale_factors(self) -> None:
        """A running maximum (`online`) needs, beside its own row vector and the sums', one more per row: the
        factor exp((m_old - m_new)·c) that rescales the sums after each update (chapter 5.3.3's three row
        vectors m, l and the update factor).  Planned like the maximum's buffer, used by the sums it rescales."""
        for stat in self.tree.online:
            sums = [s for s in self.stmts if (r := self.model.stmt(s).rescale) is not None and r.stat == stat]
            home = next((b for b in self.buffers if b.tensor == stat and b.kind in ("write", "temp")), None)
            if not sums or home is None:
                continue
            factor = PlannedBuffer(f"rescale({stat})", home.scope, "temp", home.loop, list(home.shape), "f32", 1,
                                   [stat, *sums], at=home.at)
            self._add(factor, home.at, [stat, *sums])

    # ------------------------------------------------------------ loads and stores

    def _buffer_for(self, stmt: str, tensor: str, kind: str) -> Optional[Buffer]:
        """The innermost cache buffer of `tensor` that `stmt` uses."""
        path = self.path(stmt)
        found = [b for b in self.tree_buffers if b.tensor == tensor and b.kind == kind and stmt in b.stmts]
        found.sort(key=lambda b: _index(path, b.at))
        return found[-1] if found else None

    def _hoist(self, stmt: str, tensor: str, level: Optional[Loop], floor: Optional[Loop]) -> Optional[Loop]:
        """Move a tile's load level out of serial loops it does not depend on (never past a bound loop or `floor`).
        Only tile-level loops are levels: the point loops between them are lanes of the tile."""
        if level is None:
            return None
        path = self._levels(stmt, level)
        at, stop = _index(path, level), _index(path, floor)
        region = self.touched([stmt], tensor, level)
        while at > stop and not path[at].bind:
            outer = path[at - 1] if at > 0 else None
            candidate = self.touched([stmt], tensor, outer)
            if outer is None:
                lifted = isl.Map.from_domain_and_range(region.domain(), candidate.range())
            else:
                inner = sum(l.n_dims for l in path[: at + 1])
                kept = sum(l.n_dims for l in path[:at])
                lifted = candidate.insert_dims(isl.dim_type.in_, kept, inner - kept).intersect_domain(region.domain())
            if not lifted.is_equal(region):
                break
            region, at = candidate, at - 1
        return path[at] if at >= 0 else None

    def _reads(self) -> None:
        groups: dict = {}
        for stmt_name in self.stmts:
            stmt = self.model.stmt(stmt_name)
            # (a read in a `where` branch never taken, at these sizes, moves nothing)
            for tensor in dict.fromkeys(a.tensor for a in stmt.reads if not a.relation.is_empty()):
                if tensor in self.produced and tensor != stmt_name and (tensor, stmt_name) not in self.memory_reads:
                    continue  # produced in this kernel: already on chip (a recurrence reads its own back from memory)
                buf = self._buffer_for(stmt_name, tensor, "read")
                level = self.tile_level(stmt_name)
                path = self.path(stmt_name)
                if buf is not None and (level is None or _index(path, buf.at) > _index(path, level)):
                    level = buf.at
                if buf is None:  # a tile loaded from global memory stays in registers while it does not change
                    level = self._hoist(stmt_name, tensor, level, None)
                key = (tensor, id(level), id(buf))
                groups.setdefault(key, (tensor, level, buf, []))[3].append(stmt_name)
        for tensor, level, buf, stmts in groups.values():
            region = self.touched(stmts, tensor, level)
            if buf is None:
                dtype = self.model.tensors[tensor].dtype
                shape = self._shape(region, f"tile of {tensor}")
                tile = PlannedBuffer(tensor, self.default_scope, "tile", level.name if level else "", shape, dtype, 1,
                                     list(stmts), source="global")
                self._add(tile, level, stmts)
                self.accesses.append(TileAccess(tensor, "read", "global", self.default_scope, level, stmts, region,
                                                dtype, tile))
            else:
                planned = self._planned[id(buf)]
                self.accesses.append(TileAccess(tensor, "read", planned.scope, "compute", level, stmts, region,
                                                planned.dtype, planned))

    def _writes(self) -> None:
        groups: dict = {}
        for stmt_name in self.stmts:
            stmt = self.model.stmt(stmt_name)
            tensor = stmt.write.tensor
            if tensor not in self.globals and tensor not in self._read_back():
                continue
            buf = self._buffer_for(stmt_name, tensor, "write")
            if buf is not None:
                groups.setdefault(("buf", id(buf)), (tensor, buf.at, buf, []))[3].append(stmt_name)
                continue
            level = self.store_level(stmt_name)
            groups.setdefault(("tile", tensor, id(level)), (tensor, level, None, []))[3].append(stmt_name)
        for tensor, level, buf, stmts in groups.values():
            region = self.touched(stmts, tensor, level, write=True)
            dtype = self.model.tensors[tensor].dtype
            if buf is not None:
                planned = self._planned[id(buf)]
                self.accesses.append(TileAccess(tensor, "write", planned.scope, "global", level, stmts, region, dtype,
                                                planned))
                continue
            home = next((b for b in self.buffers if b.tensor == tensor and b.kind == "temp"), None)
            if tensor not in self.globals and home is not None:  # stored from its register tile, for a read back
                self.accesses.append(TileAccess(tensor, "write", home.scope, "global", level, stmts, region, dtype,
                                                home))
                continue
            writer = self.model.stmt(stmts[0])
            held = writer.accum_dtype if writer.is_reduction else dtype
            shape = self._shape(region, f"tile of {tensor}")
            tile = PlannedBuffer(tensor, self.default_scope, "tile", level.name if level else "", shape, held, 1,
                                 list(stmts), source="")
            self._add(tile, level, stmts)
            self.accesses.append(TileAccess(tensor, "write", self.default_scope, "global", level, stmts, region, dtype,
                                            tile))

    def _fills(self) -> None:
        """Each cache_read copy is filled once per iteration of its loop, from global or from an outer copy."""
        for buf in self.tree_buffers:
            if buf.kind != "read":
                continue
            stmts = [s for s in buf.stmts if s in self.pos]
            planned = self._planned[id(buf)]
            parent = self._parent(buf, stmts)
            if parent is not None:
                src, dtype = self._planned[id(parent)].scope, self._planned[id(parent)].dtype
            elif buf.tensor in self.produced:
                src, dtype = self._producer_scope(buf.tensor), self.model.tensors[buf.tensor].dtype
            else:
                src, dtype = "global", self.model.tensors[buf.tensor].dtype
            planned.source = src
            region = self.touched(stmts, buf.tensor, buf.at)
            self.accesses.append(TileAccess(buf.tensor, "read", src, planned.scope, buf.at, stmts, region, dtype,
                                            planned))

    def _parent(self, buf: Buffer, stmts: list[str]) -> Optional[Buffer]:
        path = self.path(stmts[0])
        here = _index(path, buf.at)
        outer = [b for b in self.tree_buffers if b is not buf and b.tensor == buf.tensor and b.kind == "read"
                 and set(stmts) <= set(b.stmts) and 0 <= _index(path, b.at) < here]
        outer.sort(key=lambda b: _index(path, b.at))
        return outer[-1] if outer else None

    def _producer_scope(self, tensor: str) -> str:
        for b in self.buffers:
            if b.tensor == tensor and b.kind in ("write", "temp"):
                return b.scope
        return self.default_scope


# ---------------------------------------------------------------- helpers


def _index(path: list[Loop], loop: Optional[Loop]) -> int:
    if loop is None:
        return -1
    for n, l in enumerate(path):
        if l is loop:
            return n
    raise KeyError(loop.name)


def _same_lanes(read: isl.Map, lanes: list, written: isl.Map, written_lanes: list) -> bool:
    """The reader's tile is the producer's, lane for lane: it reads only what the producer wrote in that
    iteration (`written`), and per dimension d the lanes its tile holds there (`lanes[d]`) start where the
    producer's (`written_lanes[d]`) do and span as many (a triangular reader masks some of them, a `where`
    branch takes some of them)."""
    if not read.is_subset(written):
        return False
    for d, (held, wrote) in enumerate(zip(lanes, written_lanes)):
        if not held.dim_min(d).is_equal(wrote.dim_min(d)):
            return False
        if not _largest_span(held, d).eq(_largest_span(wrote, d)):
            return False
    return True


def _transposed(access, reader, written_lanes: list) -> bool:
    """Whether the read takes the producer's tile axes (the dimensions its lanes span more than one element of)
    in another order than the reader's tile holds them, its iterators' order (`F[k, j]` read by a tile over
    (j, k)): the lowering reads no register tile transposed (compiler/lower/registers.py `_lanes`)."""
    order = [reader.iters.index(index.name) for d, index in enumerate(access.node.indices)
             if not _largest_span(written_lanes[d], d).is_zero()]
    return order != sorted(order)


def _plain_lanes(access, reader, producer) -> bool:
    """Every index of the read is one of the reader's iterators, one per dimension the producer writes: a tile's
    lanes are taken as they are, not re-indexed (an index `i + 1` is a shifted window; a copy made by
    `recompute_at` has the tile's dimensions besides the read's)."""
    indices = access.node.indices
    return len(indices) == len(producer.lhs_iters) and all(
        isinstance(index, ast.Name) and index.name in reader.iters for index in indices)


def _read_as_written(access, reader) -> bool:
    """Whether a read's indices, taken as the reader's iterators, name the elements it reads: a `recompute_at`
    copy indexes by its tile's local coordinates, which are the tensor's only where its tile starts at 0 (a
    tile of one row at a size of one)."""
    as_written = _as_written(access, reader)
    try:
        return as_written is not None and as_written.intersect_domain(access.relation.domain()).is_equal(
            access.relation)
    except isl.Error:  # spaces isl will not line up: not proved, read back as any copy's read
        return False


def _tile_lanes(access, reader) -> isl.Map:
    """The elements a plain read names at every instance of the reader, whatever its `where` condition: the
    lowering takes the producer's lanes for the reader's whole tile and masks the branch (a branch taken at one
    corner of the tile reads that corner's lane from the register tile).  The read's own relation where isl
    will not line the indices up."""
    as_written = _as_written(access, reader)
    if as_written is None:
        return access.relation
    try:
        return as_written.intersect_domain(reader.domain.align_params(as_written.get_space().domain()))
    except isl.Error:
        return access.relation


def _as_written(access, reader) -> Optional[isl.Map]:
    """The read's indices as a map from the reader's iterators, in the read's spaces; None where isl will not
    line them up."""
    names = [index.name for index in access.node.indices]
    space = access.relation.get_space()
    try:
        as_written = isl.Map(f"{{ [{', '.join(reader.iters)}] -> [{', '.join(names)}] }}", access.relation.get_ctx())
        as_written = as_written.align_params(space)
        for kind in (isl.dim_type.in_, isl.dim_type.out):
            as_written = as_written.set_tuple_id(kind, space.get_tuple_id(kind))
        return as_written
    except isl.Error:
        return None


def _index_or_none(path: list[Loop], loop: Optional[Loop]) -> Optional[int]:
    """`_index`, or None for a loop not on the path."""
    try:
        return _index(path, loop)
    except KeyError:
        return None


def _largest_span(region: isl.Map, d: int) -> isl.Val:
    """The most that coordinate `d` of the elements one iteration touches varies (max - min, over iterations)."""
    try:
        return integer_bounds(region.dim_max(d).sub(region.dim_min(d)).coalesce())[1]
    except isl.Error:
        # A region with strides (an index `j // 2`, a condition `j % 2 == 0`) can give bounds with rational
        # coefficients, which max_val refuses; the differences of two touched coordinates are integers.
        one = region.project_out(isl.dim_type.out, d + 1, region.dim(isl.dim_type.out) - d - 1)
        one = one.project_out(isl.dim_type.out, 0, d)
        deltas = one.reverse().apply_range(one).deltas()
        return deltas.max_val(isl.Aff.var_on_domain(isl.LocalSpace.from_space(deltas.get_space()),
                                                    isl.dim_type.set, 0))


def _common_loop(paths: list[list[Loop]]) -> Optional[Loop]:
    common = None
    for level in zip(*paths):
        if all(l is level[0] for l in level):
            common = level[0]
        else:
            break
    return common
