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
  `T.Scope("C" | "V")`, `T.set_cross_flag / wait_cross_flag`, `T.reduce_sum / reduce_max`, `T.tile.*`
  (fill, add/sub/mul/div/max/min, bitwise_and/or, exp/ln/abs/sqrt/rsqrt/sigmoid/silu, cast,
  createvecindex, compare, select), `T.Cast`, `T.infinity`, scalar math.  A function outside that surface
  is an AttributeError.

Execution model
---------------
* A kernel runs block by block: the prim_func is called once per block, `T.Kernel` returns that block's id
  (on the 910B each `T.Scope("V")` runs twice, as vector core 0 and then 1 (`vid`): the kernels give all
  vector work to core 0 behind `if vid == 0`, and only cross-core flag calls, which both cores must make,
  stand outside it -- checked statically; a `T.Scope("V")` with other content is `Unsupported`).  Within a
  block the statements run in program order; on the 910B the cube scope's work therefore precedes the
  vector scope's.
* Every on-chip buffer is allocated per block and filled with NaN (integer buffers: INT_POISON), so a
  read of something never written shows up in the result.  Outputs, temporaries and workspaces in GM start
  NaN-filled too.  Buffers and tensors are bfloat16, float16, float32, float8_e4m3fn, int32, int16,
  uint16 or uint8 (the 910B modules use the integer ones for masks, indices and FP8 bytes).
* `T.Parallel(e0, e1, ...)` runs its body once with all lanes at once: the loop variables are broadcast
  index arrays.  That is exact only if the lanes are independent, and it is checked: within one
  `T.Parallel`, an element stored by two lanes, or stored by one lane and read by another (in either
  order), is an error.
* Loads and stores are bounds-checked on the lanes that perform them (GM and on-chip); a copy region must
  lie inside both buffers; a store into an input tensor is an error.
* Dtypes are those of TIR: a store needs the buffer's dtype (`T.Cast` is explicit in TIR), casts round
  with `compiler.dtypes` (RNE, single rounding; f8e4m3 saturating), f32 arithmetic stays f32, and
  `exp/log/sqrt/tanh` are the float64 result rounded to f32 (the reference interpreter's definitions).
  `T.tile.cast` float -> integer: CAST_RINT rounds half to even, CAST_NONE must be exact, a value outside
  the integer type is an error; integer -> float rounds to nearest even.
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
  core; reading GM elements the other core wrote in this block without such a flag, waiting for a flag no
  one set (a deadlock), or leaving a flag unconsumed is an error.  The flags follow CrossCoreSetFlag's mode
  2: one the cube sets counts once for each vector core, which must each wait for it; the cube's wait goes
  on only when both vector cores have set the flag; ids 0..10, at most 16 pending sets.  Writes are recorded element by element.
  On the 950 the dialect inserts the synchronisation itself and nothing is checked.
* 910B copies between GM and the chip clip the GM region as tilelang-ascend's lowering does (ascend.cc:
  336-421): its start must be >= 0, its valid extent along the copied rows and columns (the last two
  dimensions of extent != 1) is min(extent, max(shape - start, 0)), and a region leaving the tensor along
  another dimension is Unsupported (the real copy would not clip it).  GM -> UB fills the whole UB region
  with `pad_value` (None: 0, in the UB dtype; not for 8-bit dtypes, which AscendC::Duplicate lacks) before
  copying the valid part into its leading corner (copy_gm_to_ub, common.h:199-226); GM -> L1 zero-fills it
  (copy_gm_to_l1, common.h:57-86); UB -> GM and L0C -> GM write only the valid part, taken from the leading
  corner (common.h:156-177, 229-236).  A region entirely outside the tensor, three dimensions of extent > 1,
  and a UB side whose rows are not adjacent or not whole 32-byte blocks (DataCopyPad) are errors.  On the
  950 a region must lie inside its tensor.
* 910B `T.tile.*` take a pointer and an element count (ascend_tile.py): a region must be contiguous, the
  element counts of dst and sources must agree (not the shapes), and a subscript `b[i]` passed as an
  operand is TIR's BufferLoad, which the real functions read at `indices[0]`: it must index a 1-D UB buffer
  (a name bound by `p = b[i, j]` is a scalar and may come from any buffer).  `T.tile.compare` writes one bit
  per element into a uint8 mask, element i at bit i % 8 of byte i // 8 (AscendC's Compare), on a multiple of
  256 bytes of input (codegen_ascend.cc:1790); `T.tile.select` takes src0 where the mask bit is set, src1
  (a buffer, or a scalar in VSEL_TENSOR_SCALAR_MODE) elsewhere; VSEL_CMPMASK_SPR reads the same first
  256 / itemsize bits in every 256-byte repeat (AscendC Select mode 0).  `T.tile.div` by a scalar operand
  multiplies by its f32 reciprocal (codegen_ascend.cc:1721-1765).
