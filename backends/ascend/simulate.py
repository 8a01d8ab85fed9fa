"""NumPy execution of an emitted Ascend kernel module (ascend-950 and ascend-910b), checked as it runs.

No NPU and no Ascend compiler exist here, so the generated module is executed *as Python*: its text is
parsed, three mechanical rewrites are applied (below), and it is run with a fake `tilelang` package whose
`T` namespace implements each tile operation the backends emit in NumPy, on buffers of the declared shapes
and dtypes.  Nothing is re-derived from the tile program: what runs is the emitted source.

    sim = simulate(text, inputs)                      # text: the module `tdsl compile --target ascend-*` writes
    sim.tensors["Y"]                                  # every GM tensor after all kernels (storage dtype)
    sim.kernels[0].footprint                          # bytes per scope one block allocated (stages included)

The namespaces
--------------
* ascend-950 (`import tilelang.ascend.language as T`, mainline TileLang 0.1.15's Ascend dialect):
  `T.prim_func`, `T.Tensor`, `T.dynamic`, `T.Kernel(n) as cid`, `T.alloc_l1 / alloc_l0a / alloc_l0b /
  alloc_l0c / alloc_shared` (UB), `T.copy`, `T.gemm(..., transpose_A/B, clear_accum)`, `T.Pipelined`,
  `T.serial`, `T.Parallel`, `T.SimtVF`, `T.Cast`, `T.cast`, `T.if_then_else`, `T.And`, `T.Or`,
  `T.infinity`, `T.exp / log / sqrt / tanh / abs / max / min`, `T.evaluate`.  Parameter names follow the
  real functions (the tests check them against the installed tilelang where it is importable).
* ascend-910b (`import tilelang.language as T`, tilelang-ascend 0.1.4): exactly the surface of
  `api910b.py`, with its signatures: `T.Kernel(n, is_npu=True) as (cid, vid)`, `T.alloc_L1 / L0A / L0B /
  L0C / ub`, `T.copy(..., transpose)`, `T.mma(..., init)`, `T.gemm_v0`, `T.Pipelined`, `T.serial`,
  `T.Scope("C" | "V")`, `T.set_cross_flag / wait_cross_flag`, `T.reduce_sum / reduce_max`, `T.tile.*`,
  `T.Cast`, `T.infinity`, scalar math.  A function outside that surface is an AttributeError.

Execution model
---------------
* A kernel runs block by block: the prim_func is called once per block, `T.Kernel` returns that block's id
  (the 910B's `vid` is 0: the 910B kernels give all vector work to vector core 0 behind `if vid == 0`,
  which is checked statically; a `T.Scope("V")` with other content is `Unsupported`).  Within a block the
  statements run in program order; on the 910B the cube scope's work therefore precedes the vector scope's.
* Every on-chip buffer is allocated per block and filled with NaN, so a read of something never written
  shows up in the result.  Outputs, temporaries and workspaces in GM start NaN-filled too.
* `T.Parallel(e0, e1, ...)` runs its body once with all lanes at once: the loop variables are broadcast
  index arrays.  That is exact only if the lanes are independent, and it is checked: within one
  `T.Parallel`, an element stored by two lanes, or stored by one lane and read by another (in either
  order), is an error.
* Loads and stores are bounds-checked on the lanes that perform them (GM and on-chip); a copy region must
  lie inside both buffers; a store into an input tensor is an error.
* Dtypes are those of TIR: a store needs the buffer's dtype (`T.Cast` is explicit in TIR), casts round
  with `compiler.dtypes` (RNE, single rounding; f8e4m3 saturating), f32 arithmetic stays f32, and
  `exp/log/sqrt/tanh` are the float64 result rounded to f32 (the reference interpreter's definitions).
* `T.gemm` / `T.mma`: the operands widened to f32 and multiplied with `np.matmul` in f32 (the product of
  two bf16/f16/fp8 values is exact in f32; the f32 sums are in BLAS's order), then added to, or written
  into, the f32 L0C accumulator.
* Data paths: `T.copy` must move data along a path the core has (950: GM->L1, GM->UB, L1->L0A/L0B,
  L0C->UB, L0C->GM, UB->GM, UB->UB; 910B: GM->L1, L1->L0A/L0B, L0C->GM in the cube scope, GM->UB, UB->GM,
  UB->UB in the vector scope), must not convert dtypes (DMA does not), and lanes of vector code may touch
  only GM and UB.  `T.gemm` / `T.mma` take L0A, L0B and an f32 L0C.
* Capacities: the bytes allocated per scope in one block are summed (an L1 buffer that a `T.copy` from GM
  fills inside `T.Pipelined(num_stages=S)` counts S times on the 950, whose dialect multi-buffers it; the
  910B kernels allocate their stage slots explicitly) and compared with `compiler/targets`
  (`scope(S).per_block`) at every allocation: exceeding one is `CapacityExceeded`.
* 910B synchronisation: `T.set_cross_flag(pipe, f)` publishes the GM writes its core made on `pipe`
  (L0C->GM is the FIX pipe, UB->GM MTE3) and `T.wait_cross_flag(f)` makes them visible to the waiting
  core; reading GM data the other core wrote in this block without such a flag, waiting for a flag no one
  set (a deadlock), or leaving a flag unconsumed is an error.  On the 950 the dialect inserts the
  synchronisation itself and nothing is checked.

The rewrites (all inside `@T.prim_func` bodies)
-----------------------------------------------
1. `if c: A else: B` becomes `for _ in __sim__.when(c): A` / `for _ in __sim__.unless(c): B`: with lanes,
   the condition is a mask, under which loads and stores act only on the lanes where it holds.
2. `T.if_then_else(c, a, b)` becomes `__sim__.select(c, lambda: a, lambda: b)`: TIR evaluates only the
   chosen operand per lane (a guarded out-of-range load is legal), so each operand is evaluated under its
   mask.
3. A subscript passed to `T.copy` (`T.copy(A[r0, c0], A_l1)`) becomes a region object (TileLang reads the
   extent of a point region from the other operand, right-aligned), and `X = T.alloc_*(...)` becomes
   `X = __sim__.named("X")(T.alloc_*(...))`, which only records the name X for messages.

What this does not model is in docs/target-ascend.md ("What the NumPy execution proves").
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import types
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from tdsl.compiler import dtypes as dt

SCOPES = ("L1", "L0A", "L0B", "L0C", "UB")
ON_CHIP = ("L1", "L0A", "L0B", "L0C")  # reached by DMA and the cube only, never by vector lanes
TL_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float8_e4m3fn": "f8e4m3"}
FILENAME = "<ascend-simulated>"

# (source scope, destination scope) -> the pipe that moves the data
PATHS = {
    "ascend-950": {("GM", "L1"): "MTE2", ("GM", "UB"): "MTE2", ("L1", "L0A"): "MTE1", ("L1", "L0B"): "MTE1",
                   ("L0C", "UB"): "FIX", ("L0C", "GM"): "FIX", ("UB", "GM"): "MTE3", ("UB", "UB"): "V"},
    "ascend-910b": {("GM", "L1"): "MTE2", ("L1", "L0A"): "MTE1", ("L1", "L0B"): "MTE1", ("L0C", "GM"): "FIX",
                    ("GM", "UB"): "MTE2", ("UB", "GM"): "MTE3", ("UB", "UB"): "V"},
}
CORE_910B = {("GM", "L1"): "C", ("L1", "L0A"): "C", ("L1", "L0B"): "C", ("L0C", "GM"): "C",
             ("GM", "UB"): "V", ("UB", "GM"): "V", ("UB", "UB"): "V"}


class SimulationError(Exception):
    """The emitted kernel did something wrong (or something its target cannot do)."""


class Unsupported(SimulationError):
    """An emitted construct the simulator cannot execute faithfully (tests skip with this reason)."""


class CapacityExceeded(SimulationError):
    """The buffers of one block exceed a scope's per-block capacity."""

    def __init__(self, message, scope, need, capacity):
        super().__init__(message)
        self.scope, self.need, self.capacity = scope, need, capacity


