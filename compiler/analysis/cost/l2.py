"""Reuse in L2: the global bytes that reach DRAM when the programs resident together share the tiles they load.

CUDA starts blocks in the order of their linear index (grid x fastest, then y, z); `resident blocks x SMs` of
them run together, one wave.  A tile that several programs of one wave load is read from DRAM once and hit in L2
by the others.  isl says which grid loops a load's tile depends on (`grid_dependence`); the launch order says how
many values each grid loop takes within one wave (`grid_order`, `wave_extent`).  docs/cost.md, "DRAM after
reuse in L2".
"""

from __future__ import annotations

import math
from typing import Optional

import islpy as isl

from tdsl.compiler.analysis.buffer_plan import DTYPE_BYTES, KernelPlan
from tdsl.compiler.analysis.cost.results import KernelCost
from tdsl.compiler.schedule.tree import Loop
from tdsl.compiler.targets import Target


def dram_bytes(model, kp: KernelPlan, cost: KernelCost, tgt: Target, resident: int) -> int:
    """Global bytes that reach DRAM.  Programs are launched in grid order and `resident` x SMs of them run
    together (a wave); a tile that several programs of one wave load is read from DRAM once and hit in L2 by
    the others, so a load's DRAM bytes are its counted bytes x (distinct tiles in a wave / programs in a wave).
    When every tensor the kernel reads fits in L2 together, none is read from DRAM twice.  Writes reach DRAM once;
    an intermediate the kernel stores and reads back (KernelPlan.read_back) is read by the program that stored
    it, from L2."""
    wave = min(cost.programs, resident * tgt.units)
    order = grid_order(kp, cost)
    counted_bytes = {_key(t): t.bytes for t in cost.transfers}  # what traffic.py counted, by movement
    reads = [a for a in kp.accesses if a.src == "global" and a.tensor not in kp.read_back]
    sizes = {a.tensor: tensor_bytes(model, a.tensor) for a in reads}
    fits = tgt.l2_bytes is not None and None not in sizes.values() and sum(sizes.values()) <= tgt.l2_bytes
    per_tensor: dict = {}
    for a in reads:
        counted = counted_bytes[_key(a)]
        if a.loop is None:  # loaded once by the whole kernel: nothing to share
            nbytes = counted
        else:
            varies = grid_dependence(kp, a)
            distinct = math.prod(wave_extent(order, name, wave) for name in varies)
            nbytes = min(counted, counted * distinct // max(wave, 1))
        per_tensor[a.tensor] = per_tensor.get(a.tensor, 0) + nbytes
    if fits:  # a tensor loaded by several movements (a row read by two loops) is read from DRAM once
        per_tensor = {t: min(n, sizes[t]) for t, n in per_tensor.items()}
    return cost.global_write + sum(per_tensor.values())


def _key(movement) -> tuple:
    """A movement's identity, the same for the plan's TileAccess and the cost's Transfer made from it."""
    loop = movement.loop_name if hasattr(movement, "loop_name") else movement.loop  # TileAccess / Transfer
    return movement.tensor, movement.kind, movement.src, movement.dst, loop, tuple(movement.stmts)


def tensor_bytes(model, tensor: str) -> Optional[int]:
    """Bytes of a whole tensor (None when a size is a run-time parameter)."""
    t = model.tensors[tensor]
    if not all(isinstance(d, int) for d in t.shape):
        return None
    return DTYPE_BYTES[t.dtype] * math.prod(t.shape)


def grid_order(kp: KernelPlan, cost: KernelCost) -> list:
    """The grid loops with their extents, fastest-varying first: CUDA starts blocks in order of their linear
    index (x fastest, then y, z); loops fused on one axis vary innermost first (backends/triton/emit.py)."""
    extents, outer = {}, 1
    for loop in kp.grid_loops:  # tree order: outer to inner
        total = cost.loop_iterations.get(loop.name, 1)
        extents[loop.name] = max(round(total / outer), 1)
        outer = max(total, 1)
    rank = {"x": 0, "y": 1, "z": 2}
    position = {loop.name: n for n, loop in enumerate(kp.grid_loops)}
    loops = sorted(kp.grid_loops, key=lambda l: (rank.get(l.bind, 3), -position[l.name]))
    order = [(l.name, extents[l.name]) for l in loops]
    group = getattr(kp.root, "group", None)
    x = [l.name for l in loops if l.bind == "x"]
    y = [l.name for l in loops if l.bind == "y"]
    if group and len(x) == 1 and len(y) == 1:  # `launch(group=G)`: G values of x, all of y, then the next group
        nx, ny = extents[x[0]], extents[y[0]]
        rest = [(n, e) for n, e in order if n not in (x[0], y[0])]
        order = [(x[0], min(group, nx)), (y[0], ny), (x[0], math.ceil(nx / group))] + rest
    return order


def wave_extent(order: list, name: str, wave: int) -> int:
    """How many values grid loop `name` takes over `wave` consecutive programs (a loop may appear twice in the
    order: grid.x of a grouped launch, once within a group and once across groups)."""
    stride, values = 1, 1
    for loop, extent in order:
        if loop == name:
            values *= min(extent, max(1, math.ceil(wave / stride)))
        stride *= extent
    return values


def grid_dependence(kp: KernelPlan, access) -> list:
    """The grid loops whose value changes the tile a global access moves (isl: the touched region with that
    loop's dimension projected out is larger than the region itself)."""
    dims = loop_dims(kp.root, access.loop)
    grid = {l.name for l in kp.grid_loops}
    rel = access.touched
    varies = []
    for name, positions in dims.items():
        if name not in grid:
            continue
        for d in positions:
            free = rel.project_out(isl.dim_type.in_, d, 1).insert_dims(isl.dim_type.in_, d, 1)
            if not free.intersect_domain(rel.domain()).is_subset(rel):
                varies.append(name)
                break
    return varies


def loop_dims(root, target: Optional[Loop]) -> dict:
    """Loop name -> positions of its dimensions in a movement's domain (the loops from the kernel's root down to
    the loop the movement happens in, each contributing its dimensions)."""
    if target is None or not isinstance(root, Loop):
        return {}
    path = _path(root, target) or []
    out, d = {}, 0
    for loop in path:
        out[loop.name] = list(range(d, d + loop.n_dims))
        d += loop.n_dims
    return out


def _path(node, target: Loop) -> Optional[list]:
    if node is target:
        return [node]
    for child in getattr(node, "body", []):
        if isinstance(child, Loop):
            found = _path(child, target)
            if found is not None:
                return [node] + found
    return None
