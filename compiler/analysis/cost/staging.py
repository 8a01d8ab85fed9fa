"""The plan as Triton allocates it on sm_90: a tensor-core product's operands loaded from memory sit in shared memory.

The buffer plan keeps an operand tile that no `cache_read` stages where the program reads it: in registers
(flash attention's Q, K and V).  On sm_90 the tensor cores' wgmma reads its operands from shared memory, and
Triton copies a dot operand it loads from global memory there (placement.STAGING: "Triton's own pipeliner
places the shared-memory copies"), never holding it in registers.  Its pipeliner keeps one copy per stage of the
loop the load is issued in, all live across the loop; the stages are the loop's `pipeline`, or the kernel's
num_stages where the loop has none (compiler/lower/build.py: the deepest pipeline of the kernel, 2 without one).
A loop of one stage is not pipelined: its copies live where the plan's tiles do, and may share memory.  A tile
loaded once (Q, hoisted out of the K loop) has one copy.  The TileLang printer copies such operands of every
product, also of one it multiplies in an exact FMA loop (`K_s`, placement.STAGING), and `T.Pipelined(num_stages=N)`
keeps N of each; a loop without `pipeline` is `T.serial`, one copy.  Checked against the sm_90a lowering of every
legal example schedule (the kernel's `dyn_shared_memory_buf`, tests/backends/tilelang/test_tilelang_backend.py):
equal, but for TileLang's 512-byte reduction workspace and one named exception.  Two more differences: a
persistent Triton kernel keeps its stored tiles in shared memory of their own (`persistent_stores`), and neither
code generator makes a `cache_read` copy that no `Dot` reads (`unmade_copies`).

Measured by compiling the generated modules for sm_90 (Triton 3.9: `metadata.shared`, `cuobjdump -res-usage`),
examples/mha.tdsl at B = 8, H = 32, L = 4096 (tests/analysis/test_cost_staging.py checks the shared bytes):

| schedule | Triton: shared, registers, stack | the plan: shared, registers | as generated (estimate) |
|---|---|---|---|
| flash (128 x 128 blocks, 8 warps, 3 stages) | 224 KiB, 207, 0 | 0, 232 | 224 KiB, 168 |
| 128 x 64, 4 warps, 2 stages | 96 KiB, 255, 16 B | 0, 328 (72 spilled) | 96 KiB, 232 |
| 128 x 64, 4 warps, 3 stages | 128 KiB, 255, 0 | 0, 328 | 128 KiB, 232 |
| 128 x 128, 8 warps, no `pipeline` / `stages=1` | 160 / 64 KiB | 0 | 160 / 64 KiB |

So 4-warp 128 x 64 blocks do not spill (their 2-stage kernel ran at the 8-warp kernel's speed on the H200,
RESULTS "Multi-head attention"), and their 3-stage kernel fits one program an SM, not two.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

import islpy as isl

from tdsl.compiler.analysis.buffer_plan import KernelPlan, PlannedBuffer
from tdsl.compiler.analysis.buffer_sharing import working_sets
from tdsl.compiler.analysis.cost.work import product_unit, products
from tdsl.compiler.analysis.placement import MATRIX, STAGING, VECTOR
from tdsl.compiler.schedule.tree import Loop, statements_under, walk_loops
from tdsl.compiler.targets import Target

STAGED_SCOPE = "shared"


def as_generated(model, kp: KernelPlan, tgt: Target, backend: str = "triton",
                 prods: Optional[list] = None) -> KernelPlan:
    """`kp` with every operand tile the code generator (`triton`, or `tilelang`) stages moved to shared memory
    (its copies and live range as the pipeliner keeps them), TileLang's copies of register tiles read at a
    second lane pattern added (`pattern_copies`), a persistent Triton kernel's stored tiles added
    (`persistent_stores`), the `cache_read` copies it does not make left out (`unmade_copies`), and the working
    sets recounted; `kp` itself where there is none.  `prods`: the kernel's `products`, where the caller has
    them already."""
    prods = products(model, kp) if prods is None else prods
    staged = staged_operands(kp, prods, tgt, backend)
    added = pattern_copies(model, kp, tgt, backend)
    absent = absent_term_copies(model, kp, prods, tgt, backend)
    added += persistent_stores(kp, backend)
    unmade = {id(b) for b in unmade_copies(kp, prods, backend)}
    if not staged and not added and not absent and not unmade:
        return kp
    moved = {id(b): [_in_shared(b, shape, kp, backend) for shape in _operand_boxes(b, prods)] for b in staged}
    moved.update((key, []) for key in unmade)
    buffers = [c for b in kp.buffers for c in moved.get(id(b), [b])] + added + absent
    slots = []
    for slot in kp.slots:  # a slot shares memory within one scope: split what moved out of it
        now = [moved[id(b)][0] if id(b) in moved else b for b in slot if moved.get(id(b), True)]
        slots += [[b for b in now if b.scope == scope] for scope in dict.fromkeys(b.scope for b in now)]
        slots += [[c] for b in slot for c in moved.get(id(b), [])[1:]]  # a tile's further copies: live with the first
    slots += [[b] for b in added]
    for copy in absent:
        ring = _pipelined_copy(copy, [(b, c) for b in staged for c in moved[id(b)]], kp)
        home = next((slot for slot in slots if ring is not None and ring in slot), None)
        if home is not None:
            home.append(copy)
        else:
            slots.append([copy])
    working, peaks = working_sets(buffers, slots, len(kp.stmts))
    return replace(kp, buffers=buffers, slots=slots, working_set=working, peak_buffers=peaks)


def persistent_stores(kp: KernelPlan, backend: str) -> list[PlannedBuffer]:
    """The tiles a persistent Triton kernel (`launch(persistent=true)`) passes through shared memory on their way
    out, one per stored tile in its storage dtype, live across the kernel: while one program stores a tile, the
    next tile's operands are already being copied in, so the stored tile cannot reuse their memory as it does in a
    kernel that stores once (compiler/lower/passes/tma.py `persistent_bytes`, which the Triton lowering refuses
    by; measured on the H200: a 256 x 128 bf16 tile of 2 stages asked the plan's 196,608 B + 65,536 B)."""
    if backend != "triton" or not getattr(kp.root, "persistent", False):
        return []
    whole = (0, max(len(kp.stmts) - 1, 0))
    return [replace(a.buffer, scope=STAGED_SCOPE, dtype=a.dtype, stages=1, live=whole, shares=None,
                    source=a.buffer.scope)
            for a in kp.accesses if a.kind == "write" and a.dst == "global" and a.buffer is not None]


def unmade_copies(kp: KernelPlan, prods: list, backend: str) -> list[PlannedBuffer]:
    """The schedule's `cache_read` copies in shared memory that Triton and TileLang make no copy for.  Both copy a
    tensor on chip only as the operand of a product the lowering turns into a `Dot` (the tile IR's `Staged`, its
    `cache` the schedule's copy); any other statement reads the tensor from memory where it reads it.  So a
    GEMM at 7 x 7 x 7, whose 8 x 8 x 8 tile is below `placement.smallest_dot_tile`, is a vector product of
    global loads, and its copies of A and B take no shared memory."""
    if backend not in ("triton", "tilelang"):
        return []
    operands = {(p.stmt, tensor) for p in prods for tensor in p.tensors}
    return [b for b in kp.buffers if b.kind == "read" and b.scope == STAGED_SCOPE
            and not any((s, b.tensor) in operands for s in b.stmts)]


def pattern_copies(model, kp: KernelPlan, tgt: Target, backend: str) -> list[PlannedBuffer]:
    """The TileLang printer's shared copies of register tiles (backends/tilelang/emit.py
    `one_pattern_per_fragment`): TileLang gives a fragment one layout per `T.Parallel`, so a statement that reads
    a register tile of this kernel at two lane patterns (cholesky's An = Ap - Lc[k, i] * Lc[k, j]: Lc along the
    rows and along the columns) reads each further pattern from a copy in shared memory made just before it."""
    if backend != "tilelang":
        return []
    out = []
    for position, s in enumerate(kp.stmts):
        patterns: dict = {}  # tensor -> the index lists of its plain reads, in order, each once
        for access in model.stmt(s).reads:
            names = tuple(getattr(index, "name", None) for index in access.node.indices)
            if None not in names and access.tensor not in kp.read_back:
                patterns.setdefault(access.tensor, {})[names] = None
        for tensor, seen in patterns.items():
            held = _register_tile(kp, tensor, tgt)
            if held is None:
                continue
            out += [replace(held, scope=STAGED_SCOPE, stmts=[s], first=s, last=s, live=(position, position),
                            source=held.scope, shares=None) for _ in range(len(seen) - 1)]
    return out


def absent_term_copies(model, kp: KernelPlan, prods: list, tgt: Target, backend: str) -> list[PlannedBuffer]:
    """The TileLang printer's shared copy of a product operand held in registers (attention's P in P·V) where
    the product may have absent terms (backends/tilelang/emit.py `checked_product`: where an infinite or NaN
    element meets a masked lane, the exact product runs, each lane reading whole rows of P).  The
    lowering decides absent terms per tile (`Dot.absent_terms`); here a product whose reduction range depends
    on its output's indices (a causal `sum(j : j <= i)`) counts the copy, in the operand's dtype, live at the
    statement."""
    if backend != "tilelang":
        return []
    out = []
    for p in prods:
        if not _reduction_range_varies(model.stmt(p.stmt)):
            continue
        position = kp.stmts.index(p.stmt)
        for tensor in dict.fromkeys(p.tensors):
            held = _register_tile(kp, tensor, tgt)
            if held is not None:
                out.append(replace(held, scope=STAGED_SCOPE, dtype=model.tensors[tensor].dtype, stmts=[p.stmt],
                                   first=p.stmt, last=p.stmt, live=(position, position), source=held.scope,
                                   shares=None))
    return out


def _pipelined_copy(copy: PlannedBuffer, moved: list[tuple], kp: KernelPlan) -> Optional[PlannedBuffer]:
    """A shared copy of more than one stage that the statement of an absent-term copy reads in a loop pipelined
    without warp specialisation, at least as large: the iterations that make the copy carry masks (absent terms
    need one), and a loop's masked iterations run after its pipelined full ones as a loop of their own
    (compiler/lower/loops.py), whose memory TileLang gives to the pipelined copies' once those are done with.
    `moved`: (the plan's tile, its copy) pairs."""
    for tile, buf in moved:
        loop = _loaded_in(tile, kp)
        if (buf.stages > 1 and copy.stmts[0] in buf.stmts and buf.bytes >= copy.bytes and loop is not None
                and not loop.warp_specialize):
            return buf
    return None


def _reduction_range_varies(stmt) -> bool:
    """Whether a reduction's range depends on its output's indices: its domain is not the product of its
    projections onto the output and the reduction iterators."""
    n_out, n_red = len(stmt.lhs_iters), len(stmt.red_iters)
    if not n_red:
        return False
    out = stmt.domain.project_out(isl.dim_type.set, n_out, n_red)
    red = stmt.domain.project_out(isl.dim_type.set, 0, n_out)
    domain = stmt.domain.reset_tuple_id()
    return not out.reset_tuple_id().flat_product(red.reset_tuple_id()).is_subset(domain)


def _register_tile(kp: KernelPlan, tensor: str, tgt: Target) -> Optional[PlannedBuffer]:
    """The register tile of more than one element that a statement of this kernel computes `tensor` into."""
    return next((b for b in kp.buffers if b.tensor == tensor and b.scope == tgt.default_scope and b.source == ""
                 and b.kind in ("tile", "temp") and math.prod(b.shape) > 1), None)


def copies(generated: KernelPlan) -> list[PlannedBuffer]:
    """The operand copies `as_generated` placed in shared memory."""
    return [b for b in generated.buffers if b.scope == STAGED_SCOPE and b.kind == "tile" and b.source == "global"]


def staged_operands(kp: KernelPlan, prods: list, tgt: Target, backend: str = "triton") -> list[PlannedBuffer]:
    """The plan's register tiles loaded from global memory that only products whose operands the code generator
    copies (`_copies_operands`) read, as operands."""
    operands = {p.stmt: set(p.tensors) for p in prods if _copies_operands(p, tgt, backend)}
    return [b for b in kp.buffers
            if b.scope == tgt.default_scope and b.kind == "tile" and b.source == "global"
            and b.stmts and all(b.tensor in operands.get(s, ()) for s in b.stmts)]


def _copies_operands(p, tgt: Target, backend: str) -> bool:
    """Does the generated code copy the product's operands to shared memory itself?  Triton's pipeliner: those of
    a product on the tensor cores where they read shared memory (sm_90's wgmma).  TileLang's printer: every
    product's (placement.STAGING: `T.copy` to shared, then `T.gemm` or the exact FMA loop)."""
    unit = MATRIX if product_unit(p, tgt).startswith("tensor") else VECTOR
    if backend == "triton":
        return tgt.tensor_operands_in_shared and unit == MATRIX
    return STAGING.get(backend, {}).get(unit) == STAGED_SCOPE


def _operand_boxes(buf: PlannedBuffer, prods: list) -> list:
    """The shapes of the copies made of an operand tile: the plan's one where it is one operand; one box per
    operand where a product multiplies the tensor by itself (covariance's D[k, i] * D[k, j]): the plan holds
    the two reads' hull, and the code generators copy each operand's tile apart."""
    both = next((p for p in prods if p.tensors == (buf.tensor, buf.tensor) and p.boxes), None)
    return list(both.boxes) if both is not None else [buf.shape]


def _in_shared(buf: PlannedBuffer, shape: list, kp: KernelPlan, backend: str) -> PlannedBuffer:
    loop = _loaded_in(buf, kp)
    stages = _stages(loop, kp, backend)
    if stages < 2:
        return replace(buf, scope=STAGED_SCOPE, shape=shape)
    under = statements_under(loop)
    positions = [kp.stmts.index(s) for s in under if s in kp.stmts]
    return replace(buf, scope=STAGED_SCOPE, shape=shape, stages=stages, live=(min(positions), max(positions)))


def _loaded_in(buf: PlannedBuffer, kp: KernelPlan) -> Optional[Loop]:
    """The loop in each iteration of which the tile is loaded (its global read's loop), None for once a kernel."""
    return next((a.loop for a in kp.accesses if a.buffer is buf), None)


def _stages(loop: Optional[Loop], kp: KernelPlan, backend: str) -> int:
    """Copies the pipeliner keeps of a tile loaded in each iteration of a serial loop; 1 for one loaded once.
    Triton pipelines every loop at the kernel's num_stages; TileLang only a loop the schedule pipelines."""
    if loop is None or loop.name not in kp.serial_loops:
        return 1
    if backend != "triton":
        return loop.pipeline or 1
    depths = [other.pipeline for other in walk_loops([kp.root]) if other.pipeline]
    return loop.pipeline or (max(depths) if depths else 2)