# ---------------------------------------------------------------- results


@dataclass
class KernelRun:
    name: str
    blocks: int
    footprint: dict  # scope -> bytes one block allocated (largest over blocks, pipeline stages included)
    declared: dict  # scope -> bytes from the kernel's header comment ("on-chip bytes: ...")


@dataclass
class Simulation:
    target: str
    tensors: dict  # every GM tensor after the run, in its storage dtype
    kernels: list = field(default_factory=list)
    capacities: dict = field(default_factory=dict)


# ---------------------------------------------------------------- buffers


class Buffer:
    __slots__ = ("m", "name", "scope", "dtype", "data", "stages", "role")

    def __init__(self, m, name, scope, dtype, data, role=""):
        self.m, self.name, self.scope, self.dtype, self.data = m, name, scope, dtype, data
        self.stages = 1
        self.role = role  # GM: input | output

    @property
    def shape(self):
        return self.data.shape

    def __getitem__(self, key):
        return self.m.load(self, key)

    def __setitem__(self, key, value):
        self.m.store(self, key, value)

    def describe(self) -> str:
        stages = f" x{self.stages} stages" if self.stages > 1 else ""
        return f"{self.name} {tuple(self.shape)} {self.dtype}{stages} = {self.data.nbytes * self.stages:,} B"

    def __repr__(self):
        return f"<{self.scope} buffer {self.name} {tuple(self.shape)} {self.dtype}>"


class Region:
    """`buf[key]` where the key has slices, or any subscript handed to T.copy (a point region)."""

    __slots__ = ("buf", "key")

    def __init__(self, buf, key):
        self.buf, self.key = buf, key


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple
    dtype: str


class _Lanes:
    __slots__ = ("shape", "size", "ids", "writers", "readers")

    def __init__(self, shape):
        self.shape = shape
        self.size = int(np.prod(shape))
        self.ids = np.arange(self.size).reshape(shape)
        self.writers = {}  # id(buffer) -> flat array of the lane that stored each element (-1: none)
        self.readers = {}  # id(buffer) -> the lane that read each element (-1: none, -2: several)


def _dtype(name) -> str:
    name = str(name)
    if name in TL_DTYPES:
        return TL_DTYPES[name]
    raise Unsupported(f"dtype {name!r} is not simulated")


