"""Per-kernel counts: the bytes each movement of a tile moves, the FLOPs of each statement, loop trip counts.

The movements come from the buffer plan (`plan_kernels`); their bytes are `box_sum` of the region touched per
iteration of their loop, times the element size (docs/cost.md).
"""

from __future__ import annotations

from typing import Optional

from tdsl.frontend import ast

from tdsl.compiler.analysis.buffer_plan import DTYPE_BYTES, KernelPlan
from tdsl.compiler.analysis.cost.count import box_sum, card
from tdsl.compiler.analysis.cost.results import Transfer
from tdsl.compiler.analysis.placement import matrix_operands
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import Loop, pw_affs_to_map, statements_under, walk_loops


def kernel_transfers(kp: KernelPlan) -> list[Transfer]:
    """Every movement of the kernel's plan with its iterations and bytes, in report order."""
    transfers = []
    for a in kp.accesses:
        nbytes = box_sum(a.touched) * DTYPE_BYTES[a.dtype]
        iterations = card(a.touched.domain())
        transfers.append(Transfer(a.tensor, a.kind, a.src, a.dst, a.loop_name, iterations, nbytes, list(a.stmts)))
    def rank(t: Transfer) -> int:  # loads from global, then copies between on-chip levels, operand reads, stores
        return 0 if t.src == "global" else (3 if t.dst == "global" else (2 if t.dst == "compute" else 1))

    transfers.sort(key=lambda t: (rank(t), kp.stmts.index(t.stmts[0])))
    return transfers


def kernel_flops(model, stmts: list[str]) -> tuple[int, int, Optional[str]]:
    """(matrix FLOPs, other FLOPs, matrix operand dtype) of the kernel's statements."""
    fm, fv, mdtype = 0, 0, None
    for s in stmts:
        m, v, dt = statement_flops(model, s)
        fm, fv = fm + m, fv + v
        mdtype = mdtype or dt
    return fm, fv, mdtype


def loop_iterations(schedule: Schedule, kp: KernelPlan) -> dict:
    """How many times each loop of the kernel runs its body, summed over all enclosing iterations.  Around a
    loop that is bound or serial the enclosing loops that count are the bound and serial ones: a point loop
    between them holds lanes of a tile and runs no iterations (the buffer plan's `_levels`); in a scalar loop
    nest (program order: the chapter's one element at a time) every loop counts."""
    model, tree = schedule.model, schedule.tree
    loops = [kp.root] + list(walk_loops(kp.root.body)) if isinstance(kp.root, Loop) else []

    out = {}
    for loop in loops:
        image = None
        for s in statements_under(loop):
            path = tree.path(s)
            upto = path[: next(n for n, l in enumerate(path) if l is loop) + 1]
            if kp.is_tile_level(loop):
                upto = [l for l in upto if kp.is_tile_level(l)]
            part = pw_affs_to_map([d for l in upto for d in l.exprs[s]], model.stmt(s).domain).range()
            image = part if image is None else image.union(part)
        out[loop.name] = out.get(loop.name, 0) + card(image)
    return out


def statement_flops(model, stmt_name: str) -> tuple[int, int, Optional[str]]:
    """(matrix FLOPs, other FLOPs, matrix operand dtype) of one statement over its whole domain."""
    stmt = model.stmt(stmt_name)
    n = card(stmt.domain)
    body = stmt.value
    operands = matrix_operands(stmt, model.sizes)
    if operands is not None:
        dtypes = [model.tensors[a.tensor].dtype for a in operands]
        dtype = "f8e4m3" if "f8e4m3" in dtypes else ("f32" if all(d == "f32" for d in dtypes) else "bf16")
        return 2 * n, 0, dtype
    ops = _ops(body) + (1 if stmt.is_reduction else 0)
    return 0, ops * n, None


def _ops(e) -> int:
    if isinstance(e, (ast.BinOp, ast.Compare)):
        return 1 + _ops(e.lhs) + _ops(e.rhs)
    if isinstance(e, ast.Neg):
        return 1 + _ops(e.operand)
    if isinstance(e, ast.Call):
        return (0 if e.func in ("f32",) else 1) + sum(_ops(a) for a in e.args)
    return 0
