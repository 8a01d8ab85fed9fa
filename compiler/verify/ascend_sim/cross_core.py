"""GM ordering between the 910B's cores: the cube, two vector cores, and the cross-core flags between them.

A mixin of the machine (machine.py), for the 910B only: every GM element a core writes in a block is recorded
with its writer and its pipe; `T.set_cross_flag(pipe, f)` publishes that core's writes on the pipe, and
`T.wait_cross_flag(f)` makes them visible to the waiting core.  Reading what another core wrote without such a
flag, waiting for a flag nobody set, and leaving a flag unconsumed at the end of a block are errors.  Within one
core a GM store (MTE3, or FIX from L0C) and a later load of it (MTE2) are different pipes too: reading back an
element the core itself changed needs a `T.barrier_all()` between them (a store of the value already there, as
a masked store writes back the lanes it keeps, changes nothing a load could see).  Flags
follow CrossCoreSetFlag's mode 2 (see the package docstring).  It uses the machine's `target`, `core` ("C" |
"V" inside a `T.Scope`) and `vid` (the vector core running now).

On the 950 only the second rule is modelled: its modules pass values through memory only on the vector cores
(compiler/lower/passes/recurrence.py), so a block is one core, and reading back an element it changed needs a
`T.ascend_pipe_barrier("PIPE_ALL")` between the store and the load.  Which core runs what, and the flags between
them, are the dialect's (it inserts them itself) and not checked.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from tdsl.compiler.verify.ascend_sim.buffers import Buffer, SimulationError, Unsupported, _pt

MAX_CROSS_FLAG = 10  # CrossCoreSetFlag flag ids 0..10 on Atlas A2 (the 910B)
CORE_CODE = {"C": 1, "V0": 2, "V1": 3}  # who wrote a GM element (0: nobody, in this block)
CORE_NAME = {1: "cube", 2: "vector core 0", 3: "vector core 1"}
ORDERED = ("ascend-910b", "ascend-950")  # the targets whose GM stores and later loads are checked for a barrier
BLOCK = "block"  # the 950's one core of a block, as far as the order of its stores and loads goes


def _flat_of(buf, where) -> np.ndarray:
    """Flat element indices of `where`: a tuple of slices or of one element's indices, or (an array of) flat
    indices."""
    if isinstance(where, tuple) and len(where) == len(buf.shape) and all(isinstance(k, (int, np.integer))
                                                                         for k in where):
        return np.array([np.ravel_multi_index(where, buf.shape)])
    if isinstance(where, tuple) and all(isinstance(k, (int, np.integer, slice)) for k in where):
        # the region's own indices, not the whole tensor's (a copy of one element of a large tensor is common)
        parts = list(where) + [slice(None)] * (len(buf.shape) - len(where))
        axes = [np.arange(*k.indices(n)) if isinstance(k, slice) else np.array([int(k) % n])  # numpy's wrap
                for k, n in zip(parts, buf.shape)]
        return np.ravel_multi_index(np.ix_(*axes), buf.shape).reshape(-1)
    if isinstance(where, tuple):
        return np.arange(buf.data.size).reshape(buf.shape)[where].reshape(-1)
    return np.asarray(where).reshape(-1)


def _differs(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Element by element, whether two arrays of one dtype differ in their bits (NaN equal to the same NaN)."""
    kind = f"u{new.dtype.itemsize}"
    return np.ascontiguousarray(new).view(kind) != np.ascontiguousarray(old).view(kind)


def _elements(per_tensor: dict, buf) -> np.ndarray:
    """The bool mask over `buf`'s elements kept in `per_tensor` (created empty)."""
    mask = per_tensor.get(buf.name)
    if mask is None:
        mask = per_tensor[buf.name] = np.zeros(buf.data.size, dtype=bool)
    return mask


