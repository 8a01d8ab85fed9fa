"""The schedule tree tdsl's primitives rewrite.

A tree is a sequence of nodes; a node is a `Loop` (one or more schedule
dimensions, each a quasi-affine function of every enclosed statement's
iterators, and an ordered body) or a `Leaf` (one statement).  This is the
isl schedule tree in a form primitives can edit by name:

    Loop            -> Band node (consecutive single-child loops of one
                       kind are printed and exported as one Band)
    body of n > 1   -> Sequence node with one Filter per child
    buffers / pipeline / bind / host -> Mark nodes

`time_maps` flattens the tree into one isl map per statement (the
"2d+1" encoding: child position, loop dims, child position, ...), which
is what the legality checks and the interpreter consume; `to_isl`
builds the corresponding `isl.Schedule`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import islpy as isl

from tdsl.compiler.model.isl_memo import by_text
from tdsl.compiler.model.program import KernelModel


@dataclass(eq=False)
class Loop:
    name: str
    exprs: dict[str, list[isl.PwAff]]  # statement -> this loop's dims as functions of its iterators
    body: list["Node"]
    kind: str = "point"  # "tile" for the outer loop of a split; bands group loops of one kind
    pipeline: Optional[int] = None  # software-pipeline stages
    bind: Optional[str] = None  # grid axis: "x" | "y" | "z"
    warps: Optional[int] = None  # launch configuration of the kernel this loop nest is (set on its top loop)
    host: bool = False  # run by the launcher on the host: each iteration launches the kernels of its body (`host`)
    group: Optional[int] = None  # launch order of the kernel's programs: grid.x in groups of this many (`launch`)
    persistent: bool = False  # one program per multiprocessor walks the kernel's tiles (`launch persistent=true`)
    # a pipelined loop run by a producer warp group and consumers that issue the first product of the next
    # iteration before the last group of this one (`pipeline(..., warp_specialize=true)`; TileLang only)
    warp_specialize: bool = False

    @property
    def n_dims(self) -> int:
        return len(next(iter(self.exprs.values())))


@dataclass(eq=False)
class Leaf:
    stmt: str


Node = Union[Loop, Leaf]


@dataclass(eq=False)
class Buffer:
    """An on-chip copy placed by cache_read / cache_write."""

    tensor: str
    scope: str
    at: Loop
    kind: str  # "read" | "write"
    stmts: list[str]  # the statements that use the copy
    dtype: Optional[str] = None  # the copy's element type (None: the program's dtypes, rounding kept)


@dataclass
class Tree:
    body: list[Node]
    buffers: list[Buffer] = field(default_factory=list)
    online: list[str] = field(default_factory=list)  # maxima whose readers may use the running value (`online`)

    # ------------------------------------------------------------ navigation

    def copy(self) -> "Tree":
        memo: dict[int, Loop] = {}

        def dup(node: Node) -> Node:
            if isinstance(node, Leaf):
                return Leaf(node.stmt)
            new = Loop(node.name, {s: list(d) for s, d in node.exprs.items()}, [dup(c) for c in node.body],
                       node.kind, node.pipeline, node.bind, node.warps, node.host, node.group, node.persistent,
                       node.warp_specialize)
            memo[id(node)] = new
            return new

        body = [dup(n) for n in self.body]
        buffers = [Buffer(b.tensor, b.scope, memo[id(b.at)], b.kind, list(b.stmts), b.dtype) for b in self.buffers]
        return Tree(body, buffers, list(self.online))

    def leaves(self) -> list[str]:
        return [leaf.stmt for leaf in walk_leaves(self.body)]

    def path(self, stmt: str) -> list[Loop]:
        """The loops enclosing a statement, outermost first."""
        return self.locate(stmt)[1]

    def positions(self, stmt: str) -> list[int]:
        """Child position at each level on the way to the statement (len = len(path) + 1)."""
        return self.locate(stmt)[0]

    def locate(self, stmt: str) -> tuple[list[int], list[Loop]]:
        found = _locate(self.body, stmt)
        if found is None:
            raise KeyError(stmt)
        return found

    def parent_body(self, node: Node) -> list[Node]:
        """The list that holds `node` (the root body or a loop's body)."""
        if any(n is node for n in self.body):
            return self.body
        for loop in walk_loops(self.body):
            if any(n is node for n in loop.body):
                return loop.body
        raise KeyError(node)

    def enclosing_loops(self, node: Node) -> list[Loop]:
        if isinstance(node, Leaf):
            return self.path(node.stmt)
        some = statements_under(node)[0]
        path = self.path(some)
        return path[: next(i for i, l in enumerate(path) if l is node)]

    # ------------------------------------------------------------ flattening to isl

    def time_maps(self, model: KernelModel, upto: Optional[Loop] = None, positions: bool = True) -> dict[str, isl.Map]:
        """One map per statement: instance -> time vector, all padded to one length.

        With `upto`, only the dims of the loops down to and including that
        loop (the statements under it) are kept, without child positions:
        two instances share an iteration of `upto` iff their prefixes are equal.
        """
        raw: dict[str, list[isl.PwAff]] = {}
        stmts = self.leaves() if upto is None else statements_under(upto)
        for stmt in stmts:
            domain = model.stmt(stmt).domain
            parts: list[isl.PwAff] = []
            pos, path = self.locate(stmt)
            for level, loop in enumerate(path):
                if positions:
                    parts.append(const_on(domain, pos[level]))
                parts.extend(loop.exprs[stmt])
                if loop is upto:
                    break
            else:
                if positions:
                    parts.append(const_on(domain, pos[-1]))
            raw[stmt] = parts
        width = max((len(p) for p in raw.values()), default=0)
        maps = {}
        for stmt, parts in raw.items():
            domain = model.stmt(stmt).domain
            parts = parts + [const_on(domain, 0)] * (width - len(parts))
            maps[stmt] = pw_affs_to_map(parts, domain)
        return maps

    def union_map(self, model: KernelModel) -> isl.UnionMap:
        umap = None
        for m in self.time_maps(model).values():
            um = isl.UnionMap.from_map(m)
            umap = um if umap is None else umap.union(um)
        return umap


# Legality checks rebuild the time maps of mostly unchanged trees after every step: the same expressions on the same
# domains, cached (compiler/model/isl_memo.py: a lookup costs microseconds, a build 0.2-1 ms).
@by_text(maxsize=4096)
def const_on(domain: isl.Set, value: int) -> isl.PwAff:
    return isl.PwAff.val_on_domain(domain, isl.Val.int_from_si(domain.get_ctx(), value))


def pw_affs_to_map(parts: list[isl.PwAff], domain: isl.Set) -> isl.Map:
    return _pw_affs_to_map(domain, *parts)


@by_text(maxsize=4096)
def _pw_affs_to_map(domain: isl.Set, *parts: isl.PwAff) -> isl.Map:
    result = None
    for pa in parts:
        m = isl.Map.from_pw_aff(pa)
        result = m if result is None else result.flat_range_product(m)
    if result is None:  # a statement outside any loop: a single point in time
        result = isl.Map.from_domain_and_range(domain, isl.Set.read_from_str(domain.get_ctx(), "{ [0] }"))
    return result.intersect_domain(domain)


def iterator_aff(domain: isl.Set, text: str) -> isl.PwAff:
    """A quasi-affine expression of a statement's iterators, e.g. 'i' or 'floor(k/32)'."""
    space = domain.get_space()
    name = space.get_tuple_name(isl.dim_type.set)
    names = [space.get_dim_name(isl.dim_type.set, i) for i in range(space.dim(isl.dim_type.set))]
    params = [space.get_dim_name(isl.dim_type.param, i) for i in range(space.dim(isl.dim_type.param))]
    prefix = f"[{', '.join(params)}] -> " if params else ""
    pa = isl.PwAff.read_from_str(domain.get_ctx(), f"{prefix}{{ {name}[{', '.join(names)}] -> [({text})] }}")
    return pa


# ---------------------------------------------------------------- walking


def walks_reduction(stmt, pa: isl.PwAff) -> bool:
    """Does a loop dim's expression for `stmt` use a reduction iterator (e.g. ko = floor(k/64))?

    Structural on purpose: a loop over k stays the reduction loop even when a small size gives it one
    iteration; the conditions of a piecewise placement (compute_at) are not part of the expression."""
    return uses_iterators(pa, len(stmt.lhs_iters), len(stmt.red_iters))


def uses_iterators(pa: isl.PwAff, first: int, count: int) -> bool:
    """Does a loop dim's expression (a function of a statement's iterators) use iterators first..first+count-1
    in any of its pieces?"""
    found = []
    pa.foreach_piece(lambda _set, aff: found.append(aff.involves_dims(isl.dim_type.in_, first, count)))
    return any(found)


def placed_at_one_value(loop: "Loop", stmt_name: str) -> bool:
    """Does the loop take one value for every instance of the statement (no piece of its placement uses an
    iterator)?  A reduction's accumulator then lives across the loop (compiler/lower/loops.py
    `_accumulation_loop`, compiler/analysis/buffer_planner.py `_final_level`)."""
    return not any(uses_iterators(pa, 0, pa.dim(isl.dim_type.in_)) for pa in loop.exprs[stmt_name])


def read_outside(model: KernelModel, tensor: str, loop: "Loop", stmts) -> bool:
    """Does one of `stmts` (a kernel's statements) outside `loop` read `tensor`?"""
    inside = set(statements_under(loop))
    return any(s not in inside and any(r.tensor == tensor for r in model.stmt(s).reads) for s in stmts)


def loop_walks_reduction(model: KernelModel, stmt_name: str, loop: "Loop") -> bool:
    """Does `loop` iterate over a reduction iterator of the statement (any of its dims, see `walks_reduction`)?"""
    stmt = model.stmt(stmt_name)
    return stmt.is_reduction and any(walks_reduction(stmt, pa) for pa in loop.exprs[stmt_name])


def accumulation_loop(model: KernelModel, stmt_name: str, loops: list, stmts, deeper=()) -> Optional["Loop"]:
    """The loop of `loops` (a statement's loops, outermost first) its reduction's accumulator lives across: the
    outermost unbound loop that walks its reduction iterators; else the outermost unbound loop at one value of
    which all its instances lie (a loop over key blocks that a small size leaves with one block) and that one of
    `stmts` (the kernel's statements) reads the result after -- unless one of `deeper` (the statement's serial
    loops inside `loops`, for a caller that passes a prefix of them) walks the reduction: the accumulator then
    lives across that loop, and the answer must not depend on how much of the path the caller passed.  None for
    a statement that is not a reduction.  The tile lowering keeps the accumulator there (compiler/lower/loops.py)
    and the buffer plan follows it."""
    if not model.stmt(stmt_name).is_reduction:
        return None
    around = [loop for loop in loops if not loop.bind and stmt_name in loop.exprs]
    for loop in around:
        if loop_walks_reduction(model, stmt_name, loop):
            return loop
    if any(not loop.bind and stmt_name in loop.exprs and loop_walks_reduction(model, stmt_name, loop)
           for loop in deeper):
        return None
    for loop in around:
        if placed_at_one_value(loop, stmt_name) and read_outside(model, stmt_name, loop, stmts):
            return loop
    return None


@dataclass
class Launch:
    """One kernel: a node of the tree, launched once per iteration of the host loops around it (outermost first;
    none: launched once).  Each top-level node is a kernel, except a host loop, whose body's nodes are."""

    node: Node
    host: list[Loop]


def launches(tree: "Tree") -> list[Launch]:
    """The kernels of a tree, in launch order (see `Launch`)."""
    def visit(node: Node, host: list[Loop]) -> list[Launch]:
        if isinstance(node, Loop) and node.host:
            return [launch for child in node.body for launch in visit(child, host + [node])]
        return [Launch(node, host)]

    return [launch for node in tree.body for launch in visit(node, [])]


def kernel_of(tree: "Tree") -> dict[str, int]:
    """Statement -> the index of the kernel (`launches`) that computes it."""
    return {s: k for k, launch in enumerate(launches(tree)) for s in statements_under(launch.node)}


def global_tensors(model: KernelModel, tree) -> set:
    """Tensors that live in global memory: inputs, outputs, and temporaries crossing kernels (or never read)."""
    kernel_of_ = kernel_of(tree)
    result = {t.name for t in model.tensors.values() if t.kind in ("input", "output")}
    for stmt in model.stmts:
        if model.tensors[stmt.name].kind != "temp":
            continue
        readers = [s.name for s in model.stmts if any(r.tensor == stmt.name for r in s.reads)]
        if not readers or any(kernel_of_.get(r) != kernel_of_.get(stmt.name) for r in readers):
            result.add(stmt.name)
    return result


def walk_loops(body: list[Node]):
    for node in body:
        if isinstance(node, Loop):
            yield node
            yield from walk_loops(node.body)


def walk_leaves(body: list[Node]):
    for node in body:
        if isinstance(node, Leaf):
            yield node
        else:
            yield from walk_leaves(node.body)


def statements_under(node: Node) -> list[str]:
    if isinstance(node, Leaf):
        return [node.stmt]
    return [leaf.stmt for leaf in walk_leaves(node.body)]


def _locate(body: list[Node], stmt: str) -> Optional[tuple[list[int], list[Loop]]]:
    for index, node in enumerate(body):
        if isinstance(node, Leaf):
            if node.stmt == stmt:
                return [index], []
        else:
            inner = _locate(node.body, stmt)
            if inner is not None:
                return [index] + inner[0], [node] + inner[1]
    return None


def initial_tree(model: KernelModel) -> Tree:
    """Program order: each statement in its own loop nest over its iterators (reduction ones innermost); the
    statements of a `for` block share one loop over the block's iterator, around their nests in block order."""
    entries = [(stmt, stmt.order or [n]) for n, stmt in enumerate(model.stmts)]
    return Tree(_program_nodes(entries, 0))


def _program_nodes(entries: list, level: int) -> list[Node]:
    """The nodes of one body: `entries` (statement, program-order positions) in source order, at block depth
    `level`; consecutive statements of one block (the same position at this level) become one shared loop."""
    nodes: list[Node] = []
    k = 0
    while k < len(entries):
        stmt, order = entries[k]
        if len(stmt.loops) == level:
            nodes.append(_statement_nest(stmt))
            k += 1
            continue
        group = [e for e in entries[k:] if len(e[0].loops) > level and e[1][level] == order[level]]
        loop = stmt.loops[level]
        exprs = {s.name: [iterator_aff(s.domain, loop)] for s, _ in group}
        nodes.append(Loop(loop, exprs, _program_nodes(group, level + 1)))
        k += len(group)
    return nodes


def _statement_nest(stmt) -> Node:
    node: Node = Leaf(stmt.name)
    for it in reversed([it for it in stmt.iters if it not in stmt.loops]):
        node = Loop(it, {stmt.name: [iterator_aff(stmt.domain, it)]}, [node])
    return node
