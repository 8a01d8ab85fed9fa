"""Buffer plan: every buffer a schedule creates, its footprint, scope and lifetime, and the capacity check.

Each top-level node of the schedule tree is one kernel (one launch).  Inside a kernel tdsl knows four kinds
of on-chip storage, all sized from isl access relations restricted to one iteration of a loop:

* ``read``  -- ``cache_read(A, shared, at=C.ko)``: the region of A that the statements under `ko` read in
  one iteration of `ko` (the access relations composed with the loop prefix, boxed per dimension);
* ``write`` -- ``cache_write(C, register, at=C.jo)``: the region C writes in one iteration of `jo`, in the
  accumulator's dtype for a reduction (the chapter's 64x64 FP32 accumulator: 16 KiB);
* ``temp``  -- a fused intermediate: a temporary produced and consumed inside one kernel without a
  ``cache_write``; it lives in the target's default scope (registers on NVIDIA, UB on Ascend) for one
  iteration of the innermost loop that encloses its producer and all its readers;
* ``tile``  -- the tile of an uncached global tensor that a statement loads (or stores) directly, for one
  iteration of its *load level* (below).  Tiles are part of the per-kernel plan (`plan_kernels`), not of
  `plan` (which lists what the schedule itself creates).

A buffer at a pipelined loop is allocated once per stage.

Load level of an uncached tensor.  The loops bound to grid axes, the tile loops made by split/tile and the
pipelined loops are the *tile level*: everything below the innermost of them is one tile (what the tile
lowering vectorises), loaded once per iteration of that loop.  A statement with no such loop is a scalar
loop nest (program order): it loads its operands once per iteration of its innermost loop.  A tile whose
region does not change across inner serial (unbound) loops is hoisted out of them, as a compiler hoists a
loop-invariant load (a row scale read inside the K loop is read once per output tile); bound loops are never
crossed, because their iterations are different programs.  Reads of a tensor produced in the same kernel
come from on-chip storage and move nothing to or from global memory.

Lifetime.  Positions are the statements of a kernel in schedule order.  A buffer allocated at loop X is live
from the first to the last statement that uses it, widened to whole children of X's body (a buffer used
inside an inner loop stays live through all that loop's iterations); a pipelined buffer is live through
all of X's body (its next copy is in flight).  Buffers of one scope whose live ranges do not overlap share
memory (the K and V tiles of FlashAttention use one slot in turn); an elementwise statement that reads an
intermediate element for element as its last use writes its result in place (scores -> probabilities).
The working set of a scope is the largest total of the buffers live at one position; it must fit the
target's per-block capacity of that scope (`check`), else `CapacityError` names the scope, the buffers
and how many bytes are over.

Size: one class, `_KernelPlanner`, per kernel; placement, lifetimes and sharing use the same positions
and regions, so they stay together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.model.dtypes import BYTES
from tdsl.compiler.errors import BackendError
from tdsl.compiler.model.isl_code import integer_bounds
from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import Buffer, Loop, Node, global_tensors, loop_walks_reduction, pw_affs_to_map, statements_under

DTYPE_BYTES = BYTES  # compiler/model/dtypes.py
DEFAULT_WARPS = 4  # the backends' launch default (Triton num_warps)


@dataclass
class PlannedBuffer:
    tensor: str
    scope: str
    kind: str  # read | write | temp | tile
    loop: str  # allocated for one iteration of this loop ("" = once per kernel)
    shape: list[int]
    dtype: str
    stages: int
    stmts: list[str]  # the statements that use it
    kernel: int = 0
    first: str = ""  # first and last statement using it in one iteration of `loop`: freed after `last`
    last: str = ""
    live: tuple = (0, 0)  # positions of first and last (statement order within the kernel)
    shares: Optional[str] = None  # label of the buffer whose memory it reuses (in place, or a later slot user)
    source: str = ""  # where its data comes from: "global", a scope, or "" (computed here)
    at: Optional[Loop] = field(default=None, compare=False, repr=False)  # the loop named by `loop` (identity)

    @property
    def bytes_per_copy(self) -> int:
        n = DTYPE_BYTES[self.dtype]
        for d in self.shape:
            n *= d
        return n

    @property
    def bytes(self) -> int:
        return self.bytes_per_copy * self.stages

    @property
    def label(self) -> str:
        return f"{self.tensor}@{self.loop or 'kernel'}" + (f"[{self.kind}]" if self.kind in ("tile", "temp") else "")

    def describe(self) -> str:
        shape = "x".join(map(str, self.shape)) or "1"
        stages = f" x {self.stages} stages" if self.stages > 1 else ""
        return f"{self.label} {shape} {self.dtype}{stages} = {fmt_bytes(self.bytes)}"


@dataclass
class TileAccess:
    """Data moved for one tensor between two memory levels, once per iteration of `loop`."""

    tensor: str
    kind: str  # read | write
    src: str  # "global" or a scope name
    dst: str  # a scope name, "compute" (operands read by the compute units) or "global"
    loop: Optional[Loop]
    stmts: list[str]
    touched: isl.Map  # loop values -> tensor elements (the region one iteration moves)
    dtype: str  # element type of the bytes moved
    buffer: Optional[PlannedBuffer] = None

    @property
    def loop_name(self) -> str:
        return self.loop.name if self.loop is not None else ""


@dataclass
class Violation:
    kernel: str
    scope: str
    need: int
    capacity: int
    buffers: list[PlannedBuffer]

    @property
    def over(self) -> int:
        return self.need - self.capacity

    def text(self) -> str:
        names = ", ".join(b.describe() for b in self.buffers)
        return (f"kernel {self.kernel}: {self.scope} needs {fmt_bytes(self.need)} ({self.need:,} B) per block but "
                f"the target has {fmt_bytes(self.capacity)} ({self.capacity:,} B): {self.over:,} B over; "
                f"live together: {names}")


class CapacityError(TdslError):
    """A schedule whose buffers do not fit a target's on-chip memory (rejected like an illegal schedule)."""

    exit_code = 1
    rule = "capacity"

    def __init__(self, target: str, violations: list[Violation], schedule: Optional[str] = None):
        self.target = target
        self.violations = violations
        what = f"schedule {schedule}" if schedule else "the schedule"
        lines = [f"{what} does not fit {target} [rule capacity]"] + ["  " + v.text() for v in violations]
        super().__init__("\n".join(lines))


