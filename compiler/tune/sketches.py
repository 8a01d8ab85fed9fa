"""Sketch rules: the shape of a kernel's search space, read off its statements.

Every statement gets a role from its form, and each role has one sketch -- a schedule template whose
numbers (tile sizes, stages, warps) and choices (fuse the epilogue or not) are parameters:

* **product** -- `C = sum(k) X[i, k] * Y[k, j]` (the form `placement.matrix_operands` recognises): a tile
  of BM x BN outputs per program, the reduction split by BK, both operands staged in shared memory at the
  K step, the accumulator in registers, `pipeline` stages, warps, which tile axis walks the grid first,
  the launch order (linear, or grid.x in groups of 8); its pointwise consumers either follow each output
  tile (`reverse_compute_at`, the epilogue) or run as kernels of their own; a pointwise producer of an
  operand is either inlined into the product or a kernel.
* **elementwise** -- a statement without reduction whose pointwise producers are temporaries only it
  reads: those producers inlined or computed at its tile; a TM x TN tile (the last two iterators), warps.
* **rows** -- the same, when a producer is a row statistic (its iterators a prefix of the root's, as the
  sum of squares of RMSNorm or the maximum of softmax): every producer computed at the row, one row per
  program, warps.
* **single** -- a statement nothing else fuses with (a row reduction feeding several kernels): its outer
  iterators on the grid, warps.

A statement inside a `for` block, a recurrence (reading its own tensor) or a product with a batch iterator
has no rule yet: `sketch` raises `NoSketch` naming it, and the tuner says so instead of guessing.

Parameter values are powers of two within the (padded) extent of the loop they size: the space the
backends' tile rules allow.  `Sketch.steps(choice)` turns one choice of every parameter into the
schedule steps, in the order a person would write them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.placement import matrix_operands, smallest_dot_tile
from tdsl.compiler.model.online import NotOnline, online_form
from tdsl.compiler.model.program import KernelModel, Stmt, collect_accesses
from tdsl.compiler.schedule.primitives.common import fresh_loop_name
from tdsl.compiler.lower.tile_rules import lanes, too_many_elements
from tdsl.compiler.schedule.schedule import Step

PRODUCT_TILES = (16, 32, 64, 128, 256)
PRODUCT_K = (16, 32, 64, 128)
PRODUCT_STAGES = (1, 2, 3, 4, 5)
PRODUCT_WARPS = (4, 8)
PRODUCT_GROUPS = (1, 8)  # launch order: linear, or grid.x in groups of 8 (L2 rasterisation)
ROW_TILES = (1, 2, 4, 8, 16, 32)
COLUMN_TILES = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
WARPS = (1, 2, 4, 8, 16)
UNKNOWN_EXTENT = 4096  # a `param` size: tiles are drawn as if it were this large


class NoSketch(TdslError):
    """The kernel has a statement no sketch rule covers."""


@dataclass(frozen=True)
class Param:
    name: str  # "<statement>.<knob>", e.g. "C.BM"
    values: tuple  # the domain in order: neighbours in the tuple are neighbours in the search
    when: Optional[tuple] = None  # (param, value): this knob exists only under that choice of another one
    order_only: bool = False  # changes only the order programs run in, not what each computes (the tuner
                              # measures every combination of these around its fastest candidate)

    def active(self, choice: dict) -> bool:
        return self.when is None or choice.get(self.when[0]) == self.when[1]


@dataclass
class Group:
    """Statements scheduled together by one rule, around the statement that owns the group's loops."""

    rule: str  # product | elementwise | rows | single
    root: str
    members: list[str]
    params: list[Param]
    build: Callable[[dict], list[Step]]  # a choice of every parameter -> the group's steps

    def size(self) -> int:
        plain = [p for p in self.params if p.when is None]
        switches = {p.when[0] for p in self.params if p.when is not None}
        n = 1
        for p in plain:
            if p.name not in switches:
                n *= len(p.values)
        branches = 1
        for name in switches:
            switch = next(p for p in plain if p.name == name)
            branches *= sum(_product(len(q.values) for q in self.params if q.when == (name, v))
                            for v in switch.values)
        return n * branches


@dataclass
class Sketch:
    kernel: str
    groups: list[Group]

    @property
    def params(self) -> list[Param]:
        return [p for g in self.groups for p in g.params]

    def steps(self, choice: dict) -> list[Step]:
        return [step for g in self.groups for step in g.build(choice)]

    def size(self) -> int:
        """Distinct choices: a conditional knob multiplies only the branch it belongs to."""
        n = 1
        for g in self.groups:
            n *= g.size()
        return n


