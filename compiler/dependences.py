"""Memory-based dependences between statement instances, computed with isl.

A dependence `S(x) -> T(y)` says that instance S(x) runs before T(y) in the
original program and both touch the same tensor element, at least one of
them writing it.  A schedule is legal when every dependence still points
forward under it.

Kinds:
* `flow`   S writes, T reads   (T needs S's value)
* `anti`   S reads, T writes   (T must not overwrite before S has read)
* `output` S writes, T writes  (the later write must stay later)
* `reduction` a reduction's self-dependence: its updates of one element
  combine in the declared order.  A reduction declared `combine reassoc`
  has none: the program allows any order and grouping of its terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from .model import KernelModel, Stmt


@dataclass
class Dependence:
    kind: str  # flow | anti | output | reduction
    src: str
    dst: str
    tensor: str
    relation: isl.Map  # src instance -> dst instance

    def describe(self) -> str:
        verb = {
            "flow": f"{self.dst} reads {self.tensor} written by {self.src}",
            "anti": f"{self.dst} overwrites {self.tensor} read by {self.src}",
            "output": f"{self.dst} overwrites {self.tensor} written by {self.src}",
            "reduction": f"{self.src} combines its updates of {self.tensor} in order",
        }
        return verb[self.kind]


def program_order_maps(model: KernelModel) -> dict[str, isl.Map]:
    """The original order: statement number p, then its iterators (left-hand, then reduction)."""
    depth = max(len(s.iters) for s in model.stmts)
    maps = {}
    for p, stmt in enumerate(model.stmts):
        coords = [str(p)] + stmt.iters + ["0"] * (depth - len(stmt.iters))
        space = stmt.domain.get_space()
        text = f"{{ {stmt.name}[{', '.join(stmt.iters)}] -> [{', '.join(coords)}] }}"
        m = isl.Map.read_from_str(model.ctx, text)
        maps[stmt.name] = m.align_params(space).intersect_domain(stmt.domain)
    return maps


def compute_dependences(model: KernelModel) -> list[Dependence]:
    order = program_order_maps(model)
    deps: list[Dependence] = []
    for src in model.stmts:
        for dst in model.stmts:
            before = order[src.name].lex_lt_map(order[dst.name])
            for kind, a, b in _access_pairs(src, dst):
                rel = a.relation.apply_range(b.relation.reverse()).intersect(before)
                if rel.is_empty():
                    continue
                if kind == "output" and src is dst and src.is_reduction:
                    if src.combine == "reassoc":
                        continue  # the program allows any grouping of this reduction's terms
                    kind = "reduction"
                deps.append(Dependence(kind, src.name, dst.name, a.tensor, rel.coalesce()))
    # Flow first: the most telling counterexample comes from a value read too early.
    rank = {"flow": 0, "reduction": 1, "output": 2, "anti": 3}
    deps.sort(key=lambda d: rank[d.kind])
    return deps


def _access_pairs(src: Stmt, dst: Stmt):
    """(kind, access of src, access of dst) for every pair touching one tensor, with a write."""
    for r in dst.reads:
        if r.tensor == src.write.tensor:
            yield "flow", src.write, r
    for r in src.reads:
        if r.tensor == dst.write.tensor:
            yield "anti", r, dst.write
    if src.write.tensor == dst.write.tensor:
        yield "output", src.write, dst.write
