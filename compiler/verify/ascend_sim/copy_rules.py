"""Which copies the Ascend cores can make, and how the 910B's copies between GM and the chip clip their regions.

`PATHS`: the data paths of each target (source scope, destination scope) -> the pipe that moves the data;
`CORE_910B`: which 910B core (cube "C" or vector "V") owns each path.  The functions model tilelang-ascend
0.1.4's lowering of a `T.copy` between GM and the chip (ascend.cc:336-421, common.h): the valid extent of a GM
region that leaves its tensor, and the row layout a GM <-> UB copy needs on its UB side.  The machine
(regions.py) applies them.
"""

from __future__ import annotations

import numpy as np

from tdsl.compiler.verify.ascend_sim.buffers import SimulationError, Unsupported, _contiguous, _span

# (source scope, destination scope) -> the pipe that moves the data
PATHS = {
    # the 950's vector cores also write the cube's L1 (UB -> L1: tilelang.ascend.language.copy, lowered with an
    # ND -> NZ conversion by the dialect's InsertNd2Nz pass)
    "ascend-950": {("GM", "L1"): "MTE2", ("GM", "UB"): "MTE2", ("L1", "L0A"): "MTE1", ("L1", "L0B"): "MTE1",
                   ("L0C", "UB"): "FIX", ("L0C", "GM"): "FIX", ("UB", "GM"): "MTE3", ("UB", "UB"): "V",
                   ("UB", "L1"): "MTE3"},
    "ascend-910b": {("GM", "L1"): "MTE2", ("L1", "L0A"): "MTE1", ("L1", "L0B"): "MTE1", ("L0C", "GM"): "FIX",
                    ("GM", "UB"): "MTE2", ("UB", "GM"): "MTE3", ("UB", "UB"): "V"},
}
CORE_910B = {("GM", "L1"): "C", ("L1", "L0A"): "C", ("L1", "L0B"): "C", ("L0C", "GM"): "C",
             ("GM", "UB"): "V", ("UB", "GM"): "V", ("UB", "UB"): "V"}


def _active_dims(ext) -> list:
    """find_active_dim_indices (ascend.cc:346-376): the dimensions of extent != 1, always with the last one,
    and with the one before it when there would be a single one; the last two are copied as rows x columns."""
    n = len(ext)
    active = [i for i, e in enumerate(ext) if e != 1]
    if n >= 1 and (not active or active[-1] != n - 1):
        active.append(n - 1)
    if n >= 2 and len(active) == 1:
        active.insert(0, n - 2)
    return active


def _clip(gm, lo, ext, what) -> tuple:
    """The valid extents of the GM region of a 910B copy: compute_valid_extent (ascend.cc:336-344) gives
    min(extent, max(shape - start, 0)) along the rows and columns the copy moves (ascend.cc:380-421)."""
    if any(a < 0 for a in lo):
        raise SimulationError(f"{what}: the GM region {gm.name}[{_span(lo, ext)}] starts at a negative index; the "
                              f"910B's copy clips only the end of a region (compute_valid_extent, ascend.cc:336-344)")
    if any(e < 0 for e in ext):
        raise SimulationError(f"{what}: the GM region {gm.name}[{_span(lo, ext)}] ends before it starts")
    valid = tuple(min(e, max(d - a, 0)) for a, e, d in zip(lo, ext, gm.shape))
    active = _active_dims(ext)
    if len(active) > 2:
        raise SimulationError(f"{what}: the GM region {gm.name}[{_span(lo, ext)}] has {len(active)} dimensions of "
                              f"extent > 1, but the 910B's copy moves validRow x validCol of the last two only "
                              f"(ascend.cc:380-421)")
    for i, (v, e) in enumerate(zip(valid, ext)):
        if v != e and i not in active:
            raise Unsupported(f"{what}: the GM region {gm.name}[{_span(lo, ext)}] leaves {gm.name} (shape "
                              f"{tuple(gm.shape)}) along dimension {i}, which the copy does not clip (only the "
                              f"last two dimensions of extent != 1 are, find_active_dim_indices, ascend.cc:346-376)")
    if 0 in valid:
        raise SimulationError(f"{what}: the GM region {gm.name}[{_span(lo, ext)}] lies entirely outside {gm.name} "
                              f"(shape {tuple(gm.shape)}): a valid extent of 0 is read as the whole tile by "
                              f"copy_gm_to_l1 / copy_l0c_to_gm (common.h:60-61, 159-160) and as no rows by "
                              f"DataCopyPad")
    return valid


def _ub_rows(ub, lo, ext, what) -> None:
    """A GM <-> UB copy lays its UB side out as rows of the region's last extent (copy_gm_to_ub / copy_ub_to_gm:
    DataCopyPad with a UB stride in 32-byte blocks, common.h:199-236), each row starting on a 32-byte block."""
    rows = int(np.prod(ext[:-1]))
    if rows <= 1:
        return
    if not _contiguous(ub.shape, ext):
        raise SimulationError(f"{what}: the {rows} rows of the UB region {ub.name}[{_span(lo, ext)}] are not adjacent "
                              f"in {ub.name} {tuple(ub.shape)}, but copy_gm_to_ub / copy_ub_to_gm (common.h:199-236) "
                              f"place UB rows {ext[-1]} elements apart")
    row = ext[-1] * ub.data.itemsize
    if row % 32:
        raise SimulationError(f"{what}: UB rows of {ext[-1]} {ub.dtype} ({row} B) in {ub.name}: DataCopyPad starts "
                              f"every UB row on a 32-byte block (common.h:218-224), so a tile of several rows needs "
                              f"rows of a multiple of 32 bytes")