def _key(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _scalar(x):
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


def _pt(index, shape=None) -> str:
    """An element or lane as `[i, j]` (from a flat index when `shape` is given)."""
    if shape is not None:
        index = np.unravel_index(int(index), shape)
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _strip(shape) -> tuple:
    shape = tuple(shape)
    while len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    return shape


# ---------------------------------------------------------------- the machine


class _Machine:
    def __init__(self, target: str, capacities: dict, sizes: Optional[dict]):
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
        self.flags = Counter()
        self.published = defaultdict(set)  # flag -> GM tensors it makes visible
        self.pending = defaultdict(set)  # (core, pipe) -> GM tensors written and not yet published
        self.written_by = {}  # GM tensor -> core that wrote it in this block
        self.visible = defaultdict(set)  # core -> GM tensors it waited for

    def end_block(self) -> None:
        if not self.entered:
            raise SimulationError("the kernel body never entered T.Kernel")
        left = {f: n for f, n in self.flags.items() if n}
        if left:
            raise SimulationError(f"cross-core flags set but never waited for at the end of the block: {left}")

    # ------------------------------------------------------------ allocation and capacities

    def alloc(self, scope: str, shape, dtype) -> Buffer:
        if not self.entered:
            raise SimulationError("buffer allocated outside T.Kernel")
        if self.lanes is not None:
            raise SimulationError("buffer allocated inside T.Parallel")
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        d = _dtype(dtype)
        data = dt.to_storage(d, np.full(shape, np.nan, dtype=np.float32))  # uninitialised: NaN
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
        """T.if_then_else: each operand evaluated only on the lanes that take it."""
        if np.ndim(cond) == 0:
            return then() if bool(cond) else other()
        cond = np.asarray(cond)
        a = b = None
        for _ in self.when(cond):
            a = then()
        for _ in self.unless(cond):
            b = other()
        if a is None:
            return b
        if b is None:
            return a
        ta = None if isinstance(a, (int, float)) else np.asarray(a).dtype
        tb = None if isinstance(b, (int, float)) else np.asarray(b).dtype
        if ta is not None and tb is not None and ta != tb:
            raise SimulationError(f"T.if_then_else with operands of dtypes {ta} and {tb}")
        t = ta or tb
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
        if buf.scope == "GM" and not write:
            self._gm_read(buf)

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
            return buf.data[key]
        shape, idx, active = self._indices(buf, key)
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
            return dt.to_storage(buf.dtype, value)[()]
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
            buf.data[key] = val
            self._gm_write(buf, "S")  # scalar / SIMT stores to GM
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
        buf.data.reshape(-1)[flat] = v
        self._gm_write(buf, "S")  # scalar / SIMT stores to GM

    # ------------------------------------------------------------ GM ordering between the 910B's cores

    def _gm_write(self, buf: Buffer, pipe) -> None:
        if buf.scope != "GM" or self.target != "ascend-910b":
            return
        self.written_by[buf.name] = self.core
        self.pending[(self.core, pipe)].add(buf.name)

    def _gm_read(self, buf: Buffer) -> None:
        if self.target != "ascend-910b":
            return
        writer = self.written_by.get(buf.name)
        if writer is not None and writer != self.core and buf.name not in self.visible[self.core]:
            raise SimulationError(f"the {'vector' if self.core == 'V' else 'cube'} core reads {buf.name}, which the "
                                  f"{'cube' if writer == 'C' else 'vector'} core wrote in this block, without waiting "
                                  f"for a cross-core flag set after that write on its pipe")

    def set_flag(self, pipe: str, flag) -> None:
        if self.core is None:
            raise SimulationError("T.set_cross_flag outside T.Scope")
        key = (self.core, str(pipe))
        self.published[flag] |= self.pending.pop(key, set())
        self.flags[flag] += 1

    def wait_flag(self, flag) -> None:
        if self.core is None:
            raise SimulationError("T.wait_cross_flag outside T.Scope")
        if self.flags[flag] <= 0:
            raise SimulationError(f"T.wait_cross_flag({flag}) waits for a flag that no core set before: the core "
                                  f"would wait forever")
        self.flags[flag] -= 1
        self.visible[self.core] |= self.published[flag]

    # ------------------------------------------------------------ regions and copies

    def region(self, base, key):
        if isinstance(base, Region):
            raise Unsupported("a subscript of a region")
        if not isinstance(base, Buffer):
            raise SimulationError(f"T.copy of {type(base).__name__}, not a buffer")
        return Region(base, _key(key))

    def _view(self, x, other=None):
        """(buffer, numpy view) of a buffer or region; a point region takes its extent from `other`."""
        if isinstance(x, Buffer):
            return x, x.data
        if not isinstance(x, Region):
            raise SimulationError(f"expected a buffer or a region, got {type(x).__name__}")
        buf, key = x.buf, x.key
        if Ellipsis in key:
            n = key.index(Ellipsis)
            key = key[:n] + (slice(None),) * (len(buf.shape) - len(key) + 1) + key[n + 1:]
        if len(key) != len(buf.shape):
            raise SimulationError(f"{buf.name} has {len(buf.shape)} dimensions but the region has {len(key)}")
        if all(_is_int(k) for k in key):  # a point: the extent is the other operand's shape, right-aligned
            if other is None:
                raise SimulationError(f"a point region of {buf.name} needs a buffer on the other side")
            ext = _strip(self._shape(other))
            if len(ext) > len(key):
                raise SimulationError(f"a {len(ext)}-d copy into the {len(key)}-d {buf.name}")
            ext = (1,) * (len(key) - len(ext)) + ext
            sl = tuple(slice(int(k), int(k) + e) for k, e in zip(key, ext))
        else:
            sl = []
            for k, d in zip(key, buf.shape):
                if isinstance(k, slice):
                    if k.step not in (None, 1):
                        raise Unsupported(f"a strided region of {buf.name}")
                    lo = 0 if k.start is None else int(k.start)
                    hi = d if k.stop is None else int(k.stop)
                    sl.append(slice(lo, hi))
                elif _is_int(k):
                    sl.append(slice(int(k), int(k) + 1))
                else:
                    raise SimulationError(f"{buf.name}: region index {k!r} is not an integer or a slice")
            sl = tuple(sl)
        for s, d in zip(sl, buf.shape):
            if s.start < 0 or s.stop > d or s.start > s.stop:
                raise SimulationError(f"region {buf.name}[{', '.join(f'{s.start}:{s.stop}' for s in sl)}] lies "
                                      f"outside {buf.name} (shape {tuple(buf.shape)})")
        return buf, buf.data[sl]

    def _shape(self, x):
        if isinstance(x, Buffer):
            return x.shape
        if isinstance(x, Region):
            if all(_is_int(k) for k in x.key):
                raise SimulationError(f"T.copy between two point regions ({x.buf.name})")
            return self._view(x)[1].shape
        raise SimulationError(f"expected a buffer or a region, got {type(x).__name__}")

    def copy(self, src, dst, transpose=False) -> None:
        if self.lanes is not None or self.masks:
            raise Unsupported("T.copy inside T.Parallel or under a lane condition")
        sb, sv = self._view(src, other=dst)
        db, dv = self._view(dst, other=src)
        path = (sb.scope, db.scope)
        pipe = PATHS[self.target].get(path)
        if pipe is None:
            raise SimulationError(f"T.copy {sb.name} -> {db.name}: {self.target} has no data path "
                                  f"{path[0]} -> {path[1]}")
        if self.target == "ascend-910b":
            if self.core is None:
                raise SimulationError(f"T.copy {sb.name} -> {db.name} outside T.Scope")
            if CORE_910B[path] != self.core:
                raise SimulationError(f"T.copy {path[0]} -> {path[1]} ({sb.name} -> {db.name}) in the "
                                      f"{'cube' if self.core == 'C' else 'vector'} scope")
        if sb.data.dtype != db.data.dtype:
            raise SimulationError(f"T.copy {sb.name} ({sb.dtype}) -> {db.name} ({db.dtype}) converts dtypes; DMA "
                                  f"moves bytes")
        if db.role == "input":
            raise SimulationError(f"T.copy into input tensor {db.name}")
        s = _strip(sv.shape)
        d = _strip(dv.shape)
        if transpose:
            if len(s) != 2 or (s[1], s[0]) != d:
                raise SimulationError(f"transposing T.copy {sb.name} {sv.shape} -> {db.name} {dv.shape}")
            val = np.ascontiguousarray(sv.reshape(s).T)
        else:
            if s != d:
                raise SimulationError(f"T.copy {sb.name} {sv.shape} -> {db.name} {dv.shape}: shapes differ")
            val = sv
        if sb.scope == "GM":
            self._gm_read(sb)
        dv[...] = val.reshape(dv.shape)
        if db.scope == "GM":
            self._gm_write(db, pipe)
        if self.target == "ascend-950" and path == ("GM", "L1") and self.stages and self.stages[-1] > 1:
            if db.stages < self.stages[-1]:
                db.stages = self.stages[-1]  # multi-buffered by the dialect's pipeliner
                self._account()

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
        if ab.dtype != bb.dtype or ab.dtype == "f32" or cb.dtype != "f32":
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

    # ------------------------------------------------------------ a kernel

    def run_kernel(self, kernel, gm: dict) -> KernelRun:
        args = [gm[name] for name, _ in kernel.params]
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


# ---------------------------------------------------------------- the T namespaces


class _Frame:
    def __init__(self, enter=None, leave=None, value=None):
        self._enter, self._leave, self.value = enter, leave, value

    def __enter__(self):
        if self._enter:
            self._enter()
        return self.value

    def __exit__(self, *exc):
        if self._leave:
            self._leave()
        return False


class _PrimFunc:
    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self.params = []
        for p in inspect.signature(func).parameters.values():
            spec = p.annotation
            if isinstance(spec, str):
                spec = eval(spec, func.__globals__)  # noqa: S307 (a postponed annotation of the module itself)
            if not isinstance(spec, TensorSpec):
                raise SimulationError(f"{self.name}: parameter {p.name} is not annotated with T.Tensor")
            self.params.append((p.name, spec))
        self.declared = {}


class _Common:
    """Helpers both dialects share (kernels, loops, casts, scalar math); the public names are per dialect."""

    def __init__(self, m: _Machine):
        self._m = m

    def _prim_func(self, func):
        if func is None:
            return _PrimFunc
        return _PrimFunc(func)

    def _tensor(self, shape, dtype):
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        return TensorSpec(shape, _dtype(dtype))

    def _kernel(self, blocks, value_of):
        m = self._m
        if m.entered:
            raise Unsupported("a second T.Kernel in one prim_func")
        if len(blocks) != 1:
            raise Unsupported(f"a {len(blocks)}-d T.Kernel grid")
        n = int(blocks[0])
        if n <= 0:
            raise SimulationError(f"T.Kernel({n})")
        if m.grid is not None and m.grid != n:
            raise SimulationError(f"T.Kernel({n}) after T.Kernel({m.grid})")
        m.grid = n

        def enter():
            m.entered = True

        return _Frame(enter, None, value_of(m.block))

    def _serial(self, start, stop, step):
        if stop is None:
            start, stop = 0, start
        return range(int(start), int(stop), 1 if step is None else int(step))

    def _pipelined(self, start, stop, num_stages):
        if stop is None:
            start, stop = 0, start
        m = self._m
        m.stages.append(int(num_stages))
        try:
            yield from range(int(start), int(stop))
        finally:
            m.stages.pop()

    def _cast(self, dtype, value):
        d = _dtype(dtype)
        if d == "f32":
            if isinstance(value, (int, float)):
                return np.float32(value)
            return _scalar(np.asarray(value).astype(np.float32))
        return _scalar(dt.to_storage(d, value))

    def _max(self, a, b):
        if _is_int(a) and _is_int(b):
            return builtins.max(a, b)
        return _scalar(np.maximum(_f32(a), _f32(b)))

    def _min(self, a, b):
        if _is_int(a) and _is_int(b):
            return builtins.min(a, b)
        return _scalar(np.minimum(_f32(a), _f32(b)))

    @staticmethod
    def _and(a, b):
        if np.ndim(a) == 0 and np.ndim(b) == 0:
            return bool(a) and bool(b)
        return np.logical_and(a, b)


def _f32(x):
    return np.float32(x) if isinstance(x, float) else x


def _f64_math(fn, x):
    """exp / log / sqrt / tanh as the interpreter computes them: the float64 result rounded once."""
    if isinstance(x, (int, float)):
        x = np.float32(x)
    a = np.asarray(x)
    with np.errstate(all="ignore"):
        r = fn(a.astype(np.float64))
    if a.dtype == np.float32:
        return _scalar(r.astype(np.float32))
    return _scalar(dt.to_storage({v: k for k, v in dt.NUMPY_DTYPES.items()}[a.dtype], r))


class Lang950(_Common):
    """`tilelang.ascend.language` as the ascend-950 modules use it (parameter names of tilelang 0.1.15)."""

    def prim_func(self, func=None, *, eager_jit=False):
        return self._prim_func(func)

    def Tensor(self, shape, dtype="float32", data=None, scope=None):  # noqa: N802
        return self._tensor(shape, dtype)

    def dynamic(self, name, dtype="int32"):
        if name not in self._m.sizes:
            raise Unsupported(f"run-time size {name}: pass sizes={{'{name}': ...}} to simulate()")
        return int(self._m.sizes[name])

    def Kernel(self, *blocks, prelude=None):  # noqa: N802
        return self._kernel(blocks, lambda b: b)

    def alloc_l1(self, shape, dtype, scope="shared.l1"):
        return self._m.alloc("L1", shape, dtype)

    def alloc_l0a(self, shape, dtype, scope="shared.l0a"):
        return self._m.alloc("L0A", shape, dtype)

    def alloc_l0b(self, shape, dtype, scope="shared.l0b"):
        return self._m.alloc("L0B", shape, dtype)

    def alloc_l0c(self, shape, dtype, scope="shared.l0c", layout=True):
        return self._m.alloc("L0C", shape, dtype)

    def alloc_shared(self, shape, dtype, scope="shared.dyn"):
        return self._m.alloc("UB", shape, dtype)

    def copy(self, src, dst, *, coalesced_width=None, transpose=False, l2_cache_ctrl=None, unit_flag_ctrl=None,
             sub_blockid=None, pad_value=None, data_select=False, annotations=None, loop_layout=None):
        if pad_value is not None or data_select:
            raise Unsupported("T.copy with pad_value / data_select")
        self._m.copy(src, dst, transpose=bool(transpose))

    def gemm(self, A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False,  # noqa: N803
             unit_flag_ctrl=None, annotations=None):
        self._m.matmul(A, B, C, bool(transpose_A), bool(transpose_B), clear_accum, "T.gemm")

    def Pipelined(self, start, stop=None, num_stages=0, order=None, stage=None, annotations=None):  # noqa: N802
        return self._pipelined(start, stop, num_stages)

    def serial(self, start, stop=None, step=None, *, annotations=None):
        return self._serial(start, stop, step)

    def Parallel(self, *extents, coalesced_width=None, loop_layout=None, annotations=None):  # noqa: N802
        return self._m.parallel(extents)

    def SimtVF(self, threads=128, latency=0):  # noqa: N802
        return _Frame()

    def Cast(self, dtype, value, annotations=None, span=None):  # noqa: N802
        return self._cast(dtype, value)

    def cast(self, value, dtype, round="", sat=True, rbits=None, span=None):  # noqa: A002
        if round or rbits is not None or not sat:
            raise Unsupported("T.cast with a rounding mode or without saturation")
        return self._cast(dtype, value)

    def if_then_else(self, cond, t, f, span=None):
        raise Unsupported("T.if_then_else reached unrewritten")  # the loader rewrites every call

    def And(self, a, b, span=None):  # noqa: N802
        return self._and(a, b)

    def Or(self, a, b, span=None):  # noqa: N802
        if np.ndim(a) == 0 and np.ndim(b) == 0:
            return bool(a) or bool(b)
        return np.logical_or(a, b)

    def infinity(self, dtype, span=None):
        return self._cast(dtype, float("inf"))

    def exp(self, x):
        return _f64_math(np.exp, x)

    def log(self, x):
        return _f64_math(np.log, x)

    def sqrt(self, x):
        return _f64_math(np.sqrt, x)

    def tanh(self, x):
        return _f64_math(np.tanh, x)

    def abs(self, x, span=None):  # noqa: A003
        return _scalar(np.abs(_f32(x)))

    def max(self, a, b):  # noqa: A003
        return self._max(a, b)

    def min(self, a, b):  # noqa: A003
        return self._min(a, b)

    def evaluate(self, value):
        return None


class _Tile910B:
    """`T.tile.*` of tilelang-ascend 0.1.4 (ascend_tile.py): whole-tile operations on UB buffers."""

    def __init__(self, m: _Machine):
        self._m = m

    def _binary(self, what, fn, dst, src0, src1, scalar_ok):
        m = self._m
        m.vector_op(what)
        db, d = m.tile_view(dst, what)
        _, a = m.tile_view(src0, what)
        if isinstance(src1, (Buffer, Region)):
            _, b = m.tile_view(src1, what)
            if b.shape != d.shape:
                raise SimulationError(f"{what}: operand shapes {a.shape}, {b.shape} into {d.shape}")
        else:
            if not scalar_ok or np.ndim(src1) != 0:
                raise SimulationError(f"{what} with a scalar second operand")
            b = m._convert(db, src1)
        if a.shape != d.shape or a.dtype != d.dtype or np.asarray(b).dtype != d.dtype:
            raise SimulationError(f"{what}: {a.shape} {a.dtype} and {np.asarray(b).dtype} into {d.shape} {d.dtype}")
        d[...] = fn(a, b)

    def _unary(self, what, fn, dst, src):
        m = self._m
        m.vector_op(what)
        _, d = m.tile_view(dst, what)
        _, a = m.tile_view(src, what)
        if a.shape != d.shape or a.dtype != d.dtype:
            raise SimulationError(f"{what}: {a.shape} {a.dtype} into {d.shape} {d.dtype}")
        d[...] = fn(a)

    def fill(self, buffer, value):
        m = self._m
        m.vector_op("T.tile.fill")
        b, v = m.tile_view(buffer, "T.tile.fill")
        if np.ndim(value) != 0:
            raise SimulationError("T.tile.fill with a non-scalar value")
        v[...] = m._convert(b, value)

    def add(self, dst, src0, src1):
        self._binary("T.tile.add", np.add, dst, src0, src1, True)

    def sub(self, dst, src0, src1):
        self._binary("T.tile.sub", np.subtract, dst, src0, src1, False)

    def mul(self, dst, src0, src1):
        self._binary("T.tile.mul", np.multiply, dst, src0, src1, True)

    def div(self, dst, src0, src1):
        self._binary("T.tile.div", np.divide, dst, src0, src1, False)

    def max(self, dst, src0, src1):  # noqa: A003
        self._binary("T.tile.max", np.maximum, dst, src0, src1, True)

    def min(self, dst, src0, src1):  # noqa: A003
        self._binary("T.tile.min", np.minimum, dst, src0, src1, True)

    def exp(self, dst, src0):
        self._unary("T.tile.exp", lambda a: _f64_math(np.exp, a), dst, src0)

    def ln(self, dst, src0):
        self._unary("T.tile.ln", lambda a: _f64_math(np.log, a), dst, src0)

    def abs(self, dst, src0):  # noqa: A003
        self._unary("T.tile.abs", np.abs, dst, src0)

    def sqrt(self, dst, src0):
        self._unary("T.tile.sqrt", lambda a: _f64_math(np.sqrt, a), dst, src0)

    def rsqrt(self, dst, src0):
        self._unary("T.tile.rsqrt", lambda a: np.float32(1.0) / _f64_math(np.sqrt, a), dst, src0)

    def sigmoid(self, dst, src):
        one = np.float32(1.0)
        self._unary("T.tile.sigmoid", lambda a: one / (one + _f64_math(np.exp, -a)), dst, src)

    def silu(self, dst, src):
        one = np.float32(1.0)
        self._unary("T.tile.silu", lambda a: a * (one / (one + _f64_math(np.exp, -a))), dst, src)

    def cast(self, dst, src, mode, count):
        from .api910b import CAST_MODES

        m = self._m
        m.vector_op("T.tile.cast")
        db, d = m.tile_view(dst, "T.tile.cast")
        _, s = m.tile_view(src, "T.tile.cast")
        if mode not in CAST_MODES:
            raise SimulationError(f"T.tile.cast with unknown mode {mode!r}")
        if int(count) != d.size or d.size != s.size or _strip(d.shape) != _strip(s.shape):
            raise SimulationError(f"T.tile.cast of {count} elements from {s.shape} into {d.shape}")
        if mode not in ("CAST_RINT", "CAST_NONE"):
            raise Unsupported(f"T.tile.cast {mode}: only round-to-nearest-even (CAST_RINT, and CAST_NONE, which is "
                              f"RINT where the conversion is inexact) is modelled")
        d[...] = dt.to_storage(db.dtype, s).reshape(d.shape)


class Lang910B(_Common):
    """`tilelang.language` of tilelang-ascend 0.1.4: exactly api910b.py's names and signatures."""

    def __init__(self, m: _Machine):
        super().__init__(m)
        self.tile = _Tile910B(m)

    def prim_func(self, func=None, private=False, check_well_formed=True):
        return self._prim_func(func)

    def Tensor(self, shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global",  # noqa: N802
               align=0, offset_factor=0, buffer_type="", axis_separators=None):
        return self._tensor(shape, dtype)

    def Kernel(self, *blocks, threads=None, is_cpu=False, prelude=None, is_npu=False, pipeline=False):  # noqa: N802
        if not is_npu:
            raise SimulationError("T.Kernel without is_npu=True")
        return self._kernel(blocks, lambda b: (b, 0))

    def alloc_L1(self, shape, dtype):  # noqa: N802
        return self._m.alloc("L1", shape, dtype)

    def alloc_L0A(self, shape, dtype):  # noqa: N802
        return self._m.alloc("L0A", shape, dtype)

    def alloc_L0B(self, shape, dtype):  # noqa: N802
        return self._m.alloc("L0B", shape, dtype)

    def alloc_L0C(self, shape, dtype):  # noqa: N802
        return self._m.alloc("L0C", shape, dtype)

    def alloc_ub(self, shape, dtype):
        return self._m.alloc("UB", shape, dtype)

    def copy(self, src, dst, enable_relu=False, transpose=False, pad_value=None):
        if enable_relu or pad_value is not None:
            raise Unsupported("T.copy with enable_relu / pad_value")
        self._m.copy(src, dst, transpose=bool(transpose))

    def mma(self, A, B, C, init=False):  # noqa: N803
        self._m.matmul(A, B, C, False, False, init, "T.mma")

    def gemm_v0(self, A, B, C, transpose_A=False, transpose_B=False, init=False):  # noqa: N803
        self._m.matmul(A, B, C, bool(transpose_A), bool(transpose_B), init, "T.gemm_v0")

    def Pipelined(self, start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None,  # noqa: N802
                  cross_interval=1):
        return self._pipelined(start, stop, num_stages)

    def serial(self, start, stop=None, step=None, *, annotations=None):
        return self._serial(start, stop, step)

    def Scope(self, name):  # noqa: N802
        m = self._m
        if name not in ("C", "V"):
            raise SimulationError(f'T.Scope("{name}")')

        def enter():
            if m.core is not None:
                raise SimulationError(f'T.Scope("{name}") inside T.Scope("{m.core}")')
            m.core = name

        def leave():
            m.core = None

        return _Frame(enter, leave)

    def set_cross_flag(self, pipe, flag, mode=2):
        self._m.set_flag(pipe, flag)

    def wait_cross_flag(self, flag, pipe=""):
        self._m.wait_flag(flag)

    def _reduce(self, what, fn, buffer, out, dim, clear):
        m = self._m
        m.vector_op(what)
        _, src = m.tile_view(buffer, what)
        _, dst = m.tile_view(out, what)
        r = fn(src, axis=int(dim))
        if _strip(r.shape or (1,)) != _strip(dst.shape) or src.dtype != dst.dtype:
            raise SimulationError(f"{what} of {src.shape} over dim {dim} into {dst.shape}")
        r = r.reshape(dst.shape)
        dst[...] = r if clear else fn(np.stack([dst, r]), axis=0)

    def reduce_sum(self, buffer, out, dim=-1, *args, clear=True, real_shape=None):
        if args or real_shape is not None:
            raise Unsupported("T.reduce_sum with real_shape")
        self._reduce("T.reduce_sum", np.sum, buffer, out, dim, clear)

    def reduce_max(self, buffer, out, dim=-1, *args, clear=True, real_shape=None):
        if args or real_shape is not None:
            raise Unsupported("T.reduce_max with real_shape")
        self._reduce("T.reduce_max", np.max, buffer, out, dim, clear)

    def Cast(self, dtype, x):  # noqa: N802
        return self._cast(dtype, x)

    def infinity(self, dtype):
        return self._cast(dtype, float("inf"))

    def exp(self, x):
        return _f64_math(np.exp, x)

    def log(self, x):
        return _f64_math(np.log, x)

    def sqrt(self, x):
        return _f64_math(np.sqrt, x)

    def abs(self, x):  # noqa: A003
        return _scalar(np.abs(_f32(x)))

    def max(self, a, b):  # noqa: A003
        return self._max(a, b)

    def min(self, a, b):  # noqa: A003
        return self._min(a, b)

    def And(self, a, b):  # noqa: N802
        return self._and(a, b)

    def evaluate(self, value):
        return None


LANGS = {"ascend-950": Lang950, "ascend-910b": Lang910B}
MODULES = {"ascend-950": "tilelang.ascend.language", "ascend-910b": "tilelang.language"}


def namespace_functions(target: str) -> dict:
    """name -> function of a target's fake `T` (for the API checks in the tests); `tile.x` for T.tile.*."""
    lang = LANGS[target](_Machine(target, {}, None))
    out = {n: getattr(lang, n) for n in dir(lang) if not n.startswith("_") and callable(getattr(lang, n))
           and n != "tile"}
    if target == "ascend-910b":
        out.update({f"tile.{n}": getattr(lang.tile, n) for n in dir(lang.tile) if not n.startswith("_")})
    return out


# ---------------------------------------------------------------- loading the module


def _is_T(func, name: Optional[str] = None) -> bool:  # noqa: N802
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "T"
            and (name is None or func.attr == name))


