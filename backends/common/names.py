"""Python identifiers for the names of a program: one symbol table per generated module, for every backend.

Kernels, tensors, sizes and loops are named by the program, and those names reach each generated module as
Python identifiers, next to names the module gives itself: its imports (`tl`, `T`, `torch`), helpers
(`_check`, `_round_bf16`), Python's builtins, Triton's launch options, and the locals each printer derives from
the program's names (`v_C`, `acc_C`, `Y_i`, `t_A_1`, `A_s_1`, `A_L1`) or invents (`l0`, `bx`, `cid`, `vid`,
`pid_x`).  A `ModuleNames` hands out every one of these identifiers for one module, so that no two things in
it share an identifier and nothing the program names can shadow what the module uses:

* `RESERVED` -- Python's keywords and builtins, the module-level names and API namespaces of every backend's
  template, the names Triton reserves in a kernel's parameter list, and the C++ names TileLang's lowered kernels
  spell verbatim (`reserved`: keywords, types, intrinsics' families) -- is never handed out;
* the program's own names are claimed first, in a fixed order (kernel and tensors, then run-time sizes, then
  loop variables), and keep their spelling unless it is reserved or already taken; then they get the first
  free of `name_1`, `name_2`, ... -- after the names of their group that keep theirs, so a tensor `T_1`
  stays `T_1` beside a tensor `T` (which becomes `T_2`);
* generated names are claimed after them and yield to them: kernel functions (`gemm_0`) at module level, then
  the locals of each function (`FunctionNames`), which only have to differ from each other and from the
  module-level names.

The same program name is always the same identifier in one module (the kernel and a tensor of the same name
share it: `def softmax(softmax=None)` is fine), and a program whose names collide with nothing prints exactly
as before.  `RESERVED` is one set for all backends, so the launcher of a program has the same parameters with
Triton and TileLang.  A module whose kernel or tensors had to be renamed lists them in `RENAMED` (program name ->
identifier): the launcher's parameters are then those identifiers (`module.f(A, range_1=out)`), and the
Ascend simulator reads the table to match tensors with the program's names.

Where it lives, and why here.  The tile program (compiler/lower/tileir.py) keeps the program's own names: every
backend's comments show them, the buffer plan and the printers match operands and loops by them, and most
identifiers of a module are derived per backend (`A_s_1` in TileLang, `A_L1` on the 910B), so the tile program
could not carry finished identifiers for them.  What the tile lowering guarantees is that its names are
unambiguous: a loop variable never has the name of an iterator, a size or another loop
(compiler/lower/build.py `_loop_variables`).  Every printer turns names into identifiers here, through the one
`ModuleNames` of the module it prints, so the rules are written once for the four backends.
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass, field
from typing import Optional

from tdsl.backends.common.python_expr import dimension_python, python_text
from tdsl.compiler.lower import tileir as T

# Module-level names of the generated modules (backends/*/templates): imports and API namespaces, helpers,
# tables, and the names the modules' users read (KERNELS, RENAMED, E4M3_BYTES).
MODULE_LEVEL = frozenset({
    "os", "math", "np", "torch", "triton", "tl", "tilelang", "T",
    "_INTERPRET", "_round_f8e4m3", "_round_bf16", "_sigmoid", "_silu", "_tanh", "_max_nan", "_maximum_nan",
    "_min_nan", "_minimum_nan", "_max_nan_either", "_min_nan_either", "_maximum_either", "_minimum_either",
    "_zero_bits",
    "_f8e4m3_bits", "_from_f8e4m3_bits", "_store_f8e4m3", "_widen_f8e4m3", "_to_bf16", "_widen_bf16",
    "libdevice",
    "_TORCH_DTYPES", "_check", "_overlaps", "KERNELS", "_COMPILED", "_kernel", "compile_kernels", "E4M3_BYTES",
    "RENAMED",
    "IN_PLACE", "launches", "_programs", "PASS_CONFIGS", "CUDA_SOURCE",
})
# A Triton kernel's parameters share one namespace with its launch keywords (every option of CUDAOptions,
# `grid`, `warmup`, the `INTERPRET` constexpr of these modules) and with the locals of the argument binder
# Triton generates for it (runtime/jit.py `create_function_from_signature`).
TRITON_KERNEL = frozenset({
    "INTERPRET", "grid", "warmup", "device", "device_type", "stream",
    "params", "specialization", "options", "specialize_impl", "backend", "dynamic_func",
    "num_warps", "num_ctas", "num_stages", "warp_size", "maxnreg", "ptx_version", "ptx_options", "ir_override",
    "enable_fp_fusion", "sched4reg", "enable_reflect_ftz", "launch_cooperative_grid", "launch_pdl", "clc",
    "supported_fp8_dtypes", "deprecated_fp8_dot_operand_dtypes", "default_dot_input_precision",
    "allowed_dot_input_precisions", "max_num_imprecise_acc_default", "extern_libs", "debug", "backend_name",
    "sanitize_overflow", "arch", "instrumentation_mode", "fpsan_homomorphic_casts", "min_shared_mem",
})
# TileLang's modules become C++ (CUDA, AscendC) in which the program's names are parameters and locals.  TVM's
# name supply renames them around a short list of C keywords only; everything else the lowered source spells
# verbatim would be shadowed or misparsed (a tensor `new`, `half_t` or `tdsl_reload` broke nvcc): C++'s keywords,
# the built-in types, variables and functions of CUDA and AscendC, TileLang's types and the helpers of
# backends/tilelang/emit.py CUDA_HELPERS.  (Lists from TileLang's codegen_cuda.cc and codegen_ascend.cc, and the
# identifiers of every example's lowered source.)
CPP_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false final float for friend goto if
    inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq override private protected
    public register reinterpret_cast requires restrict return short signed sizeof static static_assert static_cast
    struct switch template this thread_local throw true try typedef typeid typename union unsigned using virtual
    void volatile wchar_t while xor xor_eq
""".split())
C_BUILTINS = frozenset("""
    threadIdx blockIdx blockDim gridDim warpSize dim3 block_idx NULL INFINITY NAN CUDART_INF_F CUDART_NAN_F
    CUtensorMap printf assert abs std cute cutlass nvcuda tl half half2 nv_bfloat16 nv_bfloat162 uint ushort uchar
    ulong longlong ulonglong size_t ssize_t ptrdiff_t intptr_t uintptr_t nullptr_t int8_t int16_t int32_t int64_t
    uint8_t uint16_t uint32_t uint64_t half_t bfloat16_t tfloat32_t bfloat16x2_t event_t simd_inst
    AtomicAdd AtomicAddRet AtomicAddx2 AtomicAddx2Ret AtomicAddx4 AtomicAddx4Ret AtomicMax AtomicMaxRet AtomicMin
    AtomicMinRet AtomicLoad AtomicStore
""".split())
# Families: CUDA's vector types (`float4`, `uint2`), the 8- and 4-bit float types of TileLang (`fp8_e4_t`,
# `fp8_e4_16_t`) and AscendC (`float8_e4m3x2_t`), and the functions TileLang names after a kernel function `f_0`
# (`f_0_kernel`, AscendC's `f_0_kernel_simt_vf_1`).  Adding `_1` to one of these leaves the family.
C_RESERVED_FORMS = re.compile(r"(u?(char|short|int|long|longlong)|float|double)[1-4]"
                              r"|(fp|float)[48]_e\d+(m\d+)?(x\d+|_\d+)?_t"
                              r"|\w+_\d+_kernel(_simt_vf_\d+)?")
