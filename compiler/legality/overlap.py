"""Rule `pipeline-overlap`: what `pipeline(L, warp_specialize=true)` moves, and when that is legal.

A warp-specialised loop (docs/primitives.md#pipeline) runs its body as groups: the *first* group (the loop body's
first node: FlashAttention's QKᵀ) and the *last* group (its last node: the accumulating P·V and its rescaling),
with everything between them in the *middle*.  Iteration k+1's first product is issued before iteration k's last
group and waited for after it, so for every k the instances

    last group at k   and   first group at k+1

run in the opposite order, or at the same time; every other pair of instances keeps its order (the middle group
of k still runs before the first product of k+1, the last group of k still before the middle group of k+1: its
rescaling runs before, and only its product's accumulation overlaps the middle group, which cannot read the sum
before it is complete: rule reduction-incomplete).  So the step is legal when no dependence relates an instance of
the last group at iteration k with an instance of the first group at iteration k+1, within one iteration of the
loops around L.  The tree's order does not change (the mark only asks the TileLang printer for the
arrangement), so the interpreter runs the program order of the loop, which the rule makes equivalent.

Checked when `pipeline` sets the mark and after every later step (`compiler/legality/checks.py`
`check_invariants`), as bound loops are.
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.errors import PipelineOverlap, ScheduleError
from tdsl.compiler.model.dependences import Dependence
from tdsl.compiler.model.program import KernelModel
from tdsl.compiler.schedule.tree import Loop, Tree, statements_under


def overlap_groups(loop: Loop, primitive: str = "pipeline") -> tuple[list[str], list[str]]:
    """(the first group's statements, the last group's): those of the first and of the last node of the loop's
    body.  A loop of one node has nothing to overlap, and a fused loop (several dimensions) no single next
    iteration: both are refused."""
    if loop.n_dims != 1:
        raise ScheduleError(primitive, f"warp_specialize needs a loop of one dimension; {loop.name} has "
                                       f"{loop.n_dims} (fused): specialise the loop before fusing it")
    if len(loop.body) < 2:
        raise ScheduleError(primitive, f"warp_specialize overlaps the first and the last statement group of loop "
                                       f"{loop.name}, which holds one group; place the statements of the key block "
                                       f"in it first (compute_at, reverse_compute_at)")
    return _statements(loop.body[0]), _statements(loop.body[-1])


def check_overlap(model: KernelModel, deps: list[Dependence], tree: Tree, loop: Loop, primitive: str) -> None:
    """No dependence from the last group at iteration k to the first group at iteration k+1 (see the module)."""
    first, last = overlap_groups(loop, primitive)
    inner = tree.time_maps(model, upto=loop, positions=False)  # instance -> (the loops around L..., L)
    for dep in deps:
        if dep.src not in last or dep.dst not in first:
            continue
        pairs = dep.relation.intersect(_next_iteration(inner[dep.src], inner[dep.dst]))
        if pairs.is_empty():
            continue
        from tdsl.compiler.legality.checks import _touch, concrete_pair

        src, dst, element = concrete_pair(model, dep, pairs)
        detail = (f"warp_specialize issues {', '.join(first)} of iteration {loop.name} + 1 before "
                  f"{', '.join(last)} of iteration {loop.name}, but {dep.describe()}")
        example = f"{src} must run before {dst} ({_touch(dep, element)}) but would run after"
        raise PipelineOverlap(primitive, sorted({dep.src, dep.dst}), detail, example)


def _next_iteration(src_time: isl.Map, dst_time: isl.Map) -> isl.Map:
    """Pairs of instances (a, b) where b is in the next iteration of the loop (the last time dimension + 1) and in
    the same iteration of every loop around it."""
    n = src_time.dim(isl.dim_type.out)
    xs = ", ".join(f"x{d}" for d in range(n))
    ys = ", ".join(f"x{d}" for d in range(n - 1)) + (", " if n > 1 else "") + f"x{n - 1} + 1"
    step = isl.Map.read_from_str(src_time.get_ctx(), f"{{ [{xs}] -> [{ys}] }}")
    return src_time.apply_range(step).apply_range(dst_time.reverse())


def _statements(node) -> list[str]:
    return statements_under(node) if isinstance(node, Loop) else [node.stmt]