* FP8 on the 910B, which has no E4M3 type: the module lists at top level `E4M3_BYTES = [names]` of uint8 GM
  tensors holding E4M3 bit patterns; `simulate` encodes their inputs (compiler.dtypes, saturating), starts
  the others as 0x7F bytes (E4M3 NaN), and gives them back in `Simulation.tensors` decoded to float32.

The rewrites (all inside `@T.prim_func` bodies)
-----------------------------------------------
1. `if c: A else: B` becomes `for __sim_ in __sim__.when(c): A` / `... __sim__.unless(c): B`: with lanes,
   the condition is a mask, under which loads and stores act only on the lanes where it holds.
2. `T.if_then_else(c, a, b)` becomes `__sim__.select(c, lambda: a, lambda: b)`: TIR evaluates only the
   chosen operand per lane (a guarded out-of-range load is legal), so each operand is evaluated under its
   mask.
3. A subscript passed to `T.copy` (`T.copy(A[r0, c0], A_l1)`) becomes a region object (TileLang reads the
   extent of a point region from the other operand, right-aligned); one passed to `T.tile.*` or
   `T.reduce_*` becomes a region if it has a slice (`acc[r, :]`, a BufferRegion) and a BufferLoad object
   otherwise (`p[r]`).  `X = T.alloc_*(...)` becomes `X = __sim__.named("X")(T.alloc_*(...))`, which only
   records the name X for messages.

The rewrites bind and read only names that start with `__sim` (no program name may start with `__`), and the
910B's vector core index is the name the kernel binds in `T.Kernel(...) as (cid, vid)`, whatever it is.
A module whose tensors are renamed (its `RENAMED` table, backends/names.py) takes `inputs` and gives back
`tensors` under the program's names.

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
MAX_CROSS_FLAG = 10  # CrossCoreSetFlag flag ids 0..10 on Atlas A2 (the 910B)
ON_CHIP = ("L1", "L0A", "L0B", "L0C")  # reached by DMA and the cube only, never by vector lanes
TL_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float8_e4m3fn": "f8e4m3",
             "int32": "i32", "int16": "i16", "uint16": "u16", "uint8": "u8"}
INT_DTYPES = {"i32": np.dtype(np.int32), "i16": np.dtype(np.int16), "u16": np.dtype(np.uint16),
              "u8": np.dtype(np.uint8)}
# what an uninitialised integer buffer holds (floats hold NaN); 0x7F is also the E4M3 NaN byte
INT_POISON = {"i32": -2 ** 31, "i16": -2 ** 15, "u16": 0x7FFF, "u8": 0x7F}
# AscendC::Duplicate (the pad fill of copy_gm_to_ub and T.tile.fill) has no 8-bit version (common.h:41-45)
DUPLICATE_DTYPES = ("bf16", "f16", "f32", "i16", "u16", "i32")
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
    tensors: dict  # every GM tensor after the run, in its storage dtype (E4M3_BYTES tensors: decoded, float32)
    kernels: list = field(default_factory=list)
    capacities: dict = field(default_factory=dict)


# ---------------------------------------------------------------- buffers


class Buffer:
    __slots__ = ("m", "name", "scope", "dtype", "_data", "stages", "role")

    def __init__(self, m, name, scope, dtype, data, role=""):
        self.m, self.name, self.scope, self.dtype = m, name, scope, dtype
        # a 910B UB buffer exists once per vector core (each AIV has its own UB): one array per vid
        self._data = [data, data.copy()] if (scope == "UB" and m.target == "ascend-910b") else data
        self.stages = 1
        self.role = role  # GM: input | output

    @property
    def data(self):
        return self._data[self.m.vid] if isinstance(self._data, list) else self._data

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

    def __repr__(self):
        return f"{self.buf.name}[{', '.join(_show_index(k) for k in self.key)}]"


class BufferLoad:
    """`buf[i, j]` (integer indices only) passed to T.tile.* / T.reduce_*: TIR's BufferLoad, which
    tilelang-ascend reads as a scalar operand at `indices[0]` only (ascend_tile.py:819-829)."""

    __slots__ = ("buf", "key")

    def __init__(self, buf, key):
        self.buf, self.key = buf, key

    def __repr__(self):
        return f"{self.buf.name}[{', '.join(_show_index(k) for k in self.key)}]"


def _show_index(k) -> str:
    if isinstance(k, slice):
        return f"{'' if k.start is None else k.start}:{'' if k.stop is None else k.stop}"
    return "..." if k is Ellipsis else str(k)


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


def _is_int_dtype(d: str) -> bool:
    return d in INT_DTYPES