# Prefixes of families whose members the lowerings compose (`make_float2`, `asc_sync_intra_arrive`,
# `PIPE_MTE2`, `curand_normal2`) or tdsl adds (`tdsl_ex2`): a name with one gets a `u` in front instead.
C_RESERVED_PREFIXES = ("make_", "asc_", "ASC_", "PIPE_", "curand", "tdsl_")
RESERVED = (frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
            | MODULE_LEVEL | TRITON_KERNEL | CPP_KEYWORDS | C_BUILTINS)


def reserved(name: str) -> bool:
    """Whether no program name may be printed as `name` in a module (RESERVED, the C++ forms and prefixes)."""
    return (name in RESERVED or C_RESERVED_FORMS.fullmatch(name) is not None
            or name.startswith(C_RESERVED_PREFIXES))



def free_name(preferred: str, taken) -> str:
    """`preferred`, or the first of `preferred_1`, `preferred_2`, ... (`v_1`, `v_2` for `v_`) that is neither
    reserved nor taken.

    Identifiers starting with `__` belong to the tools that run generated modules (TileLang's script builder
    binds `__tb` and `__1`, `__2`, ...; the Ascend simulator `__sim__`), and no program name starts so; a name
    derived from one that starts with `_` could, and then gets a `u` in front."""
    if not preferred.isidentifier():
        raise ValueError(f"internal: {preferred!r} is not a Python identifier")
    base = "u" + preferred if preferred.startswith(("__",) + C_RESERVED_PREFIXES) else preferred
    sep = "" if base.endswith("_") else "_"  # `_` gives `_1`, never `__1`
    name, n = base, 0
    while reserved(name) or name in taken:
        n += 1
        name = f"{base}{sep}{n}"
    return name


