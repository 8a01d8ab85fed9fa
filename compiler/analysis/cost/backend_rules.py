"""Can a code generator use a candidate of `tdsl cost --fit / --sweep`?  Its tile rules, applied to the plan.

The cost model sizes a buffer exactly (82 rows of Q are 82 rows); the generated code gives every tile a
power-of-two number of lanes (compiler/lower/tile_rules.py), so the buffers it allocates are the padded ones,
and it refuses whatever its lowering refuses (a tile over 65,536 elements, a tile without a fixed size, ...).
A candidate the backend can use:

* has a padded working set (each buffer's shape rounded up to its lanes, shared and live as planned) that
  fits every hard scope of the target, and
* passes the backend's lowering and printer (`compiler/lower/pipeline.lower_for`, then the backend's
  `emit_module`: what `tdsl compile` runs), and
* for Triton and TileLang on NVIDIA, fits the shared memory with the operand copies they make themselves
  (cost/staging.py: product operands the schedule leaves in registers, one copy per operand and pipeline
  stage), which the plan does not hold, every tile padded to its lanes.

`refusal` gives the first reason it cannot, in one line, or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tdsl.compiler.analysis.buffer_plan import DTYPE_BYTES, KernelPlan, PlannedBuffer, fmt_bytes, plan_kernels
from tdsl.compiler.analysis.buffer_records import Violation
from tdsl.compiler.analysis.buffer_sharing import violations, working_sets
from tdsl.compiler.analysis.cost.staging import as_generated, copies, persistent_stores
from tdsl.compiler.lower.tile_rules import padded_shape
from tdsl.compiler.schedule.empty_statements import without_empty_statements
from tdsl.compiler.targets import Target


def refusal(schedule, target: Target, backend: str, kernels: Optional[list[KernelPlan]] = None) -> Optional[str]:
    """Why `backend` (a key of compiler/lower/pipeline.BACKENDS) cannot use the schedule on `target`; None if it can."""
    schedule = without_empty_statements(schedule)  # the schedule the plans were made from
    kernels = kernels if kernels is not None else plan_kernels(schedule, target)
    return (padded_overflow(kernels, target) or staged_overflow(schedule.model, kernels, target, backend)
            or lowering_refusal(schedule, target, backend))


def padded_bytes(buf: PlannedBuffer) -> int:
    n = DTYPE_BYTES[buf.dtype] * buf.stages
    for d in padded_shape(buf.shape):
        n *= d
    return n


@dataclass
class AsGenerated(Violation):
    """A kernel whose buffers fit as planned but not as its code generator makes them (tiles padded to their
    lanes, operand copies the generator adds): the kernel would fail to compile or launch."""

    reason: str = ""

    def text(self) -> str:
        return f"kernel {self.kernel}: {self.reason}"


def generated_overflow(model, kernels: list[KernelPlan], target: Target, backend: str) -> Optional[AsGenerated]:
    """The first kernel that does not fit as `backend` generates it (`padded_overflow`, then `staged_overflow`);
    the one judgement of `tdsl compile` (compiler/lower/pipeline.py `with_stages`), the cost report and the
    tuner's screen (probe CC of the 30th session: `cost` and `compile` took a 192-wide tile that Triton pads to 256
    as fitting, the screen did not)."""
    if backend not in COPYING:  # the Ascend printers size their buffers as they print them (check_capacity)
        return None
    return padded_violation(kernels, target) or staged_violation(model, kernels, target, backend)


def padded_overflow(kernels: list[KernelPlan], target: Target) -> Optional[str]:
    v = padded_violation(kernels, target)
    return v and v.reason


def padded_violation(kernels: list[KernelPlan], target: Target) -> Optional[AsGenerated]:
    """The first hard scope whose working set, with every tile padded to its lanes, is over the capacity."""
    for kp in kernels:
        if all(b.shape == padded_shape(b.shape) for b in kp.buffers):
            continue  # nothing is padded: the plan's own capacity check says it all
        working, peaks = working_sets(kp.buffers, kp.slots, len(kp.stmts), padded_bytes)
        for v in violations(kp.name, working, peaks, target):
            padded = [b for b in v.buffers if b.shape != padded_shape(b.shape)]
            reason = (f"{v.scope} needs {fmt_bytes(v.need)} per block with its tiles padded to powers of two "
                      f"({', '.join(_padding(b) for b in padded)}) but {target.name} has {fmt_bytes(v.capacity)}")
            return AsGenerated(kp.name, v.scope, v.need, v.capacity, v.buffers, reason=reason)
    return None


# code generators that copy operands themselves, and which (cost/staging.py)
COPYING = {"triton": "Triton copies the tensor-core operands", "tilelang": "TileLang copies the product operands"}


def staged_overflow(model, kernels: list[KernelPlan], target: Target, backend: str) -> Optional[str]:
    v = staged_violation(model, kernels, target, backend)
    return v and f"{v.kernel}: {v.reason}"


def staged_violation(model, kernels: list[KernelPlan], target: Target, backend: str) -> Optional[AsGenerated]:
    """The first kernel whose shared memory, with the operand copies the code generator adds and a persistent
    Triton kernel's stored tiles (cost/staging.py), every tile padded to its lanes, is over the target's
    per-block capacity: the kernel would fail to compile or launch ("out of resource: shared memory")."""
    shared = target.scopes.get("shared")
    if backend not in COPYING or shared is None:
        return None
    for kp in kernels:
        generated = as_generated(model, kp, target, backend)
        if generated is kp:
            continue
        need = working_sets(generated.buffers, generated.slots, len(kp.stmts), padded_bytes)[0].get("shared", 0)
        if need <= shared.per_block:
            continue
        made = ", ".join(f"{b.tensor} {_shape(b.shape)} x{b.stages}" for b in copies(generated))
        kept = ", ".join(f"{b.tensor} {_shape(b.shape)}" for b in persistent_stores(kp, backend))
        what = " and ".join(filter(None, [
            made and f"{COPYING[backend]} into shared memory itself ({made})",
            kept and f"launched persistently, Triton keeps each tile it stores in shared memory beside the next "
                     f"tile's operands ({kept})"]))
        reason = (f"{what}: {fmt_bytes(need)} per block, but {target.name} has "
                  f"{fmt_bytes(shared.per_block)}; use fewer pipeline stages or smaller tiles"
                  + (", or launch it without persistent=true" if kept else ""))
        return AsGenerated(kp.name, "shared", need, shared.per_block, generated.buffers, reason=reason)
    return None


def _padding(buf: PlannedBuffer) -> str:
    return f"{buf.tensor} {_shape(buf.shape)} -> {_shape(padded_shape(buf.shape))}"


def _shape(shape) -> str:
    return "x".join(map(str, shape)) or "1"


def lowering_refusal(schedule, target: Target, backend: str) -> Optional[str]:
    """The backend's own refusal of the schedule: what `tdsl compile` would say, from its lowering and from its
    printer (the Ascend printers size their UB, L1 and L0 buffers as they print them; a factor the lowering
    alone accepted was proposed by `--fit` and refused by `tdsl compile`)."""
    from tdsl.backends import emit_module
    from tdsl.compiler.analysis.buffer_plan import CapacityError
    from tdsl.compiler.errors import BackendError
    from tdsl.compiler.lower.pipeline import lower_for

    try:
        emit_module(backend, lower_for(schedule, backend, target.name))
    except BackendError as err:
        return err.reason
    except CapacityError as err:
        return str(err).split("\n")[0]
    return None