def _sim_call(name, args, node):
    call = ast.Call(ast.Attribute(ast.Name("__sim__", ast.Load()), name, ast.Load()), args, [])
    return ast.copy_location(call, node)


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.n = 0

    def visit_If(self, node):  # noqa: N802
        self.generic_visit(node)
        for sub in ast.walk(ast.Module(body=node.body + node.orelse, type_ignores=[])):
            if isinstance(sub, (ast.Break, ast.Continue, ast.Return)):
                raise Unsupported(f"line {node.lineno}: break/continue/return inside an if")
        self.n += 1
        tmp = f"__sim_cond_{self.n}"
        out = [ast.copy_location(ast.Assign([ast.Name(tmp, ast.Store())], node.test), node)]
        for fn, body in (("when", node.body), ("unless", node.orelse)):
            if body:
                loop = ast.For(ast.Name("_", ast.Store()), _sim_call(fn, [ast.Name(tmp, ast.Load())], node), body, [])
                out.append(ast.copy_location(loop, node))
        return out

    def visit_Call(self, node):  # noqa: N802
        self.generic_visit(node)
        if _is_T(node.func, "if_then_else") and len(node.args) == 3 and not node.keywords:
            c, a, b = node.args
            def thunk(e):
                return ast.copy_location(ast.Lambda(ast.arguments([], [], None, [], [], None, []), e), e)

            return _sim_call("select", [c, thunk(a), thunk(b)], node)
        if _is_T(node.func, "copy"):
            node.args = [self._region(a) for a in node.args]
            for kw in node.keywords:
                if kw.arg in ("src", "dst"):
                    kw.value = self._region(kw.value)
        return node

    def visit_Assign(self, node):  # noqa: N802
        self.generic_visit(node)
        v = node.value
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(v, ast.Call)
                and _is_T(v.func) and v.func.attr.startswith("alloc_")):
            namer = _sim_call("named", [ast.Constant(node.targets[0].id)], v)
            node.value = ast.copy_location(ast.Call(namer, [v], []), v)
        return node

    @staticmethod
    def _region(e):
        if not isinstance(e, ast.Subscript):
            return e
        elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        conv = []
        for x in elts:
            if isinstance(x, ast.Slice):
                parts = [p if p is not None else ast.Constant(None) for p in (x.lower, x.upper, x.step)]
                conv.append(ast.copy_location(ast.Call(ast.Name("slice", ast.Load()), parts, []), e))
            else:
                conv.append(x)
        return _sim_call("region", [e.value, ast.copy_location(ast.Tuple(conv, ast.Load()), e)], e)


