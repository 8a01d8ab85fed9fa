"""`tilelang.ascend.language` (mainline TileLang 0.1.15's Ascend dialect) as the ascend-950 modules use it.

Every function takes the parameter names of the real one (tests/verify/test_ascend_simulate.py compares them
with the installed tilelang where it is importable); memory goes through the machine (machine.py).
"""

from __future__ import annotations

import numpy as np

from tdsl.compiler.model import dtypes as dt
from tdsl.compiler.verify.ascend_sim.buffers import INT_DTYPES, Unsupported, _dtype, _scalar
from tdsl.compiler.verify.ascend_sim.lang_common import ScalarSpec, _Common, _f64_math, _Frame


class Lang950(_Common):
    """`tilelang.ascend.language` as the ascend-950 modules use it (parameter names of tilelang 0.1.15)."""

    int32 = ScalarSpec("int32")  # a scalar parameter: a host loop's value

    def prim_func(self, func=None, *, eager_jit=False):
        return self._prim_func(func)

    def Tensor(self, shape, dtype="float32", data=None, scope=None):  # noqa: N802
        return self._tensor(shape, dtype)

    def decl_buffer(self, shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=0,
                    offset_factor=0, buffer_type="", axis_separators=None):
        if strides is not None or elem_offset is not None or scope != "global":
            raise Unsupported("T.decl_buffer with strides, an offset or a scope")
        return self._m.view(shape, dtype, data)

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

    def ascend_pipe_barrier(self, pipe_t):
        if pipe_t != "PIPE_ALL":
            raise Unsupported(f"T.ascend_pipe_barrier({pipe_t!r}): only PIPE_ALL (every pipe) is modelled")
        self._m.pipe_barrier_all()

    def Pipelined(self, start, stop=None, num_stages=0, order=None, stage=None, annotations=None):  # noqa: N802
        return self._pipelined(start, stop, num_stages)

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

    def alloc_var(self, dtype, *args, scope="local.var", init=None):
        """A scalar variable: the printers declare only constants this way (operands TVM must not fold)."""
        if args or init is None:
            raise Unsupported("T.alloc_var other than with a keyword init")
        return self._cast(dtype, init)

    def reinterpret(self, value, dtype, span=None):
        """The same bits as another dtype of the same width (the printers' round trip through int32)."""
        a = np.asarray(value)
        d = _dtype(dtype)
        target = INT_DTYPES[d] if d in INT_DTYPES else dt.numpy_dtype(d)
        if a.dtype.itemsize != target.itemsize:
            raise Unsupported(f"T.reinterpret of {a.dtype} as {dtype}")
        return _scalar(a.view(target))

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

    def tanh(self, x):
        return _f64_math(np.tanh, x)

    def abs(self, x, span=None):  # noqa: A003
        return self._abs(x)