@dataclass
class KernelPlan:
    index: int
    name: str
    root: Node
    stmts: list[str]  # in schedule order (the positions of `live`)
    buffers: list[PlannedBuffer]
    accesses: list[TileAccess]
    working_set: dict  # scope -> peak bytes per block
    peak_buffers: dict  # scope -> buffers live at that peak
    warps: int
    grid_loops: list[Loop]
    violations: list[Violation] = field(default_factory=list)


def fmt_bytes(n: int) -> str:
    if n >= 1 << 30 and n % (1 << 20) == 0 and n >= 8 << 30:
        return f"{n / (1 << 30):g} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.4g} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.4g} KiB"
    return f"{n} B"


# ---------------------------------------------------------------- public API


def plan(schedule: Schedule, target=None) -> list[PlannedBuffer]:
    """The buffers the schedule creates: cache_read / cache_write copies and fused intermediates."""
    return [b for k in plan_kernels(schedule, target) for b in k.buffers if b.kind != "tile"]


def plan_kernels(schedule: Schedule, target=None) -> list[KernelPlan]:
    """Per kernel: every buffer (with implicit tiles), the data movements, working sets and capacity violations."""
    from tdsl.compiler.targets import get_target

    tgt = get_target(target) if target is not None else None
    require_bound_sizes(schedule)
    return [_KernelPlanner(schedule, tgt, k, node).run() for k, node in enumerate(schedule.tree.body)]


