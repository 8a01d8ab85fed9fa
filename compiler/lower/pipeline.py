"""From a schedule to the tile program one backend prints: the middle end as a list of passes.

    program = lower_for(schedule, "ascend-910b")
    text = emit(program, ...)          # a printer: it reads facts from the program, decides none

Each step is a function `TileProgram -> TileProgram` (or, for the first, `Schedule -> TileProgram`) with one
line saying what it decides; the printers of `backends/` run none of them.  A backend is one of `BACKENDS`:
a code generator for one target.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from tdsl.compiler.analysis.buffer_records import CapacityError
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower.passes.hoist import hoist_invariant_operands
from tdsl.compiler.lower.passes.int32 import check_int32
from tdsl.compiler.lower.passes.masked_scores import mask_scores_once
from tdsl.compiler.lower.passes.recurrence import refuse_cube_recurrences
from tdsl.compiler.lower.passes.rounded_operands import read_rounded_sources
from tdsl.compiler.lower.passes.storage import refuse_folded_products
from tdsl.compiler.lower.passes.store_masks import mark_unclipped
from tdsl.compiler.lower.passes.persistent import refuse_persistent_overflow
from tdsl.compiler.lower.passes.tma import mark_descriptors
from tdsl.compiler.lower.passes.warp_specialize import check_warp_specialized, plain_pipelines
from tdsl.compiler.lower.passes.ascend910b import (assign_cross_core, refuse_uncopyable_operands,
                                                   split_vector_rows, widen_narrow_tiles)
from tdsl.compiler.analysis.placement import assign_units, stage_operands
from tdsl.compiler.lower.build import lower
from tdsl.compiler.schedule.empty_statements import without_empty_statements
from tdsl.compiler.lower.tileir import TileProgram

# (compile target, code generator) -> backend: the key of every per-backend table of the middle end
BACKENDS = {
    ("nvidia", "triton"): "triton",
    ("nvidia", "tilelang"): "tilelang",
    ("ascend-950", "tilelang"): "ascend-950",
    ("ascend-910b", "tilelang-ascend"): "ascend-910b",
}

# Rewrites of the products' operands, before their copies are placed (each a pure TileProgram -> TileProgram)
OPERAND_PASSES = {
    "triton": (
        hoist_invariant_operands,  # a product operand the same in every iteration of a loop is loaded before it
        read_rounded_sources,  # an operand that only rounds a register tile to the operand dtype reads that tile
    ),
    "tilelang": (
        hoist_invariant_operands,
        read_rounded_sources,
    ),
    "ascend-950": (
        hoist_invariant_operands,
    ),
}

# The tile rewrites one backend's hardware needs, in order (each a pure TileProgram -> TileProgram)
TARGET_PASSES = {
    "triton": (
        mask_scores_once,  # a finished score tile set to -inf outside its mask once, so what follows needs none
        mark_descriptors,  # operand loads and tile stores a TMA descriptor can make (Load.box, store_box)
        refuse_persistent_overflow,  # a persistent kernel's stored tiles beside its operands in shared memory
        plain_pipelines,  # a warp-specialised loop runs pipelined (the arrangement is TileLang's)
    ),
    "tilelang": (
        mask_scores_once,
        check_warp_specialized,  # a warp-specialised loop has the form its arrangement needs, or is refused
    ),
    "ascend-950": (
        plain_pipelines,
        refuse_cube_recurrences,  # values through memory are ordered on the vector cores (a PIPE_ALL barrier)
    ),
    "ascend-910b": (
        plain_pipelines,
        refuse_folded_products,  # folded tensors go lane by lane; a product's operand tiles are whole regions
        refuse_cube_recurrences,  # values through memory are ordered on the vector cores (T.barrier_all)
        widen_narrow_tiles,  # vector tile rows of whole 32-byte blocks (GM <-> UB copies), 128 elements with E4M3
        split_vector_rows,  # each of the AI core's two vector cores takes half of every vector tile's rows
        refuse_uncopyable_operands,  # no product operand that no one copy moves (others go lane by lane)
        assign_cross_core,  # GM workspaces and cross-core flags for tiles passed between cube and vector cores
    ),
}

# The device whose capacities a backend's buffers are checked against (the H200 has the H100's per-SM limits).
DEVICE = {"triton": "h100", "tilelang": "h100", "ascend-950": "ascend-950", "ascend-910b": "ascend-910b"}


def lower_for(schedule, backend: str, device: Optional[str] = None) -> TileProgram:
    """The tile program `backend` prints for `schedule` on `device` (default: the backend's `DEVICE`); raises
    CapacityError / BackendError as the steps do."""
    schedule = without_empty_statements(schedule)  # as lower() sees it
    program = lower(schedule)  # tiles, loops, masks and reductions of the scheduled tree (compiler/lower/build.py)
    return _passes(program, schedule, backend, device)


def prepare(program: TileProgram, schedule, backend: str, device: Optional[str] = None) -> TileProgram:
    """The backend-specific passes over a lowered program (each returns a new program; none edits its input)."""
    return _passes(program, without_empty_statements(schedule), backend, device)


def takes_run_time_sizes(backend: str) -> bool:
    """Whether `backend`'s kernels take `param` sizes at run time: only the Triton launcher reads sizes off the
    tensors; the others are compiled for fixed sizes."""
    return backend == "triton"


def _passes(program: TileProgram, schedule, backend: str, device: Optional[str]) -> TileProgram:
    params = schedule.model.params
    if params and not takes_run_time_sizes(backend):
        are, give = ("is a run-time size", "it a value") if len(params) == 1 else ("are run-time sizes", "them values")
        raise BackendError(f"the {backend} kernels are compiled for fixed sizes, and {', '.join(params)} {are}: "
                           f"give {give} (--size {params[0]}=..., or tdsl.load(..., sizes=...)); only Triton's "
                           f"kernels (--target nvidia --backend triton) take sizes at run time", backend)
    program = with_stages(program, schedule, device or DEVICE[backend], backend)  # buffers checked on the device
    program = assign_units(program, backend)  # the unit of every tile product (compiler/analysis/placement.py)
    for rewrite in OPERAND_PASSES.get(backend, ()):
        program = rewrite(program)
    program = stage_operands(program, backend)  # where each product's operands are copied first (placement.py)
    program = mark_unclipped(program)  # which comparisons of each store's mask clipping does not enforce
    try:
        for rewrite in TARGET_PASSES.get(backend, ()):
            program = rewrite(program)
    except CapacityError as err:  # a pass checks the backend's device limits: name the device compiled for
        raise CapacityError(device or DEVICE[backend], err.violations, schedule.name) from None
    return check_int32(program)  # every index, mask and address fits the kernels' 32-bit integers


def with_stages(program: TileProgram, schedule, device: str, backend: str) -> TileProgram:
    """Check the schedule's buffers against the device, as planned and as the backend generates them (tiles padded
    to their lanes, the operand copies Triton and TileLang make), and give each kernel the pipeline depth of its
    plan.  With run-time sizes the footprints are unknown until launch: the kernels keep the stages lowering gave."""
    if schedule.model.params:
        return program
    from tdsl.compiler.analysis.buffer_plan import check, kernel_stages
    from tdsl.compiler.analysis.cost.backend_rules import generated_overflow
    from tdsl.compiler.targets import get_target

    plans = check(schedule, device)  # a schedule whose buffers do not fit is rejected here
    overflow = generated_overflow(schedule.model, plans, get_target(device), backend)
    if overflow is not None:
        raise CapacityError(device, [overflow], schedule.name)
    return replace(program, kernels=[replace(k, num_stages=kernel_stages(plan))
                                     for k, plan in zip(program.kernels, plans)])
