"""The machine an emitted Ascend kernel runs on: blocks, allocation and capacities, lanes and masks, element access.

`_Machine` is the object the rewritten module calls as `__sim__` (rewrite.py) and the `T` namespaces call for
everything that touches memory (lang950.py, lang910b.py, tile910b.py).  One block at a time: buffers are
allocated NaN-filled (or INT_POISON) and summed per scope against the target's capacities; `T.Parallel` runs its
body once with broadcast index arrays and checks that its lanes are independent; `if` conditions become masks;
every load and store is bounds-checked on the lanes that perform it.  Regions and copies are in regions.py, GM
ordering between the 910B's cores in cross_core.py (mixins of `_Machine`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

import numpy as np

from tdsl.compiler.verify.ascend_sim.buffers import (ON_CHIP, Buffer, CapacityExceeded, KernelRun, Region, SimulationError, Unsupported, _dtype,
                      _is_int, _key, _Lanes, _pt, _scalar, _storage, _uninit)
from tdsl.compiler.verify.ascend_sim.cross_core import _CrossCore
from tdsl.compiler.verify.ascend_sim.regions import _Regions
from tdsl.compiler.verify.ascend_sim.rewrite import FILENAME


class _Machine(_Regions, _CrossCore):
    """One run of an emitted module: the state of the block being executed, and every check on it."""

    def __init__(self, target: str, capacities: dict, sizes: Optional[dict]):
        self.vid = 0  # the vector core running now (910B)
        self.target = target
        self.caps = capacities
        self.sizes = dict(sizes or {})
        self.kernel = None
        self.block = None
        self.source = []  # the module's lines, for messages

    # ------------------------------------------------------------ blocks

    def begin_block(self, kernel, block: int) -> None:
        self.kernel, self.block = kernel, block
        self.entered = False
        self.allocs = []
        self.used = {}
        self.core = None  # 910B: "C" | "V" inside T.Scope
        self.stages = []  # enclosing T.Pipelined stage counts
        self.lanes = None
        self.masks = []
        self.vid = 0  # the vector core running the current T.Scope("V") (each runs it, one after the other)
        self._reset_cross_core()  # 910B: cross-core flags and GM writes per core (cross_core.py)

    def end_block(self) -> None:
        if not self.entered:
            raise SimulationError("the kernel body never entered T.Kernel")
        self._check_flags_consumed()

    # ------------------------------------------------------------ allocation and capacities

    def view(self, shape, dtype, data) -> Buffer:
        """`T.decl_buffer(shape, dtype, data=X.data)` before T.Kernel: a GM tensor on a parameter's memory (an output
        stored in an input, `store_in`), which the kernel may write."""
        if self.entered:
            raise SimulationError("T.decl_buffer inside T.Kernel: declare a GM view before it")
        owner = next((b for b in self.gm.values() if b.data is data), None)
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if owner is None or owner.shape != shape or owner.dtype != _dtype(dtype):
            raise SimulationError(f"T.decl_buffer({shape}, {dtype}, data=...): data must be the .data of a GM "
                                  f"parameter of that shape and dtype")
        return Buffer(self, f"{owner.name} (view)", "GM", owner.dtype, owner.data, "output")

    def alloc(self, scope: str, shape, dtype) -> Buffer:
        if not self.entered:
            raise SimulationError("buffer allocated outside T.Kernel")
        if self.lanes is not None:
            raise SimulationError("buffer allocated inside T.Parallel")
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        d = _dtype(dtype)
        data = _uninit(d, shape)
        name = getattr(self, "next_name", None) or f"<{scope} buffer {len(self.allocs)}>"
        self.next_name = None
        buf = Buffer(self, name, scope, d, data)
        self.allocs.append(buf)
        self._account()
        return buf

    def _account(self) -> None:
        used = defaultdict(int)
        for b in self.allocs:
            used[b.scope] += b.data.nbytes * b.stages
        self.used = dict(used)
        for scope, need in used.items():
            cap = self.caps.get(scope)
            if cap is not None and need > cap:
                names = ", ".join(b.describe() for b in self.allocs if b.scope == scope)
                raise CapacityExceeded(f"the buffers in {scope} need {need:,} B but {self.target} allows {cap:,} B "
                                       f"per block: {names}", scope, need, cap)

    def named(self, name: str):
        """`X = T.alloc_*(...)` runs as `X = __sim__.named("X")(T.alloc_*(...))`: the name is known at allocation."""
        self.next_name = name

        def done(buf):
            self.next_name = None
            return buf

        return done

    # ------------------------------------------------------------ lanes and masks

    def parallel(self, extents):
        if self.lanes is not None:
            raise Unsupported("nested T.Parallel")
        ext = tuple(int(e) for e in extents)
        n = len(ext)
        lane_vars = [np.arange(e).reshape([-1 if i == k else 1 for i in range(n)]) for k, e in enumerate(ext)]
        self.lanes = _Lanes(ext)
        try:
            yield lane_vars[0] if n == 1 else tuple(lane_vars)
        finally:
            self.lanes = None

    def _mask(self):
        return self.masks[-1] if self.masks else None

    def when(self, cond):
        if np.ndim(cond) == 0:
            if bool(cond):
                yield
            return
        cond = np.asarray(cond)
        if cond.dtype != np.bool_:
            raise SimulationError(f"a condition of dtype {cond.dtype}")
        mask = self._mask()
        mask = cond if mask is None else np.logical_and(mask, cond)
        if not mask.any():
            return
        self.masks.append(mask)
        try:
            yield
        finally:
            self.masks.pop()

    def unless(self, cond):
        if np.ndim(cond) == 0:
            return self.when(not bool(cond))
        return self.when(np.logical_not(cond))

    def select(self, cond, then, other):
        """T.if_then_else: each operand evaluated only on the lanes that take it.  A Python float operand is a
        TIR float literal, float32 (TVM's default float dtype), as in `T.if_then_else(c, T.tanh(x), 3.0)`."""
        if np.ndim(cond) == 0:
            return _literal(then() if bool(cond) else other())
        cond = np.asarray(cond)
        a = b = None
        for _ in self.when(cond):
            a = _literal(then())
        for _ in self.unless(cond):
            b = _literal(other())
        if a is None:  # no lane takes the first operand (also: the literal of the other is float32, not a Python float)
            return b
        if b is None:
            return a
        ta = None if isinstance(a, (int, float)) else np.asarray(a).dtype
        tb = None if isinstance(b, (int, float)) else np.asarray(b).dtype
        if ta is not None and tb is not None and ta != tb:
            raise SimulationError(f"T.if_then_else with operands of dtypes {ta} and {tb}")
        t = ta or tb or (np.dtype(np.float32) if isinstance(a, float) or isinstance(b, float) else None)
        if t is not None:
            a, b = np.asarray(a, dtype=t), np.asarray(b, dtype=t)
        return _scalar(np.where(cond, a, b))

    # ------------------------------------------------------------ element access

    def _element_rules(self, buf: Buffer, write: bool) -> None:
        if buf.scope in ON_CHIP:
            raise SimulationError(f"element {'store to' if write else 'load of'} {buf.name}, which is in {buf.scope}: "
                                  f"only DMA (T.copy) and the cube reach {buf.scope}")
        if write and buf.role == "input":
            raise SimulationError(f"store into input tensor {buf.name}")
        if self.target == "ascend-910b":
            if self.core is None:
                raise SimulationError(f"element access to {buf.name} outside T.Scope")
            if self.core == "C" and buf.scope == "UB":
                raise SimulationError(f"the cube scope touches UB buffer {buf.name}")

    def _indices(self, buf: Buffer, key, extra=()):
        if len(key) != len(buf.shape):
            raise SimulationError(f"{buf.name} has {len(buf.shape)} dimensions but is indexed with {len(key)}")
        arrs = []
        for k in key:
            a = np.asarray(k)
            if a.dtype.kind not in "iu":
                raise SimulationError(f"{buf.name}: index {k!r} is not an integer")
            arrs.append(a)
        shapes = [a.shape for a in arrs] + [np.shape(e) for e in extra]
        if self.lanes is not None:
            shapes.append(self.lanes.shape)
        mask = self._mask()
        if mask is not None:
            shapes.append(np.shape(mask))
        shape = np.broadcast_shapes(*shapes)
        idx = [np.broadcast_to(a, shape) for a in arrs]
        active = np.broadcast_to(mask, shape) if mask is not None else None
        bad = np.zeros(shape, dtype=bool)
        for i, d in zip(idx, buf.shape):
            bad |= (i < 0) | (i >= d)
        if active is not None:
            bad &= active
        if bad.any():
            at = tuple(int(x) for x in np.argwhere(bad)[0])
            raise SimulationError(f"out-of-bounds access {buf.name}[{', '.join(str(int(i[at])) for i in idx)}] "
                                  f"(shape {tuple(buf.shape)}){self._lane_note(at)}")
        if active is not None:
            idx = [np.where(active, i, 0) for i in idx]
        return shape, idx, active

    def _lane_note(self, at) -> str:
        return f" by lane {_pt(at)} of T.Parallel{self.lanes.shape}" if self.lanes is not None and at else ""

    def load(self, buf: Buffer, key):
        key = _key(key)
        if any(isinstance(k, slice) or k is Ellipsis for k in key):
            return Region(buf, key)
        self._element_rules(buf, write=False)
        lanes = self.lanes
        if all(_is_int(k) for k in key) and not self.masks and (lanes is None or lanes.size == 1):
            if len(key) != len(buf.shape) or any(not 0 <= k < d for k, d in zip(key, buf.shape)):
                raise SimulationError(f"out-of-bounds access {buf.name}{list(key)} (shape {tuple(buf.shape)})")
            self._gm_read(buf, np.ravel_multi_index(key, buf.shape))
            return buf.data[key]
        shape, idx, active = self._indices(buf, key)
        if buf.scope == "GM":
            flat = np.ravel_multi_index(idx, buf.shape)
            self._gm_read(buf, flat[active] if active is not None else flat)
        if lanes is not None and lanes.size > 1:
            flat = np.ravel_multi_index(idx, buf.shape)
            lid = np.broadcast_to(lanes.ids, shape)
            if active is not None:
                flat, lid = flat[active], lid[active]
            else:
                flat, lid = flat.reshape(-1), lid.reshape(-1)
            w = lanes.writers.get(id(buf))
            if w is not None:
                prior = w[flat]
                bad = np.nonzero((prior >= 0) & (prior != lid))[0]
                if bad.size:
                    k = bad[0]
                    raise SimulationError(f"lane {_pt(int(lid[k]), lanes.shape)} of T.Parallel{lanes.shape} reads "
                                          f"{buf.name} element {_pt(int(flat[k]), buf.shape)}, which lane "
                                          f"{_pt(int(prior[k]), lanes.shape)} of the same loop stored: the lanes "
                                          f"are not independent")
            r = lanes.readers.get(id(buf))
            if r is None:
                r = lanes.readers[id(buf)] = np.full(buf.data.size, -1, dtype=np.int64)
            cur = r[flat]
            r[flat] = np.where(cur == -1, lid, np.where(cur == lid, cur, -2))
            after = r[flat]
            r[flat[(after >= 0) & (after != lid)]] = -2  # one element read by several lanes of this load
        return _scalar(buf.data[tuple(idx)])

    def _convert(self, buf: Buffer, value):
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, np.ndarray) and value.dtype == np.bool_):
            raise SimulationError(f"storing a boolean into {buf.name}")
        if isinstance(value, (int, float)):  # a literal: TIR gives it the buffer's dtype
            return _storage(buf.dtype, value, f"a literal stored into {buf.name}")[()]
        a = np.asarray(value)
        if a.dtype != buf.data.dtype:
            raise SimulationError(f"storing {a.dtype} values into {buf.name} ({buf.data.dtype}) needs a T.Cast "
                                  f"(a TIR BufferStore takes the buffer's dtype)")
        return value

    def store(self, buf: Buffer, key, value) -> None:
        key = _key(key)
        if any(isinstance(k, slice) or k is Ellipsis for k in key):
            raise Unsupported(f"slice assignment to {buf.name}")
        self._element_rules(buf, write=True)
        val = self._convert(buf, value)
        lanes = self.lanes
        if (all(_is_int(k) for k in key) and not self.masks and (lanes is None or lanes.size == 1)
                and np.ndim(val) == 0):
            if len(key) != len(buf.shape) or any(not 0 <= k < d for k, d in zip(key, buf.shape)):
                raise SimulationError(f"out-of-bounds access {buf.name}{list(key)} (shape {tuple(buf.shape)})")
            self._gm_store(buf, "S", tuple(key), val)  # scalar / SIMT stores to GM
            return
        shape, idx, active = self._indices(buf, key, extra=(val,))
        v = np.broadcast_to(val, shape)
        if active is not None:
            idx = [i[active] for i in idx]
            v = v[active]
        else:
            idx = [i.reshape(-1) for i in idx]
            v = v.reshape(-1)
        flat = np.ravel_multi_index(idx, buf.shape)
        if lanes is not None and lanes.size > 1:
            if shape != lanes.shape:
                raise Unsupported(f"a store to {buf.name} indexed beyond the lanes of T.Parallel{lanes.shape}")
            lid = lanes.ids[active] if active is not None else lanes.ids.reshape(-1)
            order = np.argsort(flat, kind="stable")
            dup = np.nonzero(flat[order][1:] == flat[order][:-1])[0]
            if dup.size:
                a, b = lid[order][dup[0]], lid[order][dup[0] + 1]
                raise SimulationError(f"lanes {_pt(int(a), lanes.shape)} and "
                                      f"{_pt(int(b), lanes.shape)} of T.Parallel{lanes.shape} both store "
                                      f"{buf.name} element {_pt(int(flat[order][dup[0]]), buf.shape)}")
            w = lanes.writers.get(id(buf))
            if w is None:
                w = lanes.writers[id(buf)] = np.full(buf.data.size, -1, dtype=np.int64)
            prior = w[flat]
            clash = (prior >= 0) & (prior != lid)
            if clash.any():
                k = int(np.nonzero(clash)[0][0])
                raise SimulationError(f"lane {_pt(int(lid[k]), lanes.shape)} of T.Parallel{lanes.shape} "
                                      f"overwrites {buf.name} element {_pt(int(flat[k]), buf.shape)} "
                                      f"that lane {_pt(int(prior[k]), lanes.shape)} stored")
            w[flat] = lid
            r = lanes.readers.get(id(buf))
            if r is not None:
                rd = r[flat]
                clash = np.nonzero((rd == -2) | ((rd >= 0) & (rd != lid)))[0]
                if clash.size:
                    k = clash[0]
                    who = "several lanes" if rd[k] == -2 else f"lane {_pt(int(rd[k]), lanes.shape)}"
                    raise SimulationError(f"lane {_pt(int(lid[k]), lanes.shape)} of T.Parallel{lanes.shape} stores "
                                          f"{buf.name} element {_pt(int(flat[k]), buf.shape)}, which {who} of the "
                                          f"same loop read: the lanes are not independent")
        self._gm_store_flat(buf, "S", flat, v)  # scalar / SIMT stores to GM

    # ------------------------------------------------------------ a kernel

    def run_kernel(self, kernel, gm: dict, scalars: tuple = ()) -> KernelRun:
        """Every block of `kernel` on the GM tensors `gm`, with the values of its scalar (host loop) parameters."""
        if len(scalars) != len(kernel.scalars):
            raise SimulationError(f"{kernel.name} takes {len(kernel.scalars)} scalar parameter(s), launched with "
                                  f"{len(scalars)}")
        args = [gm[name] for name, _ in kernel.params] + [int(v) for v in scalars]
        self.gm = gm
        footprint = {}
        blocks, b = None, 0
        self.grid = None  # set by T.Kernel in the first block; later blocks must ask for the same grid
        while blocks is None or b < blocks:
            self.begin_block(kernel, b)
            try:
                kernel.func(*args)
                self.end_block()
            except SimulationError as err:
                raise _located(err, kernel.name, b, self.source)
            except Exception as err:  # a call the fake API rejects, a name the module lacks, ...
                wrapped = SimulationError(f"{type(err).__name__}: {err}")
                raise _located(wrapped, kernel.name, b, self.source, err) from err
            if blocks is None:
                blocks = self.grid
            for scope, n in self.used.items():
                footprint[scope] = max(footprint.get(scope, 0), n)
            b += 1
        return KernelRun(kernel.name, blocks, footprint, dict(kernel.declared))


def _literal(x):
    """A Python float operand of T.if_then_else is a TIR float literal: float32 (TVM's default float dtype)."""
    return np.float32(x) if isinstance(x, float) else x


def _located(err: SimulationError, kernel: str, block: int, source, cause: Optional[BaseException] = None):
    """The error with the kernel, the block and the emitted line it happened at."""
    tb = (cause or err).__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f"{kernel}, block {block}"
    if line is not None and source:
        where += f", line {line}: {source[line - 1].strip()}"
    err.args = (f"{err.args[0] if err.args else ''} [{where}]",) + tuple(err.args[1:])
    return err
