"""Recurrences: a statement that reads its own tensor, proven to read only elements it has finished.

    y[i] = where(i == 0, x[i], y[i - 1] + x[i])          # a scan
    s[i, j] = where(j == 0, a[i, j], s[i, j - 1] * r + a[i, j])
    x[i] = sum(j : j < i) L[i, j] * x[j]                 # reads x[j], finished at an earlier i

A statement's instances run in program order: lexicographically over its iterators (left-hand, then reduction).
A read of its own tensor is allowed when, for every instance, every instance that writes the element it reads
runs before it; then the read sees the element's final value, and the isl flow dependence between the two
instances is loop-carried, so the legality checks (compiler/legality/checks.py) keep its order under every
schedule and the tile lowering runs the loop that carries it serially (compiler/lower/loops.py).

Inside a `for t < T { ... }` block, program order runs the block's statements in turn for each t, so a
statement may also read a tensor that a later statement of the block computes -- at an earlier step
(`Ap[t, i] = where(t == 0, A0[i], An[t - 1, i])`) -- and one that an earlier statement of the block computes at the
same step.  The same rule proves it: every instance writing the element read runs before the reader in program
order (`_check_read`).

Refused, at the read, with the first instance that breaks the rule:
* an element computed by the reading instance itself (`y[i] = y[i] + x[i]`) or by a later one (`y[i + 1]`);
* an element of a reduction that is still being summed (a write of it comes after the read).
Reading an element no instance writes is refused earlier, by the model's bounds check ("no instance of y
writes").
"""

from __future__ import annotations

import islpy as isl

from tdsl.frontend.diagnostics import SourceError

from tdsl.compiler.model.program import KernelModel, Stmt, first_point, format_access, instance_text


def check_recurrences(model: KernelModel) -> None:
    from tdsl.compiler.model.dependences import program_order_maps

    order = None
    writer_of = {s.name: s for s in model.stmts}
    for stmt in model.stmts:
        for access in stmt.reads:
            writer = writer_of.get(access.tensor)
            if writer is None or not (writer is stmt or same_block(stmt, writer)):
                continue  # an earlier statement outside this one's blocks: finished before it starts
            order = order or program_order_maps(model)
            _check_read(stmt, access, writer, order)


def same_block(a: Stmt, b: Stmt) -> bool:
    """Are two statements inside one `for` block (where program order interleaves them step by step)?"""
    return bool(a.loops) and bool(b.loops) and a.order[:1] == b.order[:1]


def self_reads(stmt: Stmt) -> list:
    """The reads of a statement's own tensor (a recurrence; empty for every other statement)."""
    return [a for a in stmt.reads if a.tensor == stmt.name]


def _check_read(stmt: Stmt, access, writer: Stmt, order: dict) -> None:
    # reading instance -> every instance that writes the element it reads, not before it in program order
    writers = access.relation.apply_range(writer.write.relation.reverse())
    not_before = writers.intersect(order[stmt.name].lex_le_map(order[writer.name]))
    if not_before.is_empty():
        return
    params, coords = first_point(not_before.wrap())
    n = len(stmt.iters)
    reader, written_by = coords[:n], coords[n:]
    element = _element(access, reader, params)
    at = instance_text(stmt.name, stmt.iters, reader)
    if params:
        at += " with " + ", ".join(f"{k}={v}" for k, v in params.items())
    if writer is not stmt:
        raise SourceError(
            f"{format_access(access.node)} reads an element {writer.name} has not computed yet: {at} reads {element}, "
            f"which {instance_text(writer.name, writer.iters, written_by)} computes later; inside a `for` block a "
            f"statement may read what the block computes only at elements computed before (an earlier step, or an "
            f"earlier statement of the same step)",
            access.node.span if access.node is not None else stmt.span,
        )
    if stmt.is_reduction and written_by[: len(stmt.lhs_iters)] == reader[: len(stmt.lhs_iters)]:
        why = "which this reduction is still summing"
    elif written_by == reader:
        why = "which this same instance computes"
    else:
        why = f"which {instance_text(stmt.name, stmt.iters, written_by)} computes later"
    raise SourceError(
        f"{format_access(access.node)} reads an element {stmt.name} has not computed yet: {at} reads {element}, "
        f"{why}; a statement may read its own tensor only at elements computed before (a recurrence over "
        f"earlier indices)",
        access.node.span if access.node is not None else stmt.span,
    )


def _element(access, reader: list[int], params: dict) -> str:
    point = access.relation
    for k, v in enumerate(reader):
        point = point.fix_val(isl.dim_type.in_, k, isl.Val.int_from_si(point.get_ctx(), v))
    for name, v in params.items():
        pos = point.find_dim_by_name(isl.dim_type.param, name)
        point = point.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(point.get_ctx(), v))
    _, coords = first_point(point.range())
    return f"{access.tensor}[{', '.join(map(str, coords))}]"
