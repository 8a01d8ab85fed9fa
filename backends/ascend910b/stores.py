"""Stores from UB to GM: whole tiles (T.copy clips at the tensor's bounds), row by row, a column of a tile, and
the read-modify-write of a tile whose mask excludes lanes inside the tensor.
"""

from __future__ import annotations

import math

from tdsl.backends.ascend910b import e4m3
from tdsl.backends.ascend910b.common import _Opnd, ROW
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.lane_masks import atoms, conjunction, mentions
from tdsl.compiler.lower.tileir import simplify


class Stores:
    """Methods of `Ascend910BPrinter` (emit.py); `self` is the printer."""

    def _store(self, stmt, tile, lhs, value: _Opnd, unclipped: tuple) -> None:
        """Store `value` over `tile` to stmt[lhs]; `unclipped`: the comparisons of the tile's mask that exclude
        lanes inside the tensor (the tile program's `unclipped`, for this tile)."""
        arg = next(t for t in self.kernel.tensors if t.name == stmt)
        shape = [a.size for a in tile.axes]
        src = value if value.kind == "tile" else self._materialise(value, shape)
        names = self._region_names(tile)
        region = self.gm_element(stmt, [names[it] for it in lhs])  # a folded dimension at its plane
        form, lanes_why = self.facts.store_form(stmt, tile, lhs)
        column = form == "column"
        axes = [a.iter for a in tile.axes]
        # the comparisons on no lane are the whole statement's condition, tested around it
        extra = [a for a in atoms(conjunction(list(unclipped))) if any(mentions(a, it) for it in axes)]
        # fold_storage: lane by lane (a region could cross the planes' wrap-around; one element cannot); so is a
        # region no one copy moves (`store_form`)
        if self.facts.planes(stmt) and axes:
            lanes_why = "its storage is folded"
        if len(axes) == 2 and any(not mentions(a, axes[-1]) for a in extra) and lanes_why is None:
            return self._store_rows(stmt, tile, lhs, src, unclipped)
        if lanes_why is None and extra and not column and self._lanes_of_another_block(extra):
            lanes_why = "its last lanes are another block's"
        lanewise = lanes_why is not None
        if extra and not column and not lanewise:  # read-modify-write: the GM tile is kept where the mask is false
            if arg.dtype == "f8e4m3":
                raise BackendError(f"{stmt}: a store of FP8 bytes under a mask other than the tensor's bounds is not "
                                   f"generated for ascend-910b")
            old = self.alloc(self.fresh(f"{stmt}_old"), shape, arg.dtype, "UB", f"{stmt} as it is in GM")
            if self._neighbour_stored_earlier(extra):
                self.emit("T.barrier_all()  # those lanes may be an earlier iteration's tile, stored (MTE3) before "
                          "this load (MTE2)")
            self.emit(f"T.copy({region}, {old})  # GM -> UB: lanes outside the domain keep these values")
            old = self._widen(old, arg.dtype, shape)
            out = self.temp(f"{stmt}_new", shape)
            self.emit(f"T.copy({src.code}, {out})  # UB -> UB")
            self._mask_lanes(out, tile, conjunction(extra), tensor=old)
            self.expr_temps.add(old)
            self.done(old)
            src = _Opnd("tile", out)
        if arg.dtype == "f8e4m3":
            src = _Opnd("tile", e4m3.encode_e4m3(self, src.code, shape))
            self.expr_temps.add(src.code)
        elif arg.dtype != "f32":
            out = self.temp(f"{stmt}_out", shape, arg.dtype, f"{stmt} in {arg.dtype}")
            self.emit(f'T.tile.cast({out}, {src.code}, "CAST_RINT", {math.prod(shape or [1])})')
            self.done(src)
            src = _Opnd("tile", out)
        if lanewise:
            self._store_lanes(stmt, tile, lhs, src.code, arg.dtype, lanes_why)
        elif column:
            self._store_column(stmt, tile, lhs, src.code, arg.dtype)
        else:
            clipped = " (clipped to the tensor)" if tile.mask is not None else ""
            self.emit(f"T.copy({src.code}, {region})  # UB -> GM{clipped}")
        self.done(src)

    def _store_rows(self, stmt, tile, lhs, src: _Opnd, unclipped: tuple) -> None:
        """A 2-D tile some of whose rows lie outside the domain (a tile size that is not a power of two: the
        tile's last rows are the next tile's first ones, which another vector core or block may be writing):
        stored row by row, each row inside the domain as a 1-D tile; the others are not written at all."""
        row, col = tile.axes
        r = self.fresh("r")
        parts = atoms(tile.mask)
        row_parts = [a for a in parts if not mentions(a, col.iter) and mentions(a, row.iter)]
        row_parts += self._row_inside(stmt, row.iter, lhs)
        scalars = {**tile.scalars, row.iter: simplify(T.Bin("+", row.offset, T.Var(ROW)))}
        sub = T.Tile(axes=[col], scalars=scalars, mask=conjunction([a for a in parts if a not in row_parts]))
        saved, self.vars[ROW] = self.vars.get(ROW), r
        depth = self.depth
        self.emit(f"for {r} in T.serial({row.size}):  # {stmt} row by row: rows outside the domain are not written")
        self.depth += 1
        self.emit(f"if {self._condition(row_parts, self._scalar_names(sub))}:")
        self.depth += 1
        row_unclipped = tuple(a for a in unclipped if a not in row_parts)
        self._store(stmt, sub, lhs, _Opnd("tile", f"{src.code}[{r}, :]"), row_unclipped)
        self.depth = depth
        self.vars[ROW] = saved
        self.done(src)

    def _row_inside(self, stmt, row: str, lhs) -> list:
        """The comparisons that keep a stored row inside its tensor.  A mask leaves out the tensor's bounds, which
        a copy clips; but a row wholly past them is not clipped to nothing (a copy of valid extent 0 writes the
        whole row), so a row-by-row store tests them itself (seidel-2d's skewed rows at N = 14)."""
        if row not in lhs:
            return []
        return self._inside(stmt, [T.Var(it) for it in lhs], [list(lhs).index(row)])

    def _lanes_of_another_block(self, extra) -> bool:
        """Whether the lanes outside a masked store's mask may be a neighbouring tile that another block stores
        at the same time (the mask mentions a grid axis: a tile size that is not a power of two).  A store that
        writes them back as they were (read-modify-write) is right only if no other core writes them meanwhile:
        lanes outside the statement's domain, or a neighbouring tile this core stores itself (a serial loop).
        Otherwise the tile is stored lane by lane (`_store_lanes`)."""
        grid = {v for axis in self.kernel.grid for v in axis.vars}
        return any(mentions(atom, v) for atom in extra for v in grid)

    def _store_lanes(self, stmt, tile, lhs, src: str, dtype: str, why: str) -> None:
        """A tile whose last lanes are another block's (`_lanes_of_another_block`), of a folded tensor (at its
        plane: `gm_element`), or that no one copy moves (`store_form`), element by element: each lane inside the
        tile's mask into the first lane of a row of whole 32-byte blocks (a UB -> GM copy starts on one), copied to
        its own GM element.  The other lanes
        are not written at all.  Slow (a copy a lane)."""
        *rows_axis, col = tile.axes
        staged = self._column_rows(stmt, col.size, dtype)
        names = self._scalar_names(tile)
        depth, at = self.depth, []
        for axis in (*rows_axis, col):
            v = self.fresh("r" if axis is not col else "w")
            self.emit(f"for {v} in T.serial({axis.size}):" + (f"  # {stmt} lane by lane: {why}" if not at else ""))
            self.depth += 1
            names[axis.iter] = self._row_code(axis, v)
            at.append(v)
        inside = self._inside(stmt, [T.Var(it) for it in lhs])  # the mask may leave them to clipping
        self.emit(f"if {self._condition(atoms(tile.mask) + inside, names)}:  # lanes inside the domain")
        self.emit(f"    {staged}[{at[-1]}, 0] = {_element(src, at)}")
        self.emit(f"    T.copy({staged}[{at[-1]}, 0:1], {self.gm_element(stmt, [names[it] for it in lhs])})  # UB -> GM")
        self.depth = depth
        self.done(staged)

    def _neighbour_stored_earlier(self, extra) -> bool:
        """Whether the lanes a masked store keeps may belong to the tile an earlier iteration of a serial loop
        around it stored: its mask mentions that loop (the reversed walk of a tile reads the lanes of the tile
        stored just before).  The load reading them back must then wait for that store (another pipe)."""
        serial = {loop.var for loop in self.loops}
        return any(mentions(atom, v) for atom in extra for v in serial)

    def _store_column(self, stmt, tile, lhs, src: str, dtype: str) -> None:
        """A 1-D tile down a GM column, element by element: each into the first lane of a row of whole 32-byte
        blocks (a UB -> GM copy starts on one), copied to its own GM element.  Rows outside the tile's mask
        (past the tensor, or outside the domain) are not written: the copies need no clipping and no
        read-modify-write."""
        axis = tile.axes[0]
        rows = self._column_rows(stmt, axis.size, dtype)
        r = self.fresh("r")
        names = self._scalar_names(tile)
        names[axis.iter] = self._row_code(axis, r)
        depth = self.depth
        self.emit(f"for {r} in T.serial({axis.size}):  # {stmt}'s column, one element at a time")
        self.depth += 1
        if tile.mask is not None:
            self.emit(f"if {self._condition(atoms(tile.mask), names)}:  # rows inside the domain")
            self.depth += 1
        self.emit(f"{rows}[{r}, 0] = {src}[{r}]")
        self.emit(f"T.copy({rows}[{r}, 0:1], {self.tensor(stmt)}[{', '.join(names[it] for it in lhs)}])  # UB -> GM")
        self.depth = depth
        self.done(rows)


def _element(src: str, lanes: list) -> str:
    """The element at `lanes` of a UB tile, or of a row of one (`t[r, :]`, as `_store_rows` passes it)."""
    if src.endswith(", :]"):
        return f"{src[:-2]}{', '.join(lanes)}]"
    return f"{src}[{', '.join(lanes)}]"
