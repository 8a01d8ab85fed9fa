"""The value a sum starts from is read before the loops that walk its terms (rule dependence).

`C[i, j] = sum(k) A[i, k] * B[k, j] from T[j]`: the program reads T[j] once per element, into the accumulator,
and only then adds the terms; every backend loads it where the accumulator is created, before the outermost loop
over k among C's loops.  The dependences of the model count the start read at every instance of C, so a producer
of T[j] placed inside that loop (`compute_at(T, C.k)`: T(j) runs at C's k = 0, before C(i, j, 0)) satisfies
them, and yet the kernel reads T[j] before it is computed (fuzz seed 5509).  This check places the start read
where it happens: at the entry of that loop, before any of its iterations.
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.compiler.errors import DependenceViolation
from tdsl.compiler.model.program import KernelModel, Stmt, first_point, instance_text, start_reads
from tdsl.compiler.schedule.tree import Loop, Tree, const_on, pw_affs_to_map, walks_reduction


def check_start_values(model: KernelModel, tree: Tree, times: dict, primitive: str) -> None:
    """Every instance that writes what a sum's start value reads runs before the loop that walks the sum's terms
    is entered, in the iteration of the loops around it that reads the start value."""
    writers = {s.write.tensor: s for s in model.stmts}
    for stmt in model.stmts:
        reads = [r for r in start_reads(stmt) if r.tensor in writers and writers[r.tensor] is not stmt]
        if not reads:
            continue
        entry = _walk_entry(tree, stmt)
        if entry is None:
            continue
        loop, before = entry
        for read in reads:
            writer = writers[read.tensor]
            pairs = writer.write.relation.apply_range(read.relation.reverse())  # writer instance -> reader instance
            width = before.dim(isl.dim_type.out)
            written_at = times[writer.name]
            written_at = written_at.project_out(isl.dim_type.out, width, written_at.dim(isl.dim_type.out) - width)
            late = pairs.intersect(written_at.lex_ge_map(before))
            if not late.is_empty():
                _raise(primitive, stmt, writer, read, loop, late)


def _walk_entry(tree: Tree, stmt: Stmt) -> Optional[tuple[Loop, isl.Map]]:
    """The outermost loop around `stmt` whose iterations run different terms of it, and the map from `stmt`'s
    instances to the time at which that loop is entered (the time dims above it and its position among its
    siblings)."""
    positions, path = tree.locate(stmt.name)
    parts = []
    for level, loop in enumerate(path):
        parts.append(const_on(stmt.domain, positions[level]))
        exprs = loop.exprs[stmt.name]
        if any(walks_reduction(stmt, e) for e in exprs):  # its pieces' functions, not their domains
            return loop, pw_affs_to_map(parts, stmt.domain)
        parts.extend(exprs)
    return None


def _raise(primitive, stmt, writer, read, loop, late: isl.Map) -> None:
    params, coords = first_point(late.wrap())
    n = len(writer.iters)
    produced = instance_text(writer.name, writer.iters, coords[:n])
    reader = instance_text(stmt.name, stmt.iters, coords[n:])
    suffix = (" with " + ", ".join(f"{k}={v}" for k, v in params.items())) if params else ""
    raise DependenceViolation(
        primitive,
        sorted({stmt.name, writer.name}),
        f"{stmt.name} starts its sum from a value that reads {read.tensor}, before loop {loop.name} walks its terms, "
        f"but {writer.name} would compute it inside or after that loop",
        f"{produced} must run before {reader} enters loop {loop.name} (it reads the start value there){suffix}, "
        f"but would run after",
    )
