"""compute_inline: substitute an elementwise temporary into its readers.

Before::                                   After ``compute_inline(T)``::

    T[i, j]: bf16 = silu(G[i, j])              Z[i, j] = bf16(silu(G[i, j])) * U[i, j]
    Z[i, j] = T[i, j] * U[i, j]

T disappears (no buffer, no store), but its rounding stays where the
program put it: the inlined value is cast to T's dtype (here bf16) before
it is used, exactly as the store would have rounded it.  Only temporaries
computed without a reduction can be inlined.  The readers now read T's
inputs directly, so dependences are recomputed and checked.

``compute_inline(T, round=False)`` asks to drop that cast (what a fusing
compiler does when it keeps a fused chain in f32).  It is accepted only
where the cast does nothing: T is f32, or T's value already lies on the
grid of T's dtype (`abs(X[i])`, `max(X[i], 0.0)`, `-X[i]`, a `where` between
values of that dtype; compiler/legality/grids.py); otherwise it is rule
rounding-removed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from tdsl.frontend import ast

from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.grids import statement_grids
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.model.program import Access, collect_accesses
from tdsl.compiler.schedule.primitives.common import State, check_expression_size, check_stmt, flag
from tdsl.compiler.legality.storage import check_storage_order
from tdsl.compiler.schedule.primitives.online import rederive
from tdsl.compiler.schedule.primitives.registry import FLAG, STMT, arg, option, primitive
from tdsl.compiler.model.recurrences import self_reads


@primitive(arg("stmt", STMT), option("round", FLAG, True, text="false", omit_default=True), rank=80)
def compute_inline(state: State, stmt: str, round=True) -> None:
    stmt = check_stmt(state, "compute_inline", stmt)
    keep = flag("compute_inline", "round", round)
    model = state.model
    target = model.stmt(stmt)
    if target.is_reduction:
        raise ScheduleError("compute_inline", f"{stmt} is a reduction; only elementwise statements can be inlined")
    if self_reads(target):
        raise ScheduleError("compute_inline", f"{stmt} is a recurrence (it reads its own earlier elements): its "
                                              f"value cannot be recomputed in its readers; it must be stored")
    if model.tensors[stmt].kind != "temp":
        raise ScheduleError("compute_inline", f"{stmt} is a kernel result; it must be stored")
    if any(b.tensor == stmt for b in state.tree.buffers):
        raise ScheduleError("compute_inline", f"{stmt} has an on-chip buffer; inline it before caching")
    readers = [s for s in model.stmts if any(r.tensor == stmt for r in s.reads)]
    new_stmts = []
    for s in model.stmts:
        if s is target:
            continue
        if s in readers:
            s = _inline_into(s, target, keep)
        new_stmts.append(s)
    tensors = {k: v for k, v in model.tensors.items() if k != stmt}
    state.model = replace(model, stmts=new_stmts, tensors=tensors)
    _remove_leaf(state, stmt)
    check_storage_order(state.model, "compute_inline", state.tree)  # folded or shared storage, in the new program
    state.deps = compute_dependences(state.model)
    rederive(state, "compute_inline")  # a running maximum's readers and sums, in the new program
    if not keep and readers and target.dtype not in statement_grids(model, target):
        _rounding_removed(model, target, readers)  # with no reader, or a cast that changes nothing, nothing is lost
    check_dependences(state.model, state.deps, state.tree, "compute_inline")


def _rounding_removed(model, target, readers) -> None:
    from tdsl.compiler.errors import RoundingRemoved
    from tdsl.compiler.legality.rounding import first_read, value_rounding_witness

    changed, why = value_rounding_witness(model, target, target.dtype)
    reader, inst, element = first_read(model, [r.name for r in readers], target.name, changed)
    raise RoundingRemoved(
        "compute_inline",
        sorted({target.name, reader}),
        f"{reader} would use the value of {target.name} unrounded, but the program rounds {target.name} to "
        f"{target.dtype} when it stores it",
        f"{inst} reads {element}, which the program rounds to {target.dtype}: {why}",
    )


def _inline_into(reader, target, keep_rounding: bool = True):
    value = substitute_reads(reader.value, target, keep_rounding)
    init = None if reader.init is None else substitute_reads(reader.init, target, keep_rounding)
    _check_value_operators(reader, target, value, init)
    check_expression_size("compute_inline", reader.name, [value, init],
                          f"keep {target.name} stored (compute_at it instead of inlining it)")
    reads = [r for r in reader.reads if r.tensor != target.name]
    for r in reader.reads:
        if r.tensor != target.name:
            continue
        # reader instance -> element of target -> target instance -> what the target reads there
        to_target = r.relation.apply_range(target.write.relation.reverse())
        for inner in target.reads:
            # a read of the target in the start value (`from T[j]`) inlines into reads of the start value
            reads.append(Access(inner.tensor, to_target.apply_range(inner.relation), _reindexed(inner.node, target, r),
                                start=r.start))
    return replace(reader, value=value, init=init, reads=_nodes_in(reads, value, init))


def _nodes_in(reads: list, value: ast.Expr, init: Optional[ast.Expr]) -> list:
    """The reads with their nodes taken from the new value and start value (the same object, or an equal one:
    an inlined read is re-indexed as the value is), so that later steps that find a read by its node's identity
    (rfactor, recompute_at, the register plan) find it."""
    pools = {False: collect_accesses(value), True: [] if init is None else collect_accesses(init)}
    rebound = []
    for r in reads:
        pool = pools[r.start]
        found = next((k for k, n in enumerate(pool) if n is r.node), None)
        if found is None:
            found = next((k for k, n in enumerate(pool) if n == r.node), None)
        rebound.append(r if found is None else replace(r, node=pool.pop(found)))
    return rebound


def _check_value_operators(reader, target, value: ast.Expr, init: Optional[ast.Expr]) -> None:
    """`//` and `%` belong to indices: a target that uses its iterators as values (`where(i > 2, ...)`,
    `X[i] * i`), read at `T[i // 2]`, would compute with them once inlined."""
    for expr in [value] + ([init] if init is not None else []):
        found = _index_operator_in_value(expr)
        if found is not None:
            from tdsl.frontend.printer import expr_text

            raise ScheduleError(
                "compute_inline",
                f"{target.name} uses its iterators as values, and {reader.name} reads it at an index with "
                f"`{found.op}`: inlined, the value would compute `{expr_text(found)}`, and `{found.op}` is only "
                f"allowed in indices; compute_at {target.name} instead")


def _index_operator_in_value(e: ast.Expr) -> Optional[ast.BinOp]:
    if isinstance(e, ast.Access):
        return None  # its indices may divide
    if isinstance(e, ast.BinOp) and e.op in ("//", "%"):
        return e
    for child in ast.children(e):
        found = _index_operator_in_value(child)
        if found is not None:
            return found
    return None


def _reindexed(node: Optional[ast.Access], target, read) -> Optional[ast.Access]:
    """The target's read as it now stands in the reader's value: indexed by the reader's indices of the target
    (`substitute_reads` renames the same way), so that a read of `P[t, i, j - 1]` with P inlined is
    `T[i, j - 1]`, not the `T[i, j]` of P's own text (the plan and the lowering judge a read by its indices)."""
    if node is None or read.node is None:
        return node
    return rename_iterators(node, dict(zip(target.lhs_iters, read.node.indices)))


