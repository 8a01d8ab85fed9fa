"""Emit a TileLang module (NVIDIA, `tilelang.language`) from a tile program.

Like the Triton backend, every schedule decision is read from the tile
program (`compiler/lower/tileir.py`: buffers, operand copies and product units
included, see docs/architecture.md); this file only chooses the TileLang
form of each op:

| tile program                          | TileLang                                               |
|---------------------------------------|--------------------------------------------------------|
| grid axes                             | `with T.Kernel(gx, gy, threads=32*warps) as (bx, by)`  |
| `SerialLoop` (pipelined)              | `for ko in T.Pipelined(lo, hi, num_stages=S)`          |
| `SerialLoop`                          | `for ko in T.serial(lo, hi)`                           |
| `Dot` operands (cache_read or not)    | `T.alloc_shared` + `T.copy(A[r0, c0], A_s)` per step   |
| `Dot` of one dtype, f32 accumulator   | `T.gemm(A_s, B_s, acc)` into a `T.alloc_fragment`      |
| `Dot` of f32 or mixed operands        | exact f32 FMA: `for kk in T.serial(K): T.Parallel(I, J)` |
| accumulator                           | `T.alloc_fragment` + `T.fill`                          |
| `Reduce`                              | `T.reduce_sum(p, acc, dim, clear=False)`; max / min: of ordered keys |
| `Compute` (elementwise)               | `for a, b in T.Parallel(...)` into a fragment          |
| store of a full, unmasked tile        | `T.copy(frag, Y[r0, c0])`                               |
| store of a masked tile                | `T.Parallel` + `if mask:`                               |

Values are f32 and rounded where the program stores (`T.Cast(f32, T.Cast(bf16, x))`),
as in the Triton backend.  All buffers are allocated at the top of the kernel
(TileLang needs that for `T.Pipelined`).  What has no TileLang form raises
`BackendError` with the reason.

Size: the printer for every tile op in the TileLang dialect, plus the helpers the 950 printer inherits.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Optional

from tdsl.backends.common.dtypes import TILELANG
from tdsl.backends.common.launcher import epilogue, host_loops, prologue
from tdsl.backends.common.module import dynamic_sizes, launcher_fields, module_text
from tdsl.backends.common.names import ModuleNames
from tdsl.backends.common.printer import PrinterBase, call_code, float_literal, spelling_key
from tdsl.compiler.analysis.placement import VECTOR, unit_of
from tdsl.compiler.errors import BackendError, InternalError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.lane_masks import expr_text
from tdsl.compiler.lower.tileir import simplify
from tdsl.compiler.model.dtypes import BYTES
from tdsl.compiler.model import reduce_ops
from tdsl.compiler.lower.passes.warp_specialize import specialized_parts
from tdsl.backends.tilelang import ieee
from tdsl.backends.tilelang.warp_specialized import (WarpSpecializedBody, pass_configs, persistent_walk,
                                                     producer_threads)

TEMPLATES = Path(__file__).parent / "templates"

TL_DTYPES = {**TILELANG, "i32": "int32"}  # backends/common/dtypes.py; i32: the keys of a max / min tile reduction
ELEMENT_BYTES = {**BYTES, "i32": 4}
GRID_VARS = {"x": "bx", "y": "by", "z": "bz"}
FP8_INSTRUCTION_K = 32  # terms of one FP8 tensor-core instruction (wgmma / mma, sm_89+): the finest promotion
F8_MAX = 448.0

FUNCTIONS = {  # the primitives of compiler/model/functions.py in TileLang
    "exp": "T.exp({0})",
    "log": "T.log({0})",
    "sqrt": "T.sqrt({0})",
    "tanh": "T.tanh({0})",
    "abs": "T.abs({0})",
    # Ascend: the IEEE division (fast_inverse allows an approximate reciprocal; this one is exact)
    "fast_inverse": "(1.0 / {0})",
    "max": "T.max({0}, {1})",
    "min": "T.min({0}, {1})",
}

# On NVIDIA, exp is CUDA's __expf (ex2.approx of x·log2 e, a few ulp), as Triton's tl.exp is: T.exp would be
# the libm expf (without --use_fast_math, which tdsl does not pass: it would also make `/` approximate); and
# fast_inverse is rcp.approx.ftz.f32 (1 ulp, subnormals flushed), as the program declares it may be.
# exp2 is ex2.approx.ftz.f32 (2 ulp, subnormal results flushed to 0), the instruction __expf ends in; CUDA's exp2f
# wraps it in a test and two multiplications for subnormal results, which cost 3-9 % of the flash kernel on the
# H200 (benchmarks/RESULTS.md).  TileLang has no spelling for it: a kernel that uses it imports the one-line CUDA
# function of CUDA_HELPERS.  fma is __fmaf_rn, fma.rn.f32.
NVIDIA_ONLY = {"exp2": "the Ascend vector unit's API has Exp and Ln but no exp2",
               "fma": "the Ascend vector unit's API has no fused multiply-add rounded once"}
# max and min are the language's IEEE maximum and minimum, a NaN if either operand is one (as Triton's
# propagate_nan=ALL); TileLang's T.max / T.min are CUDA's fmaxf / fminf, which return the other operand, so a NaN
# term of a max or min, or a NaN rounded to E4M3 through the clamp to +-448, came out a number (GPU fuzz seed 33).
# PTX's max.NaN / min.NaN (sm_80 on) give the canonical NaN.  Of two zeros of opposite signs they may return
# either; the maximum is +0.0 and the minimum -0.0 (IEEE 754-2019), so two zeros are added instead: +0 + -0 is +0.
NVIDIA_FUNCTIONS = {**FUNCTIONS, "exp": "T.__exp({0})", "fast_inverse": "T.fast_rcp({0})",
                    "exp2": 'T.call_extern("float32", "tdsl_ex2", {0})', "fma": "T.ieee_fmaf({0}, {1}, {2})",
                    "max": 'T.call_extern("float32", "tdsl_max", {0}, {1})',
                    "min": 'T.call_extern("float32", "tdsl_min", {0}, {1})',
                    # where no use can tell the zero they return (compiler/analysis/zero_signs.py)
                    "max_either_zero": 'T.call_extern("float32", "tdsl_max_either", {0}, {1})',
                    "min_either_zero": 'T.call_extern("float32", "tdsl_min_either", {0}, {1})'}
CUDA_HELPERS = {  # function -> the CUDA source its NVIDIA spelling calls
    "exp2": 'extern "C" __device__ __forceinline__ float tdsl_ex2(float x) '
            '{ float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }',
    "max": 'extern "C" __device__ __forceinline__ float tdsl_max(float a, float b) '
           '{ float y; asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); '
           'return a == 0.0f && b == 0.0f ? a + b : y; }',
    "min": 'extern "C" __device__ __forceinline__ float tdsl_min(float a, float b) '
           '{ float y; asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); '
           'return a == 0.0f && b == 0.0f ? -(-a + -b) : y; }',
    "max_either_zero": 'extern "C" __device__ __forceinline__ float tdsl_max_either(float a, float b) '
                       '{ float y; asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); return y; }',
    "min_either_zero": 'extern "C" __device__ __forceinline__ float tdsl_min_either(float a, float b) '
                       '{ float y; asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b)); return y; }',
}
# A max or min over a register tile is TileLang's T.reduce_max / T.reduce_min, whose f32 combine (fmaxf / fminf,
# also under its nan_propagate, which reaches bf16 and f16 only) drops a NaN term.  The NVIDIA printer reduces
# integer keys instead, ordered as the floats are: a float's bits, the 31 low ones flipped where the sign is set,
# and a NaN the largest key for a max (the smallest for a min), so a NaN term wins the reduction; the key of the
# result is turned back into its float (a NaN key into a NaN), exactly.
CUDA_HELPERS["max_key"] = ('extern "C" __device__ __forceinline__ int tdsl_max_key(float x) '
                           '{ int b = __float_as_int(x); return x != x ? 0x7fffffff : b ^ ((b >> 31) & 0x7fffffff); }')
CUDA_HELPERS["min_key"] = ('extern "C" __device__ __forceinline__ int tdsl_min_key(float x) '
                           '{ int b = __float_as_int(x); return x != x ? (int)0x80000000 : b ^ ((b >> 31) & 0x7fffffff); }')
CUDA_HELPERS["from_key"] = ('extern "C" __device__ __forceinline__ float tdsl_from_key(int k) '
                            '{ return __int_as_float(k ^ ((k >> 31) & 0x7fffffff)); }')
ORDERED_KEYS = {"max_key": 'T.call_extern("int32", "tdsl_max_key", {0})',
                "min_key": 'T.call_extern("int32", "tdsl_min_key", {0})',
                "from_key": 'T.call_extern("float32", "tdsl_from_key", {0})'}

# After a barrier, loads of what other threads stored: TVM declares every pointer parameter __restrict__, so nvcc
# treats the memory behind it as changed by this thread only and may move a load of it above the barrier that
# orders it after the other threads' stores (seen on the H200: a row maximum stored by one thread and read by the
# others after __syncthreads(), read before it).  An asm that takes the pointer and clobbers memory, right after the
# barrier, keeps every later load of that tensor below it.
CUDA_HELPERS["reload"] = ('extern "C" __device__ __forceinline__ void tdsl_reload(const void* p) '
                          '{ asm volatile("" : : "l"(p) : "memory"); }')

# A product with absent terms asks whether any thread of the block saw an infinite or NaN operand element
# (KernelPrinter.any_nonfinite): bar.red.or at a named barrier of its own among the threads that run the kernel's
# code (TileLang's producer warps, where it adds them, run none of it; __syncthreads_or would wait for them).
ANY_BARRIER = 9  # TileLang's own named barriers are 0-3
CUDA_HELPERS["any"] = ('extern "C" __device__ __forceinline__ int tdsl_any(int x, int barrier, int threads) '
                       '{ int y; asm volatile("{ .reg .pred p, q; setp.ne.s32 p, %1, 0; bar.red.or.pred q, %2, %3, p; '
                       'selp.s32 %0, 1, 0, q; }" : "=r"(y) : "r"(x), "r"(barrier), "r"(threads) : "memory"); '
                       'return y; }')


# `a * b + c` is two roundings in the program (docs/legality.md#rounding): nvcc must not contract it into one fma,
# which it does by default (a program asks for an fma with `fma`, T.ieee_fmaf).  Triton's launches say the same
# with enable_fp_fusion=False (backends/triton/launcher.py).
NO_CONTRACTION = {"tl.device_compile_flags": ["--fmad=false"]}


def _pass_configs(program: T.TileProgram) -> dict:
    """Every kernel's TileLang pass configuration, by its KERNELS key: no contraction, and what a warp-specialised
    loop needs (warp_specialized.py)."""
    special = pass_configs(program)
    return {k.name: {**NO_CONTRACTION, **special.get(k.name, {})} for k in program.kernels}


def emit_module(program: T.TileProgram, **common) -> str:
    """The module text: the kernels of `program` and their torch launcher (templates/module.py.j2)."""
    names = ModuleNames(program)
    kernels = [KernelPrinter(program, k, names).render() for k in program.kernels]
    helpers = sorted({f for k in kernels for f in k["helpers"]})
    return module_text(TEMPLATES, program, names, kernels, **common, dynamic=dynamic_sizes(program, names),
                       pass_configs=_pass_configs(program),
                       persistent=any(persistent_walk(k) for k in program.kernels),
                       cuda_source=repr("\n".join(CUDA_HELPERS[f] for f in helpers) + "\n") if helpers else "",
                       **launcher_fields(program, names, launcher(program, names)))


# ---------------------------------------------------------------- index expressions


def index_code(e: T.Expr, names: dict, disjunction: str = "T.Or({}, {})",
               select: str = "T.if_then_else({}, {}, {})") -> str:
    """Integer / boolean index arithmetic; `names` maps every variable to its code: iterators to lanes or
    offsets, loop variables and run-time sizes to their identifiers (a printer's `vars`).  `disjunction`
    spells `a or b` and `select` an integer `x if c else y` (a dialect without T.Or or T.if_then_else passes
    other forms)."""
    r = lambda x: index_code(x, names, disjunction, select)  # noqa: E731
    if isinstance(e, T.Const):
        return repr(e.value)
    if isinstance(e, T.Var):
        return var_code(e.name, names)
    if isinstance(e, T.Neg):
        return f"(-{r(e.operand)})"
    if isinstance(e, T.Select):
        return select.format(r(e.cond), r(e.then), r(e.other))
    if isinstance(e, T.Bin):
        a, b = r(e.lhs), r(e.rhs)
        if e.op in ("min", "max"):
            return f"T.{e.op}({a}, {b})"
        if e.op == "and":
            return f"T.And({a}, {b})"
        if e.op == "or":
            return disjunction.format(a, b)
        return f"({a} {e.op} {b})"
    raise BackendError(f"{expr_text(e)} is used where an index or a lane condition is needed (a comparison of tensor "
                       f"values, or a value as an index), which this printer does not generate")


def bound_constant(e: T.Expr, names: dict) -> T.Expr:
    """An iterator bound to a constant here (the one value of a loop of extent 1) as that constant: TVM sees the
    literal and folds it like one (`x * j` with j = 0 into 0, GPU fuzz seed 39), so the printer must treat it as
    one (ieee.py)."""
    if isinstance(e, T.Var) and e.name in names and _INTEGER.fullmatch(names[e.name]):
        return T.Const(float(int(names[e.name].strip("()"))))
    return e


_INTEGER = re.compile(r"\(*-?\d+\)*")


def var_code(name: str, names: dict) -> str:
    if name not in names:
        raise InternalError(f"variable {name} has no name here")
    return names[name]


def axis_start(x: T.Expr, tile: T.Tile, names: dict) -> str:
    """The first value of the tile axis that the operand index `x` (a plain iterator) runs along."""
    for a in tile.axes:
        if isinstance(x, T.Var) and x.name == a.iter:
            return index_code(simplify(a.offset), names)
    raise InternalError(f"operand index {x} is not a tile axis")


def operand_region(tensor: str, load: T.Load, tile: T.Tile, names: dict) -> str:
    """A product operand's region in its tensor, for T.copy into a buffer of the tile's box: `A[i0, k0]` for a
    2-D operand (the buffer gives the extents); a batched one, `Q[b, h, i, d]`, with its two tile axes as
    slices and its batch indices at their one value: `Q[b, h, i0:i0 + 64, d0:d0 + 128]`."""
    return f"{tensor}[{', '.join(region_indices(load, tile, names))}]"


def region_indices(load: T.Load, tile: T.Tile, names: dict) -> list[str]:
    """The subscripts of `operand_region`."""
    if len(load.indices) == 2:
        return [axis_start(x, tile, names) for x in load.indices]
    return box_indices(load, tile, names)


def box_indices(load: T.Load, tile: T.Tile, names: dict) -> list[str]:
    """An operand's box in its tensor: a slice along each tile axis, a batch index at its one value."""
    size = {a.iter: a.size for a in tile.axes}
    parts = []
    for x in load.indices:
        if isinstance(x, T.Var) and x.name in size:
            start = axis_start(x, tile, names)
            parts.append(f"{start}:{start} + {size[x.name]}" if start != "0" else f"0:{size[x.name]}")
        elif isinstance(x, T.Var) and x.name in tile.scalars:
            parts.append(index_code(simplify(tile.scalars[x.name]), names))
        else:
            raise InternalError(f"operand index {x} is neither a tile axis nor fixed in the tile")
    return parts


def shape_code(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# ---------------------------------------------------------------- kernels


@dataclass
class _Value:
    """Where a statement's (rounded, f32) tile lives: a buffer and the iterators of its axes."""

    buffer: str
    iters: list  # tile axis iterators, in buffer-dimension order ([] for a scalar held in a (1,) buffer)


class TileLangDialect(PrinterBase):
    """The TileLang spellings of PrinterBase's hooks, for the NVIDIA, 950 and 910B printers."""

    EMPTY_BODY = "T.evaluate(0)"

    def loop_header(self, op: T.SerialLoop, lo: str, hi: str) -> str:
        var = self.loop_var(op.var)
        if op.stages:
            return f"for {var} in T.Pipelined({lo}, {hi}, num_stages={op.stages}):"
        return f"for {var} in T.serial({lo}, {hi}):"

    def index(self, e: T.Expr) -> str:
        return index_code(e, self.vars)

    def loop_var(self, var: str) -> str:
        return self.vars[var]


@dataclass
class KernelPrinter(TileLangDialect):
    BARRIER = "T.sync_threads()"
    program: T.TileProgram
    kernel: T.TileKernel
    names: Optional[ModuleNames] = None  # the module's identifiers (backends/common/names.py); the program's own if None
    lines: list = field(default_factory=list)
    allocs: list = field(default_factory=list)
    depth: int = 2
    counter: int = 0
    values: dict = field(default_factory=dict)
    fragment_copies: dict = field(default_factory=dict)  # (stmt, lane pattern) -> its copy, in one T.Parallel
    # running maximum -> its copy with 0 where it is -inf, made before the one T.Parallel that reads it so
    # (`maxima_as_zero`)
    maxima_as_zero_copies: dict = field(default_factory=dict)
    accs: dict = field(default_factory=dict)  # stmt -> (buffer, shape)
    acc_tiles: dict = field(default_factory=dict)  # stmt -> the accumulator's tile
    loops: list = field(default_factory=list)  # enclosing SerialLoops
    acc_depth: dict = field(default_factory=dict)  # stmt -> len(loops) at AccInit
    footprint: dict = field(default_factory=dict)  # scope -> bytes
    allocated: dict = field(default_factory=dict)  # buffer -> (shape, dtype, scope)
    preloads: dict = field(default_factory=dict)  # Preload name -> its buffer
    uses: dict = field(default_factory=dict)  # buffers taken in the loop being printed: spec -> count
    siblings: dict = field(default_factory=dict)  # (loop variables, spec, n) -> buffer
    helpers: set = field(default_factory=set)  # the functions of CUDA_HELPERS the kernel calls
    walk: Optional[object] = None  # a persistent warp-specialised kernel's PersistentWalk

    # dialect hooks (Ascend-950 overrides these)
    module_T = "tilelang.language"
    vector_scope = "fragment"
    functions = NVIDIA_FUNCTIONS
    helper_functions = frozenset(CUDA_HELPERS)  # the functions whose spelling calls a helper of CUDA_SOURCE
    ordered_keys = True  # a max / min tile reduction reduces ORDERED_KEYS (keeps a NaN term)

    def __post_init__(self):
        if self.names is None:
            self.names = ModuleNames(self.program)
        self.locals = self.names.function()
        self.vars = dict(self.names.variables)  # loop variables and run-time sizes: index_code's names outside tiles

    def render(self) -> dict:
        k = self.kernel
        # pipeline(..., warp_specialize=true): backends/tilelang/warp_specialized.py
        specialized = WarpSpecializedBody(self, k) if specialized_parts(k) else None
        self.walk = specialized.walk if specialized else None
        self._kernel_head()
        self.launch_order()
        if specialized:
            specialized.print()
        else:
            for op in k.body:
                self._op(op)
        head = self._views() + self.head_lines
        imports = [f"T.import_source(CUDA_SOURCE)  # {', '.join(sorted(self.helpers))}"] if self.helpers else []
        if "reload" in self.helpers:
            imports.insert(0, self._not_restrict())
        return {"name": self.names.kernel(k.name), "key": k.name, "params": self._params(), "head": head,
                "allocs": imports + self.allocs, "lines": self.lines, "comment": k.comment,
                "footprint": dict(self.footprint), "helpers": sorted(self.helpers)}

    def _not_restrict(self) -> str:
        """A kernel that loads what its threads stored declares no parameter `__restrict__`: with it, nvcc turns
        a `where` between a load of an input and a load of such a tensor into one load from a selected pointer
        through the read-only cache (ld.global.nc), which does not see the kernel's own stores (seen on the H200:
        trmm's and ludcmp's recurrences read their initial values back).  Without it nvcc uses no such load."""
        names = ", ".join(self.tensor(t.name) for t in kernel_arrays(self.kernel))
        return f"T.annotate_restrict_buffers({names})  # no __restrict__: this kernel reads back what it stores"

    def _views(self) -> list[str]:
        """An output stored in an input (`store_in`) is a view of the input's array: TVM compiles every pointer
        parameter as restrict (distinct), so the kernel takes the one array once."""
        return [f'{self.tensor(t.name)} = T.decl_buffer({self.names.shape(t.shape)}, "{TL_DTYPES[t.dtype]}", '
                f'data={self.tensor(t.stored_in)}.data)  # {t.name} is stored in {t.stored_in} (store_in)'
                for t in self.kernel.tensors if t.stored_in]

    def _params(self) -> list[str]:
        params = []
        for t in kernel_arrays(self.kernel):
            params.append(f'{self.tensor(t.name)}: T.Tensor({self.names.shape(t.shape)}, "{TL_DTYPES[t.dtype]}")')
        params += [f"{self.names.var(h.var)}: T.int32" for h in self.kernel.host]  # the host loops' values
        if persistent_walk(self.kernel):  # the launcher's count of multiprocessors
            params.append(f"{self.walk.programs}: T.int32")
        return params

    def serial(self, op: T.SerialLoop, body) -> None:
        outer, self.uses = self.uses, {}
        super().serial(op, body)
        self.uses = outer

    def loop_buffer(self, stem: str, shape, dtype: str, scope: str, note: str = "", copies: int = 1) -> str:
        """A buffer for one use in the loop being printed.  The parts a loop is split into (full tiles first, the
        rest masked: compiler/lower/loops.py) run one after the other, so the n-th buffer of one spec that each
        takes is the same one -- except shared memory of a T.Pipelined loop, which the pipeliner gives one copy
        per stage inside that loop only (TileLang lets loops that run one after the other share the storage)."""
        spec = (stem, tuple(shape), dtype, scope)
        n = self.uses.get(spec, 0)
        self.uses[spec] = n + 1
        if scope == "shared" and self.loops and self.loops[-1].stages:
            return self.alloc(self.fresh(stem), shape, dtype, scope, note, copies)
        key = (tuple(loop.var for loop in self.loops), spec, n)
        if key not in self.siblings:
            self.siblings[key] = self.alloc(self.fresh(stem), shape, dtype, scope, note, copies)
        return self.siblings[key]

    # identifiers (backends/common/names.py): the program's names, and the locals derived from them

    def tensor(self, name: str) -> str:
        return self.names.tensor(name)

    def lane(self, n: int) -> str:
        """The n-th loop variable of a T.Parallel."""
        return self.local(("lane", n), f"l{n}")

    def lane_list(self, rank: int) -> list[str]:
        return [self.lane(n) for n in range(rank)] or [self.lane(0)]

    def value_name(self, stmt: str) -> str:
        return self.local(("value", stmt), f"v_{stmt}")

    def acc_name(self, stmt: str) -> str:
        return self.local(("acc", stmt), f"acc_{stmt}")

    def with_vars(self, names: dict) -> dict:
        """`names` (iterators -> code) with the loop variables and sizes: what index_code takes."""
        return {**self.vars, **names}

    def alloc(self, name: str, shape, dtype: str, scope: str, note: str = "", copies: int = 1) -> str:
        """Declare a buffer at the top of the kernel (once per name); `copies`: how many the pipeliner keeps in
        flight, for the footprint."""
        shape = list(shape) or [1]
        if self.declared_before(name, shape, dtype, scope):
            return name
        call = {"fragment": "T.alloc_fragment", "shared": "T.alloc_shared", "local": "T.alloc_local"}[scope]
        self.allocs.append(f'{name} = {call}({shape_code(shape)}, "{TL_DTYPES[dtype]}")' + (f"  # {note}" if note else ""))
        self.footprint[scope] = self.footprint.get(scope, 0) + math.prod(shape) * ELEMENT_BYTES[dtype] * copies
        return name

    def declared_before(self, name: str, shape: list, dtype: str, scope: str) -> bool:
        """Whether this local is already declared with this shape, dtype and scope (the same buffer again: the
        parts a loop is split into); if not, it is recorded as declared now."""
        if self.allocated.get(name) == (shape, dtype, scope):
            return True
        self.allocated[name] = (shape, dtype, scope)
        return False

    # ------------------------------------------------------------ grid

    def _kernel_head(self) -> None:
        k = self.kernel
        extents, names = [], []
        for axis in k.grid:
            extents.append(" * ".join(f"({index_code(simplify(e), self.vars)})" if len(axis.extents) > 1
                                      else index_code(simplify(e), self.vars) for e in axis.extents))
            names.append(self.grid_var(axis.axis))
        if len(set(a.axis for a in k.grid)) != len(k.grid):
            raise BackendError(f"{k.name}: a grid axis is bound twice")
        order = sorted(range(len(k.grid)), key=lambda n: "xyz".index(k.grid[n].axis))
        if [k.grid[n].axis for n in order] != list("xyz"[: len(order)]):
            raise BackendError(f"{k.name}: grid axes {', '.join(a.axis for a in k.grid)} leave a gap; "
                               f"TileLang's T.Kernel takes x, y, z in order")
        threads = 32 * k.num_warps + producer_threads(k)  # a warp-specialised loop's producer warp group
        if self.walk:  # each role binds the grid variables of the tiles it walks
            self.head_lines = [self.walk.head(threads)]
            return
        if not k.grid:
            self.head_lines = [f"with T.Kernel(1, threads={threads}) as ({self.grid_var('x')},):"]
        else:
            ext = ", ".join(extents[n] for n in order)
            bind = ", ".join(names[n] for n in order) + ("," if len(order) == 1 else "")
            self.head_lines = [f"with T.Kernel({ext}, threads={threads}) as ({bind}):"]
        for axis in k.grid:
            self._bind_grid_vars(axis, self.grid_var(axis.axis))

    def launch_order(self) -> None:
        """`launch(group=G)` (TileKernel.grid_group): TileLang's rasterisation of the blocks in panels of G."""
        if self.kernel.grid_group > 1:
            self.emit(f"T.use_swizzle(panel_size={self.kernel.grid_group})  # blocks start in panels of "
                      f"{self.kernel.grid_group} (launch group=)")
        if self.kernel.persistent and not self.walk:
            self.emit("# launch persistent=true: one block per tile here (TileLang walks the tiles of a "
                      "warp-specialised loop only; the Triton backend walks every kernel's)")

    def grid_var(self, axis: str) -> str:
        """The block index along a grid axis (`bx`)."""
        return self.local(("block", axis), GRID_VARS[axis])

    def _bind_grid_vars(self, axis: T.GridAxis, pid: str) -> None:
        if len(axis.vars) == 1:
            lower = simplify(axis.lowers[0])
            start = "" if lower == T.Const(0) else f"{index_code(lower, self.vars)} + "
            self.emit(f"{self.vars[axis.vars[0]]} = {start}{pid}  # grid.{axis.axis}")
            return
        # a fused loop: row-major decomposition, the last variable fastest
        exts = [index_code(simplify(e), self.vars) for e in axis.extents]
        for n, (var, lower) in enumerate(zip(axis.vars, axis.lowers)):
            inner = " * ".join(f"({x})" for x in exts[n + 1:]) or "1"
            self.emit(f"{self.vars[var]} = {index_code(simplify(lower), self.vars)} + ({pid} // ({inner})) % ({exts[n]})"
                      f"  # grid.{axis.axis}")

    # ------------------------------------------------------------ ops

    def _op(self, op) -> None:
        if isinstance(op, T.SerialLoop):
            self.serial(op, lambda body: [self._op(inner) for inner in body])
        elif isinstance(op, T.Compute):
            self._compute(op)
        elif isinstance(op, T.AccInit):
            self._acc_init(op)
        elif isinstance(op, T.AccUpdate):
            self._acc_update(op)
        elif isinstance(op, T.AccFinish):
            self._acc_finish(op)
        elif isinstance(op, T.Barrier):
            self.barrier(op)
        elif isinstance(op, T.Preload):
            self._preload(op)
        else:
            raise InternalError(f"the TileLang printer has no case for the tile op {type(op).__name__}")

    def _preload(self, op: T.Preload) -> None:
        """A product operand the same in every iteration of the loop that follows: copied once, before it, where
        placement put it (op.scope), and only when the loop runs (op.guard)."""
        if not op.scope:
            raise InternalError(f"the preloaded operand {op.load.tensor} has no staging scope")
        size = {a.iter: a.size for a in op.tile.axes}
        shape = [size[x.name] for x in op.load.indices if isinstance(x, T.Var) and x.name in size]
        self.emit(f"# {op.load.tensor}: the same tile in every iteration of the loop below, copied once")
        buf = self.alloc(self.local(("preload", op.name), f"{op.load.tensor}_pre"), shape, op.dtype, op.scope,
                         f"{op.load.tensor}, loaded before the loop that reads it")
        self.preloads[op.name] = buf
        guard = None if op.guard is None else index_code(simplify(op.guard), self.vars)
        guarded = guard not in (None, "True")
        if guarded:
            self.emit(f"if {guard}:")
            self.depth += 1
        self.copy_in(op, op.load, buf, shape, op.dtype)
        self.depth -= guarded


    # lanes: the iterators of a tile inside a T.Parallel over its box

    def lanes(self, tile: T.Tile) -> tuple[list[str], dict]:
        lane_vars = self.lane_list(len(tile.axes))
        names = self.with_vars({it: f"({index_code(simplify(v), self.vars)})" for it, v in tile.scalars.items()})
        for n, axis in enumerate(tile.axes):
            names[axis.iter] = self.axis_value(axis, lane_vars[n])
        return lane_vars, names

    def axis_value(self, axis: T.Axis, lane: str) -> str:
        """The iterator value of `lane` along a tile axis (its offset plus the lane)."""
        off = simplify(axis.offset)
        return lane if off == T.Const(0) else f"({index_code(off, self.vars)} + {lane})"

    def parallel(self, tile: T.Tile) -> tuple[list[str], dict]:
        lane_vars, names = self.lanes(tile)
        sizes = [str(a.size) for a in tile.axes] or ["1"]
        self.emit(f"for {', '.join(lane_vars)} in T.Parallel({', '.join(sizes)}):")
        return lane_vars, names

    def enter_vector(self) -> None:
        """Hook: Ascend wraps SIMT loops in a vector-function scope."""

    def exit_vector(self) -> None:
        pass

    def _compute(self, op: T.Compute) -> None:
        self.emit(f"# {self.text(op.stmt)}{self.tile_note(op.tile)}")
        shape = [a.size for a in op.tile.axes]
        buf = self.alloc(self.value_name(op.stmt), shape, "f32", self.vector_scope, f"{op.stmt}, rounded to {op.dtype}")
        self.tile_value(buf, op.tile, op.value, op.dtype)
        self.values[op.stmt] = _Value(buf, [a.iter for a in op.tile.axes])
        if op.store:
            self.store(op.stmt, op.tile, op.lhs, op.dtype, buf)

    def _acc_init(self, op: T.AccInit) -> None:
        shape = [a.size for a in op.tile.axes]
        self.emit(f"# {self.text(op.stmt)}")
        self.emit(f"# {op.stmt}: {op.op} accumulator ({op.accum}), tile {shape}")
        buf = self.acc_alloc(op, shape)
        self.accs[op.stmt] = (buf, shape)
        self.acc_tiles[op.stmt] = op.tile
        self.acc_depth[op.stmt] = len(self.loops)
        self.acc_fill(op, buf)
        if op.follows is not None:
            rows = [shape[p] for p in op.follows.axes]
            self.emit(f"# {op.stmt} follows the running maximum {op.follows.stmt}: the maximum it was built with")
            ref = self.alloc(self.ref_name(op.stmt), rows, "f32", self.vector_scope)
            self.fill(ref, rows, float_code(float("-inf")))

    def acc_alloc(self, op: T.AccInit, shape) -> str:
        return self.alloc(self.acc_name(op.stmt), shape, "f32", "fragment",
                          f"cache_write {op.stmt} -> register" if self.cache_write(op.stmt) else "")

    def acc_fill(self, op: T.AccInit, buf: str) -> None:
        """The accumulator's first value: the identity of its operation, or the value the sum starts from."""
        if op.start is None:
            self.fill(buf, self.accs[op.stmt][1], float_code(reduce_ops.identity(op.op)))
            return
        self.emit(f"# {op.stmt} starts from its own value, once per element")
        self.tile_value(buf, op.tile, op.start, "f32")  # rounded to the accumulator already (tile program)

    def tile_value(self, buf: str, tile: T.Tile, value: T.Expr, dtype: str) -> None:
        """`buf` (a vector buffer of the tile's shape) set lane by lane to `value`, rounded to `dtype`."""
        with self.one_pattern_per_fragment(value), self.maxima_as_zero(value):
            self.enter_vector()
            lane_vars, names = self.parallel(tile)
            self.depth += 1
            index = ", ".join(lane_vars) if tile.axes else "0"
            self.emit(f"{buf}[{index}] = {self.round(dtype, self.value(value, tile, lane_vars, names))}")
            self.depth -= 1
            self.exit_vector()

    @contextmanager
    def maxima_as_zero(self, value):
        """A running maximum that the value reads as 0 where it is -inf (tileir.NegInfAsZero) is copied so once
        per row, before the loop over the tile, which reads the copy: one select per row, not one per lane."""
        for node in T.nodes_in(value, T.NegInfAsZero):
            running = node.operand
            if not isinstance(running, T.Running) or running.stmt in self.maxima_as_zero_copies:
                continue
            acc, shape = self.accs[running.stmt]
            copy = self.loop_buffer(f"{running.stmt}_finite", shape, "f32", self.vector_scope,
                                    f"{running.stmt}, 0 where -inf")
            at = ", ".join(self.lane_list(len(shape)))
            self.enter_vector()
            self.emit(f"for {at} in T.Parallel({', '.join(map(str, shape)) or '1'}):")
            self.emit(f"    {copy}[{at}] = T.if_then_else({acc}[{at}] == {float_code(-math.inf)}, 0.0, {acc}[{at}])")
            self.exit_vector()
            self.maxima_as_zero_copies[running.stmt] = copy
        try:
            yield
        finally:
            self.maxima_as_zero_copies.clear()

    @contextmanager
    def one_pattern_per_fragment(self, value):
        """TileLang gives a fragment one layout in a T.Parallel, from the way the loop indexes it.  A register tile
        read there at two lane patterns (cholesky's An = Ap - Lc[i] * Lc[j], Lc along the rows and along the
        columns) fails its layout inference, and so does a second fragment copied from the first, and so may one
        read off its own lanes, its axis n at another position of the loop than n (gramschmidt's An = Ap - Qc[i] *
        Rr[j], Rr made along the rows of its reduction and read along the columns, beside a one-element fragment:
        CPU fuzz seed 5560).  So the fragment itself is read only at its own lanes; every other pattern reads a
        copy in shared memory, which any thread reads at any element, made just before the loop (TileLang puts
        the barrier between the copy and the reads), for this loop only.  "Its own lanes": its axes in their
        order, the first at the loop's first axis (attention's U reads P[i, j] in the loop over i, c, j: through a
        copy, the loop's layout no longer followed P's rows, and U's rows and l's disagreed in O's loop, "no
        available layout found", GPU fuzz seed 48)."""
        patterns: dict = {}
        for reg in T.nodes_in(value, T.Reg) if self.vector_scope == "fragment" else []:
            held = self.values.get(reg.stmt)
            if held is not None and held.iters and reg.axes not in patterns.setdefault(reg.stmt, []):
                patterns[reg.stmt].append(reg.axes)
        for stmt, axes in patterns.items():
            source = self.values[stmt].buffer
            shape, dtype, _ = self.allocated[source]
            exact = tuple(range(len(shape)))
            direct = exact if exact in axes else next((a for a in axes if _own_lanes(a)), None)
            for n, pattern in enumerate([a for a in axes if a != direct], 1):
                copy = self.alloc(self.local(("pattern", stmt, n), f"{source}_{n}"), shape, dtype, "shared",
                                  f"{stmt} again, read at another lane pattern")
                lanes = ", ".join(self.lane_list(len(shape)))
                self.emit(f"for {lanes} in T.Parallel({', '.join(map(str, shape))}):")
                self.emit(f"    {copy}[{lanes}] = {source}[{lanes}]")
                self.fragment_copies[(stmt, pattern)] = copy
        try:
            yield
        finally:
            self.fragment_copies = {}

    def fill(self, buf: str, shape, value: str) -> None:
        """Every element of a vector buffer set to `value`."""
        self.emit(f"T.fill({buf}, {value})")

    def cache_write(self, stmt: str) -> Optional[T.BufferDecl]:
        """The schedule's cache_write of a statement in this kernel, if any."""
        return next((b for b in T.kernel_buffers(self.kernel) if b.tensor == stmt and b.kind == "write"), None)

    def ref_name(self, stmt: str) -> str:
        return self.local(("reference", stmt), f"ref_{stmt}")

    def _acc_update(self, op: T.AccUpdate) -> None:
        how = "matrix product" if isinstance(op.partial, T.Dot) else f"tile {op.op}"
        if op.rescale is not None:
            self.rescale(op)
        self.emit(f"# {op.stmt}: partial result of one tile{self.tile_note(op.tile)} by {how}")
        if op.stmt not in self.accs:
            raise InternalError(f"{op.stmt} is updated before its accumulator exists")
        if isinstance(op.partial, T.Dot):
            self.dot(op)
        else:
            self.reduce(op)

    def rescale(self, op: T.AccUpdate) -> None:
        """Bring the accumulator from the maximum it was built with to the current one (tileir.Rescaling): one
        factor per row, 1 where the two are equal (also both -inf, where the exponent would be NaN)."""
        acc, shape = self.accs[op.stmt]
        current = op.rescale.current
        rows = list(current.axes)
        tile = self.acc_tiles[op.stmt]
        self.emit(f"# {op.stmt} follows the running maximum {current.stmt}: rescale what it holds to the current one")
        factor = self.loop_buffer(f"alpha_{op.stmt}", [shape[p] for p in rows], "f32", self.vector_scope,
                            f"{op.stmt}: rescaling factor per row")
        ref = self.ref_name(op.stmt)
        lanes = self.lane_list(len(shape))  # one lane over a single element when the accumulator has no axes
        at = ", ".join(lanes)  # an element of the accumulator
        row = ", ".join(lanes[p] for p in rows) or lanes[0]  # its row (the one element of a scalar's)
        # the row of an element of the accumulator: with the rows a scalar (one query row, kept as `i = l_i`),
        # every element of it (its columns) has the factor's one element
        row_of = ", ".join(lanes[p] for p in rows) or "0"
        each_row = f"for {row} in T.Parallel({', '.join(str(shape[p]) for p in rows) or '1'}):"
        names = self.with_vars({})
        now = self.value(current, tile, lanes, names)
        same = f"({self.value(T.Reference(op.stmt, current.axes), tile, lanes, names)} == {now})"
        scale = self.value(op.rescale.factor, tile, lanes, names)
        self.enter_vector()
        self.emit(each_row)
        self.emit(f"    {factor}[{row}] = T.if_then_else({same}, 1.0, {scale})")
        self.emit(f"for {at} in T.Parallel({', '.join(map(str, shape)) or '1'}):")
        self.emit(f"    {acc}[{at}] = {self.round(op.accum, f'{acc}[{at}] * {factor}[{row_of}]')}")
        self.emit(each_row)
        self.emit(f"    {ref}[{row}] = {now}")
        self.exit_vector()

    # ------------------------------------------------------------ matrix products

    def stage_operand(self, op: T.AccUpdate, n: int, stem: str) -> str:
        """Allocate operand n's on-chip copy (`op.staged`, compiler/analysis/placement.py) and copy its box into it."""
        st, load = op.staged[n], (op.partial.lhs, op.partial.rhs)[n]
        if isinstance(load, T.RegOperand):
            return self.register_operand(op, st, load)
        if isinstance(load, T.Preloaded):
            return self.preloads[load.name]
        cache = st.cache
        note = (f"cache_read {load.tensor} -> {cache.scope} at {cache.loop} (plan {list(cache.shape)} {cache.dtype})"
                if cache else f"{load.tensor} staged for the matrix unit (no cache_read in the schedule)")
        copies = st.stages if st.scope == "shared" else 1  # one copy per stage in flight
        buf = self.loop_buffer(f"{load.tensor}_{stem}", list(st.shape), st.dtype, st.scope, note, copies)
        self.copy_in(op, load, buf, list(st.shape), st.dtype)
        return buf

    def register_operand(self, op: T.AccUpdate, st: T.Staged, load: T.RegOperand) -> str:
        """A product operand an earlier statement holds in registers (already rounded to its dtype): copied in
        the operand dtype to its staging buffer (a fragment T.gemm reads in place, or shared memory), 0 outside
        the reduction's lanes."""
        value = self.values.get(load.reg.stmt)
        if value is None:
            raise InternalError(f"{load.reg.stmt} is read before it is computed")
        held = f"{load.rounds} = {load.reg.stmt}" if load.rounds else load.reg.stmt
        buf = self.loop_buffer(f"{load.rounds or load.reg.stmt}_{st.scope[0]}", list(st.shape), st.dtype, st.scope,
                               f"{held} in {st.dtype}, as the product reads it")
        lanes = self.lane_list(len(st.shape))
        _, names = self.lanes(op.tile)
        for lane, p in zip(lanes, load.reg.axes):  # the operand's lanes run along the producer's tile axes
            names[op.tile.axes[p].iter] = self.axis_value(op.tile.axes[p], lane)
        src = f"{value.buffer}[{', '.join(lanes)}]"
        if load.mask is not None:
            src = f"T.if_then_else({index_code(load.mask, names)}, {src}, 0.0)"
        self.enter_vector()
        self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, st.shape))}):")
        self.emit(f'    {buf}[{", ".join(lanes)}] = T.Cast("{TL_DTYPES[st.dtype]}", {src})')
        self.exit_vector()
        return buf

    @cached_property
    def stored_here(self) -> list[str]:
        """The tensors this kernel stores to, by their names in the kernel (an output kept in an input: its view);
        once per kernel, not at every barrier."""
        return sorted({op.stmt for op in T.walk_ops(self.kernel.body) if isinstance(op, (T.Compute, T.AccFinish))
                       and op.store})

    def barrier_code(self, what: str) -> str:
        """The barrier, then CUDA_HELPERS' reload of every tensor this kernel stores to."""
        barrier = super().barrier_code(what)
        reloads = "".join(f'; T.call_extern("handle", "tdsl_reload", {self.tensor(t)}.data)'
                          for t in self.stored_here)
        if reloads:
            self.helpers.add("reload")
        return barrier + reloads

    def _tensor_shape(self, name: str) -> list:
        return next((t.shape for t in self.kernel.tensors if t.name == name), [])

    def element(self, tensor: str, parts: list) -> str:
        """A global tensor's element at index texts `parts`; a dimension folded by fold_storage at its plane
        (`T[(t) % 2, i]`: compiler/model/storage.py)."""
        planes = self._planes(tensor)
        idx = [f"({p}) % {planes[k]}" if k in planes else p for k, p in enumerate(parts)]
        return f"{self.tensor(tensor)}[{', '.join(idx)}]"

    def _planes(self, tensor: str) -> dict:
        """Dimension -> planes of a tensor the schedule folds (fold_storage), {} when it does not: a folded tensor's
        tiles are read and written element by element (a T.copy region could cross the planes' wrap-around)."""
        return dict(next((t.fold for t in self.kernel.tensors if t.name == tensor), ()))

    def region_copy(self, op, load: T.Load) -> bool:
        """Whether one T.copy moves the box of `load` in `op`'s tile: unmasked, and not of a folded tensor (a region
        could cross the planes' wrap-around).  Otherwise it is copied element by element."""
        return load.mask is None and not self._planes(load.tensor)

    def copy_in(self, op, load: T.Load, buf: str, shape, dtype: str) -> None:
        """Copy the box of `load` in `op`'s tile (a product's, or a Preload's) into `buf`."""
        _, names = self.lanes(op.tile)
        if self.region_copy(op, load):
            self.emit(f"T.copy({operand_region(self.tensor(load.tensor), load, op.tile, self.vars)}, {buf})")
            return
        lanes = iter([self.lane(n) for n in range(len(shape))])
        axes = {a.iter for a in op.tile.axes}
        idx, sub = [], dict(names)
        for x in load.indices:  # a lane along each tile axis; a batch index at its one value
            if x.name in axes:
                start, lane = self._start(x, op.tile), next(lanes)
                idx.append(f"({start} + {lane})" if start != "0" else lane)
                sub[x.name] = idx[-1]
            else:
                idx.append(index_code(simplify(op.tile.scalars[x.name]), self.vars))
        lanes = [self.lane(n) for n in range(len(shape))]
        self.enter_vector()
        self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, shape))}):")
        if load.mask is None:
            self.emit(f"    {buf}[{', '.join(lanes)}] = {self.element(load.tensor, idx)}")
        else:
            self.emit(f"    {buf}[{', '.join(lanes)}] = T.if_then_else({index_code(load.mask, sub)}, "
                      f"{self.element(load.tensor, idx)}, T.cast(0, \"{TL_DTYPES[dtype]}\"))")
        self.exit_vector()

    def _start(self, x: T.Expr, tile: T.Tile) -> str:
        return axis_start(x, tile, self.vars)

    def dot(self, op: T.AccUpdate) -> None:
        i, j, k = [a.iter for a in op.tile.axes]  # rows, columns, reduction (the Dot's layout)
        ta, tb = (st.transposed for st in op.staged)
        acc, shape = self.accs[op.stmt]
        size = {a.iter: a.size for a in op.tile.axes}
        if shape != [size[i], size[j]]:
            raise BackendError(f"{op.stmt}: accumulator tile {shape} differs from the product tile {[size[i], size[j]]}")
        a = self.stage_operand(op, 0, "s")
        b = self.stage_operand(op, 1, "s")
        if unit_of(op) == VECTOR:  # f32 / mixed operands, or too small for the warps (compiler/analysis/placement.py)
            self._fma_loop(op, a, ta, b, tb, acc, size[i], size[j], size[k])
            return
        flags = (", transpose_A=True" if ta else "") + (", transpose_B=True" if tb else "")
        if op.partial.warp_rows:  # each warp owns whole rows (compiler/analysis/placement.py: warps_by_rows)
            flags += ", policy=T.GemmWarpPolicy.FullRow"
        gemm = lambda: self._gemm(op, a, ta, b, tb, acc, flags)  # noqa: E731
        if op.partial.absent_terms:
            self.checked_product(op, a, ta, b, tb, gemm)
        else:
            gemm()

    def _gemm(self, op: T.AccUpdate, a: str, ta: bool, b: str, tb: bool, acc: str, flags: str) -> None:
        """The product on the tensor cores (T.gemm), added to the accumulator `acc`."""
        i, j, k = [ax.iter for ax in op.tile.axes]
        size = {ax.iter: ax.size for ax in op.tile.axes}
        shape = self.accs[op.stmt][1]
        interval = T.promotion_interval(op.partial, size[k])
        if op.accum == "f32" and interval is None:
            self.emit(f"T.gemm({a}, {b}, {acc}{flags})")
            return
        part = self.alloc(self.local(("part", op.stmt), f"part_{op.stmt}"), shape, "f32", "fragment",
                          "one step's product, added in the accumulator's dtype" if interval is None else
                          "FP8 products of at most the promotion interval, added to the f32 sum")
        terms = None if interval is None else interval or FP8_INSTRUCTION_K  # 0: after every instruction
        if terms is not None:
            self.emit(f"# {op.stmt}: FP8 products added to the f32 sum every {terms} terms "
                      f"(T.gemm would keep them in the tensor core's reduced-precision accumulator for the whole loop)")
        for a_part, b_part in _k_slices(op, a, ta, b, tb, size[i], size[j], size[k], terms):
            self.emit(f"T.gemm({a_part}, {b_part}, {part}{flags}, clear_accum=True)")
            self.add_into(acc, part, shape, op.accum)

    def checked_product(self, op: T.AccUpdate, a: str, ta: bool, b: str, tb: bool, gemm, exact_first: str = "",
                        barrier: str = "") -> None:
        """A product with absent terms (`Dot.absent_terms`): T.gemm multiplies every lane of the tile, and a lane
        the program has no term at is a masked 0 times the other operand's element, NaN for an infinite or NaN
        one.  Where an operand that meets such zeros holds an infinite or NaN element anywhere in the tile (the
        threads agree on it at a barrier, `any_nonfinite`), the product is the exact one instead: each
        accumulator element walks k in order, adding only the program's terms (`_term_added`); otherwise the
        zeros meet finite elements, add nothing, and `gemm()` prints the tile product.  `exact_first`: a line the
        exact form starts with; `barrier`: where TileLang puts none itself, the one around the exact form's
        copy of a register operand."""
        flag = self.any_nonfinite(op, a, b)
        self.emit(f"if {flag} != 0:  # {op.stmt}: an infinite or NaN element meets a masked lane: the exact product")
        self.depth += 1
        if exact_first:
            self.emit(exact_first)
        self._exact_product(op, a, ta, b, tb, barrier)
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        gemm()
        self.depth -= 1

    def any_nonfinite(self, op: T.AccUpdate, a: str, b: str) -> str:
        """Code for whether an operand tile whose elements meet the other operand's masked lanes holds an infinite
        or NaN element, the same in every thread of the block: each thread looks at its own lanes, then they meet
        at a named barrier that ORs their answers (CUDA_HELPERS["any"]).  Only in the iterations that hold such
        lanes (`Dot.absent_where`); 0 in the others."""
        flag = self.alloc(self.local(("any", op.stmt), f"any_{op.stmt}"), [1], "i32", "local",
                          f"{op.stmt}: an infinite or NaN operand element meets a masked lane")
        self.emit(f"{flag}[0] = 0")
        where = op.partial.absent_where
        if where is not None:
            self.emit(f"if {index_code(where, self.vars)}:")
            self.depth += 1
        for n, buf in enumerate((a, b)):
            if op.partial.absent_met[n]:  # the other operand's masked zeros meet this one's elements
                self._or_nonfinite(op.staged[n], buf, f"{flag}[0]", f"{op.stmt}_{n}")
        self.helpers.add("any")
        threads = 32 * self.kernel.num_warps
        self.emit(f'{flag}[0] = T.call_extern("int32", "tdsl_any", {flag}[0], {ANY_BARRIER}, {threads})')
        self.depth -= where is not None
        return f"{flag}[0]"

    def _or_nonfinite(self, st: T.Staged, buf: str, into: str, key: str) -> None:
        """`into` |= whether this thread's lanes of the operand tile `buf` hold an infinite or NaN element.  A
        fragment is read at its own lanes; a tile in shared memory through a fragment of flags, which gives the
        T.Parallel its layout (one share of the lanes per thread)."""
        lanes = self.lane_list(len(st.shape))
        idx = ", ".join(lanes)
        bad = f'T.if_then_else(T.isfinite(T.Cast("float32", {_element(buf, *lanes)})), 0, 1)'
        self.enter_vector()
        self.emit(f"for {idx} in T.Parallel({', '.join(map(str, st.shape))}):")
        if st.scope == "fragment":
            self.emit(f"    {into} = {into} | {bad}")
        else:
            flags = self.alloc(self.local(("nonfinite", key), f"nf_{key}"), list(st.shape), "i32", "fragment",
                               "1 where the operand element is infinite or NaN")
            self.emit(f"    {flags}[{idx}] = {bad}")
            self.emit(f"    {into} = {into} | {flags}[{idx}]")
        self.exit_vector()

    def _exact_product(self, op: T.AccUpdate, a: str, ta: bool, b: str, tb: bool, barrier: str) -> None:
        """Each accumulator element adds the program's terms in k order, rounded to the accumulator's dtype; an
        operand held in registers read from a copy in shared memory (every lane reads a whole row of it)."""
        copied = [st.scope == "fragment" for st in op.staged]
        a, b = (self._shared_operand(op, n, x) for n, x in enumerate((a, b)))
        if barrier and any(copied):
            self.emit(f"{barrier}  # the copy is written")
        acc, shape = self.accs[op.stmt]
        l0, l1, kk = self.lane(0), self.lane(1), self.local(("product step",), "kk")
        update = self._term_added(op, a, ta, b, tb, acc, op.accum)
        self.accumulate_in_order(acc, [(l0, shape[0]), (l1, shape[1])], (kk, op.tile.axes[2].size), update)
        if barrier and any(copied):
            self.emit(f"{barrier}  # the copy is read: the next one may be written")

    def _shared_operand(self, op: T.AccUpdate, n: int, buf: str) -> str:
        """Operand n of a product where every lane may read it: the staged copy, or a copy in shared memory of
        one held in registers (a fragment is read only at its own lanes)."""
        st = op.staged[n]
        if st.scope != "fragment":
            return buf
        copy = self.loop_buffer(f"{st.tensor}_sx", list(st.shape), st.dtype, "shared",
                                f"{buf} in shared memory: the term-by-term product reads whole rows of it")
        lanes = self.lane_list(len(st.shape))
        self.enter_vector()
        self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, st.shape))}):")
        self.emit(f"    {copy}[{', '.join(lanes)}] = {buf}[{', '.join(lanes)}]")
        self.exit_vector()
        return copy

    def _term_added(self, op: T.AccUpdate, a: str, ta: bool, b: str, tb: bool, into: str, accum: str) -> str:
        """`into[l0, l1]` plus the term of lane (l0, l1, kk) rounded to `accum` where the tile's mask holds the
        lane; `into[l0, l1]` itself where it does not (a lane the program has no term at adds nothing)."""
        l0, l1, kk = self.lane(0), self.lane(1), self.local(("product step",), "kk")
        av = _element(a, kk, l0) if ta else _element(a, l0, kk)
        bv = _element(b, l1, kk) if tb else _element(b, kk, l1)
        update = self.round(accum, f'{into}[{l0}, {l1}] + T.Cast("float32", {av}) * T.Cast("float32", {bv})')
        if op.tile.mask is None:
            return update
        _, names = self.lanes(op.tile)
        for axis, lane in zip(op.tile.axes, (l0, l1, kk)):
            names[axis.iter] = self.axis_value(axis, lane)
        return f"T.if_then_else({index_code(op.tile.mask, names)}, {update}, {into}[{l0}, {l1}])"

    def add_into(self, acc: str, part: str, shape, accum: str) -> None:
        """acc += part, lane by lane, rounded to the accumulator's dtype (one step's product added to its sum)."""
        lanes = ", ".join(self.lane_list(len(shape)))
        self.enter_vector()
        self.emit(f"for {lanes} in T.Parallel({', '.join(map(str, shape))}):")
        self.emit(f"    {acc}[{lanes}] = {self.round(accum, f'{acc}[{lanes}] + {part}[{lanes}]')}")
        self.exit_vector()

    def _fma_loop(self, op, a, ta, b, tb, acc, si, sj, sk) -> None:
        """f32 or mixed operands, or a tile too small for the warps' matrix instructions: the program's f32
        products, accumulated exactly in f32 (no tf32 tensor cores); each lane owns one accumulator element and
        walks k in order."""
        if op.partial.absent_terms:
            self.emit("# lanes the program has no term at (a masked 0 times the other operand, NaN for an infinite one): "
                      "exact f32 multiply-add on the vector units, adding only the program's terms")
        else:
            self.emit("# f32 / mixed-dtype operands: exact f32 multiply-add on the vector units (T.gemm would round f32 "
                      "to tf32)")
        l0, l1, kk = self.lane(0), self.lane(1), self.local(("product step",), "kk")
        if op.partial.absent_terms:  # a lane the program has no term at adds nothing (masked 0 times inf is NaN)
            update = self._term_added(op, a, ta, b, tb, acc, op.accum)
        else:
            av = f"{a}[{kk}, {l0}]" if ta else f"{a}[{l0}, {kk}]"
            bv = f"{b}[{l1}, {kk}]" if tb else f"{b}[{kk}, {l1}]"
            update = self.round(op.accum, f'{acc}[{l0}, {l1}] + T.Cast("float32", {av}) * T.Cast("float32", {bv})')
        self.accumulate_in_order(acc, [(l0, si), (l1, sj)], (kk, sk), update)

    def accumulate_in_order(self, acc: str, lanes: list, step: tuple, update: str) -> None:
        """Each lane ((name, size) pairs) owns one element of `acc` and applies `update` for every value of the
        step (name, count) in order: the exact FMA loop, and the `unanchored` tile reductions."""
        idx = ", ".join(name for name, _ in lanes)
        self.enter_vector()
        self.emit(f"for {idx} in T.Parallel({', '.join(str(size) for _, size in lanes)}):")
        self.emit(f"    for {step[0]} in T.serial({step[1]}):")
        self.emit(f"        {acc}[{idx}] = {update}")
        self.exit_vector()

    # ------------------------------------------------------------ tile reductions

    def reduce(self, op: T.AccUpdate) -> None:
        partial = op.partial
        with self.one_pattern_per_fragment(partial.operand if isinstance(partial, T.Reduce) else partial):
            self._reduce(op)

    def _reduce(self, op: T.AccUpdate) -> None:
        acc, acc_shape = self.accs[op.stmt]
        partial = op.partial
        body, red = (partial.operand, list(partial.axes)) if isinstance(partial, T.Reduce) else (partial, [])
        keep = [a for n, a in enumerate(op.tile.axes) if n not in red]
        if [a.size for a in keep] != acc_shape:
            raise BackendError(f"{op.stmt}: the partial tile {[a.size for a in keep]} does not match the accumulator "
                               f"{acc_shape}")
        if not red:
            self.enter_vector()
            lane_vars, names = self.parallel(op.tile)
            idx = ", ".join(lane_vars) if op.tile.axes else "0"
            value = self.value(body, op.tile, lane_vars, names)
            combined = self.combine(op.op, f"{acc}[{idx}]", value, op.zeros)
            self.emit(f"    {acc}[{idx}] = {self.round(op.accum, combined)}")
            self.exit_vector()
            return
        shape = [a.size for a in op.tile.axes]
        if self.unanchored(body, shape, red):
            return self.reduce_step_by_step(op, body, red[0], acc)
        keys = self.ordered_keys and op.op in ("max", "min")
        part = self.alloc(self.local(("terms", op.stmt), f"{'k' if keys else 'p'}_{op.stmt}"), shape,
                          "i32" if keys else "f32", self.vector_scope,
                          f"{op.stmt}: one tile's terms" + (" as ordered keys (ORDERED_KEYS)" if keys else ""))
        self.enter_vector()
        lane_vars, names = self.parallel(op.tile)
        term = self.value(body, op.tile, lane_vars, names)
        self.emit(f"    {part}[{', '.join(lane_vars)}] = {self.ordered_key(f'{op.op}_key', term) if keys else term}")
        self.exit_vector()
        self.tile_reduce(op, part, shape, red, acc, acc_shape, keys)

    def unanchored(self, body, shape, red) -> bool:
        """A 3-D tile reduced over one axis whose terms read no register tile of this kernel (only memory).
        TileLang gives a fragment its layout from the loops that use it and derives a reduction's destination
        from its terms, not the terms from the destination: terms that read no fragment have no layout of their
        own, and where the accumulator is also tied to a row value another reduction made (rescaled by it,
        divided by it), its layout inference finds none ("no available layout found": P·V one query row at a
        time in a flash kernel, GPU fuzz seed 33)."""
        holds = (T.Reg, T.Running, T.Reference)
        return (self.vector_scope == "fragment" and len(shape) == 3 and len(red) == 1
                and not any(T.nodes_in(body, kind) for kind in holds))

    def reduce_step_by_step(self, op: T.AccUpdate, body, axis: int, acc: str) -> None:
        """`unanchored` terms added into the accumulator one step of the reduced axis at a time, each lane its
        own element (as the exact FMA loop of a product): only the accumulator's layout is asked for."""
        lane_vars, names = self.lanes(op.tile)
        kept = [(v, a.size) for n, (v, a) in enumerate(zip(lane_vars, op.tile.axes)) if n != axis]
        own = f"{acc}[{', '.join(v for v, _ in kept)}]"
        update = self.round(op.accum, self.combine(op.op, own, self.value(body, op.tile, lane_vars, names), op.zeros))
        self.accumulate_in_order(acc, kept, (lane_vars[axis], op.tile.axes[axis].size), update)

    def tile_reduce(self, op, part, shape, red, acc, acc_shape, keys: bool = False) -> None:
        """`part` reduced over the axes `red` into the accumulator; `keys`: `part` holds ORDERED_KEYS, reduced as
        integers and turned back into floats for the NaN-keeping combine."""
        if len(shape) > 3:
            # TileLang 0.1.x's layout inference fails on some reductions of 4-D fragments ("no available layout
            # found"; e.g. attention's P*V in program order at H = 17, D = L = 2): refused, not risked
            tile = " x ".join(f"{a.iter}:{a.size}" for a in op.tile.axes)
            raise BackendError(f"{op.stmt}: a tile reduction over {len(shape)} axes ({tile}); the tilelang backend "
                               f"reduces tiles of at most 3: bind or split the outer loops (a batch or head "
                               f"loop to the grid), or generate with --backend triton")
        fn = f"T.reduce_{op.op}"  # T.reduce_sum / reduce_max / reduce_min
        src, cur = part, list(shape)
        for n, dim in enumerate(sorted(red, reverse=True)):
            cur = cur[:dim] + cur[dim + 1:]
            last = n == len(red) - 1
            if last and op.accum == "f32" and not keys:
                self.emit(f"{fn}({src}, {acc}, dim={dim}, clear=False)")
                return
            dst = self.loop_buffer(f"r_{op.stmt}", cur, "i32" if keys else "f32", self.vector_scope)
            self.emit(f"{fn}({src}, {dst}, dim={dim}, clear=True)")
            src = dst
        lanes = self.lane_list(len(acc_shape))
        idx = ", ".join(lanes) if acc_shape else "0"
        term = self.ordered_key("from_key", f"{src}[{idx}]") if keys else f"{src}[{idx}]"
        combined = self.combine(op.op, f"{acc}[{idx}]", term, op.zeros)
        self.enter_vector()
        self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, acc_shape)) or '1'}):")
        self.emit(f"    {acc}[{idx}] = {self.round(op.accum, combined)}")
        self.exit_vector()

    def _acc_finish(self, op: T.AccFinish) -> None:
        where = "stored" if op.store else "kept on chip"
        self.emit(f"# {op.stmt}: the reduction is complete; round to {op.dtype} as the store would ({where})")
        acc, shape = self.accs[op.stmt]
        buf = self.finish_buffer(op, acc, shape)
        self.values[op.stmt] = _Value(buf, [a.iter for a in op.tile.axes])
        if op.fill is not None:
            self.emit(f"# {op.stmt} outside its mask set once to {op.fill!r}: what is computed from it "
                      f"needs no mask")
            own = T.Reg(op.stmt, tuple(range(len(op.tile.axes))))
            self.tile_value(buf, op.tile, T.Select(op.tile.mask, own, T.Const(op.fill)), "f32")
        if op.store:
            self.store(op.stmt, op.tile, op.lhs, op.dtype, buf)

    def finish_buffer(self, op: T.AccFinish, acc: str, shape) -> str:
        """The finished accumulator, multiplied by the terms' constant factor and rounded to the store dtype."""
        if op.dtype != "f32" or op.scale != 1.0:
            lanes = self.lane_list(len(shape))
            idx = ", ".join(lanes) if shape else "0"
            value = f"{acc}[{idx}]" if op.scale == 1.0 else f"{acc}[{idx}] * {float_code(op.scale)}"
            if op.scale != 1.0:
                self.emit("# every term's constant factor, applied to the sum")
            self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, shape)) or '1'}):")
            self.emit(f"    {acc}[{idx}] = {self.round(op.dtype, value)}")
        return acc

    # ------------------------------------------------------------ stores

    def store(self, stmt: str, tile: T.Tile, lhs: tuple, dtype: str, buf: str) -> None:
        arg = next(t for t in self.kernel.tensors if t.name == stmt)
        axes = [a.iter for a in tile.axes]
        if tile.mask is None and axes and list(lhs) == axes and not self._planes(stmt):
            starts = [index_code(simplify(a.offset), self.vars) for a in tile.axes]
            self.emit(f"T.copy({buf}, {self.tensor(stmt)}[{', '.join(starts)}])")
            return
        self.enter_vector()
        lane_vars, names = self.parallel(tile)
        self.depth += 1
        target = self.element(stmt, [names[it] for it in lhs])
        src = f"{buf}[{', '.join(lane_vars) if axes else '0'}]"
        if tile.mask is not None:
            self.emit(f"if {index_code(tile.mask, names)}:")
            self.emit(f'    {target} = T.Cast("{TL_DTYPES[arg.dtype]}", {src})')
        else:
            self.emit(f'{target} = T.Cast("{TL_DTYPES[arg.dtype]}", {src})')
        self.depth -= 1
        self.exit_vector()

    # ------------------------------------------------------------ values (f32)

    def round(self, dtype: str, code: str) -> str:
        if dtype == "f32":
            return code
        if dtype == "f8e4m3":  # saturated to +-448 (a NaN stays one), then rounded
            clamped = self.call("max", [self.call("min", [code, str(F8_MAX)]), str(-F8_MAX)])
            return f'T.Cast("float32", T.Cast("float8_e4m3fn", {clamped}))'
        return f'T.Cast("float32", T.Cast("{TL_DTYPES[dtype]}", {code}))'

    def value(self, e: T.Expr, tile: T.Tile, lane_vars: list, names: dict) -> str:
        v = lambda x: self.value(x, tile, lane_vars, names)  # noqa: E731
        e = bound_constant(e, names)
        if isinstance(e, T.Const):
            code = float_code(e.value)
            return f"({code})" if code.startswith("-T.") else code  # -inf parenthesised inside expressions
        if isinstance(e, T.Var):
            return f'T.Cast("float32", {var_code(e.name, names)})'
        if isinstance(e, T.Neg):
            return f"(-{v(e.operand)})"
        if isinstance(e, T.Bin):
            if e.op in ("<", "<=", ">", ">=", "==", "!=", "and", "or"):
                return self.cond(e, tile, lane_vars, names)
            if e.op in ("min", "max"):
                return f"T.{e.op}({v(e.lhs)}, {v(e.rhs)})"
            if e.op in ("//", "%"):
                raise BackendError(f"'{e.op}' on values has no TileLang form here")
            e = replace(e, lhs=bound_constant(e.lhs, names), rhs=bound_constant(e.rhs, names))
            return "({} {} {})".format(*self.operands(e, v))
        if isinstance(e, T.Select):
            return f"T.if_then_else({self.cond(e.cond, tile, lane_vars, names)}, {v(e.then)}, {v(e.other)})"
        if isinstance(e, T.NegInfAsZero):
            running = e.operand
            if isinstance(running, T.Running) and running.stmt in self.maxima_as_zero_copies:
                copy = self.maxima_as_zero_copies[running.stmt]
                return self.round(running.dtype, f"{copy}[{', '.join(lane_vars[p] for p in running.axes) or '0'}]")
            x = v(e.operand)
            return f"T.if_then_else({x} == {float_code(-math.inf)}, 0.0, {x})"
        if isinstance(e, T.Load):
            element = self.element(e.tensor, [index_code(simplify(x), names) for x in e.indices])
            load = f'T.Cast("float32", {element})'
            if e.mask is not None:
                return f"T.if_then_else({index_code(e.mask, names)}, {load}, {float(e.other)!r})"
            return load
        if isinstance(e, T.Reg):
            value = self.values.get(e.stmt)
            if value is None:
                raise InternalError(f"{e.stmt} is read before it is computed")
            if not value.iters:
                return f"{value.buffer}[0]"
            buffer = self.fragment_copies.get((e.stmt, e.axes), value.buffer)
            return f"{buffer}[{', '.join(lane_vars[p] for p in e.axes)}]"
        if isinstance(e, T.Running):  # a running maximum: its accumulator now, rounded as a store would
            acc, _ = self.accs[e.stmt]
            return self.round(e.dtype, f"{acc}[{', '.join(lane_vars[p] for p in e.axes) or '0'}]")
        if isinstance(e, T.Reference):  # the maximum a rescaled accumulator was last brought to
            return f"{self.ref_name(e.stmt)}[{', '.join(lane_vars[p] for p in e.axes) or '0'}]"
        if isinstance(e, T.Call):
            if e.func not in self.functions:
                raise BackendError(f"{e.func}() has no spelling in this printer ({NVIDIA_ONLY.get(e.func, '')}); "
                                   f"write the program without it for this target")
            return self.call(e.func, [v(a) for a in e.args], e.zeros)
        if isinstance(e, T.Round):
            return self.round(e.dtype, v(e.operand))
        if isinstance(e, (T.Reduce, T.Dot)):
            raise BackendError(f"a {type(e).__name__.lower()} nested inside an expression has no tile form; "
                               f"make it its own statement")
        raise BackendError(f"the value {expr_text(e)} has no form in this printer")

    def call(self, func: str, args: list, zeros: bool = True) -> str:
        """A primitive function in this printer's spelling; a CUDA helper it calls is imported by the kernel.
        `zeros`: a max / min whose zero a use can tell (T.Call.zeros), else the hardware's (call_code)."""
        helper = spelling_key(self.functions, func, zeros)
        if helper in self.helper_functions:
            self.helpers.add(helper)
        return call_code(self.functions, func, args, zeros)

    def ordered_key(self, func: str, code: str) -> str:
        """A float as its ORDERED_KEYS key (max_key, min_key), or a key back as its float (from_key)."""
        self.helpers.add(func)
        return ORDERED_KEYS[func].format(code)

    def combine(self, op: str, acc: str, term: str, zeros: bool = True) -> str:
        """A reduction's update `acc (op) term`: + or this printer's max / min (compiler/model/reduce_ops.py)."""
        how = reduce_ops.combine(op)
        return f"{acc} + {term}" if how == "+" else self.call(how, [acc, term], zeros)

    def cond(self, e: T.Expr, tile, lane_vars, names) -> str:
        if isinstance(e, T.Bin) and e.op in ("and", "or"):
            f = "T.And" if e.op == "and" else "T.Or"
            return f"{f}({self.cond(e.lhs, tile, lane_vars, names)}, {self.cond(e.rhs, tile, lane_vars, names)})"
        if isinstance(e, T.Bin) and e.op in ieee.COMPARISONS:
            side = lambda x: index_code(x, names) if _is_index(x) else self.value(x, tile, lane_vars, names)  # noqa: E731
            if _is_index(e.lhs) or _is_index(e.rhs):
                return f"({side(e.lhs)} {e.op} {side(e.rhs)})"
            # `x == x` is true to TVM; a literal zero stays one (`x > 0.0` folds nothing)
            return "({} {} {})".format(*self.operands(e, side, zeros_as_variables=False))
        return index_code(e, names)

    # ------------------------------------------------------------ operands TVM's simplifier must not see (ieee.py)

    HIDDEN = 'T.Cast("float32", T.Cast("float64", {0}))'  # exact both ways; nvcc removes it

    def operands(self, e: T.Bin, value, zeros_as_variables: bool = True) -> tuple:
        """`e`'s left operand, its operator and its right operand, each `value(x)`; a literal zero read from a
        kernel variable (TVM folds `x * 0`, `0 / x`, `x + 0`); of a subtraction or a comparison, one operand
        hidden from TVM where its rules would relate the two (ieee.side_to_hide)."""
        def operand(x: T.Expr) -> str:
            return self.zero(float(x.value)) if zeros_as_variables and ieee.is_zero(x) else value(x)

        lhs, rhs = operand(e.lhs), operand(e.rhs)
        side = ieee.side_to_hide(e.lhs, e.rhs) if e.op == "-" or e.op in ieee.COMPARISONS else ""
        if side == "rhs":
            rhs = self.HIDDEN.format(rhs)
        elif side == "lhs":
            lhs = self.HIDDEN.format(lhs)
        elif side == "both constant":
            lhs = self.kernel_constant(value(e.lhs))  # a zero's variable is this one: the same code, the same key
        return lhs, e.op, rhs

    def zero(self, value: float) -> str:
        """+0.0 or -0.0 as a variable of the kernel, which TVM does not fold."""
        return self.kernel_constant("-0.0" if math.copysign(1.0, value) < 0 else "0.0")

    def kernel_constant(self, code: str) -> str:
        """A constant expression computed once into a variable of the kernel (declared once per expression): TVM
        folds neither `x * zero` nor `zero - c` with it, and the variable rounds the expression to f32."""
        name = self.local(("constant", code), {"0.0": "zero", "-0.0": "neg_zero"}.get(code, "constant"))
        if not self.declared_before(name, [], "f32", "var"):
            self.allocs.append(f'{name} = T.alloc_var("float32", init={code})  # an operand TVM would fold (ieee.py)')
        return name