def require_bound_sizes(schedule: Schedule) -> None:
    if schedule.model.params:
        raise TdslError(f"memory planning needs every size bound; give a value to {', '.join(schedule.model.params)} "
                        f"(--size {schedule.model.params[0]}=...)")


def check(schedule: Schedule, target) -> list[KernelPlan]:
    """Plan for `target` and raise CapacityError if a buffer set does not fit a hard on-chip scope."""
    from tdsl.compiler.targets import get_target

    tgt = get_target(target)
    kernels = plan_kernels(schedule, tgt)
    violations = [v for k in kernels for v in k.violations]
    if violations:
        raise CapacityError(tgt.name, violations, schedule.name)
    return kernels


def shared_bytes(buffers: list[PlannedBuffer], kernel_stmts: set) -> int:
    """Shared-memory bytes of the buffers used by one kernel's statements."""
    return sum(b.bytes for b in buffers if b.scope == "shared" and set(b.stmts) & kernel_stmts)


def kernel_stages(kernel: KernelPlan) -> int:
    """Pipeline depth the backends should use for this kernel: the deepest stages of its buffers (2 if none)."""
    stages = [b.stages for b in kernel.buffers if b.stages > 1]
    return max(stages) if stages else 2


# ---------------------------------------------------------------- the planner


def is_tile_level(loop: Loop) -> bool:
    return bool(loop.bind) or loop.kind == "tile" or loop.pipeline is not None


