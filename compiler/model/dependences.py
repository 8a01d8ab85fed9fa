"""Memory-based dependences between statement instances, computed with isl.

A dependence `S(x) -> T(y)` says that instance S(x) runs before T(y) in the
original program and both touch the same tensor element, at least one of
them writing it -- or, for anti and output dependences, the same location of
its storage: a folded tensor (`fold_storage`) keeps several elements in one
place, and an output stored in an input (`store_in`) replaces the input's
values.  A schedule is legal when every dependence still points forward
under it.

Kinds:
* `flow`   S writes, T reads   (T needs S's value)
* `anti`   S reads, T writes   (T must not overwrite before S has read)
* `output` S writes, T writes  (the later write must stay later)
* `reduction` a reduction's self-dependence: its updates of one element
  combine in the declared order.  It depends on the reduction's `combine`
  policy (see `policy` and docs/legality.md#combine-policies):

  - `strict` (the default): every pair of updates of one element, in
    program order;
  - `segments(N)`: only pairs in the same segment (the first reduction
    iterator's range cut into N contiguous pieces, each summed in order;
    the N partial results are then added in segment order, whatever order
    the segments ran in);
  - `reassoc` and `deterministic`: none -- the program allows any order and
    grouping of its terms (`deterministic` additionally forbids atomics and
    segment counts that depend on a problem size, checked by the steps that
    would introduce them).

  A `max` or `min` reduction has none under any policy: its result is the
  same bits in every order and grouping (`order_independent`), so there is
  no order to protect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import islpy as isl

from tdsl.compiler.model import reduce_ops
from tdsl.compiler.model.program import Access, KernelModel, Stmt, start_reads
from tdsl.compiler.model.storage import located, storage_array


@dataclass
class Dependence:
    kind: str  # flow | anti | output | reduction | running | final (compiler/model/online.py)
    src: str
    dst: str
    tensor: str
    relation: isl.Map  # src instance -> dst instance
    access: Optional["Access"] = None  # src's access (its write for flow/output/reduction, the read for anti)

    def describe(self) -> str:
        verb = {
            "flow": f"{self.dst} reads {self.tensor} written by {self.src}",
            "anti": f"{self.dst} overwrites {self.tensor} read by {self.src}",
            "output": f"{self.dst} overwrites {self.tensor} written by {self.src}",
            "reduction": f"{self.src} combines its updates of {self.tensor} in order",
            "running": f"{self.dst} reads the running maximum {self.tensor} once {self.src} holds its own term",
            "final": f"{self.dst} reads {self.tensor}, a sum that follows the running maximum {self.src}, "
                     f"once {self.src} is complete",
        }
        return verb[self.kind]


def program_order_maps(model: KernelModel, only: Optional[set] = None) -> dict[str, isl.Map]:
    """The original order: the statement's position p, then its iterators (left-hand, then reduction).  Inside
    `for` blocks: the block's position, its iterator, the position inside the block, ... then the statement's
    other iterators ("2d+1": [p0, t, p1, i, ...]).  `only`: the statements to build it for (default: all)."""
    coords_of = {}
    block_first: dict = {}  # a block's position in the kernel body -> the index of its first statement
    for p, stmt in enumerate(model.stmts):
        top = block_first.setdefault(stmt.order[0], p) if stmt.loops else p
        coords_of[stmt.name] = order_coordinates(stmt, top)
    depth = max(len(c) for c in coords_of.values())
    maps = {}
    for stmt in model.stmts:
        if only is not None and stmt.name not in only:
            continue
        coords = coords_of[stmt.name] + ["0"] * (depth - len(coords_of[stmt.name]))
        space = stmt.domain.get_space()
        text = f"{{ {stmt.name}[{', '.join(stmt.iters)}] -> [{', '.join(coords)}] }}"
        m = isl.Map.read_from_str(stmt.domain.get_ctx(), text)
        maps[stmt.name] = m.align_params(space).intersect_domain(stmt.domain)
    return maps


def order_coordinates(stmt: Stmt, top: int) -> list[str]:
    """A statement's program-order time vector as isl text: `top` (its place among the kernel's statements, or
    its block's: statements a step adds, such as rfactor's partial sums, come right before the one they serve),
    then the loop-block iterators and the positions inside the blocks interleaved, then its other iterators."""
    coords = [str(top)]
    for loop, position in zip(stmt.loops, stmt.order[1:]):
        coords += [loop, str(position)]
    return coords + [it for it in stmt.iters if it not in stmt.loops]


def compute_dependences(model: KernelModel) -> list[Dependence]:
    order = program_order_maps(model)
    deps = [d for src, dst in _sharing_pairs(model) for d in _pair_dependences(model, order, src, dst)]
    # Flow first: the most telling counterexample comes from a value read too early.
    rank = {"flow": 0, "reduction": 1, "output": 2, "anti": 3}
    deps.sort(key=lambda d: rank[d.kind])
    return deps


def overwrite_dependences(model: KernelModel, output: str) -> list[Dependence]:
    """The dependences storing `output` in an input (`store_in`) adds: an anti dependence from each read of the
    input to the writes of the output that replace its values (the program's other dependences stay as they
    were: the output's own elements keep one place each).  The same pairs `compute_dependences` finds."""
    array = model.tensors[output].stored_in
    writer = model.stmt(output)
    readers = [s for s in model.stmts if any(r.tensor == array for r in s.reads)]
    order = program_order_maps(model, {writer.name, *(s.name for s in readers)})
    return [d for src in readers for d in _pair_dependences(model, order, src, writer, reads_of=array)]


def _pair_dependences(model: KernelModel, order: dict, src: Stmt, dst: Stmt,
                      reads_of: Optional[str] = None) -> list[Dependence]:
    """The dependences from instances of `src` to later instances of `dst`, of every access pair of the two
    (`reads_of`: only the anti dependences of src's reads of that tensor).  A read of an input that an output
    replaces in place (`store_in`, a signature's `in`) wants the input's value, whichever of the two comes first
    in program order: every such pair is a dependence (`_replaces_input`), and the schedule, not program order,
    decides whether it runs forward (a left neighbour's old value read in place, legal right to left)."""
    before = order[src.name].lex_lt_map(order[dst.name])
    deps = []
    for kind, a, b in _access_pairs(model, src, dst):
        if reads_of is not None and (kind != "anti" or a.tensor != reads_of):
            continue
        rel = _touching(model, kind, a, b)
        if kind == "anti" and _replaces_input(model, a, b):
            rel = rel.subtract(isl.Map.identity(rel.get_space())) if src is dst else rel  # an instance reads first
            rel = rel.intersect_domain(first_terms(src)) if a.start else rel
        else:
            rel = rel.intersect(before)
        own = own_start_pairs(src, a) if kind == "anti" and src is dst else None
        if own is not None:
            rel = rel.subtract(own)
        if rel.is_empty():
            continue
        if kind == "output" and src is dst and src.is_reduction:
            if any_order(src):
                continue
            name, _ = policy(src)
            if name == "segments":
                rel = rel.intersect(same_segment(src))
                if rel.is_empty():
                    continue
            kind = "reduction"
        deps.append(Dependence(kind, src.name, dst.name, a.tensor, rel.coalesce(), a))
    return deps


def _replaces_input(model: KernelModel, read: Access, write: Access) -> bool:
    """Whether `write` stores an output in the input that `read` reads (its values are replaced in place)."""
    written = model.tensors.get(write.tensor)
    return written is not None and written.stored_in == read.tensor


def first_terms(stmt: Stmt) -> isl.Set:
    """The instances that take each element's first term in program order: where a sum reads the value it starts
    from.  The read happens there or earlier (a backend loads it before the reduction loop), so a write that
    replaces it must wait for these instances only, not every term (probe JJ: `from X[i + 1]` in place with the
    reduction loop outside was refused)."""
    return stmt.write.relation.reverse().lexmin().range()


def own_start_pairs(stmt: Stmt, read: Access) -> Optional[isl.Map]:
    """The pairs of `stmt`'s instances that write one element, when `read` is a read of the value the sum starts
    from (None otherwise): the start is read once, before the element's first term, into the accumulator its
    updates write back -- stored in that value's place (`store_in`), no update replaces it before it is read."""
    if not any(read is r for r in start_reads(stmt)):
        return None
    return stmt.write.relation.apply_range(stmt.write.relation.reverse())


def _touching(model: KernelModel, kind: str, a, b) -> isl.Map:
    """The pairs of instances whose accesses `a` and `b` touch one element, or for an anti or output dependence one
    location of its storage (storage.py): a write there must wait for the reads of the value it replaces and stay
    after the writes before it.  A flow dependence stays the element's: the value a read needs comes from the one
    instance that wrote that element (the later writes of the place are ordered against the read by anti and
    output dependences)."""
    if kind == "flow":
        return a.relation.apply_range(b.relation.reverse())
    return located(model.tensors[a.tensor], a.relation).apply_range(
        located(model.tensors[b.tensor], b.relation).reverse())


def _sharing_pairs(model: KernelModel):
    """(src, dst) statement pairs, in program order of src then dst, that touch a common array, one of them
    writing it: only they can depend on each other (a chain of n statements has O(n) such pairs, not n^2)."""
    users: dict[str, set] = {}
    for n, stmt in enumerate(model.stmts):
        for tensor in {stmt.write.tensor, *(r.tensor for r in stmt.reads)}:
            users.setdefault(_array(model, tensor), set()).add(n)
    pairs = set()
    for n, stmt in enumerate(model.stmts):
        for m in users.get(_array(model, stmt.write.tensor), ()):
            pairs.update({(n, m), (m, n)})
    return [(model.stmts[a], model.stmts[b]) for a, b in sorted(pairs)]


def _access_pairs(model: KernelModel, src: Stmt, dst: Stmt):
    """(kind, access of src, access of dst) for every pair with a write: a flow pair touching one tensor, an
    anti or output pair one array (an output stored in an input writes the input's array)."""
    for r in dst.reads:
        if r.tensor == src.write.tensor:
            yield "flow", src.write, r
    written = _array(model, dst.write.tensor)
    for r in src.reads:
        if _array(model, r.tensor) == written:
            yield "anti", r, dst.write
    if _array(model, src.write.tensor) == written:
        yield "output", src.write, dst.write


def _array(model: KernelModel, tensor: str) -> str:
    t = model.tensors.get(tensor)
    return storage_array(t) if t is not None else tensor


# ---------------------------------------------------------------- combine policies


def policy(stmt: Stmt) -> tuple[str, Optional[int]]:
    """A reduction's combine policy: ("strict" | "reassoc" | "deterministic", None) or ("segments", N).
    `fast_accum` and `fast_accum(N)` order like `reassoc` (`imprecise_products` says what they allow besides)."""
    text = stmt.combine or "strict"
    if text.startswith("segments(") and text.endswith(")"):
        return "segments", int(text[len("segments("):-1])
    return ("reassoc" if text.startswith("fast_accum") else text), None


def imprecise_products(stmt: Stmt) -> Optional[int]:
    """How many FP8 products (terms along the reduction) the matrix unit may keep in its reduced-precision
    accumulator before adding them to the f32 sum: 0 without a declaration (each instruction's products go to
    the f32 sum), N under `combine fast_accum(N)` (the interval cuBLASLt and DeepGEMM promote at), None under
    `combine fast_accum` (any number: cuBLAS's use_fast_accum, Triton's default on sm_90).  Either declaration
    also allows any order and grouping, as `reassoc` does."""
    text = stmt.combine or ""
    if text == "fast_accum":
        return None
    if text.startswith("fast_accum(") and text.endswith(")"):
        return int(text[len("fast_accum("):-1])
    return 0


def fast_accumulation(stmt: Stmt) -> bool:
    """The sum declares `combine fast_accum` or `fast_accum(N)`: its products may lose precision in the matrix
    unit's accumulator (the comparison with the interpreter allows for it)."""
    return imprecise_products(stmt) != 0


def reorders(stmt: Stmt) -> bool:
    """The program lets the reduction give another result than its terms added in program order: `reassoc`,
    `deterministic`, `fast_accum` and `fast_accum(N)` (any order and grouping).  A schedule's result is then
    compared with program order's within a bound, not bit for bit.  (`segments(N)` fixes its result: each
    segment in order, the segments' sums folded in order, as the interpreter computes it.)"""
    return stmt.is_reduction and policy(stmt)[0] in ("reassoc", "deterministic")


def any_order(stmt: Stmt) -> bool:
    """The reduction's terms may combine in any order and grouping: the program allows it (`reassoc`,
    `deterministic`), or every order gives the same bits (`max`, `min`), so there is no order to keep."""
    return policy(stmt)[0] in ("reassoc", "deterministic") or order_independent(stmt)


def order_independent(stmt: Stmt) -> bool:
    """The reduction gives the same bits in every order and grouping of its terms, whatever its policy: `max`
    and `min` (compiler/model/reduce_ops.py says why), not `sum`."""
    return stmt.reduce_op is not None and reduce_ops.order_independent(stmt.reduce_op)


@dataclass
class Segments:
    """How a `combine segments(N)` reduction cuts its terms: the first reduction iterator's range 0..extent-1
    in `count` contiguous pieces of `length` (the last one may be shorter)."""

    position: int  # index of the cut iterator in stmt.iters
    iterator: str
    extent: int
    count: int
    length: int

    def of(self, value: int) -> int:
        return value // self.length


def segments(stmt: Stmt) -> Optional[Segments]:
    """The segments of a `combine segments(N)` reduction, or None (another policy, or a symbolic extent)."""
    name, count = policy(stmt)
    if name != "segments" or not stmt.red_iters:
        return None
    position = len(stmt.lhs_iters)
    top = stmt.domain.dim_max(position)
    if top.dim(isl.dim_type.param) and not top.is_cst():
        return None  # the extent depends on a size left symbolic: no fixed segments (checked as strict)
    values = []
    top.foreach_piece(lambda _set, aff: values.append(aff.get_constant_val().to_python()))
    if not values:
        return None
    extent = int(max(values)) + 1
    length = -(-extent // count)
    return Segments(position, stmt.red_iters[0], extent, count, length)


def same_segment(stmt: Stmt) -> isl.Map:
    """{ S[x] -> S[x'] : x and x' lie in one segment } (all pairs when the segments are not fixed)."""
    seg = segments(stmt)
    space = stmt.domain.get_space()
    params = [space.get_dim_name(isl.dim_type.param, i) for i in range(space.dim(isl.dim_type.param))]
    prefix = f"[{', '.join(params)}] -> " if params else ""
    a = ", ".join(stmt.iters)
    b = ", ".join(f"__{it}" for it in stmt.iters)  # '__' names are the compiler's: no size is called so
    cond = "true"
    if seg is not None:
        k = seg.iterator
        cond = f"floor({k}/{seg.length}) = floor(__{k}/{seg.length})"
    text = f"{prefix}{{ {stmt.name}[{a}] -> {stmt.name}[{b}] : {cond} }}"
    return isl.Map.read_from_str(stmt.domain.get_ctx(), text)