def _storage(d: str, x, what: str = "a value") -> np.ndarray:
    """`x` in dtype `d`: floats rounded by compiler.dtypes (RNE), integers exactly (else SimulationError)."""
    if not _is_int_dtype(d):
        return dt.to_storage(d, x)
    a = np.asarray(x)
    if a.dtype.kind == "b":
        raise SimulationError(f"{what}: a boolean where a {d} value is needed")
    info = np.iinfo(INT_DTYPES[d])
    floats = a.dtype.kind not in "iu"  # float32/64, or an ml_dtypes float (kind "V")
    with np.errstate(invalid="ignore"):
        wide = a.astype(np.float64) if floats else a.astype(np.int64)
        fraction = ~np.isfinite(wide) | (wide != np.trunc(wide)) if floats else np.zeros(a.shape, bool)
        outside = (wide < info.min) | (wide > info.max)
    for bad, why in ((fraction, "is not an integer"), (outside, f"is outside {d} ({info.min}..{info.max})")):
        if np.any(bad):
            v = wide.reshape(-1)[int(np.argmax(np.reshape(bad, -1)))].item()
            raise SimulationError(f"{what}: {v} {why}")
    return wide.astype(INT_DTYPES[d])


def _uninit(d: str, shape) -> np.ndarray:
    """A buffer never written: NaN floats, INT_POISON integers."""
    if _is_int_dtype(d):
        return np.full(shape, INT_POISON[d], dtype=INT_DTYPES[d])
    return dt.to_storage(d, np.full(shape, np.nan, dtype=np.float32))


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


def _slices(lo, ext) -> tuple:
    return tuple(slice(a, a + e) for a, e in zip(lo, ext))


def _span(lo, ext) -> str:
    return ", ".join(f"{a}:{a + e}" for a, e in zip(lo, ext))


def _name(x) -> str:
    """A buffer's name, a region as written (`acc[0, :]`)."""
    return x.name if isinstance(x, Buffer) else repr(x)


def _what(x) -> str:
    if isinstance(x, BufferLoad):
        return f"the element {x!r} (a BufferLoad)"
    return type(x).__name__


def _contiguous(shape, ext) -> bool:
    """Whether a region of these extents is one run of memory in a row-major buffer of `shape`."""
    dims = [i for i, e in enumerate(ext) if e != 1]
    return not dims or all(ext[i] == shape[i] for i in range(dims[0] + 1, len(shape)))


CORE_CODE = {"C": 1, "V0": 2, "V1": 3}  # who wrote a GM element (0: nobody, in this block)
CORE_NAME = {1: "cube", 2: "vector core 0", 3: "vector core 1"}


def _flat_of(buf, where) -> np.ndarray:
    """Flat element indices of `where`: a tuple of slices or (an array of) flat indices."""
    if isinstance(where, tuple):
        return np.arange(buf.data.size).reshape(buf.shape)[where].reshape(-1)
    return np.asarray(where).reshape(-1)


def _elements(per_tensor: dict, buf) -> np.ndarray:
    """The bool mask over `buf`'s elements kept in `per_tensor` (created empty)."""
    mask = per_tensor.get(buf.name)
    if mask is None:
        mask = per_tensor[buf.name] = np.zeros(buf.data.size, dtype=bool)
    return mask


# ---------------------------------------------------------------- the 910B's copies between GM and the chip


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


# ---------------------------------------------------------------- the machine