class _KernelPlanner:
    def __init__(self, schedule: Schedule, target, index: int, root: Node):
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

    # ------------------------------------------------------------ driver

    def run(self) -> KernelPlan:
        for buf in self.tree_buffers:
            self._explicit(buf)
        self._temps()
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
        return KernelPlan(self.index, self.name, self.root, self.stmts, self.buffers, self.accesses, working, peaks,
                          warps, grid, violations)

    # ------------------------------------------------------------ loops and regions

    def path(self, stmt: str) -> list[Loop]:
        return self.tree.path(stmt)

    def _prefix(self, stmt: str, loop: Optional[Loop]) -> isl.Map:
        """Statement instance -> values of the loops from the kernel's root down to `loop` (None: no loop)."""
        domain = self.model.stmt(stmt).domain
        if loop is None:
            return pw_affs_to_map([], domain)
        path = self.path(stmt)
        upto = path[: _index(path, loop) + 1]
        return pw_affs_to_map([d for l in upto for d in l.exprs[stmt]], domain)

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

    def tile_level(self, stmt: str) -> Optional[Loop]:
        path = self.path(stmt)
        tiles = [l for l in path if is_tile_level(l)]
        if tiles:
            return tiles[-1]
        return path[-1] if path else None  # a scalar loop nest: every iteration of its innermost loop

    def store_level(self, stmt_name: str) -> Optional[Loop]:
        """Where a statement's result tile is stored: its tile level, or for a reduction the innermost tile
        loop outside the loops that walk the reduction (the accumulator is stored once it is complete)."""
        stmt = self.model.stmt(stmt_name)
        if not stmt.is_reduction:
            return self.tile_level(stmt_name)
        path = self.path(stmt_name)
        cut = next((n for n, l in enumerate(path) if loop_walks_reduction(self.model, stmt_name, l)), len(path))
        outside = path[:cut]
        if any(is_tile_level(l) for l in path):
            tiles = [l for l in outside if is_tile_level(l)]
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
            operands = [matrix_operands(self.model.stmt(s)) for s in stmts]
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

    # ------------------------------------------------------------ loads and stores

    def _buffer_for(self, stmt: str, tensor: str, kind: str) -> Optional[Buffer]:
        """The innermost cache buffer of `tensor` that `stmt` uses."""
        path = self.path(stmt)
        found = [b for b in self.tree_buffers if b.tensor == tensor and b.kind == kind and stmt in b.stmts]
        found.sort(key=lambda b: _index(path, b.at))
        return found[-1] if found else None

    def _hoist(self, stmt: str, tensor: str, level: Optional[Loop], floor: Optional[Loop]) -> Optional[Loop]:
        """Move a tile's load level out of serial loops it does not depend on (never past a bound loop or `floor`)."""
        if level is None:
            return None
        path = self.path(stmt)
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
            for tensor in dict.fromkeys(a.tensor for a in stmt.reads):
                if tensor in self.produced:
                    continue  # produced in this kernel: already on chip
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
            if tensor not in self.globals:
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

    # ------------------------------------------------------------ working sets

    def _slots(self) -> list[list[PlannedBuffer]]:
        """Buffers grouped into memory slots: an elementwise last use of an intermediate writes in place."""
        slot_of: dict[int, list] = {}
        slots: list[list[PlannedBuffer]] = []
        for buf in self.buffers:
            slot_of[id(buf)] = [buf]
            slots.append(slot_of[id(buf)])
        for buf in self.buffers:
            if buf.kind not in ("temp", "write") or len(buf.stmts) == 0:
                continue
            writer = self.model.stmt(buf.stmts[0])
            if writer.is_reduction:
                continue
            for other in self.buffers:
                if other is buf or other.kind not in ("temp", "write") or other.scope != buf.scope:
                    continue
                if other.loop != buf.loop or other.last != writer.name or other.bytes < buf.bytes:
                    continue
                if slot_of[id(other)] is slot_of[id(buf)] or slot_of[id(other)][-1] is not other:
                    continue
                if not _elementwise_read(self.model, writer, other.tensor):
                    continue
                merged = slot_of[id(other)]
                slots.remove(slot_of[id(buf)])
                merged.append(buf)
                slot_of[id(buf)] = merged
                buf.shares = other.label
                break
        return slots

    def _working_sets(self):
        slots = self._slots()
        working, peaks = {}, {}
        for scope in dict.fromkeys(b.scope for b in self.buffers):
            mine = [s for s in slots if s[0].scope == scope]
            best, best_at = -1, 0
            for p in range(len(self.stmts)):
                total = sum(max(b.bytes for b in slot) for slot in mine
                            if min(b.live[0] for b in slot) <= p <= max(b.live[1] for b in slot))
                if total > best:
                    best, best_at = total, p
            working[scope] = max(best, 0)
            peaks[scope] = [b for slot in mine for b in slot
                            if min(x.live[0] for x in slot) <= best_at <= max(x.live[1] for x in slot)]
        return working, peaks

    def _violations(self, working, peaks) -> list[Violation]:
        if self.target is None:
            return []
        found = []
        for scope, need in working.items():
            info = self.target.scope(scope)
            if info.hard and info.per_block is not None and need > info.per_block:
                found.append(Violation(self.name, scope, need, info.per_block, peaks[scope]))
        return found


# ---------------------------------------------------------------- helpers


def _index(path: list[Loop], loop: Optional[Loop]) -> int:
    if loop is None:
        return -1
    for n, l in enumerate(path):
        if l is loop:
            return n
    raise KeyError(loop.name)


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


def _elementwise_read(model, writer, tensor: str) -> bool:
    """Does `writer` read `tensor` only element for element (X[i, j] = f(T[i, j]))?"""
    reads = [a for a in writer.reads if a.tensor == tensor]
    if not reads:
        return False
    for acc in reads:
        rel = acc.relation.reverse().apply_range(writer.write.relation)  # T element -> written element
        if rel.dim(isl.dim_type.in_) != rel.dim(isl.dim_type.out):
            return False
        rel = rel.set_tuple_name(isl.dim_type.in_, "t").set_tuple_name(isl.dim_type.out, "t")
        deltas = rel.deltas()
        zero = isl.Set.read_from_str(rel.get_ctx(), "{ t[" + ", ".join(["0"] * rel.dim(isl.dim_type.in_)) + "] }")
        if deltas.is_empty() or not deltas.is_subset(zero.align_params(deltas.get_space())):
            return False
    return True