class _CrossCore:
    """The machine's record of GM writes per core and of the cross-core flags (910B)."""

    def _reset_cross_core(self) -> None:
        """A new block: no flag set, nothing written."""
        self.flags = Counter()  # (receiving core "C" | "V", sending vector core or receiving vid, flag) -> count
        # element by element (flat bool masks per GM tensor), so a clipped copy counts only what it wrote
        self.published = defaultdict(dict)  # flag -> {GM tensor: elements it makes visible}
        self.pending = defaultdict(dict)  # (core, pipe) -> {GM tensor: elements written, not yet published}
        self.written_by = {}  # GM tensor -> per element: the core that wrote it in this block (0: none)
        self.visible = defaultdict(dict)  # core ("C", "V0", "V1") -> {GM tensor: elements it waited for}
        self.unordered = defaultdict(dict)  # core -> {GM tensor: elements it changed since its last barrier}

    def _check_flags_consumed(self) -> None:
        """The end of a block: every flag set must have been waited for."""
        left = {f"{flag} (for {'the cube, from' if core == 'C' else 'vector core'} {'vector core ' if core == 'C' else ''}"
                f"{vid})": n for (core, vid, flag), n in self.flags.items() if n}
        if left:
            raise SimulationError(f"cross-core flags set but never waited for at the end of the block: {left}; in "
                                  f"mode 2 a flag the cube sets reaches both vector cores, and each must wait for it")

    def _gm_store(self, buf: Buffer, pipe, where, value) -> None:
        """Store `value` at `where` (a tuple of slices or indices) of a buffer; on the Ascend targets, for a GM one,
        record the elements this core wrote on `pipe` and which of them the store changed."""
        if buf.scope != "GM" or self.target not in ORDERED:
            buf.data[where] = value
            return
        flat = _flat_of(buf, where)
        old = buf.data.reshape(-1)[flat].copy()
        buf.data[where] = value
        self._gm_write(buf, pipe, flat, old)

    def _gm_store_flat(self, buf: Buffer, pipe, flat: np.ndarray, value) -> None:
        """`_gm_store` at flat element indices."""
        old = buf.data.reshape(-1)[flat].copy() if buf.scope == "GM" and self.target in ORDERED else None
        buf.data.reshape(-1)[flat] = value
        if old is not None:
            self._gm_write(buf, pipe, flat, old)

    def _gm_write(self, buf: Buffer, pipe, flat: np.ndarray, old: np.ndarray) -> None:
        """Record the GM elements (flat indices) this core wrote on `pipe`; `old`: their values before, to tell
        which elements the store changed."""
        changed = _differs(buf.data.reshape(-1)[flat], old)
        if self.target == "ascend-950":
            _elements(self.unordered[BLOCK], buf)[flat] |= changed
            return
        w = self.written_by.get(buf.name)
        if w is None:
            w = self.written_by[buf.name] = np.zeros(buf.data.size, dtype=np.int8)
        me = CORE_CODE[self.who]
        both = (w[flat] != 0) & (w[flat] != me) & (w[flat] != CORE_CODE["C"])
        if both.any():
            at = int(np.reshape(flat, -1)[int(np.argmax(both))])
            raise SimulationError(f"both vector cores write {buf.name} element {_pt(at, buf.shape)} in this block: "
                                  f"they run at the same time, so their GM writes must not overlap")
        w[flat] = me
        _elements(self.pending[(self.who, pipe)], buf)[flat] = True
        # a load before the next barrier may still see the old value where the store changed it
        _elements(self.unordered[self.who], buf)[flat] |= changed

    def _gm_read(self, buf: Buffer, where) -> None:
        """Reading GM elements the other core wrote in this block needs a flag set after those writes; reading back
        what this core changed, a barrier after the store."""
        if self.target not in ORDERED or buf.scope != "GM":
            return
        if self.target == "ascend-950":
            at = self._changed_before_a_barrier(BLOCK, buf, where)
            if at is not None:
                raise SimulationError(f"the block reads {buf.name} element {_pt(at, buf.shape)}, which it changed, "
                                      f"without T.ascend_pipe_barrier(\"PIPE_ALL\") between the store and the load")
            return
        w = self.written_by.get(buf.name)
        if w is None:
            return
        flat = _flat_of(buf, where)
        at = self._changed_before_a_barrier(self.who, buf, flat)
        if at is not None:
            raise SimulationError(f"{CORE_NAME[CORE_CODE[self.who]]} reads {buf.name} element {_pt(at, buf.shape)}, "
                                  f"which it changed in this block, without T.barrier_all() between the store and "
                                  f"the load (different pipes: MTE3 or FIX, then MTE2)")
        other = (w[flat] != 0) & (w[flat] != CORE_CODE[self.who])
        seen = self.visible[self.who].get(buf.name)
        if seen is not None:
            other &= ~seen[flat]
        if other.any():
            at = int(np.reshape(flat, -1)[int(np.argmax(other))])
            reader = "cube" if self.core == "C" else "vector"
            writer = "cube" if w[at] == CORE_CODE["C"] else "vector"
            if self.core == "V" and writer == "vector":
                raise SimulationError(f"{CORE_NAME[CORE_CODE[self.who]]} reads {buf.name} element "
                                      f"{_pt(at, buf.shape)}, which {CORE_NAME[int(w[at])]} wrote in this block: the "
                                      f"two vector cores run at the same time and are not synchronised")
            raise SimulationError(f"the {reader} core reads {buf.name}, which the "
                                  f"{writer} core wrote in this block (element {_pt(at, buf.shape)}), without "
                                  f"waiting for a cross-core flag set after that write on its pipe")

    def _changed_before_a_barrier(self, key: str, buf: Buffer, where):
        """The first of the elements at `where` that core `key` changed since its last barrier (flat), or None."""
        mine = self.unordered[key].get(buf.name)
        if mine is None:
            return None
        flat = np.reshape(_flat_of(buf, where), -1)
        hit = mine[flat]
        return int(flat[int(np.argmax(hit))]) if hit.any() else None

    def pipe_barrier_all(self) -> None:
        """The 950's T.ascend_pipe_barrier("PIPE_ALL"): every pipe of the core completes what it was given, so the
        block's stores are visible to its later loads."""
        self.unordered.pop(BLOCK, None)

    @property
    def who(self) -> str:
        """The core running now: "C", or "V0" / "V1" for the vector cores."""
        return self.core if self.core != "V" else f"V{self.vid}"

    def barrier_all(self) -> None:
        """T.barrier_all(): every pipe of this core completes what it was given, so its stores are visible to its
        own later loads (not to the other cores: those need cross-core flags)."""
        if self.core is None:
            raise SimulationError("T.barrier_all outside T.Scope")
        self.unordered.pop(self.who, None)

    def vector_cores(self):
        """Each of the two vector cores runs a T.Scope("V") in turn (vid 0, then vid 1)."""
        for vid in (0, 1):
            self.vid = vid
            yield vid
        self.vid = 0

    def set_flag(self, pipe: str, flag, mode=2) -> None:
        """CrossCoreSetFlag in mode 2 (AIC <-> AIV within one AI core, the only mode emitted): a flag the cube
        sets counts once for each of the two vector cores; one a vector core sets counts for the cube, which
        goes on only when both vector cores have set it (AscendC CrossCoreSetFlag, modes 0-2).  Flag ids are
        0..10 on the 910B and a counter holds at most 16 sets."""
        if self.core is None:
            raise SimulationError("T.set_cross_flag outside T.Scope")
        if int(mode) != 2:
            raise Unsupported(f"T.set_cross_flag mode {mode}: only mode 2 (cube <-> vector cores) is modelled")
        if not 0 <= int(flag) <= MAX_CROSS_FLAG:
            raise SimulationError(f"T.set_cross_flag({pipe!r}, {flag}): the 910B has cross-core flags 0..{MAX_CROSS_FLAG}")
        published = self.published[flag]
        for name, mask in self.pending.pop((self.who, str(pipe)), {}).items():
            published[name] = published[name] | mask if name in published else mask
        keys = [("V", 0, flag), ("V", 1, flag)] if self.core == "C" else [("C", self.vid, flag)]
        for key in keys:
            self.flags[key] += 1
            if self.flags[key] > 16:
                raise SimulationError(f"cross-core flag {flag} set {self.flags[key]} times without a wait: a counter "
                                      f"holds at most 16 sets")

    def wait_flag(self, flag) -> None:
        if self.core is None:
            raise SimulationError("T.wait_cross_flag outside T.Scope")
        keys = [("C", 0, flag), ("C", 1, flag)] if self.core == "C" else [("V", self.vid, flag)]
        missing = [k for k in keys if self.flags[k] <= 0]
        if missing:
            who = ("the cube waits for both vector cores to set it (mode 2), and vector core "
                   f"{', '.join(str(k[1]) for k in missing)} did not" if self.core == "C"
                   else f"no core set it for vector core {self.vid}")
            raise SimulationError(f"T.wait_cross_flag({flag}) would wait forever: {who}")
        for k in keys:
            self.flags[k] -= 1
        visible = self.visible[self.who]
        for name, mask in self.published[flag].items():
            visible[name] = visible[name] | mask if name in visible else mask.copy()