@dataclass
class ModuleNames:
    """The identifiers of one generated module: the program's names and the module-level generated names."""

    program: T.TileProgram
    taken: set = field(default_factory=set)
    public: dict = field(default_factory=dict)  # the kernel and its tensors (program name -> identifier)
    variables: dict = field(default_factory=dict)  # run-time sizes and loop variables of the tile program
    kernels: dict = field(default_factory=dict)  # tile-program kernel -> the identifier of its function

    def __post_init__(self):
        p = self.program
        self._claim(self.public, [p.name] + _tensor_names(p))
        self._claim(self.variables, _variable_names(p))
        self._claim(self.kernels, [k.name for k in p.kernels])

    def _claim(self, table: dict, names: list) -> None:
        """Give `names` identifiers: first those whose own spelling is free, then the others."""
        names = list(dict.fromkeys(names))
        kept = [n for n in names if not reserved(n) and n not in self.taken]
        for name in kept + [n for n in names if n not in kept]:
            table[name] = free_name(name, self.taken)
            self.taken.add(table[name])

    @property
    def entry(self) -> str:
        """The launcher: the program's kernel."""
        return self.public[self.program.name]

    def tensor(self, name: str) -> str:
        return self.public[name]

    def kernel(self, name: str) -> str:
        return self.kernels[name]

    def var(self, name: str) -> str:
        """A tile-program variable: a run-time size or a loop variable."""
        return self.variables[name]

    def dim(self, d) -> str:
        """A tensor dimension as code: a number, or the model's text of sizes as Python (python_expr.py)."""
        return dimension_python(d, self.var)

    def code(self, e: T.Expr, outer: Optional[dict] = None) -> str:
        """An integer expression of sizes (and host loop variables) as Python; `outer`: the identifiers of the
        launcher's enclosing host loops, by the kernel's names for them."""
        outer = outer or {}
        return python_text(e, lambda n: outer.get(n) or self.var(n))

    def shape(self, shape) -> str:
        dims = [self.dim(d) for d in shape]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    @property
    def renamed(self) -> dict:
        """The kernel and tensor names printed differently in this module (program name -> identifier)."""
        return {name: ident for name, ident in self.public.items() if name != ident}

    def renamed_code(self) -> str:
        """`RENAMED`'s value as code, or "" when nothing was renamed (the module then has no RENAMED)."""
        items = self.renamed
        return "{" + ", ".join(f'"{k}": "{v}"' for k, v in items.items()) + "}" if items else ""

    def function(self) -> "FunctionNames":
        return FunctionNames(set(self.taken))


@dataclass
class FunctionNames:
    """The locals of one generated function (a kernel): each key (what the local holds, e.g. ("acc", "C"))
    gets one identifier, its preferred spelling unless a module-level name or another local has it."""

    taken: set
    table: dict = field(default_factory=dict)

    def local(self, key: tuple, preferred: str) -> str:
        if key not in self.table:
            self.table[key] = free_name(preferred, self.taken)
            self.taken.add(self.table[key])
        return self.table[key]


def _tensor_names(p: T.TileProgram) -> list:
    names = [t.name for t in list(p.inputs) + list(p.outputs) + list(p.temps)]
    names += [t.name for k in p.kernels for t in k.tensors]
    return list(dict.fromkeys(names))


def _variable_names(p: T.TileProgram) -> list:
    """Run-time sizes, then every loop variable of every kernel (grid, then serial loops in program order)."""
    names = [n for n, v in p.sizes.items() if v is None]
    for k in p.kernels:
        names += list(k.sizes)
        names += [h.var for h in k.host]
        names += [v for axis in k.grid for v in axis.vars]
        names += _serial_vars(k.body)
    return list(dict.fromkeys(names))


def _serial_vars(ops) -> list:
    out = []
    for op in ops:
        if isinstance(op, T.SerialLoop):
            out.append(op.var)
            out += _serial_vars(op.body)
    return out