# ---------------------------------------------------------------- the kernel's dataflow


@dataclass
class Flow:
    """Who reads whom, and each statement's loop extents."""

    model: KernelModel
    readers: dict = field(default_factory=dict)  # tensor -> statements reading it, in program order
    extents: dict = field(default_factory=dict)  # (statement, iterator) -> number of iterations
    # (statement, iterator) whose loop cannot be one whole tile, so the sketches walk it in segments: its number
    # of iterations is a run-time size (a `param` tuned at one value: a tile of no fixed size, which no backend
    # compiles), or more lanes than a tile may have (a row of 100,000: probe CC of the 30th session)
    segmented: set = field(default_factory=set)

    @classmethod
    def of(cls, model: KernelModel, free: Optional[KernelModel] = None) -> "Flow":
        """`free`: the same kernel with the program's run-time sizes unbound (None: they are all bound)."""
        flow = cls(model)
        for s in model.stmts:
            for tensor in dict.fromkeys(a.tensor for a in s.reads):
                flow.readers.setdefault(tensor, []).append(s.name)
            for k, name in enumerate(s.iters):
                flow.extents[s.name, name] = _extent(s, k)
        for s in (free.stmts if free is not None else []):
            flow.segmented.update((s.name, name) for k, name in enumerate(s.iters) if _extent(s, k) == UNKNOWN_EXTENT)
        flow.segmented.update(key for key, extent in flow.extents.items() if too_many_elements(lanes(extent)))
        return flow

    def stmt(self, name: str) -> Stmt:
        return self.model.stmt(name)

    def is_temp(self, name: str) -> bool:
        return self.model.tensors[name].kind == "temp"

    def producer(self, tensor: str) -> Optional[Stmt]:
        return next((s for s in self.model.stmts if s.name == tensor), None)

    def in_use(self, stmt: Stmt) -> set:
        """The names a loop made for `stmt` must avoid: its iterators, and the program's sizes and tensors (a split
        whose new loop is named like a size is refused)."""
        return set(stmt.iters) | set(self.model.sizes) | set(self.model.tensors)

    def operands(self, stmt: Stmt) -> Optional[tuple]:
        """The two operand reads when `stmt` is a matrix product (`placement.matrix_operands`), else None."""
        return matrix_operands(stmt, self.model.sizes)


