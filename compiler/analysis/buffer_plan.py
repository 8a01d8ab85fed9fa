"""Buffer plan: every buffer a schedule creates, its footprint, scope and lifetime, and the capacity check.

Each top-level node of the schedule tree is one kernel (one launch).  Inside a kernel tdsl knows four kinds
of on-chip storage, all sized from isl access relations restricted to one iteration of a loop:

* ``read``  -- ``cache_read(A, shared, at=C.ko)``: the region of A that the statements under `ko` read in
  one iteration of `ko` (the access relations composed with the loop prefix, boxed per dimension);
* ``write`` -- ``cache_write(C, register, at=C.jo)``: the region C writes in one iteration of `jo`, in the
  accumulator's dtype for a reduction (the chapter's 64x64 FP32 accumulator: 16 KiB);
* ``temp``  -- a fused intermediate: a temporary produced and consumed inside one kernel without a
  ``cache_write``; it lives in the target's default scope (registers on NVIDIA, UB on Ascend) for one
  iteration of the innermost loop that encloses its producer and all its readers;
* ``tile``  -- the tile of an uncached global tensor that a statement loads (or stores) directly, for one
  iteration of its *load level* (below).  Tiles are part of the per-kernel plan (`plan_kernels`), not of
  `plan` (which lists what the schedule itself creates).

A buffer at a pipelined loop is allocated once per stage.

Load level of an uncached tensor.  The loops bound to grid axes and the loops every program runs serially
(compiler/analysis/serial_loops.py: the tile loops made by split/tile, pipelined loops, a loop around several
statements, ...) are the *tile level*: everything below the innermost of them is one tile (what the tile
lowering vectorises, by the same rule), loaded once per iteration of that loop.  A statement with no such loop is a scalar
loop nest (program order): it loads its operands once per iteration of its innermost loop.  A tile whose
region does not change across inner serial (unbound) loops is hoisted out of them, as a compiler hoists a
loop-invariant load (a row scale read inside the K loop is read once per output tile); bound loops are never
crossed, because their iterations are different programs.  Reads of a tensor produced in the same kernel
come from on-chip storage and move nothing to or from global memory, when the reader takes the producer's tile
lane for lane; otherwise the kernel stores the tensor and reads it back (`KernelPlan.read_back`).

Lifetime.  Positions are the statements of a kernel in schedule order.  A buffer allocated at loop X is live
from the first to the last statement that uses it, widened to whole children of X's body (a buffer used
inside an inner loop stays live through all that loop's iterations); a pipelined buffer is live through
all of X's body (its next copy is in flight).  Buffers of one scope whose live ranges do not overlap share
memory (the K and V tiles of FlashAttention use one slot in turn); an elementwise statement that reads an
intermediate element for element as its last use writes its result in place (scores -> probabilities).
The working set of a scope is the largest total of the buffers live at one position; it must fit the
target's per-block capacity of that scope (`check`), else `CapacityError` names the scope, the buffers
and how many bytes are over.

The plan is made in four modules, by what each decides:

* compiler/analysis/buffer_plan.py (this one) -- the entry points: `plan`, `plan_kernels`, `check`,
  `require_bound_sizes`, and what the lowering reads of a plan (`kernel_stages`, `shared_bytes`);
* compiler/analysis/buffer_planner.py -- one kernel's buffers and data movements, their shapes, scopes and
  lifetimes (`_KernelPlanner`; `is_tile_level`, by compiler/analysis/serial_loops.py's rule), and which of its
  tensors the kernel stores and reads back (`KernelPlan.read_back`, the tile lowering's rule);
* compiler/analysis/buffer_sharing.py -- memory sharing, working sets and capacity violations;
* compiler/analysis/buffer_records.py -- the records of a plan (`PlannedBuffer`, `TileAccess`, `KernelPlan`,
  `Violation`, `CapacityError`) and `fmt_bytes`.

Every name of `__all__` is importable from here.
"""

from __future__ import annotations

from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_planner import DEFAULT_WARPS, _KernelPlanner
from tdsl.compiler.analysis.serial_loops import SerialLoops
from tdsl.compiler.analysis.buffer_records import (
    DTYPE_BYTES,
    CapacityError,
    KernelPlan,
    PlannedBuffer,
    TileAccess,
    Violation,
    fmt_bytes,
)
from tdsl.compiler.schedule.empty_statements import without_empty_statements
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import launches

__all__ = [
    "plan",
    "plan_kernels",
    "require_bound_sizes",
    "check",
    "shared_bytes",
    "kernel_stages",
    "PlannedBuffer",
    "TileAccess",
    "Violation",
    "CapacityError",
    "KernelPlan",
    "fmt_bytes",
    "DTYPE_BYTES",
    "DEFAULT_WARPS",
]


# ---------------------------------------------------------------- public API


def plan(schedule: Schedule, target=None) -> list[PlannedBuffer]:
    """The buffers the schedule creates: cache_read / cache_write copies and fused intermediates."""
    return [b for k in plan_kernels(schedule, target) for b in k.buffers if b.kind != "tile"]


def plan_kernels(schedule: Schedule, target=None, serial: Optional[SerialLoops] = None) -> list[KernelPlan]:
    """Per kernel: every buffer (with implicit tiles), the data movements, working sets and capacity violations.
    `serial`: the schedule's serial-loop rule when the caller has it (the lowering)."""
    from tdsl.compiler.targets import get_target

    tgt = get_target(target) if target is not None else None
    schedule = without_empty_statements(schedule)  # what computes nothing at these sizes holds no buffer
    require_bound_sizes(schedule)
    serial = serial or SerialLoops.of(schedule)
    return [_KernelPlanner(schedule, tgt, k, launch.node, serial).run()
            for k, launch in enumerate(launches(schedule.tree))]


def require_bound_sizes(schedule: Schedule) -> None:
    if schedule.model.params:
        raise TdslError(f"memory planning needs every size bound; give a value to {', '.join(schedule.model.params)} "
                        f"(--size {schedule.model.params[0]}=...)")


def check(schedule: Schedule, target) -> list[KernelPlan]:
    """Plan for `target` and raise CapacityError if a buffer set does not fit a hard on-chip scope."""
    from tdsl.compiler.targets import get_target

    tgt = get_target(target)
    kernels = plan_kernels(schedule, tgt)
    violations = [v for k in kernels for v in k.violations]
    if violations:
        raise CapacityError(tgt.name, violations, schedule.name)
    return kernels


def shared_bytes(buffers: list[PlannedBuffer], kernel_stmts: set) -> int:
    """Shared-memory bytes of the buffers used by one kernel's statements."""
    return sum(b.bytes for b in buffers if b.scope == "shared" and set(b.stmts) & kernel_stmts)


def kernel_stages(kernel: KernelPlan) -> int:
    """Pipeline depth the backends should use for this kernel: the deepest stages of its buffers (2 if none)."""
    stages = [b.stages for b in kernel.buffers if b.stages > 1]
    return max(stages) if stages else 2
