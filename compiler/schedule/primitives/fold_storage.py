"""fold_storage: keep only a few elements of a temporary along one dimension, reusing their memory.

Before (every step's row stored: T x N)::      After ``fold_storage(Bn, t, 2)`` (two planes: 2 x N)::

    Bn[t, i] -> Bn[t, i]                          Bn[t, i] -> Bn[t mod 2, i]

Tensors are single-assignment, so a time loop's values are T times what the C code keeps.  Folding stores
element [.., d, ..] at [.., d mod planes, ..]: element d + planes overwrites element d.  That is a storage
decision the program does not make, and it has two conditions, checked here with isl:

* In program order, no value may be overwritten before its last read (rule storage-overwrite,
  compiler/legality/storage.py): `fold_storage(Bn, t, 1)` is legal when each step reads only its own Bn, and
  refused when step t reads Bn[t - 1] after writing Bn[t]; the counterexample names the read, the value it
  needs and the write that replaced it.
* The schedule must keep the order of every access to a shared location: the dependences are recomputed on
  locations, so folding adds anti dependences (a read before the write that replaces its value) and output
  dependences (the writes of one location in order), and the current schedule and every later step are
  checked against them (rule dependence).  A parallel sweep stays legal with one plane per step; binding the
  step loop, or running two steps' tiles out of order, is refused.

The reference interpreter, the dependences and the backends all read storage through one map
(compiler/model/storage.py).  Refused: a kernel input or output (the caller's arrays), a reduction's tensor (its
accumulator lives in the element), a dimension that is not one of the statement's own iterators, a kernel whose sizes are not bound.  As many
planes as the dimension has elements, or more, leave it unfolded (undoing an earlier fold of it): a schedule
written for larger sizes applies at small ones (PolyBench syrk's `fold_storage(Cs, k, 1)` at M = 1), and
`fold_storage(T, t, 6)` after `fold_storage(T, t, 1)` means six planes at every size.
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.legality.storage import check_storage_order
from tdsl.compiler.model.dependences import compute_dependences
from tdsl.compiler.schedule.primitives.common import State, positive_int
from tdsl.compiler.schedule.primitives.online import rederive
from tdsl.compiler.schedule.primitives.registry import DIM, INT, TENSOR, arg, primitive


@primitive(arg("tensor", TENSOR), arg("dim", DIM), arg("planes", INT, text="PLANES", keyword=True), rank=105)
def fold_storage(state: State, tensor: str, dim: str, planes: int) -> None:
    model = state.model
    t = model.tensors.get(tensor) if isinstance(tensor, str) else None
    if t is None:
        raise ScheduleError("fold_storage", f"unknown tensor {tensor!r} (tensors: {', '.join(model.tensors)})")
    if t.kind != "temp":
        raise ScheduleError("fold_storage", f"{tensor} is an {t.kind} of the kernel, an array of the caller's; "
                                            f"fold a temporary")
    writer = next((s for s in model.stmts if s.name == tensor), None)
    if writer is None or writer.is_reduction:
        raise ScheduleError("fold_storage", f"{tensor} is a reduction: its accumulator lives in its elements; fold "
                                            f"a tensor a plain statement writes")
    if dim not in writer.lhs_iters:
        raise ScheduleError("fold_storage", f"{tensor} has no dimension {dim!r}; it is written as "
                                            f"{tensor}[{', '.join(writer.lhs_iters)}]")
    axis = writer.lhs_iters.index(dim)
    planes = positive_int("fold_storage", "the number of planes", planes)
    extent = t.shape[axis]
    if not isinstance(extent, int):
        raise ScheduleError("fold_storage", f"dimension {dim} of {tensor} has extent {extent}, not a bound size; "
                                            f"bind it to fold the storage")
    folds = {**dict(t.fold), axis: planes}
    if planes >= extent:  # every element keeps a plane of its own: the dimension is not folded (an earlier fold undone)
        del folds[axis]
    folded = replace(t, fold=tuple(sorted(folds.items())))
    new = replace(model, tensors={**model.tensors, tensor: folded})
    state.model = new  # a rejected step carries what it would have run (LegalityError.rejected)
    check_storage_order(new, "fold_storage", state.tree)
    state.deps = compute_dependences(new)
    rederive(state, "fold_storage")
    check_dependences(state.model, state.deps, state.tree, "fold_storage")

