"""Bounds checks for kernels run under the Triton interpreter (TRITON_INTERPRET=1).

The interpreter turns pointers into raw host addresses and loads and stores through them unchecked: a
kernel that reads or writes outside its tensors corrupts the Python heap (or crashes the process) instead
of failing.  Inside `checked_memory()`, every launch records the address range of each tensor argument,
and every load and store checks that each of its unmasked lanes lies inside one of them; the first lane
that does not raises `OutOfBounds`, naming the tensor it came closest to.

    with checked_memory():
        module.gemm(A, B)          # raises OutOfBounds instead of writing past C

Used by `tdsl run --target nvidia` on a machine without a GPU and by the differential fuzzer.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import numpy as np


class OutOfBounds(Exception):
    """A kernel lane loaded or stored outside every tensor of its launch."""


@dataclass(frozen=True)
class _Range:
    name: str
    start: int
    end: int  # exclusive
    itemsize: int


_launches = threading.local()


def _ranges() -> list:
    stack = getattr(_launches, "stack", None)
    return stack[-1] if stack else None


def _tensor_ranges(names, values) -> list:
    ranges = []
    for name, value in zip(names, values):
        if hasattr(value, "data_ptr") and hasattr(value, "numel"):
            start = value.data_ptr()
            ranges.append(_Range(name, start, start + value.numel() * value.element_size(), value.element_size()))
    return ranges


def _check(kind: str, ptrs: np.ndarray, mask: np.ndarray, itemsize: int) -> None:
    ranges = _ranges()
    if ranges is None:
        return
    active = np.asarray(ptrs, dtype=np.uint64)[np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs))]
    if active.size == 0:
        return
    inside = np.zeros(active.shape, dtype=bool)
    for r in ranges:
        inside |= (active >= r.start) & (active + itemsize <= r.end)
    if inside.all():
        return
    bad = int(active[~inside][0])
    raise OutOfBounds(f"a {kind} at {_where(bad, ranges)} is outside every tensor of the launch")


def _where(address: int, ranges: list) -> str:
    """The address as an element offset of the nearest tensor (e.g. 'C[35] (C has 35 elements)')."""
    if not ranges:
        return hex(address)
    nearest = min(ranges, key=lambda r: min(abs(address - r.start), abs(address - r.end)))
    offset = (address - nearest.start) // nearest.itemsize
    count = (nearest.end - nearest.start) // nearest.itemsize
    return f"element {offset} of {nearest.name} ({nearest.name} has {count} elements)"


@contextlib.contextmanager
def checked_memory():
    """Check every load and store of kernels launched under the Triton interpreter inside this block."""
    import inspect

    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    executor = interpreter.GridExecutor
    saved = (builder.create_masked_load, builder.create_masked_store, executor.__call__)

    # (TMA descriptor loads and stores reach these too, with the lanes inside the tensor: keywords then)
    def load(self, ptrs, mask, other, *args, **kwargs):
        _check("load", ptrs.data, mask.data, _get_itemsize(interpreter, ptrs))
        return saved[0](self, ptrs, mask, other, *args, **kwargs)

    def store(self, ptrs, value, mask, *args, **kwargs):
        _check("store", ptrs.data, mask.data, np.asarray(value.data).itemsize)
        return saved[1](self, ptrs, value, mask, *args, **kwargs)

    def launch(self, *args, **kwargs):
        names = inspect.getfullargspec(self.fn).args
        bound = list(zip(names, args)) + [(k, v) for k, v in kwargs.items()]
        stack = getattr(_launches, "stack", None) or []
        _launches.stack = stack + [_tensor_ranges([n for n, _ in bound], [v for _, v in bound])]
        try:
            return saved[2](self, *args, **kwargs)
        finally:
            _launches.stack = stack

    builder.create_masked_load, builder.create_masked_store, executor.__call__ = load, store, launch
    try:
        yield
    finally:
        builder.create_masked_load, builder.create_masked_store, executor.__call__ = saved


def _get_itemsize(interpreter, ptrs) -> int:
    return np.dtype(interpreter._get_np_dtype(ptrs.get_element_ty())).itemsize


def out_of_bounds(err: BaseException):
    """The OutOfBounds behind an exception the interpreter raised (it wraps kernel errors), or None."""
    while err is not None:
        if isinstance(err, OutOfBounds):
            return err
        err = err.__cause__ or err.__context__
    return None