class _Machine:
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
        self.flags = Counter()  # (receiving core "C" | "V", sending vector core or receiving vid, flag) -> count
        self.vid = 0  # the vector core running the current T.Scope("V") (each runs it, one after the other)
        # element by element (flat bool masks per GM tensor), so a clipped copy counts only what it wrote
        self.published = defaultdict(dict)  # flag -> {GM tensor: elements it makes visible}
        self.pending = defaultdict(dict)  # (core, pipe) -> {GM tensor: elements written, not yet published}
        self.written_by = {}  # GM tensor -> per element: the core that wrote it in this block (0: none)
        self.visible = defaultdict(dict)  # core ("C", "V0", "V1") -> {GM tensor: elements it waited for}

    def end_block(self) -> None:
        if not self.entered:
            raise SimulationError("the kernel body never entered T.Kernel")
        left = {f"{flag} (for {'the cube, from' if core == 'C' else 'vector core'} {'vector core ' if core == 'C' else ''}"
                f"{vid})": n for (core, vid, flag), n in self.flags.items() if n}
        if left:
            raise SimulationError(f"cross-core flags set but never waited for at the end of the block: {left}; in "
                                  f"mode 2 a flag the cube sets reaches both vector cores, and each must wait for it")

    # ------------------------------------------------------------ allocation and capacities

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
        if buf.scope == "GM" and self.target == "ascend-910b":
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
            buf.data[key] = val
            self._gm_write(buf, "S", np.ravel_multi_index(key, buf.shape))  # scalar / SIMT stores to GM
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
        self._gm_write(buf, "S", flat)  # scalar / SIMT stores to GM

    # ------------------------------------------------------------ GM ordering between the 910B's cores

    def _gm_write(self, buf: Buffer, pipe, where) -> None:
        """Record the GM elements (`where`: flat indices or a tuple of slices) this core wrote on `pipe`."""
        if buf.scope != "GM" or self.target != "ascend-910b":
            return
        flat = _flat_of(buf, where)
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

    def _gm_read(self, buf: Buffer, where) -> None:
        """Reading GM elements the other core wrote in this block needs a flag set after those writes."""
        if self.target != "ascend-910b" or buf.scope != "GM":
            return
        w = self.written_by.get(buf.name)
        if w is None:
            return
        flat = _flat_of(buf, where)
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

    @property
    def who(self) -> str:
        """The core running now: "C", or "V0" / "V1" for the vector cores."""
        return self.core if self.core != "V" else f"V{self.vid}"

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

    # ------------------------------------------------------------ regions and copies

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
            dv[...] = val.reshape(dv.shape)
            self._gm_write(db, pipe, _slices(d_lo, d_ext))
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
            g = _slices(d_lo, valid)
            db.data[g] = sb.data[_slices(s_lo, s_ext)].reshape(d_ext)[corner]
            self._gm_write(db, pipe, g)

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
        if _is_int_dtype(d):  # TIR's float -> int Cast truncates toward zero
            a = np.asarray(value)
            a = a if a.dtype.kind in "iu" else np.trunc(a.astype(np.float64))
            return _scalar(_storage(d, a, f"T.Cast(\"{dtype}\", ...)"))
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


def _is_scalar(x) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    return isinstance(x, (int, float, np.generic)) or (isinstance(x, np.ndarray) and x.ndim == 0)


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


# dtypes of the 910B's vector instructions (AscendC dav_c220 kernel_operator_vec_binary_impl.h static_asserts:
# Add/Sub/Mul/Max/Min half/float/int16/int32, Div half/float, And/Or int16/uint16; Exp/Ln/... half/float)
ARITH_DTYPES = ("f16", "f32", "i16", "i32")
FLOAT_DTYPES = ("f16", "f32")
BITWISE_DTYPES = ("i16", "u16")
COMPARE = {"EQ": np.equal, "NE": np.not_equal, "GT": np.greater, "GE": np.greater_equal, "LT": np.less,
           "LE": np.less_equal}  # NaN: False except NE, as IEEE comparisons
ANY_SRC1 = ("tensor", "load", "scalar")
NO_SCALAR = "src1 is a buffer, a region or a BufferLoad (ascend_tile.py:867, 889: not a bare scalar)"
NO_BITWISE_SCALAR = ("src1 is a buffer or a region: binary_op's scalar form would call tl.ascend_bitwise_ands / "
                     "_ors, which are not registered (ascend.cc:879-888 has ascend_bitwise_and / _or only)")


def _reciprocal(v):
    """1 / v as DivsOpCodegen computes a scalar divisor: in f32, then in the operand's dtype (codegen_ascend.cc:
    1731-1745), for AscendC::Muls."""
    v = np.asarray(v)
    with np.errstate(all="ignore"):
        return (np.float32(1.0) / v.astype(np.float32)).astype(v.dtype)


