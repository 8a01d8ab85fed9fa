"""What the two dialects' `T` namespaces share: prim_funcs, tensors, the kernel grid, loops, casts, scalar math.

`_Common` is the base of `Lang950` (lang950.py) and `Lang910B` (lang910b.py).  Its public methods are the ones
whose name and signature are the same in both real APIs (`T.serial`, `T.exp / log / sqrt`, `T.max / min`,
`T.evaluate`); the others are `_` helpers that each dialect wraps with its own signature, since the tests compare
every function of a namespace with the real one.  Scalar math follows the reference interpreter: exp / log /
sqrt / tanh are the float64 result rounded once to f32 (or to the operand's narrower dtype).
"""

from __future__ import annotations

import builtins
import inspect

import numpy as np

from tdsl.compiler.model import dtypes as dt

from tdsl.compiler.verify.ascend_sim.buffers import (INT_DTYPES, SimulationError, TensorSpec, Unsupported, _dtype, _is_int,
                                                     _is_int_dtype, _scalar, _storage)
from tdsl.compiler.verify.ascend_sim.machine import _Machine

_INT_RANGE: dict = {}  # integer dtype -> (min, max): a cast of an integer in range is the integer


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


class ScalarSpec:
    """A scalar parameter's annotation (`t: T.int32`): the value of a loop the launcher runs (`host`)."""

    def __init__(self, dtype: str):
        self.dtype = dtype


class _PrimFunc:
    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self.params = []  # (name, TensorSpec): the GM tensors, first
        self.scalars = []  # names of the int32 parameters after them
        for p in inspect.signature(func).parameters.values():
            spec = p.annotation
            if isinstance(spec, str):
                spec = eval(spec, func.__globals__)  # noqa: S307 (a postponed annotation of the module itself)
            if isinstance(spec, ScalarSpec):
                self.scalars.append(p.name)
            elif not isinstance(spec, TensorSpec) or self.scalars:
                raise SimulationError(f"{self.name}: parameter {p.name} is not annotated with T.Tensor (tensors first, "
                                      f"then T.int32 scalars)")
            else:
                self.params.append((p.name, spec))
        self.declared = {}


class _Common:
    """Helpers both dialects share (kernels, loops, casts, scalar math).  Public methods here have the same name
    and signature in both real APIs; the `_` helpers are wrapped per dialect, with that dialect's signature."""

    def __init__(self, m: _Machine):
        self._m = m

    # ------------------------------------------------------------ T.* the two APIs spell alike

    def serial(self, start, stop=None, step=None, *, annotations=None):
        if stop is None:
            start, stop = 0, start
        return range(int(start), int(stop), 1 if step is None else int(step))

    def exp(self, x):
        return _f64_math(np.exp, x)

    def log(self, x):
        return _f64_math(np.log, x)

    def sqrt(self, x):
        return _f64_math(np.sqrt, x)

    def max(self, a, b):  # noqa: A003
        if _is_int(a) and _is_int(b):
            return builtins.max(a, b)
        return _scalar(np.maximum(_f32(a), _f32(b)))

    def min(self, a, b):  # noqa: A003
        if _is_int(a) and _is_int(b):
            return builtins.min(a, b)
        return _scalar(np.minimum(_f32(a), _f32(b)))

    def evaluate(self, value):
        return None

    # ------------------------------------------------------------ helpers each dialect wraps

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
            if isinstance(value, (bool, int, np.bool_, np.integer)):  # an index or a condition (most casts)
                kind = INT_DTYPES[d]
                low, high = _INT_RANGE.setdefault(d, (np.iinfo(kind).min, np.iinfo(kind).max))
                if low <= int(value) <= high:
                    return kind.type(int(value))
            a = np.asarray(value)
            a = a if a.dtype.kind in "iu" else np.trunc(a.astype(np.float64))
            return _scalar(_storage(d, a, f"T.Cast(\"{dtype}\", ...)"))
        if d == "f32":
            if isinstance(value, (int, float)):
                return np.float32(value)
            return _scalar(np.asarray(value).astype(np.float32))
        return _scalar(dt.to_storage(d, value))

    @staticmethod
    def _abs(x):
        return _scalar(np.abs(_f32(x)))

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
