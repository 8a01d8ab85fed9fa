"""What the execution model's machine holds, and what a run gives back or raises.

The dtype tables of the simulated buffers (TileLang's names -> tdsl's, integer dtypes and the poison an unwritten
buffer holds), the errors (`SimulationError`, `Unsupported`, `CapacityExceeded`), the results (`Simulation`,
`KernelRun`), the objects an emitted kernel handles (`Buffer`, a `Region` of one, a `BufferLoad` operand, the
`TensorSpec` of a parameter, the lanes of a `T.Parallel`), and the small helpers every other module of the
package uses on them (conversion to a storage dtype, index and region arithmetic, message formatting).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tdsl.compiler.model import dtypes as dt

SCOPES = ("L1", "L0A", "L0B", "L0C", "UB")
ON_CHIP = ("L1", "L0A", "L0B", "L0C")  # reached by DMA and the cube only, never by vector lanes
TL_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float8_e4m3fn": "f8e4m3",
             "int32": "i32", "int16": "i16", "uint16": "u16", "uint8": "u8"}
INT_DTYPES = {"i32": np.dtype(np.int32), "i16": np.dtype(np.int16), "u16": np.dtype(np.uint16),
              "u8": np.dtype(np.uint8)}
# what an uninitialised integer buffer holds (floats hold NaN); 0x7F is also the E4M3 NaN byte
INT_POISON = {"i32": -2 ** 31, "i16": -2 ** 15, "u16": 0x7FFF, "u8": 0x7F}
# AscendC::Duplicate (the pad fill of copy_gm_to_ub and T.tile.fill) has no 8-bit version (common.h:41-45)
DUPLICATE_DTYPES = ("bf16", "f16", "f32", "i16", "u16", "i32")


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


class _Subscript:
    """A buffer and a subscript of it, printed as written (`acc[0, :]`)."""

    __slots__ = ("buf", "key")

    def __init__(self, buf, key):
        self.buf, self.key = buf, key

    def __repr__(self):
        return f"{self.buf.name}[{', '.join(_show_index(k) for k in self.key)}]"


class Region(_Subscript):
    """`buf[key]` where the key has slices, or any subscript handed to T.copy (a point region)."""

    __slots__ = ()


class BufferLoad(_Subscript):
    """`buf[i, j]` (integer indices only) passed to T.tile.* / T.reduce_*: TIR's BufferLoad, which
    tilelang-ascend reads as a scalar operand at `indices[0]` only (ascend_tile.py:819-829)."""

    __slots__ = ()


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


def _is_scalar(x) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    return isinstance(x, (int, float, np.generic)) or (isinstance(x, np.ndarray) and x.ndim == 0)
