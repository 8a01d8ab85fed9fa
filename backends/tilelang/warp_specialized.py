"""The warp-specialised key loop in TileLang (`pipeline(L, warp_specialize=true)`, `SerialLoop.warp_specialized`).

FlashAttention-3's arrangement, the shape of benchmarks/gpu/experiments/flash_ws.py, for a loop whose form
compiler/lower/passes/warp_specialize.py checked (first product, statements without products, last product):

    with T.ws(2):                                   # the producer warp group (after the consumers' 4 or 8 warps)
        T.dec_max_nreg(24)
        T.tma_copy(Q[...], Q_ws, barrier=Q_full)    # operands the same in every iteration, once
        for ko in T.serial(lo, hi):                 # every block of the loop (both parts of a split loop)
            T.barrier_wait(K_empty[slot], phase ^ 1)
            T.tma_copy(K[...ko...], K_ring[slot, :, :], barrier=K_full[slot]) ...   # and V
    with T.ws(0, 1):                                # the consumers: everything else the kernel does
        T.inc_max_nreg(240)
        ...                                         # the ops before the loop
        first product of block lo; wait; middle statements of lo; P of lo into its operand fragment
        for ko in T.serial(lo + 1, hi):
            issue the first product of ko           (T.wgmma_gemm, asynchronous)
            rescale the last sum, issue its product of ko - 1
            T.wait_wgmma(1)                         # the first product only
            middle statements of ko                 # while the product of ko - 1 runs
            T.wait_wgmma(0)
            the last product's register operand of ko
        rescale, product of hi - 1, T.wait_wgmma(0)
        ...                                         # the ops after the loop

With `launch(persistent=true)` each role walks the grid's tiles around all of this (`PersistentWalk`), the ring
running on from tile to tile.

The two parts of a loop split at its masked iterations (compiler/lower/loops.py: full tiles, then the rest) are
walked as one: a group whose two forms differ (the masks) is printed under `if ko < split`.  The roles meet only
at the mbarriers, so the module compiles the kernel with `tl.disable_thread_storage_sync` (PASS_CONFIGS): the
__syncthreads TileLang would put between the producer's writes of the ring and the consumers' reads would wait
for threads that never arrive.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.warp_specialize import WARP_GROUP, ring_loads, specialized_parts
from tdsl.compiler.lower.tileir import simplify

PASS_CONFIGS = {"tl.disable_thread_storage_sync": True}
PRODUCER_REGISTERS = 24  # per thread: the producer only issues copies (setmaxnreg.dec)
CONSUMER_REGISTERS = 240  # per thread: the consumers hold the accumulators (setmaxnreg.inc)
WARP_GROUP_THREADS = 32 * WARP_GROUP
CONSUMER_BARRIER = 1  # a named barrier of the consumer warps alone (TileLang's cross-warp reductions use it too)


def producer_threads(kernel: T.TileKernel) -> int:
    """The threads the producer warp group adds to a kernel with a warp-specialised loop (0 without one)."""
    return WARP_GROUP_THREADS if specialized_parts(kernel) else 0


def persistent_walk(kernel: T.TileKernel) -> bool:
    """Is the kernel launched persistently (one program per multiprocessor walking its tiles, PersistentWalk)?  Only
    a kernel with a warp-specialised loop; the others are launched one program per tile."""
    return kernel.persistent and bool(specialized_parts(kernel))


def pass_configs(program: T.TileProgram) -> dict:
    """The TileLang pass configuration of each kernel that needs one, by its KERNELS key."""
    return {k.name: PASS_CONFIGS for k in program.kernels if specialized_parts(k)}


@dataclass
class _Ring:
    """One operand copied in each iteration: its slots in shared memory and a full / empty mbarrier per slot."""

    buffer: str
    full: str
    empty: str
    op: T.AccUpdate  # the product that reads it (in the first part)
    n: int  # which operand


@dataclass
class _Forms:
    """The lines of each group of the loop body for one part at one block (ko bound to some code): per group, the
    lines of each of its ops."""

    issue: list = field(default_factory=list)
    middle: list = field(default_factory=list)
    convert: list = field(default_factory=list)
    last: list = field(default_factory=list)


class WarpSpecializedBody:
    """Prints the body of a kernel with a warp-specialised loop (see the module) through its KernelPrinter."""

    def __init__(self, printer, kernel: T.TileKernel):
        self.p = printer
        self.kernel = kernel
        self.parts = specialized_parts(kernel)
        self.ws = self.parts[0].warp_specialized
        self.first, self.last = self.ws.first[0], self.ws.last[0]
        self.var = self.parts[0].var
        self.rings: dict = {}  # (id of the product op, operand) -> _Ring
        self.once: dict = {}  # Preload name -> (its buffer, its barrier)
        self.walk = PersistentWalk(printer, kernel) if kernel.persistent else None

    # ------------------------------------------------------------ the kernel body

    def print(self) -> None:
        body = list(self.kernel.body)
        at = [n for n, op in enumerate(body) if any(op is part for part in self.parts)]
        before, after = body[:at[0]], body[at[-1] + 1:]
        used = self._preloaded_names()
        loaded = [op for op in body[:at[-1]] if isinstance(op, T.Preload) and op.name in used]
        self._allocate(loaded)
        if self.walk:
            self.walk.allocate(self._loaded_once())
        p = self.p
        p.emit(f"# loop {self.var}: warp-specialised (pipeline warp_specialize=true): a producer warp group copies "
               f"the operands into a {self.ws.stages}-slot ring, the consumers issue {self.first} of block "
               f"{self.var} + 1 before {self.last} of block {self.var}")
        self._producer(loaded)
        self._consumers([op for op in before if not any(op is x for x in loaded)], after)

    def _preloaded_names(self) -> set:
        return {x.name for part in self.parts for op in part.body if isinstance(op, T.AccUpdate)
                and isinstance(op.partial, T.Dot) for x in (op.partial.lhs, op.partial.rhs)
                if isinstance(x, T.Preloaded)}

    def _allocate(self, loaded: list) -> None:
        p, stages = self.p, self.ws.stages
        for k, (op, n) in enumerate(ring_loads(self.parts)):  # one ring per operand, also of one tensor read twice
            st = op.staged[n]
            stem = st.tensor
            buf = p.alloc(p.local(("ws ring", k), f"{stem}_ring"), [stages] + list(st.shape), st.dtype, "shared",
                          f"{stem}: a ring of {stages} slots the producer fills")
            full = self._barrier(("ws full", k), f"{stem}_full", [WARP_GROUP_THREADS] * stages,
                                 f"{stem}: a slot is filled (the producer's arrivals and TMA's bytes)")
            empty = self._barrier(("ws empty", k), f"{stem}_empty", [self._consumer_threads()] * stages,
                                  f"{stem}: a slot is free again (every consumer thread is done with it)")
            self.rings[id(op), n] = _Ring(buf, full, empty, op, n)
        for pre in loaded:
            region = self._region(pre.load, pre.tile, p.vars)
            same = next((v for k, v in self.once.items() if k[1] == region), None)
            if same is None:
                shape = self._box(pre.load, pre.tile)
                buf = p.alloc(p.local(("ws once", pre.name), f"{pre.load.tensor}_ws"), shape, pre.dtype, "shared",
                              f"{pre.load.tensor}, the same in every iteration: loaded once by the producer")
                bar = self._barrier(("ws once full", pre.name), f"{pre.load.tensor}_full", WARP_GROUP_THREADS,
                                    f"{pre.load.tensor} is loaded")
                same = (buf, bar, pre)
            self.once[pre.name, region] = same
            p.preloads[pre.name] = same[0]

    def _loaded_once(self) -> list:
        """(buffer, barrier, preload) of each operand loaded once, each buffer once."""
        return list({buf: (buf, bar, pre) for buf, bar, pre in self.once.values()}.values())

    def _barrier(self, key: tuple, stem: str, counts, note: str) -> str:
        name = self.p.local(key, stem)
        self.p.allocs.append(f"{name} = T.alloc_barrier(arrive_count={counts!r})  # {note}")
        return name

    def _consumer_threads(self) -> int:
        return 32 * self.kernel.num_warps

    # ------------------------------------------------------------ the producer

    def _producer(self, loaded: list) -> None:
        p = self.p
        groups = self.kernel.num_warps // WARP_GROUP
        p.emit(f"with T.ws({groups}):  # the producer warp group: TMA copies only")
        p.depth += 1
        p.emit(f"T.dec_max_nreg({PRODUCER_REGISTERS})")
        if self.walk:
            self.walk.enter()
        guard = self._guard()
        if guard:
            p.emit(f"if {guard}:")
            p.depth += 1
        for buf, bar, pre in self._loaded_once():
            if self.walk:
                p.emit(f"T.barrier_wait({self.walk.empty[buf]}, {self.walk.tile_phase()} ^ 1)  # the consumers are "
                       f"done with the last tile's")
            p.emit(f"T.tma_copy({self._region(pre.load, pre.tile, p.vars)}, {buf}, barrier={bar})")
            p.emit(f"T.barrier_arrive({bar})")
        if guard:
            p.depth -= 1
        ko = p.vars[self.var]
        p.emit(f"for {ko} in T.serial({self._lo()}, {self._hi()}):")
        p.depth += 1
        for ring in self.rings.values():
            op = ring.op
            load = (op.partial.lhs, op.partial.rhs)[ring.n]
            slot, phase = self._slot(ko), self._phase(ko)
            p.emit(f"T.barrier_wait({ring.empty}[{slot}], {phase} ^ 1)  # the consumers freed the slot")
            p.emit(f"T.tma_copy({self._region(load, op.tile, p.vars)}, {ring.buffer}[{slot}, :, :], "
                   f"barrier={ring.full}[{slot}])")
            p.emit(f"T.barrier_arrive({ring.full}[{slot}])")
        p.depth -= 1
        if self.walk:
            self.walk.leave(self._guard(), self._blocks())
        p.depth -= 1

    # ------------------------------------------------------------ the consumers

    def _consumers(self, before: list, after: list) -> None:
        p = self.p
        groups = self.kernel.num_warps // WARP_GROUP
        p.emit(f"with T.ws({', '.join(str(g) for g in range(groups))}):  # the consumer warp groups: everything else")
        p.depth += 1
        p.emit(f"T.inc_max_nreg({CONSUMER_REGISTERS})")
        if self.walk:
            self.walk.enter()
        for op in before:
            p._op(op)
        guard = self._guard()
        if guard:
            p.emit(f"if {guard}:")
            p.depth += 1
        for buf, bar, pre in self._loaded_once():
            p.emit(f"T.barrier_wait({bar}, {self.walk.tile_phase() if self.walk else 0})")
        self._loop()
        if guard:
            p.depth -= 1
        for op in after:
            p._op(op)
        if self.walk:
            self.walk.leave(guard, self._blocks())
        p.depth -= 1

    def _loop(self) -> None:
        p, ko = self.p, self.p.vars[self.var]
        lo, hi = self._lo(), self._hi()
        last = str(int(hi) - 1) if hi.isdigit() else f"({hi} - 1)"
        previous = f"({ko} - 1)"
        p.emit(f"# block {lo}: {self.first}, then the statements up to {self.last}")
        self._group("issue", lo)
        p.emit("T.wait_wgmma(0)")
        self._release_first(lo)
        self._group("middle", lo)
        self._group("convert", lo)
        p.emit(f"for {ko} in T.serial({self._next(lo)}, {hi}):")
        p.depth += 1
        p.emit(f"# {self.first} of block {ko} runs on the tensor cores while {self.last} of block {ko} - 1 is "
               f"issued")
        self._group("issue", ko)
        self._group("last", previous)
        p.emit(f"T.wait_wgmma(1)  # {self.first} of block {ko}; {self.last}'s product still runs")
        self._release_first(ko)
        self._group("middle", ko)
        p.emit("T.wait_wgmma(0)")
        self._release_last(previous)
        self._group("convert", ko)
        p.depth -= 1
        if self.walk:  # every first product has been waited for: the producer may load the next tile's operands
            self._release_once(self.first)
        p.emit(f"# {self.last} of the last block")
        self._group("last", last)
        p.emit("T.wait_wgmma(0)")
        if self.walk:  # the next tile's blocks go through the same ring: free the last block's slots too
            self._release_last(last)
            self._release_once(self.last)

    def _release_once(self, stmt: str) -> None:
        """Persistent: the operands loaded once per tile whose last reader is `stmt`'s product, released."""
        readers = {}
        for part in self.parts:
            for op in part.body:
                if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot):
                    for x in (op.partial.lhs, op.partial.rhs):
                        if isinstance(x, T.Preloaded):
                            readers[self.p.preloads[x.name]] = op.stmt  # the last product reading it wins
        for buf, _, _ in self._loaded_once():
            if readers.get(buf) == stmt:
                self.p.emit(f"T.barrier_arrive({self.walk.empty[buf]})")

    def _release_first(self, block: str) -> None:
        for ring in self._rings_of(self.first):
            self.p.emit(f"T.barrier_arrive({ring.empty}[{self._slot(block)}])")

    def _release_last(self, block: str) -> None:
        for ring in self._rings_of(self.last):
            self.p.emit(f"T.barrier_arrive({ring.empty}[{self._slot(block)}])")

    def _rings_of(self, stmt: str) -> list:
        return [ring for ring in self.rings.values() if ring.op.stmt == stmt]

    # ------------------------------------------------------------ one group at one block, in each part's form

    def _group(self, group: str, block: str) -> None:
        """The lines of `group` for `block` (code); ops whose forms differ in the two parts (their masks), under
        `if block < split` (consecutive ones under one)."""
        p = self.p
        forms = [getattr(self._forms(part, block), group) for part in self.parts]
        if len(forms) == 1:
            self._paste([line for op in forms[0] for line in op])
            return
        split = p.index(simplify(self.parts[1].lower))
        n = 0
        while n < len(forms[0]):
            if forms[0][n] == forms[1][n]:
                self._paste(forms[0][n])
                n += 1
                continue
            end = n
            while end < len(forms[0]) and forms[0][end] != forms[1][end]:
                end += 1
            if group == "middle" and end < len(forms[0]) and self._masks_once(end - 1):
                end += 1  # the tile's first reader in the same branch as its masking: 1-5 % on causal attention
            p.emit(f"if {block} < {split}:  # the blocks with full tiles")
            self._paste(_statements([line for op in forms[0][n:end] for line in op]), 1)
            p.emit("else:  # the rest: masked")
            self._paste(_statements([line for op in forms[1][n:end] for line in op]), 1)
            n = end

    def _masks_once(self, middle: int) -> bool:
        """Is op `middle` of the middle group (body[2:-1]) the finish of a tile the rest part masks once?"""
        op = self.parts[-1].body[2 + middle]
        return isinstance(op, T.AccFinish) and op.fill is not None

    def _paste(self, lines: list, deeper: int = 0) -> None:
        pad = "    " * (self.p.depth + deeper)
        self.p.lines.extend(pad + line for line in lines)

    def _forms(self, part: T.SerialLoop, block: str) -> _Forms:
        """Every group of `part`'s body printed in order with the loop variable bound to `block` (so that buffers
        are taken in the same order, and named alike, each time)."""
        p = self.p
        saved = (p.lines, p.depth, p.uses, list(p.loops), p.vars[self.var])
        p.uses, p.loops, p.vars[self.var] = {}, [part], block
        forms = _Forms()
        try:
            body = list(part.body)
            forms.issue = [self._capture(lambda: self._issue(body[0], body[1], block))]
            forms.middle = [self._capture(lambda: p._op(op)) for op in body[2:-1]]
            operand = []
            forms.convert = [self._capture(lambda: operand.append(self._convert(body[-1])))]
            forms.last = [self._capture(lambda: self._last(body[-1], operand[0], block))]
        finally:
            p.lines, p.depth, p.uses, p.loops, p.vars[self.var] = saved
        return forms

    def _capture(self, fn) -> list:
        p = self.p
        p.lines, p.depth = [], 0
        fn()
        return p.lines

    def _issue(self, init: T.AccInit, op: T.AccUpdate, block: str) -> None:
        """The first product of `block`, issued asynchronously into a cleared accumulator (the pass checked that its
        init is the sum's identity and that the loop finishes it)."""
        p = self.p
        shape = [a.size for a in init.tile.axes]
        acc = p.acc_alloc(init, shape)
        p.accs[init.stmt], p.acc_tiles[init.stmt], p.acc_depth[init.stmt] = (acc, shape), init.tile, len(p.loops)
        p.emit(f"# {p.text(init.stmt)}: block {block}, issued (the accumulator cleared by the product)")
        for ring in self._rings_of(self.first):
            p.emit(f"T.barrier_wait({ring.full}[{self._slot(block)}], {self._phase(block)})")
        a, b = (self._operand(op, n, block) for n in (0, 1))
        p.emit(f"T.wgmma_gemm({a}, {b}, {acc}{self._flags(op)}, clear_accum=True)")

    def _convert(self, op: T.AccUpdate) -> str:
        """The last product's register operand (P) into its fragment, once the previous product has read it."""
        st, load = op.staged[0], op.partial.lhs
        self.p.emit(f"# {load.rounds or load.reg.stmt} of this block in {st.dtype}, for {op.stmt}'s product in the "
                    f"next iteration")
        return self.p.register_operand(op, st, load)

    def _last(self, op: T.AccUpdate, operand: str, block: str) -> None:
        """The last sum of `block`: its rescaling, then its product issued asynchronously."""
        p = self.p
        if op.rescale is not None:
            p.rescale(op)
        acc, _ = p.accs[op.stmt]
        p.emit(f"# {op.stmt}: block {block}'s product, issued")
        for ring in self._rings_of(self.last):
            p.emit(f"T.barrier_wait({ring.full}[{self._slot(block)}], {self._phase(block)})")
        b = self._operand(op, 1, block)
        issue = f"T.wgmma_gemm({operand}, {b}, {acc}{self._flags(op)})"
        if not op.partial.absent_terms:
            p.emit(issue)
            return
        # the causal diagonal: where a masked lane meets an infinite or NaN element, the exact product instead,
        # after the first product is waited for (the wait for the last one below then has nothing to wait for)
        ta, tb = (st.transposed for st in op.staged)
        p.checked_product(op, operand, ta, b, tb, lambda: p.emit(issue), exact_first="T.wait_wgmma(0)",
                          barrier=f"T.sync_threads({CONSUMER_BARRIER}, {self._consumer_threads()})")

    def _operand(self, op: T.AccUpdate, n: int, block: str) -> str:
        x = (op.partial.lhs, op.partial.rhs)[n]
        if isinstance(x, T.Preloaded):
            return self.p.preloads[x.name]
        ring = self.rings.get((id(op), n)) or self._ring_like(op, n)
        return f"{ring.buffer}[{self._slot(block)}, :, :]"

    def _ring_like(self, op: T.AccUpdate, n: int) -> _Ring:
        """The ring of the same operand in the first part (the rest part's ops are other objects)."""
        for ring in self.rings.values():
            if ring.op.stmt == op.stmt and ring.n == n:
                return ring
        raise InternalError(f"operand {n} of {op.stmt} has no ring")

    @staticmethod
    def _flags(op: T.AccUpdate) -> str:
        ta, tb = (st.transposed for st in op.staged)
        flags = (", transpose_A=True" if ta else "") + (", transpose_B=True" if tb else "")
        return flags + (", policy=T.GemmWarpPolicy.FullRow" if op.partial.warp_rows else "")

    # ------------------------------------------------------------ indices

    def _lo(self) -> str:
        return self.p.index(simplify(self.parts[0].lower))

    def _hi(self) -> str:
        return self.p.index(simplify(self.parts[-1].upper))

    def _guard(self) -> str:
        """`lo < hi` where the loop may not run (nothing is loaded then, and nothing waited for); "" where it runs."""
        span = simplify(T.Bin("-", self.parts[-1].upper, self.parts[0].lower))
        if isinstance(span, T.Const) and span.value > 0:
            return ""
        return f"{self._lo()} < {self._hi()}"

    def _slot(self, block: str) -> str:
        """The ring slot of `block`: its step from the loop's first block, modulo the stages."""
        step = self._step(block)
        return str(int(step) % self.ws.stages) if step.isdigit() else f"{step} % {self.ws.stages}"

    def _phase(self, block: str) -> str:
        """The parity of the slot's round for `block` (an mbarrier completes once per round)."""
        step = self._step(block)
        return str(int(step) // self.ws.stages % 2) if step.isdigit() else f"({step} // {self.ws.stages}) % 2"

    def _step(self, block: str) -> str:
        """`block`'s step through the ring: from the loop's first block, after a persistent program's earlier
        tiles' blocks."""
        lo = self._lo()
        if lo == "0":
            step = block
        elif lo.isdigit() and block.isdigit():
            step = str(int(block) - int(lo))
        else:
            step = f"({block} - {lo})"
        if not self.walk:
            return step
        return self.walk.blocks_before() if step == "0" else f"({self.walk.blocks_before()} + {step})"

    def _blocks(self) -> str:
        """How many blocks the loop walks (the ring's steps of one tile)."""
        lo, hi = self._lo(), self._hi()
        return hi if lo == "0" else f"({hi} - {lo})"

    def _next(self, block: str) -> str:
        return str(int(block) + 1) if block.isdigit() else f"{block} + 1"

    @staticmethod
    def _box(load: T.Load, tile: T.Tile) -> list:
        size = {a.iter: a.size for a in tile.axes}
        return [size[x.name] for x in load.indices if isinstance(x, T.Var) and x.name in size]

    def _region(self, load: T.Load, tile: T.Tile, names: dict) -> str:
        """The operand's box in its tensor as TMA copies it: a slice along each tile axis, a batch index at its one
        value (TMA fills zeros where the box leaves the tensor: the pass allows only bounds as masks)."""
        from tdsl.backends.tilelang.emit import box_indices

        return f"{self.p.tensor(load.tensor)}[{', '.join(box_indices(load, tile, names))}]"


class PersistentWalk:
    """`launch(persistent=true)` of a kernel with a warp-specialised loop: one program per multiprocessor (at most
    one per tile), in which each role walks the grid's tiles, a stride of the launched programs apart, x fastest:

        with T.Kernel(T.min(tiles, programs), threads=...) as (pid,):     # programs: the launcher's SM count
            with T.ws(2):                             # and alike in the consumers
                walked[0] = 0; walked[1] = 0          # this program's tiles and key blocks so far
                for tile in T.serial(pid, tiles, T.min(tiles, programs)):
                    bx = tile % gx ...                # the grid variables of this tile
                    T.barrier_wait(Q_empty, walked[0] % 2 ^ 1)  # the consumers are done with the last tile's Q
                    ... the loop, its ring slots and phases counted from walked[1]
                    walked[0] += 1; walked[1] += blocks

    The ring and its phases run on across tiles, so the producer loads the next tile's first blocks while the
    consumers finish this one's last product and store its output.  An operand loaded once per tile (Q) gets an
    `empty` barrier the consumers arrive at after its last product."""

    def __init__(self, printer, kernel: T.TileKernel):
        self.p, self.kernel = printer, kernel
        if kernel.grid_group > 1:
            raise BackendError(f"{kernel.name}: launch(group=...) with persistent=true is not generated for a "
                               f"warp-specialised TileLang loop; drop group= (or persistent=true), or generate "
                               f"with --backend triton")
        self.pid = printer.local(("persistent", "pid"), "pid")
        self.programs = printer.local(("persistent", "programs"), "programs")
        self.walked = printer.local(("persistent", "walked"), "walked")
        self.empty: dict = {}  # a buffer loaded once per tile -> its empty barrier

    def tiles(self) -> str:
        extents = [self.p.index(simplify(e)) for axis in self.kernel.grid for e in axis.extents]
        return " * ".join(f"({x})" for x in extents) or "1"

    def launched(self) -> str:
        return f"T.min({self.tiles()}, {self.programs})"

    def head(self, threads: int) -> str:
        return f"with T.Kernel({self.launched()}, threads={threads}) as ({self.pid},):"

    def allocate(self, loaded_once: list) -> None:
        p = self.p
        p.allocs.append(f'{self.walked} = T.alloc_local((2,), "int32")  # the tiles and the key blocks this '
                        f'program has walked (launch persistent=true)')
        for buf, _, pre in loaded_once:
            name = p.local(("ws once empty", buf), f"{pre.load.tensor}_empty")
            p.allocs.append(f"{name} = T.alloc_barrier(arrive_count={32 * self.kernel.num_warps})  # "
                            f"{pre.load.tensor}: every consumer thread is done with it (the next tile may load it)")
            self.empty[buf] = name

    def enter(self) -> None:
        """Open the walk over this program's tiles and bind the grid variables of each."""
        p = self.p
        p.emit(f"{self.walked}[0] = 0")
        p.emit(f"{self.walked}[1] = 0")
        tile = p.local(("persistent", "tile"), "tile")
        p.emit(f"for {tile} in T.serial({self.pid}, {self.tiles()}, {self.launched()}):  # this program's tiles "
               f"(launch persistent=true)")
        p.depth += 1
        rest = tile
        axes = sorted(self.kernel.grid, key=lambda a: "xyz".index(a.axis))
        for n, axis in enumerate(axes):
            extent = " * ".join(f"({p.index(simplify(e))})" for e in axis.extents)
            pid = rest if n == len(axes) - 1 else f"({rest} % ({extent}))"
            p._bind_grid_vars(axis, pid)
            rest = f"({rest} // ({extent}))"

    def leave(self, guard: str, blocks: str) -> None:
        """Count the tile and its blocks (where the loop ran: its guard), and close the walk."""
        p = self.p
        if guard:
            p.emit(f"if {guard}:")
            p.depth += 1
        p.emit(f"{self.walked}[0] = {self.walked}[0] + 1")
        p.emit(f"{self.walked}[1] = {self.walked}[1] + {blocks}")
        if guard:
            p.depth -= 1
        p.depth -= 1

    def tile_phase(self) -> str:
        return f"{self.walked}[0] % 2"

    def blocks_before(self) -> str:
        return f"{self.walked}[1]"


def _statements(lines: list) -> list:
    """A branch's lines, with `pass` when they are only comments (a tile masked once in the other part)."""
    return lines if any(not line.lstrip().startswith("#") for line in lines) else lines + ["pass"]
