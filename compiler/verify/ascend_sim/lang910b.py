"""`tilelang.language` of tilelang-ascend 0.1.4 as the ascend-910b modules use it: exactly backends/ascend910b/api.py's surface.

Names and signatures are those of backends/ascend910b/api.py (the tests compare them), so a function the real
API lacks is an AttributeError.  `T.Scope("C" | "V")` sets the core the machine checks every access against;
`T.tile` is tile910b.py.
"""

from __future__ import annotations

import numpy as np

from tdsl.compiler.verify.ascend_sim.buffers import SimulationError, Unsupported, _strip
from tdsl.compiler.verify.ascend_sim.lang_common import ScalarSpec, _Common, _Frame
from tdsl.compiler.verify.ascend_sim.machine import _Machine
from tdsl.compiler.verify.ascend_sim.tile910b import _Tile910B


class Lang910B(_Common):
    """`tilelang.language` of tilelang-ascend 0.1.4: exactly backends/ascend910b/api.py's names and signatures."""

    # a scalar parameter: a host loop's value (tilelang.language re-exports TVMScript's dtypes, as mainline does)
    int32 = ScalarSpec("int32")

    def __init__(self, m: _Machine):
        super().__init__(m)
        self.tile = _Tile910B(m)

    def prim_func(self, func=None, private=False, check_well_formed=True):
        return self._prim_func(func)

    def Tensor(self, shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global",  # noqa: N802
               align=0, offset_factor=0, buffer_type="", axis_separators=None):
        return self._tensor(shape, dtype)

    def decl_buffer(self, shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=-1,
                    offset_factor=0, buffer_type="default", axis_separators=None):
        if strides is not None or elem_offset is not None or scope != "global":
            raise Unsupported("T.decl_buffer with strides, an offset or a scope")
        return self._m.view(shape, dtype, data)

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

    def barrier_all(self):
        self._m.barrier_all()

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

    def abs(self, x):  # noqa: A003
        return self._abs(x)

    def And(self, a, b):  # noqa: N802
        return self._and(a, b)