def _check_vector_scopes(fn: ast.FunctionDef) -> None:
    """910B: vector work must sit behind `if vid == 0` (the simulation runs vector core 0 only)."""
    for node in ast.walk(fn):
        if not (isinstance(node, ast.With) and len(node.items) == 1):
            continue
        call = node.items[0].context_expr
        if not (isinstance(call, ast.Call) and _is_T(call.func, "Scope") and call.args
                and isinstance(call.args[0], ast.Constant) and call.args[0].value == "V"):
            continue
        ok = (len(node.body) == 1 and isinstance(node.body[0], ast.If) and not node.body[0].orelse
              and ast.dump(node.body[0].test) == ast.dump(ast.parse("vid == 0", mode="eval").body))
        if not ok:
            raise Unsupported(f"line {node.lineno}: a T.Scope(\"V\") whose work is not all behind `if vid == 0` would "
                              f"run on both vector cores; the simulation runs vector core 0 only")


def _prepare(text: str, target: str):
    tree = ast.parse(text, FILENAME)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                _is_T(d) or (isinstance(d, ast.Call) and _is_T(d.func)) for d in node.decorator_list):
            if target == "ascend-910b":
                _check_vector_scopes(node)
            _Rewriter().visit(node)
    ast.fix_missing_locations(tree)
    return compile(tree, FILENAME, "exec")


