"""Regions of buffers, and the operations on whole regions: `T.copy`, the cube's product, the 910B's tile views.

A mixin of the machine (machine.py).  A region is a buffer with a subscript (`A[r0:r0 + 64, :]`, or a point
`A[r0, c0]` whose extent comes from the other operand of a `T.copy`).  `copy` checks a copy against the
target's data paths, dtypes, shapes and (910B) the clipping of its GM region (copy_rules.py), then moves the
data and records GM writes (cross_core.py); `matmul` is `T.gemm` / `T.mma` on L0A, L0B and an f32 L0C;
`flat_view`, `scalar_load` and `scalar_value` are the operands of the 910B's `T.tile.*` (tile910b.py): a
contiguous UB region as a pointer and an element count, a `BufferLoad` read at its first index.
"""

from __future__ import annotations

import numpy as np

from tdsl.compiler.verify.ascend_sim.buffers import (DUPLICATE_DTYPES, Buffer, BufferLoad, Region, SimulationError, Unsupported, _contiguous,
                      _is_int, _is_scalar, _key, _slices, _span, _storage, _strip, _what)
from tdsl.compiler.verify.ascend_sim.copy_rules import CORE_910B, PATHS, _clip, _ub_rows


class _Regions:
    """The machine's operations on regions; it uses the machine's `target`, `core`, `lanes`, `masks`, `stages`,
    `load`, `_account` and the GM records of cross_core.py."""

    def region(self, base, key):
        if isinstance(base, Region):
            raise Unsupported("a subscript of a region")
        if not isinstance(base, Buffer):
            raise SimulationError(f"T.copy of {type(base).__name__}, not a buffer")
        return Region(base, _key(key))

    def region_arg(self, base, key):
        """A subscript with a slice passed to T.tile.* / T.reduce_*: a BufferRegion."""
        if not isinstance(base, Buffer):
            return base[key[0] if len(key) == 1 else key]  # not a buffer: the subscript as written
        return Region(base, _key(key))

    def load_arg(self, base, key):
        """A subscript of integer indices passed to T.tile.* / T.reduce_*: a BufferLoad, not yet read."""
        if not isinstance(base, Buffer):
            return base[key[0] if len(key) == 1 else key]
        return BufferLoad(base, _key(key))

    def _bounds(self, x, other=None):
        """(buffer, start, extent) of a buffer or region, not yet checked against the buffer's shape; a point
        region takes its extent from `other`, right-aligned (npu_copy_v2, copy.py:223-246)."""
        if isinstance(x, Buffer):
            return x, (0,) * len(x.shape), tuple(x.shape)
        if not isinstance(x, Region):
            raise SimulationError(f"expected a buffer or a region, got {_what(x)}")
        buf, key = x.buf, x.key
        if Ellipsis in key:
            n = key.index(Ellipsis)
            key = key[:n] + (slice(None),) * (len(buf.shape) - len(key) + 1) + key[n + 1:]
        if len(key) != len(buf.shape):
            raise SimulationError(f"{buf.name} has {len(buf.shape)} dimensions but the region has {len(key)}")
        if all(_is_int(k) for k in key):  # a point: the extent is the other operand's shape, right-aligned
            if other is None:
                raise SimulationError(f"a point region of {buf.name} needs a buffer on the other side")
            ext = _strip(self._extent(other))
            if len(ext) > len(key):
                raise SimulationError(f"a {len(ext)}-d copy into the {len(key)}-d {buf.name}")
            return buf, tuple(int(k) for k in key), (1,) * (len(key) - len(ext)) + ext
        lo, ext = [], []
        for k, d in zip(key, buf.shape):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise Unsupported(f"a strided region of {buf.name}")
                a = 0 if k.start is None else int(k.start)
                lo.append(a)
                ext.append((d if k.stop is None else int(k.stop)) - a)
            elif _is_int(k):
                lo.append(int(k))
                ext.append(1)
            else:
                raise SimulationError(f"{buf.name}: region index {k!r} is not an integer or a slice")
        return buf, tuple(lo), tuple(ext)

    @staticmethod
    def _inside(buf: Buffer, lo, ext) -> None:
        if any(a < 0 or e < 0 or a + e > d for a, e, d in zip(lo, ext, buf.shape)):
            raise SimulationError(f"region {buf.name}[{_span(lo, ext)}] lies outside {buf.name} "
                                  f"(shape {tuple(buf.shape)})")

    def _view(self, x, other=None):
        """(buffer, numpy view) of a buffer or region; a point region takes its extent from `other`."""
        buf, lo, ext = self._bounds(x, other)
        self._inside(buf, lo, ext)
        return buf, buf.data[_slices(lo, ext)]

    def _extent(self, x):
        if isinstance(x, Buffer):
            return x.shape
        if isinstance(x, Region):
            if all(_is_int(k) for k in x.key):
                raise SimulationError(f"T.copy between two point regions ({x.buf.name})")
            return self._bounds(x)[2]
        raise SimulationError(f"expected a buffer or a region, got {_what(x)}")

    def copy(self, src, dst, transpose=False, pad_value=None) -> None:
        if self.lanes is not None or self.masks:
            raise Unsupported("T.copy inside T.Parallel or under a lane condition")
        sb, s_lo, s_ext = self._bounds(src, other=dst)
        db, d_lo, d_ext = self._bounds(dst, other=src)
        clips = self.target == "ascend-910b"  # the 910B clips the GM side (ascend.cc:336-421); the 950 does not
        for b, lo, ext in ((sb, s_lo, s_ext), (db, d_lo, d_ext)):
            if not (clips and b.scope == "GM"):
                self._inside(b, lo, ext)
        what = f"T.copy {sb.name} -> {db.name}"
        path = (sb.scope, db.scope)
        pipe = PATHS[self.target].get(path)
        if pipe is None:
            raise SimulationError(f"{what}: {self.target} has no data path {path[0]} -> {path[1]}")
        if self.target == "ascend-910b":
            if self.core is None:
                raise SimulationError(f"{what} outside T.Scope")
            if CORE_910B[path] != self.core:
                raise SimulationError(f"T.copy {path[0]} -> {path[1]} ({sb.name} -> {db.name}) in the "
                                      f"{'cube' if self.core == 'C' else 'vector'} scope")
        if sb.data.dtype != db.data.dtype:
            raise SimulationError(f"T.copy {sb.name} ({sb.dtype}) -> {db.name} ({db.dtype}) converts dtypes; DMA "
                                  f"moves bytes")
        if db.role == "input":
            raise SimulationError(f"T.copy into input tensor {db.name}")
        if pad_value is not None and path != ("GM", "UB"):
            raise SimulationError(f"{what} with pad_value: only a GM -> UB copy pads (ascend.cc:455-467); "
                                  f"copy_gm_to_l1 zero-fills (common.h:68-72) and the other paths write only "
                                  f"what they copy")
        s, d = _strip(s_ext), _strip(d_ext)
        if transpose:
            if len(s) != 2 or (s[1], s[0]) != d:
                raise SimulationError(f"transposing T.copy {sb.name} {s_ext} -> {db.name} {d_ext}")
        elif s != d:
            raise SimulationError(f"T.copy {sb.name} {s_ext} -> {db.name} {d_ext}: shapes differ")
        if clips and path in (("GM", "UB"), ("UB", "GM")):
            ub, lo, ext = (db, d_lo, d_ext) if db.scope == "UB" else (sb, s_lo, s_ext)
            _ub_rows(ub, lo, ext, what)
        valid = None
        if clips and "GM" in path:
            gm, lo, ext = (sb, s_lo, s_ext) if sb.scope == "GM" else (db, d_lo, d_ext)
            valid = _clip(gm, lo, ext, what)
            if valid == ext:
                valid = None
        if valid is None:
            sv = sb.data[_slices(s_lo, s_ext)]
            dv = db.data[_slices(d_lo, d_ext)]
            val = np.ascontiguousarray(sv.reshape(s).T) if transpose else sv
            self._gm_read(sb, _slices(s_lo, s_ext))
            self._gm_store(db, pipe, _slices(d_lo, d_ext), val.reshape(dv.shape))
        else:
            if transpose:
                raise Unsupported(f"{what}: a transposing copy of a clipped GM region")
            self._clipped(sb, s_lo, s_ext, db, d_lo, d_ext, valid, pipe, pad_value)
        if self.target == "ascend-950" and path == ("GM", "L1") and self.stages and self.stages[-1] > 1:
            if db.stages < self.stages[-1]:
                db.stages = self.stages[-1]  # multi-buffered by the dialect's pipeliner
                self._account()

    def _clipped(self, sb, s_lo, s_ext, db, d_lo, d_ext, valid, pipe, pad_value) -> None:
        """A 910B copy whose GM region was clipped to `valid`: the valid part moves between GM and the leading
        corner of the on-chip region (the GM region's extents index both, their sizes being equal)."""
        corner = tuple(slice(0, v) for v in valid)
        if sb.scope == "GM":  # GM -> UB / L1
            g = _slices(s_lo, valid)
            self._gm_read(sb, g)
            dv = db.data[_slices(d_lo, d_ext)]
            tile = dv.copy().reshape(s_ext)
            if db.scope == "L1":
                tile[...] = 0  # copy_gm_to_l1 clears the whole tile first (common.h:57-72)
            elif db.dtype in DUPLICATE_DTYPES:  # copy_gm_to_ub Duplicate()s pad_value over it (common.h:209-217)
                tile[...] = self._pad(db, pad_value)
            tile[corner] = sb.data[g]
            dv[...] = tile.reshape(dv.shape)
        else:  # UB / L0C -> GM: only the valid rows and columns are written (common.h:156-177, 229-236)
            self._gm_store(db, pipe, _slices(d_lo, valid), sb.data[_slices(s_lo, s_ext)].reshape(d_ext)[corner])

    @staticmethod
    def _pad(buf: Buffer, pad_value):
        """pad_value in the UB dtype (ascend.cc:458-461 casts it; None is 0, copy.py:248-249)."""
        if pad_value is None:
            pad_value = 0
        if np.ndim(pad_value) != 0 or isinstance(pad_value, (Buffer, Region, BufferLoad)):
            raise SimulationError(f"pad_value {pad_value!r} for {buf.name} is not a scalar")
        return _storage(buf.dtype, pad_value, f"pad_value for {buf.name}")

    # ------------------------------------------------------------ the cube

    def matmul(self, A, B, C, transpose_A=False, transpose_B=False, clear=False, what="T.gemm") -> None:
        if self.lanes is not None:
            raise SimulationError(f"{what} inside T.Parallel")
        if self.target == "ascend-910b" and self.core != "C":
            raise SimulationError(f"{what} outside the cube scope T.Scope(\"C\")")
        ab, av = self._view(A)
        bb, bv = self._view(B)
        cb, cv = self._view(C)
        if (ab.scope, bb.scope, cb.scope) != ("L0A", "L0B", "L0C"):
            raise SimulationError(f"{what} takes L0A, L0B, L0C operands; got {ab.scope}, {bb.scope}, {cb.scope}")
        if ab.dtype != bb.dtype or ab.dtype not in ("bf16", "f16", "f8e4m3") or cb.dtype != "f32":
            raise Unsupported(f"{what} of {ab.dtype} x {bb.dtype} into {cb.dtype}: only one 16-bit or 8-bit operand "
                              f"dtype into an f32 accumulator is modelled")
        a = av.reshape(_strip(av.shape)).astype(np.float32)
        b = bv.reshape(_strip(bv.shape)).astype(np.float32)
        c_shape = _strip(cv.shape)
        if a.ndim != 2 or b.ndim != 2 or len(c_shape) != 2:
            raise SimulationError(f"{what} on operands that are not 2-D: {av.shape}, {bv.shape}, {cv.shape}")
        a = a.T if transpose_A else a
        b = b.T if transpose_B else b
        if a.shape[1] != b.shape[0] or (a.shape[0], b.shape[1]) != c_shape:
            raise SimulationError(f"{what}: [{a.shape[0]}, {a.shape[1]}] x [{b.shape[0]}, {b.shape[1]}] into "
                                  f"{list(c_shape)}")
        prod = np.matmul(a, b).reshape(cv.shape)
        if bool(clear):
            cv[...] = prod
        else:
            cv += prod

    # ------------------------------------------------------------ 910B vector tiles

    def vector_op(self, what: str) -> None:
        if self.target == "ascend-910b" and self.core != "V":
            raise SimulationError(f"{what} outside the vector scope T.Scope(\"V\")")

    def tile_view(self, x, what):
        b, v = self._view(x)
        if b.scope != "UB":
            raise SimulationError(f"{what} on {b.name}, which is in {b.scope}, not UB")
        return b, v

    def flat_view(self, x, what):
        """(buffer, 1-D view) of a UB buffer or region as the T.tile.* functions see it: a pointer to its first
        element and an element count (_handle_buffer_region, ascend_tile.py:62-68), so it must be contiguous."""
        if not isinstance(x, (Buffer, Region)):
            raise SimulationError(f"{what} takes a UB buffer or region here, got {_what(x)}")
        b, lo, ext = self._bounds(x)
        self._inside(b, lo, ext)
        if b.scope != "UB":
            raise SimulationError(f"{what} on {b.name}, which is in {b.scope}, not UB")
        if not _contiguous(b.shape, ext):
            raise SimulationError(f"{what}: the region {b.name}[{_span(lo, ext)}] is not contiguous in {b.name} "
                                  f"{tuple(b.shape)}; T.tile.* take its first element and an element count "
                                  f"(ascend_tile.py:62-68), so they would touch other elements")
        n = int(np.prod(ext))
        start = int(np.ravel_multi_index(lo, b.shape)) if n else 0
        return b, b.data.reshape(-1)[start:start + n]

    def scalar_load(self, x: BufferLoad, what):
        """A BufferLoad passed as a scalar operand: tilelang-ascend passes the buffer's pointer and indices[0]
        only (binary_op, ascend_tile.py:819-829; compare, 1671-1681), so it must be a 1-D UB buffer."""
        b = x.buf
        if len(b.shape) != 1:
            raise SimulationError(f"{what}: the scalar operand {x!r} indexes the {len(b.shape)}-d {b.name}, but "
                                  f"tilelang-ascend reads a BufferLoad operand at its first index only "
                                  f"(buffer.access_ptr, indices[0], ascend_tile.py:819-829), i.e. {b.name}'s flat "
                                  f"element {x.key[0]}; bind the element to a name first (`p = {x!r}`) or use a 1-D "
                                  f"buffer")
        if b.scope != "UB":
            raise SimulationError(f"{what}: the scalar operand {x!r} is in {b.scope}, not UB")
        return self.load(b, x.key)

    def scalar_value(self, x, what):
        """A PrimExpr operand (T.tile.fill's value, createvecindex's firstValue): a BufferLoad is read in full."""
        if isinstance(x, BufferLoad):
            return self.load(x.buf, x.key)
        if not _is_scalar(x):
            raise SimulationError(f"{what} takes a scalar here, got {_what(x)}")
        return x