def _product(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def _extent(stmt: Stmt, position: int) -> int:
    """Iterations of one iterator of a statement: its constant upper bound + 1, else UNKNOWN_EXTENT."""
    top = stmt.domain.dim_max(position)
    pieces = top.get_pieces()
    if len(pieces) == 1 and pieces[0][1].is_cst():
        return int(pieces[0][1].get_constant_val().to_python()) + 1
    return UNKNOWN_EXTENT


def _reads_at_identity(reader: Stmt, tensor: str, iters: list[str]) -> bool:
    """Every read of `tensor` in `reader` is `tensor[iters...]`: the element the reader's own instance names."""
    nodes = [a for a in collect_accesses(reader.value) if a.tensor == tensor]
    return bool(nodes) and all([getattr(x, "name", None) for x in a.indices] == iters for a in nodes)


def _reads_row(consumer: Stmt, producer: Stmt) -> bool:
    """The consumer reads the producer at its own outer iterators: the producer's element is one instance of
    the consumer (pointwise) or one of its rows (a row statistic)."""
    return _reads_at_identity(consumer, producer.name, consumer.iters[:len(producer.lhs_iters)])


# ---------------------------------------------------------------- the rules


def sketch(model: KernelModel, free: Optional[KernelModel] = None) -> Sketch:
    """The kernel's statements partitioned into groups, each with its rule's template (NoSketch if one has none).
    `free`: the kernel with its run-time sizes unbound, so that no loop of run-time length is left whole."""
    flow = Flow.of(model, free)
    grouped: set = set()
    groups: list[Group] = []
    for s in model.stmts:
        if s.reduce_op == "max" and s.combine == "online":
            flash = _flash_group(flow, s, grouped)
            if flash is not None:
                groups.append(flash)
    for s in model.stmts:
        if s.name not in grouped:
            _check_supported(flow, s)
    for s in model.stmts:
        if flow.operands(s) is not None and s.name not in grouped:
            groups.append(_product_group(flow, s, grouped))
    for s in reversed(model.stmts):
        if s.name not in grouped:
            groups.append(_root_group(flow, s, grouped))
    order = {s.name: k for k, s in enumerate(model.stmts)}
    groups.sort(key=lambda g: order[g.root])
    result = Sketch(model.name, groups)
    result.steps({p.name: p.values[0] for p in result.params})  # a template that cannot build says so now
    return result


def _check_supported(flow: Flow, s: Stmt) -> None:
    if s.loops:
        raise NoSketch(f"statement {s.name} is inside a 'for' block: no sketch rule schedules time loops yet; "
                       f"write its schedule by hand")
    if any(a.tensor == s.name for a in s.reads):
        raise NoSketch(f"statement {s.name} reads its own tensor (a recurrence): no sketch rule covers it yet; "
                       f"write its schedule by hand")
    operands = flow.operands(s)
    if operands is not None and len(s.lhs_iters) != 2:
        raise NoSketch(f"statement {s.name} is a batched matrix product: no sketch rule tiles its batch axes "
                       f"yet; write its schedule by hand")
    if not s.lhs_iters:
        raise NoSketch(f"statement {s.name} has no output iterator (a scalar): no sketch rule covers it")


def _product_group(flow: Flow, s: Stmt, grouped: set) -> Group:
    """Multi-level tiling of a matrix product, its operands staged, its pointwise consumers as the epilogue."""
    lhs, rhs = flow.operands(s)
    i = next(x.name for x in lhs.indices if x.name in s.lhs_iters)
    j = next(x.name for x in rhs.indices if x.name in s.lhs_iters)
    k = s.red_iters[0]
    epilogue = _epilogue(flow, s)
    inlinable = [t for t in _inlinable_operands(flow, s) if t not in grouped]  # not another product's epilogue
    grouped.update([s.name, *epilogue, *inlinable])
    taken = flow.in_use(s)
    io, jo, ii, jj, ko, kk = (_fresh(base, taken) for base in (i + "o", j + "o", i + "i", j + "i", k + "o", k + "i"))
    staged = [a.tensor for a in (lhs, rhs)]
    least_k = smallest_dot_tile([flow.model.tensors[t].dtype for t in staged])[1]
    name = s.name
    params = [
        Param(f"{name}.BM", _tiles(PRODUCT_TILES, flow.extents[name, i])),
        Param(f"{name}.BN", _tiles(PRODUCT_TILES, flow.extents[name, j])),
        # a K step too short for the matrix unit (8-bit operands need 32) would be a vector product
        Param(f"{name}.BK", _tiles(tuple(v for v in PRODUCT_K if v >= least_k), flow.extents[name, k])),
        Param(f"{name}.stages", PRODUCT_STAGES),
        Param(f"{name}.warps", PRODUCT_WARPS),
        # which tile axis is grid.x: consecutive programs share that operand
        Param(f"{name}.grid", ("ij", "ji"), order_only=True),
        Param(f"{name}.group", PRODUCT_GROUPS, order_only=True),
        # one program per multiprocessor walking the tiles (Triton; on the H200 the GEMM's missing 2-8 %)
        Param(f"{name}.persistent", (False, True), order_only=True),
    ]
    if epilogue:
        params.append(Param(f"{name}.epilogue", ("fused", "separate")))
        params += _tile_params(flow, flow.stmt(epilogue[-1]), f"{name}.epilogue_", when=(f"{name}.epilogue", "separate"))
    if inlinable:
        params.append(Param(f"{name}.operands", ("kernels", "inlined")))
        for t in inlinable:
            params += _tile_params(flow, flow.stmt(t), f"{t}.", when=(f"{name}.operands", "kernels"))

    def build(c: dict) -> list[Step]:
        steps = []
        if c.get(f"{name}.operands") == "inlined":
            steps += [Step("compute_inline", (t,), {}) for t in inlinable]
        else:
            for t in inlinable:
                steps += _grid_steps(flow, flow.stmt(t), c, f"{t}.")
        steps += [
            Step("tile", (f"{name}.{i}", f"{name}.{j}", c[f"{name}.BM"], c[f"{name}.BN"]), {}, (io, jo, ii, jj)),
            Step("split", (f"{name}.{k}", c[f"{name}.BK"]), {}, (ko, kk)),
            Step("reorder", (name, io, jo, ko, ii, jj, kk), {}),
        ]
        if c.get(f"{name}.epilogue") == "fused":
            steps += [Step("reverse_compute_at", (e, f"{name}.{jo}"), {}) for e in epilogue]
        operands = staged if c.get(f"{name}.operands") != "inlined" else [t for t in staged if t not in inlinable]
        steps += [Step("cache_read", (t, "shared"), {"at": f"{name}.{ko}"}) for t in dict.fromkeys(operands)]
        steps.append(Step("cache_write", (name, "register"), {"at": f"{name}.{jo}"}))
        if c[f"{name}.stages"] > 1:
            steps.append(Step("pipeline", (f"{name}.{ko}",), {"stages": c[f"{name}.stages"]}))
        x, y = (io, jo) if c[f"{name}.grid"] == "ij" else (jo, io)
        steps += [Step("bind", (f"{name}.{x}", "grid.x"), {}), Step("bind", (f"{name}.{y}", "grid.y"), {})]
        group = {"group": c[f"{name}.group"]} if c[f"{name}.group"] > 1 else {}
        persistent = {"persistent": True} if c.get(f"{name}.persistent") else {}
        steps.append(Step("launch", (name,), {"warps": c[f"{name}.warps"], **group, **persistent}))
        separate = epilogue if c.get(f"{name}.epilogue") == "separate" else []
        for e in separate:
            steps += _grid_steps(flow, flow.stmt(e), c, f"{name}.epilogue_")
        return steps

    return Group("product", name, [*inlinable, name, *epilogue], params, build)


def _flash_group(flow: Flow, m: Stmt, grouped: set) -> Optional[Group]:
    """Attention in its one-pass form: the maximum m declared `combine online`, its exponentials P (and the
    derived exponentials after them, such as a bf16 rounding of P that only the product reads), the row sum l
    and the product U = P·V all computed per key block of the sum's loop (`online(m)`, FlashAttention), the
    scores S = Q·Kᵀ per key block before them and the normalisation O = U / l after the last one.

    None unless the program has exactly that shape (then its statements fall to the other rules)."""
    try:
        form = online_form(flow.model, m.name)
    except NotOnline:
        return None
    values = flow.producer(form.values)
    sums = [flow.stmt(a) for a in form.accumulators]
    row_sums = [x for x in sums if flow.operands(x) is None]
    products = [x for x in sums if flow.operands(x) is not None]
    if values is None or flow.operands(values) is None or len(form.exponentials) != 1 \
            or len(row_sums) != 1 or len(products) != 1:
        return None
    l, u, p = row_sums[0], products[0], flow.stmt(form.exponentials[0])
    finals = flow.readers.get(u.name, [])
    if len(finals) != 1 or not _reads_at_identity(flow.stmt(finals[0]), u.name, flow.stmt(finals[0]).lhs_iters):
        return None
    o = flow.stmt(finals[0])
    derived = [flow.stmt(d) for d in form.derived]
    members = [values.name, m.name, p.name, *(d.name for d in derived), l.name, u.name, o.name]
    if len(l.lhs_iters) < 1 or len(l.red_iters) != 1 or any(set(flow.readers.get(x, [])) - set(members)
                                                              for x in members[:-1]):
        return None
    grouped.update(members)
    batch, (i,), (j,) = l.lhs_iters[:-1], l.lhs_iters[-1:], l.red_iters
    taken = flow.in_use(l)
    bh, qo, qi, ko, kk = (_fresh(base, taken) for base in ("".join(batch) or "bh", i + "o", i + "i", j + "o", j + "i"))
    name = l.name
    params = [
        Param(f"{name}.BQ", _tiles((64, 128), flow.extents[name, i])),
        Param(f"{name}.BK", _tiles((32, 64, 128), flow.extents[name, j])),
        Param(f"{name}.warps", (4, 8)),
        Param(f"{name}.stages", (1, 2, 3, 4)),
    ]

    def build(c: dict) -> list[Step]:
        steps = [Step("online", (m.name,), {})]
        outer = list(batch)
        if len(batch) > 1:
            steps.append(Step("fuse", tuple(f"{name}.{b}" for b in batch), {}, (bh,)))
            outer = [bh]
        steps += [
            Step("split", (f"{name}.{i}", c[f"{name}.BQ"]), {}, (qo, qi)),
            Step("split", (f"{name}.{j}", c[f"{name}.BK"]), {}, (ko, kk)),
            Step("reorder", (name, *outer, qo, ko, qi, kk), {}),
        ]
        steps += [Step("bind", (f"{name}.{x}", f"grid.{axis}"), {}) for x, axis in zip(outer, ("y",))]
        steps += [
            Step("bind", (f"{name}.{qo}", "grid.x"), {}),
            Step("compute_at", (p.name, f"{name}.{ko}"), {}),
            *(Step("reverse_compute_at", (d.name, f"{name}.{ko}"), {}) for d in derived),
            Step("reverse_compute_at", (u.name, f"{name}.{ko}"), {}),
            Step("compute_at", (m.name, f"{name}.{ko}"), {}),
            Step("compute_at", (values.name, f"{name}.{ko}"), {}),
            Step("reverse_compute_at", (o.name, f"{name}.{qo}"), {}),
            Step("launch", (name,), {"warps": c[f"{name}.warps"]}),
        ]
        if c[f"{name}.stages"] > 1:
            steps.append(Step("pipeline", (f"{name}.{ko}",), {"stages": c[f"{name}.stages"]}))
        return steps

    return Group("flash", name, members, params, build)


def _epilogue(flow: Flow, s: Stmt) -> list[str]:
    """The chain of statements after a product, each the only reader of the previous one and reading it at its
    own output element (other tensors it reads come from earlier kernels or the inputs)."""
    chain, last = [], s
    while True:
        readers = flow.readers.get(last.name, [])
        if len(readers) != 1:
            return chain
        nxt = flow.stmt(readers[0])
        if (flow.operands(nxt) is not None or nxt.red_iters or nxt.lhs_iters != s.lhs_iters
                or not _reads_at_identity(nxt, last.name, nxt.lhs_iters)):
            return chain
        chain.append(nxt.name)
        last = nxt


def _inlinable_operands(flow: Flow, s: Stmt) -> list[str]:
    """Operand temporaries made pointwise from other tensors and read by nothing but this product; once each (both
    operands of covariance's `D[k, i] * D[k, j]` are D: inlined or tiled twice, every candidate was refused)."""
    out = []
    for a in flow.operands(s):
        p = flow.producer(a.tensor)
        if p is not None and flow.is_temp(p.name) and not p.red_iters and flow.readers.get(p.name) == [s.name] \
                and p.name not in out:
            out.append(p.name)
    return out


def _root_group(flow: Flow, root: Stmt, grouped: set) -> Group:
    """A statement and the temporaries only it (or they) read, scheduled around it."""
    members = _fusable_producers(flow, root, grouped)
    grouped.update([root.name, *members])
    if not members:
        rule = "single"
    elif any(flow.stmt(m).red_iters or len(flow.stmt(m).lhs_iters) < len(root.lhs_iters) for m in members):
        rule = "rows"
    else:
        rule = "elementwise"
    name = root.name
    if rule == "rows":
        return _rows_group(flow, root, members)
    if rule == "single" and root.red_iters:
        segments = _segments(flow, root, root.red_iters)
        params = [Param(f"{name}.warps", WARPS), *segments.params]

        def build(c: dict) -> list[Step]:
            return (segments.steps(c) + _bind_outer(root, root.lhs_iters)
                    + [Step("launch", (name,), {"warps": c[f"{name}.warps"]})])

        return Group(rule, name, [name], params, build)
    params = _tile_params(flow, root, f"{name}.")
    if members:
        params.append(Param(f"{name}.producers", ("inlined", "computed_at")))

    def build(c: dict) -> list[Step]:
        inline = c.get(f"{name}.producers") == "inlined"
        steps = [Step("compute_inline", (m,), {}) for m in members] if inline else []
        tile_steps, outer = _tile_steps(flow, root, c, f"{name}.")
        steps += tile_steps
        if not inline:
            steps += [Step("compute_at", (m, f"{name}.{outer}"), {}) for m in reversed(members)]
        return steps + _tile_binds(flow, root, c, f"{name}.")

    return Group(rule, name, [name, *members], params, build)


def _rows_group(flow: Flow, root: Stmt, members: list[str]) -> Group:
    """Row statistics and their inputs computed per row block of the root: R rows per program, walked one row
    at a time (serial) or as one R-row tile (block); the root's columns whole or in segments."""
    name, iters = root.name, root.lhs_iters
    params = [Param(f"{name}.warps", WARPS)]
    column_free = (name, iters[-1]) in flow.segmented
    if len(iters) >= 2:
        row_knob = Param(f"{name}.rows", _tiles(ROW_TILES[:5], flow.extents[name, iters[-2]]))
        columns = _tiles(COLUMN_TILES[3:], flow.extents[name, iters[-1]])
        # The last column tile covers the tuned row: at a fixed length that is the whole row; where the whole row
        # is no tile (a run-time length, or a row longer than a tile), that segment takes its place.
        segments = columns if column_free else ("whole", *columns[:-1])
        params = [row_knob, *[Param(f"{name}.rows_at", ("serial", "block"), (row_knob.name, r))
                              for r in row_knob.values[1:]],
                  Param(f"{name}.segment", segments), *params]
    columns_of = {m: _column(flow.stmt(m), len(iters)) for m in members}
    members_free = [(m, it) for m, it in columns_of.items() if (m, it) in flow.segmented]
    taken = flow.in_use(root)
    row = iters[-2] if len(iters) >= 2 else iters[0]
    ro, ri = _fresh(row + "o", taken), _fresh(row + "i", taken)
    co, ci = _fresh(iters[-1] + "o", taken), _fresh(iters[-1] + "i", taken)

    def build(c: dict) -> list[Step]:
        rows = c.get(f"{name}.rows", 1)
        steps, at, grid_row = [], row, row
        if rows > 1:
            steps.append(Step("split", (f"{name}.{row}", rows), {}, (ro, ri)))
            at, grid_row = (ro if c[f"{name}.rows_at"] == "block" else ri), ro
        steps += [Step("compute_at", (m, f"{name}.{at}"), {}) for m in reversed(members)]
        segment = c.get(f"{name}.segment", "whole")
        if segment != "whole":
            steps.append(Step("split", (f"{name}.{iters[-1]}", segment), {}, (co, ci)))
            steps += [_split_fresh(flow, flow.stmt(m), it, segment) for m, it in members_free]
        outer = [grid_row if it == row else it for it in (iters[:-1] or iters)]
        return steps + _bind_outer(root, outer) + [Step("launch", (name,), {"warps": c[f"{name}.warps"]})]

    return Group("rows", name, [name, *members], params, build)


def _column(stmt: Stmt, rank: int) -> Optional[str]:
    """The loop along a row of a row group's member (the root has `rank` iterators): the last iterator of one
    shaped like the root, the one reduction of a row statistic, else None (a row's scalar: no such loop)."""
    if len(stmt.lhs_iters) == rank:
        return stmt.lhs_iters[-1]
    return stmt.red_iters[0] if len(stmt.red_iters) == 1 else None


def _split_fresh(flow: Flow, stmt: Stmt, it: str, factor: int) -> Step:
    """`split(stmt.it, factor)` into loops named apart from the statement's iterators and the program's names."""
    taken = flow.in_use(stmt)
    return Step("split", (f"{stmt.name}.{it}", factor), {}, (_fresh(it + "o", taken), _fresh(it + "i", taken)))


@dataclass
class _Segments:
    """Segments of a statement's loops that cannot be whole tiles: one knob and one split per loop."""

    flow: Flow
    stmt: Stmt
    loops: list
    params: list

    def steps(self, choice: dict) -> list[Step]:
        return [_split_fresh(self.flow, self.stmt, it, choice[f"{self.stmt.name}.{it}_segment"])
                for it in self.loops]


def _segments(flow: Flow, stmt: Stmt, iters: list) -> _Segments:
    """A loop that cannot be one whole tile (`Flow.segmented`) is walked in segments of a fixed length, drawn
    like a row group's (the last covers the tuned length)."""
    loops = [it for it in iters if (stmt.name, it) in flow.segmented]
    params = [Param(f"{stmt.name}.{it}_segment", _tiles(COLUMN_TILES[3:], flow.extents[stmt.name, it]))
              for it in loops]
    return _Segments(flow, stmt, loops, params)


def _fusable_producers(flow: Flow, root: Stmt, grouped: set) -> list[str]:
    """Temporaries (not products) that only the root or other such temporaries read, each read at its reader's
    outer iterators and shaped like the root or its rows; found back from the root, in program order."""
    members: list[str] = []
    frontier = [root]
    shapes = {len(root.lhs_iters), len(root.lhs_iters) - 1}
    while frontier:
        consumer = frontier.pop()
        for a in consumer.reads:
            p = flow.producer(a.tensor)
            if p is None or p.name in grouped or p.name in members or p.name == root.name:
                continue
            if not flow.is_temp(p.name) or flow.operands(p) is not None or len(p.lhs_iters) not in shapes:
                continue
            if not set(flow.readers.get(p.name, [])) <= {root.name, consumer.name, *members}:
                continue
            if not _reads_row(consumer, p):
                continue
            members.append(p.name)
            frontier.append(p)
    order = {s.name: k for k, s in enumerate(flow.model.stmts)}
    return sorted(members, key=order.__getitem__)


def _tile_params(flow: Flow, root: Stmt, prefix: str, when: Optional[tuple] = None) -> list[Param]:
    iters = root.lhs_iters
    cols = Param(f"{prefix}TN", _tiles(COLUMN_TILES, flow.extents[root.name, iters[-1]]), when)
    params = [cols, Param(f"{prefix}warps", WARPS, when)]
    if len(iters) >= 2:
        params.insert(0, Param(f"{prefix}TM", _tiles(ROW_TILES, flow.extents[root.name, iters[-2]]), when))
    return params


def _tile_loops(flow: Flow, root: Stmt) -> list[tuple[str, str, str]]:
    """(iterator, outer loop, inner loop) of each tiled iterator of an elementwise root: its last two (one)."""
    taken = flow.in_use(root)
    tiled = root.lhs_iters[-2:]
    outer = [_fresh(it + "o", taken) for it in tiled]
    inner = [_fresh(it + "i", taken) for it in tiled]
    return list(zip(tiled, outer, inner))


def _tile_steps(flow: Flow, root: Stmt, c: dict, prefix: str) -> tuple[list[Step], str]:
    """The tile (or split) of the root's last one or two iterators; returns the steps and the outer column loop."""
    loops, name = _tile_loops(flow, root), root.name
    factors = [c[prefix + knob] for knob in ("TM", "TN")[-len(loops):]]
    primitive = "tile" if len(loops) == 2 else "split"
    results = tuple(o for _, o, _ in loops) + tuple(i for _, _, i in loops)
    step = Step(primitive, (*(f"{name}.{it}" for it, _, _ in loops), *factors), {}, results)
    return [step], loops[-1][1]


def _tile_binds(flow: Flow, root: Stmt, c: dict, prefix: str) -> list[Step]:
    """Grid binds of a tiled root: the row tiles on grid.x, column tiles on grid.y, a third outer axis on grid.z."""
    loops, name = _tile_loops(flow, root), root.name
    binds = [Step("bind", (f"{name}.{outer}", f"grid.{axis}"), {}) for (_, outer, _), axis in zip(loops, "xy")]
    if len(loops) == 2:
        binds += _bind_outer(root, root.lhs_iters[:-2], axes=("z",))
    return binds + [Step("launch", (name,), {"warps": c[prefix + "warps"]})]


def _grid_steps(flow: Flow, s: Stmt, c: dict, prefix: str) -> list[Step]:
    """A statement of the product's epilogue run as a kernel of its own, tiled as an elementwise root."""
    steps, _ = _tile_steps(flow, s, c, prefix)
    return steps + _tile_binds(flow, s, c, prefix)


def _bind_outer(stmt: Stmt, iters: list[str], axes: tuple = ("x", "y", "z")) -> list[Step]:
    if len(iters) > len(axes):
        raise NoSketch(f"statement {stmt.name} has {len(iters)} outer iterators for {len(axes)} grid axes")
    # The innermost outer iterator walks grid.x (consecutive programs, neighbouring rows).
    return [Step("bind", (f"{stmt.name}.{it}", f"grid.{axis}"), {}) for it, axis in zip(reversed(iters), axes)]


def _tiles(values: tuple, extent: int) -> tuple:
    """The values not larger than the extent padded to a power of two (at least the smallest one)."""
    padded = 1 << max(0, (extent - 1).bit_length())
    kept = tuple(v for v in values if v <= padded)
    return kept or values[:1]


def _fresh(base: str, taken: set) -> str:
    """A loop name from `base` that is not in `taken` (`Flow.in_use`: a program may name an iterator or a size
    `io`), taken from now on (the schedule primitives' own `fresh_loop_name`)."""
    name = fresh_loop_name(base, taken)
    taken.add(name)
    return name