def _declared(text: str) -> dict:
    """kernel -> {scope: bytes} from each prim_func's header comment `# ...; on-chip bytes: L0A 16384, ...`."""
    out = {}
    name = None
    for line in text.splitlines():
        m = re.match(r"def (\w+)\(", line)
        if m:
            name = m.group(1)
            continue
        if name and "on-chip bytes:" in line:
            tail = line.split("on-chip bytes:", 1)[1]
            out[name] = {s: int(n) for s, n in re.findall(r"(\w+) (\d+)", tail)}
            name = None
    return out


def detect_target(text: str) -> str:
    m = re.search(r"^# Target (ascend-950|ascend-910b)", text, re.M)
    if not m:
        raise SimulationError("not an Ascend module generated by tdsl (no '# Target ascend-...' line)")
    return m.group(1)


def capacities(target: str) -> dict:
    """Per-block bytes of each on-chip scope, from compiler/targets."""
    from tdsl.compiler.targets import get_target

    t = get_target(target)
    return {s: t.scope(s).per_block for s in SCOPES}


def load_module(text: str, target: Optional[str] = None, sizes: Optional[dict] = None, caps: Optional[dict] = None):
    """(machine, module namespace) of an emitted module executed against the fake `tilelang`."""
    target = target or detect_target(text)
    m = _Machine(target, dict(capacities(target) if caps is None else caps), sizes)
    m.source = text.splitlines()
    lang = LANGS[target](m)
    if target == "ascend-950":
        pkg = types.SimpleNamespace(__name__="tilelang", ascend=types.SimpleNamespace(language=lang))
    else:
        pkg = types.SimpleNamespace(__name__="tilelang", language=lang)

    def fake_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        if name == "tilelang" or name.startswith("tilelang."):
            if name not in ("tilelang", MODULES[target]):
                raise SimulationError(f"a {target} module imports {name}")
            return pkg
        return builtins.__import__(name, globals, locals, fromlist, level)

    fake_builtins = dict(vars(builtins))
    fake_builtins["__import__"] = fake_import
    ns = {"__builtins__": fake_builtins, "__name__": "tdsl_ascend_simulated", "__sim__": m}
    exec(_prepare(text, target), ns)  # noqa: S102 (the generated module, with the rewrites above)
    kernels = ns.get("KERNELS")
    if not isinstance(kernels, dict) or not all(isinstance(k, _PrimFunc) for k in kernels.values()):
        raise SimulationError("the module has no KERNELS dict of prim_funcs")
    declared = _declared(text)
    for k in kernels.values():
        k.declared = declared.get(k.name, {})
    return m, ns


