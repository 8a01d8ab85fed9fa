"""The part of the tilelang-ascend 0.1.4 API the ascend-910b backend emits, as Python signatures.

Copied from github.com/tile-ai/tilelang-ascend (VERSION 0.1.4, commit 95acbd7f), `tilelang/language/`:
kernel.py (Kernel), allocate.py (alloc_L1/L0A/L0B/L0C/ub), copy.py (npu_copy_v2, exported as T.copy),
customize.py (npu_gemm, exported as T.mma), pipeline.py (Pipelined), warpgroup.py (Scope), ascend.py
(set_cross_flag, wait_cross_flag, barrier_all), reduce_ascend.py (reduce_sum, reduce_max), ascend_tile.py (T.tile.*:
fill, add/sub/mul/div/max/min (binary_op), bitwise_and/bitwise_or, exp/ln/abs/sqrt/rsqrt/sigmoid/silu,
cast, createvecindex, compare, select).
`check_module(text)` parses a generated module and binds every `T.*` call to these signatures, so a
misspelt function, a missing argument or an unknown keyword fails the tests even though the package
itself cannot be installed here (it needs CANN and clashes with mainline `tilelang`).  It also checks the
string arguments the real functions assert on: the rounding mode of `T.tile.cast` (ascend_tile.py:1735),
the mode of `T.tile.compare` (ascend_tile.py:1655) and the selMode of `T.tile.select` (ascend_tile.py:626),
which must be constants.
"""

from __future__ import annotations

import ast
import inspect


def Kernel(*blocks, threads=None, is_cpu=False, prelude=None, is_npu=False, pipeline=False): ...
def alloc_L1(shape, dtype): ...
def alloc_L0A(shape, dtype): ...
def alloc_L0B(shape, dtype): ...
def alloc_L0C(shape, dtype): ...
def alloc_ub(shape, dtype): ...
def copy(src, dst, enable_relu=False, transpose=False, pad_value=None): ...
def mma(A, B, C, init=False): ...
def gemm_v0(A, B, C, transpose_A=False, transpose_B=False, init=False): ...
def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None, cross_interval=1): ...
def serial(start, stop=None, step=None, *, annotations=None): ...
def Scope(name): ...
def set_cross_flag(pipe, flag, mode=2): ...
def wait_cross_flag(flag, pipe=""): ...
def barrier_all(): ...
def reduce_sum(buffer, out, dim=-1, *args, clear=True, real_shape=None): ...
def reduce_max(buffer, out, dim=-1, *args, clear=True, real_shape=None): ...
def decl_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=-1,
                offset_factor=0, buffer_type="default", axis_separators=None): ...  # TVMScript's, re-exported
def Tensor(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=0,
           offset_factor=0, buffer_type="", axis_separators=None): ...
def prim_func(func=None, private=False, check_well_formed=True): ...
def Cast(dtype, x): ...
def infinity(dtype): ...
def exp(x): ...
def log(x): ...
def sqrt(x): ...
def abs(x): ...  # noqa: A001
def max(a, b): ...  # noqa: A001
def min(a, b): ...  # noqa: A001
def And(a, b): ...
def evaluate(value): ...


class tile:  # noqa: N801  (T.tile.*: ascend_tile.py)
    def fill(buffer, value): ...
    def add(dst, src0, src1): ...
    def sub(dst, src0, src1): ...
    def mul(dst, src0, src1): ...
    def div(dst, src0, src1): ...
    def max(dst, src0, src1): ...  # noqa: A003
    def min(dst, src0, src1): ...  # noqa: A003
    def exp(dst, src0): ...
    def ln(dst, src0): ...
    def abs(dst, src0): ...  # noqa: A003
    def sqrt(dst, src0): ...
    def rsqrt(dst, src0): ...
    def sigmoid(dst, src): ...
    def silu(dst, src): ...
    def cast(dst, src, mode, count): ...
    def createvecindex(dst, firstValue): ...  # noqa: N803
    def compare(dst, src0, src1, mode): ...
    def select(dst, selMask, src0, src1, selMode): ...  # noqa: N803
    def bitwise_and(dst, src0, src1): ...
    def bitwise_or(dst, src0, src1): ...


CAST_MODES = {"CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC", "CAST_ODD"}
COMPARE_MODES = {"EQ", "NE", "GT", "GE", "LT", "LE"}
SELECT_MODES = {"VSEL_CMPMASK_SPR", "VSEL_TENSOR_SCALAR_MODE", "VSEL_TENSOR_TENSOR_MODE"}
# T.tile.* string arguments the real functions assert on: call -> (position, keyword, allowed values, what)
STRING_ARGS = {"T.tile.cast": (2, "mode", CAST_MODES, "rounding mode"),
               "T.tile.compare": (3, "mode", COMPARE_MODES, "comparison mode"),
               "T.tile.select": (4, "selMode", SELECT_MODES, "selMode")}
SCOPES = {"C", "V"}


def _lookup(func: ast.expr):
    """T.name or T.tile.name -> the signature function, or None if the call is not on T."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "T":
        return globals().get(func.attr), f"T.{func.attr}"
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "tile"
            and isinstance(func.value.value, ast.Name) and func.value.value.id == "T"):
        return getattr(tile, func.attr, None), f"T.tile.{func.attr}"
    return None, None


def _argument(node: ast.Call, position: int, keyword: str):
    """The argument at `position` or passed as `keyword=` (None if absent)."""
    if len(node.args) > position:
        return node.args[position]
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def check_module(text: str) -> list[str]:
    """Problems found in a generated module (empty: it parses and every T.* call fits the API)."""
    problems = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn, name = _lookup(node.func)
        if name is None:
            continue
        if fn is None:
            problems.append(f"line {node.lineno}: {name} is not in the tilelang-ascend 0.1.4 API")
            continue
        args = [None] * len(node.args)
        kwargs = {k.arg: None for k in node.keywords}
        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as err:
            problems.append(f"line {node.lineno}: {name}: {err}")
        if name in STRING_ARGS:
            position, keyword, allowed, what = STRING_ARGS[name]
            arg = _argument(node, position, keyword)
            if arg is not None and not (isinstance(arg, ast.Constant) and arg.value in allowed):
                shown = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
                problems.append(f"line {node.lineno}: {name} with an unknown {what} {shown!r} (one of "
                                f"{', '.join(sorted(allowed))}, as a constant)")
        if name == "T.Scope" and not (node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in SCOPES):
            problems.append(f"line {node.lineno}: T.Scope takes \"C\" or \"V\"")
        if name == "T.Kernel" and not any(k.arg == "is_npu" for k in node.keywords):
            problems.append(f"line {node.lineno}: T.Kernel without is_npu=True")
    return problems