def _element(buf: str, row: str, col: str) -> str:
    """An element of a 2-D operand: a buffer, or one slot of a warp-specialised ring (`V_ring[s, :, :]`)."""
    slot = ", :, :]"
    return f"{buf[:-len(slot)]}, {row}, {col}]" if buf.endswith(slot) else f"{buf}[{row}, {col}]"


def _k_slices(op: T.AccUpdate, a: str, ta: bool, b: str, tb: bool, rows: int, cols: int, k: int,
              terms: Optional[int]) -> list[tuple[str, str]]:
    """The operand regions of a product split along k into steps of at most `terms` terms, each a whole number of
    FP8 instructions; the whole operands when it need not be (`terms` None or at least k)."""
    if terms is None or k <= terms:
        return [(a, b)]
    step = math.gcd(k, terms)
    if step % FP8_INSTRUCTION_K or any(isinstance(x, T.RegOperand) for x in (op.partial.lhs, op.partial.rhs)):
        raise BackendError(f"{op.stmt}: the FP8 product's k tile ({k}) cannot be cut into steps of at most {terms} "
                           f"terms for the tensor cores (steps of {FP8_INSTRUCTION_K} from operands in shared "
                           f"memory): split its reduction by {terms}, or declare `combine fast_accum` / "
                           f"`fast_accum(N)`")

    def region(buf: str, other: int, transposed: bool, lo: int) -> str:
        ks, whole = f"{lo}:{lo + step}", f"0:{other}"
        return f"{buf}[{ks}, {whole}]" if transposed else f"{buf}[{whole}, {ks}]"

    return [(region(a, rows, ta, lo), region(b, cols, not tb, lo)) for lo in range(0, k, step)]