def simulate(text: str, inputs: dict, target: Optional[str] = None, sizes: Optional[dict] = None,
             caps: Optional[dict] = None) -> Simulation:
    """Run every kernel of an emitted Ascend module, in KERNELS order, on `inputs` (name -> array).

    GM tensors that are not inputs (outputs, temporaries, workspaces) start NaN-filled.  `caps` replaces
    the target's capacities (scope -> bytes).  Raises SimulationError (or Unsupported, CapacityExceeded).
    """
    m, ns = load_module(text, target, sizes, caps)
    specs = {}
    for k in ns["KERNELS"].values():
        for name, spec in k.params:
            if specs.setdefault(name, spec) != spec:
                raise SimulationError(f"{name} is declared {specs[name]} and {spec} by different kernels")
    gm = {}
    for name, spec in specs.items():
        if name in inputs:
            arr = np.ascontiguousarray(dt.to_storage(spec.dtype, np.asarray(inputs[name])))
            if arr.shape != spec.shape:
                raise SimulationError(f"input {name} has shape {arr.shape}, the module declares {spec.shape}")
            role = "input"
        else:
            arr = dt.to_storage(spec.dtype, np.full(spec.shape, np.nan, dtype=np.float32))
            role = "output"
        gm[name] = Buffer(m, name, "GM", spec.dtype, arr, role)
    runs = []
    with np.errstate(all="ignore"):
        for k in ns["KERNELS"].values():
            runs.append(m.run_kernel(k, gm))
    return Simulation(m.target, {n: b.data for n, b in gm.items()}, runs, dict(m.caps))


# ---------------------------------------------------------------- against the reference interpreter


def check_schedule(prog, schedule: Optional[str], target: str, seed: int = 0, reference: Optional[dict] = None,
                   inputs: Optional[dict] = None) -> dict:
    """Generate `schedule` for `target`, simulate it on random inputs and compare with the interpreter.

    Returns {tensor: compiler.verify.Comparison} for every output and GM temporary; `reference` (the
    interpreter's result on program order for these inputs) may be passed in to reuse it.
    """
    from tdsl.compiler.codegen import generate
    from tdsl.compiler.interpreter import interpret, random_inputs
    from tdsl.compiler.verify import compare

    text = generate(prog, schedule, target=target)
    original = prog.schedule()
    model = original.model
    inputs = inputs if inputs is not None else random_inputs(model, seed=seed)
    if reference is None:
        reference = interpret(model, original.time_map(), inputs)
    sim = simulate(text, inputs, target)
    result = {}
    for name, t in model.tensors.items():
        if t.kind != "input" and name in sim.tensors and name in reference:
            result[name] = compare(reference[name].astype(np.float32), sim.tensors[name].astype(np.float32), t.dtype)
    return result
