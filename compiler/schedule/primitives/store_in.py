"""store_in: keep a kernel output in the array of an input, which the kernel then updates in place.

Before (two arrays; the caller's C_in is left as it was)::    After ``store_in(C, C_in)`` (one array)::

    C[i, j] -> C[i, j]                                           C[i, j] -> C_in[i, j]
    C_in[i, j] -> C_in[i, j]                                     C_in[i, j] -> C_in[i, j]

Tensors are single-assignment, so C code that updates an array in place (`C[i][j] = beta * C[i][j] + ...`) is
written with an input and an output (`C[i, j] = sum(k) ... from beta * C_in[i, j]`).  Storing the output in
the input gives the memory back, as C does: the generated launcher passes the input as the output, the
kernels write the output's elements over the input's, and the launcher returns the updated input.  That is a
storage decision the program does not make, with two conditions checked with isl:

* In the schedule at the step, no read of the input may come after a write of the output to the element it
  reads (rule storage-overwrite, compiler/legality/storage.py): `store_in(C, C_in)` is legal when each C[i, j]
  reads only C_in[i, j], and refused when C[i, j] reads C_in[i, j - 1], which C[i, j - 1] has replaced, unless
  an earlier `reverse(C.j)` runs the elements right to left; the counterexample names the write and the read.
  A sum that starts from the element it replaces reads it once, into its accumulator, before its first term.
* The schedule must keep every read of the input before the write that replaces it: the dependences are
  recomputed on locations, so the decision adds anti dependences (each read of C_in[e] before the write of
  C[e], whichever comes first in program order), checked against the current schedule and every later step
  (rule dependence).  A parallel loop stays legal where each program reads only the elements it writes;
  binding a loop whose programs read each other's elements is refused.

The reference interpreter, the dependences and the backends all read storage through one map
(compiler/model/storage.py).  Refused: a temporary or an input as the stored tensor, a tensor that is not an
input as the array, an output and an input of different dtypes or shapes, an input that already holds an
output, an output stored twice.
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.legality.storage import check_storage_order
from tdsl.compiler.model.dependences import overwrite_dependences
from tdsl.compiler.model.program import KernelModel, Tensor
from tdsl.compiler.schedule.primitives.common import State
from tdsl.compiler.schedule.primitives.online import rederive
from tdsl.compiler.schedule.primitives.registry import TENSOR, arg, primitive


@primitive(arg("output", TENSOR, role="an output of the kernel"),
           arg("array", TENSOR, role="an input of the kernel of the output's dtype and shape"), rank=107)
def store_in(state: State, output: str, array: str) -> None:
    model = state.model
    x, y = _tensor(model, output, "output"), _tensor(model, array, "input")
    _check_pair(model, x, y)
    new = replace(model, tensors={**model.tensors, x.name: replace(x, stored_in=y.name)})
    state.model = new  # a rejected step carries what it would have run (LegalityError.rejected)
    check_storage_order(new, "store_in", state.tree)
    added = overwrite_dependences(new, x.name)  # the only ones the decision adds: checked against the schedule
    state.deps = state.deps + added
    rederive(state, "store_in")
    check_dependences(state.model, added, state.tree, "store_in")


def _tensor(model: KernelModel, name: str, kind: str) -> Tensor:
    t = model.tensors.get(name) if isinstance(name, str) else None
    if t is None:
        raise ScheduleError("store_in", f"unknown tensor {name!r} (tensors: {', '.join(model.tensors)})")
    if t.kind != kind:
        what = "a temporary" if t.kind == "temp" else f"an {t.kind}"
        raise ScheduleError("store_in", f"{name} is {what} of the kernel; store_in keeps an output of the kernel in "
                                        f"an input of it (store_in(OUTPUT, INPUT): the caller's input array is "
                                        f"updated in place)")
    return t


def _check_pair(model: KernelModel, x: Tensor, y: Tensor) -> None:
    if x.stored_in:
        raise ScheduleError("store_in", f"{x.name} is already stored in {x.stored_in}")
    holder = next((t.name for t in model.tensors.values() if t.stored_in == y.name), None)
    if holder is not None:
        raise ScheduleError("store_in", f"{y.name} already holds {holder}; an input holds one output")
    if x.dtype != y.dtype:
        raise ScheduleError("store_in", f"{x.name} is {x.dtype} and {y.name} is {y.dtype}: an output is stored in "
                                        f"an input of its own dtype")
    if [str(d) for d in x.shape] != [str(d) for d in y.shape]:
        raise ScheduleError("store_in", f"{x.name} has shape [{', '.join(map(str, x.shape))}] and {y.name} "
                                        f"[{', '.join(map(str, y.shape))}]: an output is stored in an input of its "
                                        f"own shape")