def _own_lanes(axes: tuple) -> bool:
    """A fragment read at these loop axes follows its own lanes: its axes in their order, the first the loop's
    first (`one_pattern_per_fragment`)."""
    return bool(axes) and axes[0] == 0 and list(axes) == sorted(set(axes))


def _is_index(e: T.Expr) -> bool:
    if isinstance(e, T.Var):
        return True
    if isinstance(e, T.Const):
        return isinstance(e.value, int)
    if isinstance(e, T.Bin) and e.op in ("+", "-", "*", "//", "%", "min", "max"):
        return _is_index(e.lhs) and _is_index(e.rhs)
    if isinstance(e, T.Neg):
        return _is_index(e.operand)
    return False



# ---------------------------------------------------------------- launcher


def launcher(program: T.TileProgram, names: ModuleNames, call: str = "_kernel") -> list[str]:
    lines = prologue(program, names)
    for pad, kernel, host_vars in host_loops(program, names, lines):  # by its KERNELS key, its tile program name
        args = [names.tensor(t.name) for t in kernel_arrays(kernel)] + host_vars
        if persistent_walk(kernel):
            args.append(f"_programs({args[0]})")
        lines.append(f'{pad}{call}("{kernel.name}")({", ".join(args)})')
    return lines + epilogue(program, names)


def kernel_arrays(kernel: T.TileKernel) -> list[T.TensorArg]:
    """The arrays a kernel takes: its tensors, except that an output stored in an input (`store_in`) is passed
    as that input (the kernel declares the output as a view of it)."""
    arrays = [t for t in kernel.tensors if not t.stored_in]
    for t in kernel.tensors:
        if t.stored_in and all(a.name != t.stored_in for a in arrays):
            arrays.append(replace(t, name=t.stored_in, role="input", stored_in=None))
    return arrays


def float_code(value) -> str:
    """A float constant as TileLang code, infinities as T.infinity (also the 910B dialect's spelling), NaN as
    Python's NaN cast to f32 (TVM's CUDA printer writes CUDART_NAN_F)."""
    return float_literal(value, {"inf": 'T.infinity("float32")', "-inf": '-T.infinity("float32")',
                                 "nan": 'T.Cast("float32", float("nan"))'})