class _Tile910B:
    """`T.tile.*` of tilelang-ascend 0.1.4 (ascend_tile.py): operations on UB buffers and contiguous regions,
    each a pointer and an element count."""

    def __init__(self, m: _Machine):
        self._m = m

    def _operand(self, what, x, like: Buffer, n: int, kinds, rule=""):
        """(kind, value) of a second operand: ("tensor", n elements), ("load", a 1-D UB element) or ("scalar",
        converted to `like`'s dtype as the generated code does, codegen_ascend.cc:1641-1650, 1822-1827)."""
        m = self._m
        if isinstance(x, (Buffer, Region)):
            b, v = m.flat_view(x, what)
            if "tensor" not in kinds:
                raise SimulationError(f"{what}: src1 {b.name} is a buffer here, but {rule}")
            if v.size != n:
                raise SimulationError(f"{what}: src1 {b.name} has {v.size} elements, the operation {n} (binary_op "
                                      f"asserts size_0 == size_2, ascend_tile.py:835)")
            if b.dtype != like.dtype:
                raise SimulationError(f"{what}: src1 {b.name} is {b.dtype}, {like.name} {like.dtype}")
            return "tensor", v
        if isinstance(x, BufferLoad):
            if "load" not in kinds:
                raise SimulationError(f"{what}: src1 {x!r} is a BufferLoad here, but {rule}")
            v = m.scalar_load(x, what)
            if x.buf.dtype != like.dtype:
                raise SimulationError(f"{what}: the scalar operand {x!r} is {x.buf.dtype}, {like.name} {like.dtype} "
                                      f"(codegen_ascend.cc:1628 checks they agree)")
            return "load", v
        if not _is_scalar(x):
            raise SimulationError(f"{what}: src1 is {_what(x)}, not a buffer, a region or a scalar")
        if "scalar" not in kinds:
            raise SimulationError(f"{what}: src1 {x!r} is a scalar, but {rule}")
        return "scalar", _storage(like.dtype, x, f"{what}'s scalar operand")

    def _binary(self, what, fn, dst, src0, src1, kinds=ANY_SRC1, dtypes=ARITH_DTYPES, rule="", scalar_fn=None):
        m = self._m
        m.vector_op(what)
        db, d = m.flat_view(dst, what)
        sb, a = m.flat_view(src0, what)
        if a.size != d.size:
            raise SimulationError(f"{what}: dst {db.name} has {d.size} elements but src0 {sb.name} {a.size} "
                                  f"(binary_op asserts size_0 == size_1, ascend_tile.py:816)")
        if sb.dtype != db.dtype or db.dtype not in dtypes:
            raise SimulationError(f"{what}: {sb.name} ({sb.dtype}) into {db.name} ({db.dtype}); the 910B's vector "
                                  f"instruction takes one dtype of {', '.join(dtypes)}")
        kind, b = self._operand(what, src1, db, d.size, kinds, rule)
        d[...] = scalar_fn(a, b) if scalar_fn is not None and kind != "tensor" else fn(a, b)

    def _unary(self, what, fn, dst, src):
        m = self._m
        m.vector_op(what)
        db, d = m.flat_view(dst, what)
        sb, a = m.flat_view(src, what)
        if a.size != d.size or sb.dtype != db.dtype or db.dtype not in FLOAT_DTYPES:
            raise SimulationError(f"{what}: {a.size} {sb.dtype} elements of {sb.name} into {d.size} {db.dtype} of "
                                  f"{db.name} (unary_op asserts equal sizes, ascend_tile.py:958; one dtype of "
                                  f"{', '.join(FLOAT_DTYPES)})")
        d[...] = fn(a)

    def fill(self, buffer, value):
        m = self._m
        m.vector_op("T.tile.fill")
        b, v = m.flat_view(buffer, "T.tile.fill")
        if b.dtype not in DUPLICATE_DTYPES:
            raise SimulationError(f"T.tile.fill of {b.name} ({b.dtype}): Fill is AscendC::Duplicate (common.h:"
                                  f"923-927), which takes {', '.join(DUPLICATE_DTYPES)}")
        value = m.scalar_value(value, "T.tile.fill")
        v[...] = m._convert(b, value)

    def add(self, dst, src0, src1):
        self._binary("T.tile.add", np.add, dst, src0, src1)

    def sub(self, dst, src0, src1):
        # a BufferLoad subtrahend becomes AscendC::Adds of its negation (codegen_ascend.cc:1665-1719): exact
        self._binary("T.tile.sub", np.subtract, dst, src0, src1, ("tensor", "load"), rule=NO_SCALAR)

    def mul(self, dst, src0, src1):
        self._binary("T.tile.mul", np.multiply, dst, src0, src1)

    def div(self, dst, src0, src1):
        self._binary("T.tile.div", np.divide, dst, src0, src1, ("tensor", "load"), FLOAT_DTYPES, NO_SCALAR,
                     scalar_fn=lambda a, v: a * _reciprocal(v))

    def max(self, dst, src0, src1):  # noqa: A003
        self._binary("T.tile.max", np.maximum, dst, src0, src1)

    def min(self, dst, src0, src1):  # noqa: A003
        self._binary("T.tile.min", np.minimum, dst, src0, src1)

    def bitwise_and(self, dst, src0, src1):
        self._binary("T.tile.bitwise_and", np.bitwise_and, dst, src0, src1, ("tensor",), BITWISE_DTYPES,
                     NO_BITWISE_SCALAR)

    def bitwise_or(self, dst, src0, src1):
        self._binary("T.tile.bitwise_or", np.bitwise_or, dst, src0, src1, ("tensor",), BITWISE_DTYPES,
                     NO_BITWISE_SCALAR)

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
        sb, s = m.tile_view(src, "T.tile.cast")
        if mode not in CAST_MODES:
            raise SimulationError(f"T.tile.cast with unknown mode {mode!r}")
        if int(count) != d.size or d.size != s.size or _strip(d.shape) != _strip(s.shape):
            raise SimulationError(f"T.tile.cast of {count} elements from {s.shape} into {d.shape}")
        if mode not in ("CAST_RINT", "CAST_NONE"):
            raise Unsupported(f"T.tile.cast {mode}: only round-to-nearest-even (CAST_RINT, and CAST_NONE, which is "
                              f"RINT where the conversion is inexact) is modelled")
        what = f"T.tile.cast {sb.name} ({sb.dtype}) -> {db.name} ({db.dtype}, {mode})"
        if _is_int_dtype(db.dtype) and not _is_int_dtype(sb.dtype):
            wide = s.astype(np.float64)
            r = np.rint(wide)  # ties to even
            inexact = np.isfinite(wide) & (r != wide)
            if mode == "CAST_NONE" and inexact.any():
                v = wide.reshape(-1)[int(np.argmax(inexact.reshape(-1)))].item()
                raise SimulationError(f"{what}: {v} is not an integer; the emitter uses CAST_NONE only where the "
                                      f"conversion is exact (CAST_RINT rounds)")
            d[...] = _storage(db.dtype, r, what).reshape(d.shape)
        elif _is_int_dtype(db.dtype):
            d[...] = _storage(db.dtype, s, what).reshape(d.shape)
        else:  # float -> float, integer -> float: one RNE rounding (exact for the integers used)
            d[...] = dt.to_storage(db.dtype, s).reshape(d.shape)

    def createvecindex(self, dst, firstValue):  # noqa: N803
        what = "T.tile.createvecindex"
        m = self._m
        m.vector_op(what)
        if not isinstance(dst, Buffer):
            raise SimulationError(f"{what} takes a whole buffer: the real function uses dst.shape and "
                                  f"dst.access_ptr (ascend_tile.py:1426-1435); got {dst!r}")
        b, v = m.flat_view(dst, what)
        if b.dtype not in ARITH_DTYPES:
            raise SimulationError(f"{what} into {b.name} ({b.dtype}): AscendC::CreateVecIndex takes "
                                  f"{', '.join(ARITH_DTYPES)}")
        first = m.scalar_value(firstValue, what)
        v[...] = _storage(b.dtype, np.asarray(first) + np.arange(v.size), what)

    def compare(self, dst, src0, src1, mode):
        from .api910b import COMPARE_MODES

        what = "T.tile.compare"
        m = self._m
        m.vector_op(what)
        if mode not in COMPARE_MODES:
            raise SimulationError(f"{what} with mode {mode!r}: one of {', '.join(sorted(COMPARE_MODES))} "
                                  f"(ascend_tile.py:1655)")
        sb, a = m.flat_view(src0, what)
        if sb.dtype not in FLOAT_DTYPES:
            raise SimulationError(f"{what} of {sb.name} ({sb.dtype}): one of {', '.join(FLOAT_DTYPES)} is compared")
        n = a.size
        if n * a.itemsize % 256:
            raise SimulationError(f"{what} of {n} {sb.dtype} elements of {sb.name} ({n * a.itemsize} B): the "
                                  f"compiler requires a multiple of 256 bytes (codegen_ascend.cc:1790, 1844)")
        db, d = m.flat_view(dst, what)
        need = -(-n // 8)
        if db.dtype != "u8" or d.size < need:
            raise SimulationError(f"{what}: the mask {db.name} ({d.size} {db.dtype}) is too small or not uint8: "
                                  f"{n} elements of {sb.name} need {need} uint8 bytes, one bit per element")
        _, b = self._operand(what, src1, sb, n, ANY_SRC1)
        with np.errstate(invalid="ignore"):
            bits = COMPARE[mode](a, b)
        d[:need] = np.packbits(bits, bitorder="little")  # element i: bit i % 8 of byte i // 8

    def select(self, dst, selMask, src0, src1, selMode):  # noqa: N803
        from .api910b import SELECT_MODES

        what = "T.tile.select"
        m = self._m
        m.vector_op(what)
        if selMode not in SELECT_MODES:
            raise SimulationError(f"{what} with selMode {selMode!r}: one of {', '.join(sorted(SELECT_MODES))} "
                                  f"(ascend_tile.py:626)")
        dshape, sshape = self._api_shape(dst, what), self._api_shape(src0, what)
        if dshape != sshape:
            raise SimulationError(f"{what}: dst {_name(dst)} has shape {dshape} but src0 {_name(src0)} {sshape}; "
                                  f"the real function asserts they are equal, a region's shape being its list of "
                                  f"extents (ascend_tile.py:578-593)")
        db, d = m.flat_view(dst, what)
        sb, a = m.flat_view(src0, what)
        if sb.dtype != db.dtype or db.dtype not in FLOAT_DTYPES:
            raise SimulationError(f"{what}: {sb.name} ({sb.dtype}) into {db.name} ({db.dtype}); AscendC::Select "
                                  f"takes one dtype of {', '.join(FLOAT_DTYPES)}")
        bits = self._selection(what, selMask, a.size, a.itemsize, selMode)
        if selMode == "VSEL_TENSOR_SCALAR_MODE":
            if not _is_scalar(src1):
                raise SimulationError(f"{what} in VSEL_TENSOR_SCALAR_MODE takes a scalar src1 (ascend_tile.py:"
                                      f"652-653), got {_what(src1)}")
            other = _storage(db.dtype, src1, f"{what}'s scalar src1")
        else:
            if not isinstance(src1, Buffer):
                raise SimulationError(f"{what} in {selMode} takes a whole UB buffer as src1: the real function calls "
                                      f"src1.access_ptr (ascend_tile.py:673), which a region lacks, and its BufferLoad "
                                      f"form passes indices[0] where the code generator expects the mode "
                                      f"(ascend_tile.py:640-649, codegen_ascend.cc:1327-1342); got {_what(src1)}")
            _, other = self._operand(what, src1, db, a.size, ("tensor",))
        d[...] = np.where(bits, a, other)

    def _api_shape(self, x, what):
        """The shape select compares: a buffer's shape, a region's extents (ascend_tile.py:578-589)."""
        if isinstance(x, Buffer):
            return list(x.shape)
        if isinstance(x, Region):
            return list(self._m._bounds(x)[2])
        raise SimulationError(f"{what} takes a UB buffer or region as dst and src0, got {_what(x)}")

    def _selection(self, what, mask, n, itemsize, mode):
        """Per element: take src0?  Bit i % 8 of byte i // 8 of the mask, except that VSEL_CMPMASK_SPR reuses the
        first 256 / itemsize bits in every 256-byte repeat (the CMPMASK register: 64 bits for f32, 128 for f16;
        AscendC Select mode 0, dav_c220 kernel_operator_vec_cmpsel_impl.h VselImpl)."""
        if not isinstance(mask, Buffer):
            raise SimulationError(f"{what}: selMask must be a whole UB buffer: the real function calls "
                                  f"selMask.access_ptr (ascend_tile.py:623); got {_what(mask)}")
        mb, mv = self._m.flat_view(mask, what)
        index = np.arange(n)
        if mode == "VSEL_CMPMASK_SPR":
            index = index % (256 // itemsize)
        need = -(-(int(index.max()) + 1) // 8) if n else 0
        if mb.dtype != "u8" or mv.size < need:
            raise SimulationError(f"{what}: the mask {mb.name} ({mv.size} {mb.dtype}) is too small or not uint8: "
                                  f"{n} elements in {mode} need {need} uint8 bytes")
        return np.unpackbits(mv[:need], bitorder="little")[index].astype(bool)


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
        if enable_relu:
            raise Unsupported("T.copy with enable_relu")
        self._m.copy(src, dst, transpose=bool(transpose), pad_value=pad_value)

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
        self._m.set_flag(pipe, flag, mode)

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


def _is_tile(func) -> bool:
    """T.tile.name"""
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "tile"
            and isinstance(func.value.value, ast.Name) and func.value.value.id == "T")


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
                loop = ast.For(ast.Name("__sim_", ast.Store()), _sim_call(fn, [ast.Name(tmp, ast.Load())], node), body,
                               [])
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
        elif _is_tile(node.func) or (_is_T(node.func) and node.func.attr.startswith("reduce_")):
            node.args = [self._operand(a) for a in node.args]
            for kw in node.keywords:
                kw.value = self._operand(kw.value)
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
    def _region(e, fn="region"):
        if not isinstance(e, ast.Subscript):
            return e
        elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        conv = []
        for x in elts:
            if isinstance(x, ast.Slice):
                parts = [p if p is not None else ast.Constant(None) for p in (x.lower, x.upper, x.step)]
                conv.append(ast.copy_location(ast.Call(ast.Name("__sim_slice", ast.Load()), parts, []), e))
            else:
                conv.append(x)
        return _sim_call(fn, [e.value, ast.copy_location(ast.Tuple(conv, ast.Load()), e)], e)

    @classmethod
    def _operand(cls, e):
        """An argument of T.tile.* / T.reduce_*: `a[r, :]` (a slice) is a BufferRegion, `a[r]` a BufferLoad."""
        if not isinstance(e, ast.Subscript):
            return e
        elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        sliced = any(isinstance(x, ast.Slice) or (isinstance(x, ast.Constant) and x.value is Ellipsis) for x in elts)
        return cls._region(e, "region_arg" if sliced else "load_arg")


class _BothVectorCores(ast.NodeTransformer):
    """`with T.Scope("V"): ...` -> `for vid in __sim__.vector_cores(): with T.Scope("V"): ...` (910B), `vid` the
    name the kernel binds in `with T.Kernel(n, is_npu=True) as (cid, vid)`."""

    def __init__(self, vid: str = "vid"):
        self.vid = vid

    @staticmethod
    def vector_core_name(func: ast.FunctionDef) -> str:
        for node in ast.walk(func):
            if isinstance(node, ast.With) and len(node.items) == 1:
                item = node.items[0]
                if (isinstance(item.context_expr, ast.Call) and _is_T(item.context_expr.func, "Kernel")
                        and isinstance(item.optional_vars, ast.Tuple) and len(item.optional_vars.elts) == 2
                        and isinstance(item.optional_vars.elts[1], ast.Name)):
                    return item.optional_vars.elts[1].id
        return "vid"

    def visit_With(self, node):  # noqa: N802
        self.generic_visit(node)
        call = node.items[0].context_expr if len(node.items) == 1 else None
        if not (isinstance(call, ast.Call) and _is_T(call.func, "Scope") and call.args
                and isinstance(call.args[0], ast.Constant) and call.args[0].value == "V"):
            return node
        cores = ast.Call(ast.Attribute(ast.Name("__sim__", ast.Load()), "vector_cores", ast.Load()), [], [])
        return ast.copy_location(ast.For(ast.Name(self.vid, ast.Store()), cores, [node], []), node)


def _prepare(text: str, target: str):
    tree = ast.parse(text, FILENAME)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                _is_T(d) or (isinstance(d, ast.Call) and _is_T(d.func)) for d in node.decorator_list):
            if target == "ascend-910b":
                _BothVectorCores(_BothVectorCores.vector_core_name(node)).visit(node)
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
    ns = {"__builtins__": fake_builtins, "__name__": "tdsl_ascend_simulated", "__sim__": m, "__sim_slice": slice}
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
    renamed = _renamed(ns)
    inputs = {renamed.get(name, name): value for name, value in inputs.items()}
    specs = {}
    for k in ns["KERNELS"].values():
        for name, spec in k.params:
            if specs.setdefault(name, spec) != spec:
                raise SimulationError(f"{name} is declared {specs[name]} and {spec} by different kernels")
    fp8 = _e4m3_bytes(ns, specs, m.target)
    gm = {}
    for name, spec in specs.items():
        if name in inputs:
            x = np.asarray(inputs[name])
            if name in fp8:
                arr = dt.to_storage("f8e4m3", x).view(np.uint8)
            else:
                arr = _storage(spec.dtype, x, f"input {name}")
            arr = np.ascontiguousarray(arr)
            if arr.shape != spec.shape:
                raise SimulationError(f"input {name} has shape {arr.shape}, the module declares {spec.shape}")
            role = "input"
        else:
            arr = np.full(spec.shape, 0x7F, dtype=np.uint8) if name in fp8 else _uninit(spec.dtype, spec.shape)
            role = "output"
        gm[name] = Buffer(m, name, "GM", spec.dtype, arr, role)
    runs = []
    with np.errstate(all="ignore"):
        for k in ns["KERNELS"].values():
            runs.append(m.run_kernel(k, gm))
    program_name = {ident: name for name, ident in renamed.items()}
    tensors = {program_name.get(n, n): b.data.view(dt.NUMPY_DTYPES["f8e4m3"]).astype(np.float32) if n in fp8
               else b.data for n, b in gm.items()}
    return Simulation(m.target, tensors, runs, dict(m.caps))


def _renamed(ns: dict) -> dict:
    """The module's RENAMED table (program name -> the identifier of its tensor), {} when it has none."""
    renamed = ns.get("RENAMED", {})
    if not isinstance(renamed, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in renamed.items()):
        raise SimulationError(f"RENAMED = {renamed!r}: a dict of program names to identifiers")
    return renamed


def _e4m3_bytes(ns: dict, specs: dict, target: str) -> set:
    """910B: the GM tensors the module's E4M3_BYTES lists, uint8 tensors that hold FP8 E4M3 bit patterns (the
    910B has no E4M3 type).  Their inputs are encoded, their other contents start as 0x7F (E4M3 NaN), and they
    are given back decoded."""
    names = ns.get("E4M3_BYTES", ())
    if target != "ascend-910b":
        return set()
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise SimulationError(f"E4M3_BYTES = {names!r}: a list or tuple of tensor names")
    for n in names:
        if n not in specs or specs[n].dtype != "u8":
            got = f"a {specs[n].dtype} tensor" if n in specs else "not a tensor parameter of the module's kernels"
            raise SimulationError(f"E4M3_BYTES names {n}, which is {got}; it lists uint8 GM tensors holding E4M3 "
                                  f"bytes")
    return set(names)


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