def substitute_reads(expr: ast.Expr, target, keep_rounding: bool = True) -> ast.Expr:
    """Replace every read of the target tensor by its (rounded) defining expression."""

    def inline(e):
        if isinstance(e, ast.Access) and e.tensor != target.name:
            return e  # the same node: the statement's reads refer to it
        if not isinstance(e, ast.Access):
            return None
        inlined = rename_iterators(target.value, dict(zip(target.lhs_iters, e.indices)))
        if target.dtype == "f32" or not keep_rounding:
            return inlined
        return ast.Call(target.dtype, [inlined], e.span)

    return ast.rewrite(expr, inline)


def rename_iterators(expr: ast.Expr, mapping: dict) -> ast.Expr:
    """The expression with iterator names replaced by expressions (e.g. a reader's index expressions)."""
    return ast.rewrite(expr, lambda e: mapping.get(e.name) if isinstance(e, ast.Name) else None)


def _remove_leaf(state: State, stmt: str) -> None:
    from tdsl.compiler.schedule.primitives.compute_at import _exclusive_subtree

    tree = state.tree
    node = _exclusive_subtree(tree, stmt)
    tree.parent_body(node).remove(node)
    from tdsl.compiler.schedule.tree import walk_loops

    for loop in walk_loops(tree.body):
        loop.exprs.pop(stmt, None)
