"""Program names that collide with the names generated modules use (backends/common/names.py).

A kernel, tensor, size, iterator, statement or loop may be called like a Python builtin (`range`), a name the
module imports or defines (`tl`, `T`, `torch`, `_check`, `KERNELS`), one of Triton's launch options
(`num_warps`), a kernel function or local the printers derive from other names (`f_0` beside kernel `f`,
`acc_C` beside reduction `C`, `C_i`, `t_A_1`, `A_s_1`, `A_L1`, `l_i`) or invent (`pid_x`, `l0`, `bx`, `cid`,
`vid`), or like another name up to case.  For every such name in every role, every backend's module

* is Python, and no identifier in it means two things: nothing binds a builtin's name, no module-level name
  is bound twice, no function binds a name that some part of the module reads as a global, and no Triton
  kernel has a parameter named like a launch option (`assert_nothing_shadowed`, run on every module);
* computes the program: the Triton module imports, and its launcher, called with the module's own names
  (`RENAMED`), matches the reference interpreter under TRITON_INTERPRET=1; the TileLang modules lower for
  sm_90a and for the Ascend 950; both Ascend modules run in the NumPy execution model and match the
  interpreter;

or the frontend refuses the name with a located error (Python keywords, isl keywords as iterators, sizes or
loops, names starting with `__`).  The chapter's `swiglu_quant` (a tensor named `T`) lowers for TileLang on
both targets, with its schedule and in program order, and a renamed Triton kernel compiles ahead of time.

The programs (`Gemm`, `Norm`, `Scale`) have a matrix product with a pipelined loop, grid axes (two, or one
fused), masks, register reuse, an FP8 output, a row reduction and program order (a kernel per statement,
temporaries between them).  Every name is generated in every role by the first test (many names per
program); the programs that run carry a selection of names from every category in every role.
"""

import ast
import builtins
import dataclasses
import keyword
import os
import re
import shutil
from dataclasses import dataclass, field

import numpy as np
import pytest

from catalog import EXAMPLES, ROOT
from fuzz.oracles import rebound_loop_variables

os.environ.setdefault("TILELANG_CACHE_DIR", str(ROOT / ".cache" / "tilelang"))

from tdsl.backends.ascend910b.api import check_module  # noqa: E402
from tdsl.compiler.verify.ascend_sim import simulate  # noqa: E402
from tdsl.backends.common.names import RESERVED, TRITON_KERNEL, ModuleNames  # noqa: E402
from tdsl.compiler.driver.api import load, loads  # noqa: E402
from tdsl.compiler.driver.generate import generate, load_module, to_torch  # noqa: E402
from tdsl.compiler.reference.interpreter import interpret, random_inputs  # noqa: E402
from tdsl.compiler.lower.build import lower  # noqa: E402
from tdsl.compiler.verify import compare  # noqa: E402
from tdsl.frontend.diagnostics import TdslError  # noqa: E402

try:
    import tilelang  # noqa: F401
    from tdsl.backends.tilelang.lowering import lower_module
except ImportError:  # lowering is skipped; generation, execution and simulation still run
    lower_module = None

# ---------------------------------------------------------------- the names

MODULE_NAMES = ["tl", "torch", "triton", "os", "T", "tilelang", "math", "np", "_check", "_INTERPRET", "INTERPRET",
                "_TORCH_DTYPES", "KERNELS", "_COMPILED", "_kernel", "compile_kernels", "E4M3_BYTES", "RENAMED",
                "_round_f8e4m3", "_round_bf16", "_silu", "_sigmoid", "_tanh"]
BUILTIN_NAMES = ["range", "float", "int", "len", "tuple", "isinstance", "TypeError", "ValueError", "type", "slice",
                 "print", "abs", "sum", "input", "min", "max"]
LAUNCH_NAMES = ["num_warps", "num_stages", "grid", "debug", "params", "options", "backend", "warmup"]
# What the printers derive from the default names below (kernel f; tensors A, B, C, Y; iterators i, j, k;
# loops io, jo, ii, jj, ko, kk, fz) or invent.
DERIVED_NAMES = ["f_0", "f_1", "f_2", "v_C", "acc_C", "C_i", "Cp_i", "Cp_k", "Y_i", "Y_j", "l_i", "t_A_1", "t_B_2",
                 "pid_x", "fz_0", "fz_1", "io_0", "l0", "l1", "bx", "by", "kk", "cid", "vid", "A_s_1", "B_s_2",
                 "A_l1", "A_L1", "A_l0a", "A_L0A", "C_L0C", "C_ws", "C_ub", "p_C", "part_C", "s_t_1", "t_1", "t_2",
                 "r_1", "e4m3_1", "_", "v_"]
CASE_NAMES = ["t", "Tl", "TL", "Range", "Torch", "Kernels"]
# Identifiers of the C++ the TileLang lowerings print: keywords, types, built-ins, the helpers tdsl adds
# (CUDA_HELPERS), AscendC's intrinsics, the functions named after a kernel function (`f_0_kernel`).
C_NAMES = ["void", "half", "char", "threadIdx", "blockIdx", "new", "this", "template", "typename", "half_t",
           "bfloat16_t", "fp8_e4_t", "float4", "uint2", "tdsl_reload", "tdsl_ex2", "make_float2", "asc_mmad",
           "PIPE_V", "f_0_kernel", "event_t"]
HOSTILE = list(dict.fromkeys(MODULE_NAMES + BUILTIN_NAMES + LAUNCH_NAMES + DERIVED_NAMES + CASE_NAMES + C_NAMES))

# A selection from every category, for the programs that run (every name is generated in every role).
RUN_NAMES = ["tl", "T", "torch", "_check", "INTERPRET", "KERNELS", "_round_bf16", "range", "float", "tuple",
             "ValueError", "num_warps", "grid", "f_0", "v_C", "acc_C", "C_i", "Cp_i", "l_i", "t_A_1", "pid_x",
             "fz_0", "l0", "bx", "kk", "cid", "vid", "A_s_1", "A_L1", "C_ws", "_", "Tl", "void"]

ISL_KEYWORDS = {"min", "max"}  # of the names above: refused as iterators, sizes and loops (isl reads them)


def for_indices(names):
    """The names that may name an iterator, a size or a loop."""
    return [n for n in names if n not in ISL_KEYWORDS]


def chunks(names, n):
    return [names[k:k + n] for k in range(0, len(names), n)]


# ---------------------------------------------------------------- the program


@dataclass
class Gemm:
    """C = A·B in bf16 with an f32 accumulator, kept on chip for Y = silu(C) + the extra inputs and for the
    extra outputs (2·C): a matrix product, masks (sizes that are not multiples of the tiles), register reuse,
    pipelined serial loops and grid axes.  Every name it gives is a field."""

    kernel: str = "f"
    A: str = "A"
    B: str = "B"
    C: str = "C"
    Y: str = "Y"
    M: str = "M"
    N: str = "N"
    K: str = "K"
    params: bool = False  # the sizes are run-time `param`s
    i: str = "i"  # C's iterators
    j: str = "j"
    k: str = "k"
    yi: str = "i"  # Y's
    yj: str = "j"
    io: str = "io"
    jo: str = "jo"
    ii: str = "ii"
    jj: str = "jj"
    ko: str = "ko"
    kk: str = "kk"
    fz: str = "fz"
    inputs: tuple = ()  # f32[M, N], added into Y
    outputs: tuple = ()  # (name, (iterator, iterator)): bf16[M, N] = 2 C
    quant: str = ""  # an f8e4m3[M, N] output C / 2 (the 910B has no FP8 type: bytes, E4M3_BYTES)
    values: dict = field(default_factory=lambda: {"M": 40, "N": 36, "K": 24})
    # grid: tile + split + cache_read + pipeline, bound to grid.x and grid.y; fused: the two tile loops fused
    # into one grid axis; None: program order (a kernel per statement, C a temporary between them)
    schedules: tuple = ("grid", "fused", None)

    def sizes(self, small: bool = False) -> dict:
        """Size name -> value (program order runs one statement per kernel: smaller, so its tiles fit)."""
        values = {"M": 20, "N": 18, "K": 12} if small else self.values
        return {getattr(self, s): v for s, v in values.items()}

    def text(self) -> str:
        M, N, K = self.M, self.N, self.K
        decl = f"param {M}, {N}, {K}" if self.params else f"const {M} = 40, {N} = 36, {K} = 24"
        ins = "".join(f", {e}: f32[{M}, {N}]" for e in self.inputs)
        outs = "".join(f", {o}: bf16[{M}, {N}]" for o, _ in self.outputs)
        outs += f", {self.quant}: f8e4m3[{M}, {N}]" if self.quant else ""
        yi, yj = self.yi, self.yj
        extra = "".join(f" + {e}[{yi}, {yj}]" for e in self.inputs)
        lines = [
            decl,
            f"kernel {self.kernel}({self.A}: bf16[{M}, {K}], {self.B}: bf16[{K}, {N}]{ins}) -> ({self.Y}: bf16[{M}, {N}]{outs}) {{",
            f"  {self.C}[{self.i}, {self.j}]: bf16 = sum({self.k}) {self.A}[{self.i}, {self.k}] * {self.B}[{self.k}, {self.j}] accum f32",
            f"  {self.Y}[{yi}, {yj}] = silu({self.C}[{yi}, {yj}]){extra}",
        ]
        lines += [f"  {o}[{a}, {b}] = {self.C}[{a}, {b}] * 2.0" for o, (a, b) in self.outputs]
        lines += [f"  {self.quant}[{yi}, {yj}] = {self.C}[{yi}, {yj}] * 0.5"] if self.quant else []
        lines.append("}")
        lines += self._schedule("grid", [f"cache_read({self.A}, shared, at={self.C}.{self.ko})",
                                         f"pipeline({self.C}.{self.ko}, stages=2)",
                                         f"bind({self.C}.{self.io}, grid.x)", f"bind({self.C}.{self.jo}, grid.y)"])
        lines += self._schedule("fused", [f"{self.fz} = fuse({self.C}.{self.io}, {self.C}.{self.jo})",
                                          f"pipeline({self.C}.{self.ko}, stages=2)", f"bind({self.C}.{self.fz}, grid.x)"])
        return "\n".join(lines) + "\n"

    def _schedule(self, name: str, steps: list) -> list:
        C = self.C
        head = [f"  {self.io}, {self.jo}, {self.ii}, {self.jj} = tile({C}.{self.i}, {C}.{self.j}, 32, 32)",
                f"  {self.ko}, {self.kk} = split({C}.{self.k}, 16)",
                f"  reorder({C}, {self.io}, {self.jo}, {self.ko}, {self.ii}, {self.jj}, {self.kk})",
                f"  reverse_compute_at({self.Y}, {C}.{self.jo})"]
        head += [f"  reverse_compute_at({o}, {C}.{self.jo})" for o, _ in self.outputs]
        head += [f"  reverse_compute_at({self.quant}, {C}.{self.jo})"] if self.quant else []
        return [f"schedule {name} {{"] + head + [f"  {s}" for s in steps] + ["}"]


# Programs that put names in each role, several at a time.  A role's names go where they meet the most
# derived names: the default names stay beside them (an input `acc_C` next to the reduction C).


def in_tensors(names, schedules=("grid", "fused", None)) -> Gemm:
    """The names as extra inputs and (the first four) outputs, one of them FP8, next to A, B, C, Y."""
    return Gemm(inputs=tuple(names[4:]), outputs=tuple((n, ("i", "j")) for n in names[1:4]), quant=names[0],
                schedules=schedules)


def as_tensors(names) -> Gemm:
    """The names as A, B, C (kept on chip), Y and an extra output, so derived names come from them."""
    padded = list(names) + [f"X{n}" for n in range(5 - len(names))]
    return Gemm(A=padded[0], B=padded[1], C=padded[2], Y=padded[3], outputs=((padded[4], ("i", "j")),),
                schedules=("grid", None))


def as_iterators(names) -> Gemm:
    """C[i, j] sum(k), Y[yi, yj] and two outputs with their own iterators: seven iterator names."""
    padded = list(names) + [f"x{n}" for n in range(7 - len(names))]
    return Gemm(i=padded[0], j=padded[1], k=padded[2], yi=padded[3], yj=padded[4],
                outputs=(("O1", (padded[5], padded[6])), ("O2", (padded[6], padded[5]))), schedules=("fused", None))


def as_loops(names) -> Gemm:
    """The schedule's loops (program order has none of them)."""
    padded = list(names) + [f"x{n}" for n in range(7 - len(names))]
    return Gemm(io=padded[0], jo=padded[1], ii=padded[2], jj=padded[3], ko=padded[4], kk=padded[5], fz=padded[6],
                schedules=("grid", "fused"))


def as_sizes(names) -> Gemm:
    """M, N, K as run-time sizes (loops are named apart: a loop may not have a size's name).  Only the Triton
    backend generates kernels for run-time sizes (the others need the buffer plan, which needs every size
    bound), and program order would tile a loop over a run-time size with a tile of no fixed size."""
    padded = list(names) + [f"X{n}" for n in range(3 - len(names))]
    loops = dict(zip(["io", "jo", "ii", "jj", "ko", "kk", "fz"], ["Lio", "Ljo", "Lii", "Ljj", "Lko", "Lkk", "Lfz"]))
    return Gemm(M=padded[0], N=padded[1], K=padded[2], params=True, schedules=("grid",), **loops)


def as_kernel(name) -> Gemm:
    """The kernel, and an output of the same name (they share an identifier: `def tl(A, B, tl=None)`)."""
    return Gemm(kernel=name, outputs=((name, ("i", "j")),), schedules=("grid",))


@dataclass
class Scale:
    """`kernel NAME(X) -> (NAME)`: one elementwise statement, for names of kernels (cheap to generate)."""

    kernel: str
    params: bool = False
    schedules: tuple = (None,)

    def sizes(self, small: bool = False) -> dict:
        return {"N": 40}

    def text(self) -> str:
        k = self.kernel
        return f"const N = 40\nkernel {k}(X: f32[N]) -> ({k}: f32[N]) {{\n  {k}[i] = X[i] * 2.0\n}}\n"


@dataclass
class Norm:
    """RMSNorm: a row reduction (a tile `Reduce`, not a matrix product), a row statistic broadcast along the
    row (computed row by row on the 910B), a loop bound to the grid that has an iterator's name (`l_i`), a
    float constant.  Every name it gives is a field."""

    kernel: str = "g"
    X: str = "X"
    w: str = "w"
    ss: str = "ss"
    r: str = "r"
    Y: str = "Y"
    M: str = "M"
    N: str = "N"
    eps: str = "eps"
    i: str = "i"
    j: str = "j"
    jo: str = "jo"
    jj: str = "jj"
    params: bool = False
    # rows: a row per program; split: its columns in steps of 32; None: program order
    schedules: tuple = ("rows", "split", None)

    def sizes(self, small: bool = False) -> dict:
        return {self.M: 3, self.N: 80}

    def text(self) -> str:
        X, w, ss, r, Y, i, j = self.X, self.w, self.ss, self.r, self.Y, self.i, self.j
        return "\n".join([
            f"const {self.M} = 3, {self.N} = 80",
            f"const {self.eps} = 1e-6",
            f"kernel {self.kernel}({X}: bf16[{self.M}, {self.N}], {w}: bf16[{self.N}]) -> ({Y}: bf16[{self.M}, {self.N}]) {{",
            f"  {ss}[{i}] = sum({j}) {X}[{i}, {j}] * {X}[{i}, {j}] accum f32",
            f"  {r}[{i}] = rsqrt({ss}[{i}] / {self.N} + {self.eps})",
            f"  {Y}[{i}, {j}] = {X}[{i}, {j}] * {r}[{i}] * {w}[{j}]",
            "}",
            f"schedule rows {{\n  compute_at({r}, {Y}.{i})\n  compute_at({ss}, {Y}.{i})\n  bind({Y}.{i}, grid.x)\n}}",
            f"schedule split {{\n  {self.jo}, {self.jj} = split({Y}.{j}, 32)\n  bind({Y}.{i}, grid.x)",
            f"  compute_at({r}, {Y}.{i})\n  compute_at({ss}, {Y}.{i})\n}}",
        ]) + "\n"


def norm_tensors(names) -> Norm:
    padded = list(names) + [f"X{n}" for n in range(5 - len(names))]
    return Norm(X=padded[0], w=padded[1], ss=padded[2], r=padded[3], Y=padded[4])


def norm_indices(names) -> Norm:
    """Iterators, the split's loops and the float constant."""
    padded = list(names) + [f"x{n}" for n in range(5 - len(names))]
    return Norm(i=padded[0], j=padded[1], jo=padded[2], jj=padded[3], eps=padded[4])


TARGETS = [("nvidia", "triton"), ("nvidia", "tilelang"), ("ascend-950", None), ("ascend-910b", None)]

# Every name in every role (generation only), as programs of many names each.  Where a role's names only
# reach derived identifiers (iterators, the operands and reduction of the product), a selection from every
# category; loop variables and sizes are identifiers themselves: every name.
ROLES = {
    "tensor": lambda: ([in_tensors(c) for c in chunks(HOSTILE, 40)] + [as_tensors(c) for c in chunks(RUN_NAMES, 5)]
                       + [norm_tensors(c) for c in chunks(RUN_NAMES, 5)]),
    "iterator": lambda: ([as_iterators(c) for c in chunks(for_indices(RUN_NAMES), 7)]
                         + [norm_indices(c) for c in chunks(for_indices(RUN_NAMES), 5)]),
    "loop": lambda: [as_loops(c) for c in chunks(for_indices(HOSTILE), 7)],
    "size": lambda: [as_sizes(c) for c in chunks(for_indices(HOSTILE), 3)],
    "kernel": lambda: [Scale(n) for n in HOSTILE],
}


def targets_of(p) -> list:
    return TARGETS[:1] if p.params else TARGETS  # run-time sizes: Triton only (as_sizes)


def emitted(p, schedule, target, backend) -> str:
    prog = loads(p.text(), "hostile.tdsl", sizes=None if p.params else p.sizes(small=schedule is None))
    return generate(prog, schedule, target=target, backend=backend)


# ---------------------------------------------------------------- what every module must satisfy


@dataclass
class _Scope:
    bound: set = field(default_factory=set)
    loaded: set = field(default_factory=set)


def _scopes(tree: ast.Module):
    """(the module's scope, one scope per function): the names each binds and reads.  Decorators, annotations
    and defaults are read at module level; generated modules nest no functions or classes."""
    module, functions = _Scope(), {}
    module_bindings = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            module_bindings.append(node.name)
            for expr in node.decorator_list + [a.annotation for a in node.args.args if a.annotation] + node.args.defaults:
                module.loaded |= _names(expr, ast.Load)
            scope = _Scope(bound={a.arg for a in node.args.args})
            for stmt in node.body:
                scope.bound |= _names(stmt, ast.Store)
                scope.loaded |= _names(stmt, ast.Load)
            assert not any(isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ClassDef)) for s in node.body
                           for n in ast.walk(s)), "generated functions nest no functions"
            functions[node.name] = scope
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module_bindings += [a.asname or a.name.split(".")[0] for a in node.names]
        else:
            stored = _names(node, ast.Store)
            module_bindings += sorted(stored)
            module.loaded |= _names(node, ast.Load)
    module.bound = set(module_bindings)
    return module, functions, module_bindings


def _names(node, ctx) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def assert_nothing_shadowed(text: str) -> None:
    tree = ast.parse(text)
    module, functions, bindings = _scopes(tree)
    twice = {n for n in bindings if bindings.count(n) > 1}
    assert not twice, f"bound twice at module level: {twice}"
    rebound = rebound_loop_variables(text)
    assert not rebound, f"loops rebind enclosing loops' variables: {rebound}"
    # names some part of the module reads as module-level names or builtins
    globals_read = module.loaded | {n for s in functions.values() for n in s.loaded - s.bound}
    python = set(dir(builtins)) | set(keyword.kwlist)
    assert not module.bound & python, f"module-level names shadow builtins: {module.bound & python}"
    for name, scope in functions.items():
        assert not scope.bound & python, f"{name} binds builtins: {scope.bound & python}"
        assert not scope.bound & globals_read, f"{name} binds names the module reads as globals: {scope.bound & globals_read}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("triton" in ast.unparse(d) for d in node.decorator_list):
            params = {a.arg for a in node.args.args} - {"INTERPRET", "SOFTWARE", "x"}  # the module's own
            clash = params & TRITON_KERNEL
            assert not clash, f"{node.name}: parameters named like Triton's launch options or binder locals {clash}"


def test_reserved_names_cover_python_and_triton_launch_options():
    """Triton's launch keywords are the CUDA backend's options: the list in names.py must have them all."""
    pytest.importorskip("triton")
    from triton.backends.nvidia.compiler import CUDAOptions

    assert {f.name for f in dataclasses.fields(CUDAOptions)} | {"grid", "warmup"} <= TRITON_KERNEL
    assert set(dir(builtins)) | set(keyword.kwlist) | TRITON_KERNEL <= RESERVED


@pytest.mark.parametrize("example, schedule, target, backend", [
    ("gemm_silu", "fused", "h100", "triton"),  # bf16 loads, stores and rounding
    ("quant_gemm", "separate", "h100", "triton"),  # E4M3
    ("mha_fa", "flash", "h100", "triton"),
    ("gemm_silu", "fused", "h100", "tilelang"),
    ("quant_gemm", "separate", "ascend-910b", None),
    ("rmsnorm", "row_per_program", "ascend-950", None),
])
def test_every_module_level_name_of_the_templates_is_reserved(example, schedule, target, backend):
    """The helpers, tables and imports a generated module defines at its top level are reserved
    (`names.MODULE_LEVEL`), so no program name can shadow them: a new template helper must be added there."""
    from tdsl.backends.common.names import MODULE_LEVEL

    prog = load(EXAMPLES / f"{example}.tdsl")
    tree = ast.parse(generate(prog, schedule, target=target, backend=backend))
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    # the program's own names (its kernel and the kernels derived from it) are printed as the program spells them
    ours = {n for n in defined if n.startswith("_") or n.isupper() or n in ("os", "math", "np", "torch", "triton",
                                                                             "tl", "tilelang", "T", "libdevice")}
    assert ours and ours <= MODULE_LEVEL, sorted(ours - MODULE_LEVEL)


def test_reserved_names_cover_the_helpers_tilelang_kernels_call():
    """A program name spelled like a function of CUDA_HELPERS would be a kernel parameter that hides it."""
    from tdsl.backends.common.names import free_name
    from tdsl.backends.tilelang.emit import CUDA_HELPERS

    helpers = {m for text in CUDA_HELPERS.values() for m in re.findall(r"\b(\w+)\(", text) if m.startswith("tdsl")}
    assert helpers and all(free_name(h, set()) != h for h in helpers)


@pytest.mark.skipif(lower_module is None or (shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME")),
                    reason="needs tilelang and nvcc")
def test_cpp_names_in_every_role_compile_with_nvcc(tmp_path):
    """TVM renames the program's names around a few C keywords only: tensors named `new` or `half_t` broke nvcc
    before names.py reserved C++'s keywords and the lowerings' types and functions.  Tensors, iterators and loops
    named so, in one TileLang kernel of a pipelined product with masks, compiled for sm_90a."""
    from tdsl.backends.tilelang.lowering import compile_cubin

    p = Gemm(A="new", B="half_t", C="this", Y="template", outputs=(("float4", ("typename", "uint2")),),
             i="namespace", j="event_t", k="bfloat16_t", io="operator", jo="fp8_e4_t", ii="uint1", jj="auto",
             ko="f_0_kernel", kk="make_float2", schedules=("grid",))
    module = load_module(emitted(p, "grid", "nvidia", "tilelang"), tmp_path / "cpp_names.py")
    for name in module.KERNELS:
        assert f"{name}_kernel" in compile_cubin(module, name).get_kernel_source()


# ---------------------------------------------------------------- every name in every role: generation


def _role_cases():
    for role, build in ROLES.items():
        for n, p in enumerate(build()):
            yield pytest.param(p, id=f"{role}-{n}")


@pytest.mark.parametrize("program", list(_role_cases()))
def test_every_name_in_every_role_gives_modules_where_nothing_is_shadowed(program):
    for schedule in program.schedules:
        for target, backend in targets_of(program):
            text = emitted(program, schedule, target, backend)
            try:
                assert_nothing_shadowed(text)
                if target == "ascend-910b":
                    assert check_module(text) == []
            except AssertionError as err:
                raise AssertionError(f"{target}/{backend} schedule {schedule}: {err}\n{program.text()}") from None


# ---------------------------------------------------------------- a selection, run on every backend


def _run_cases():
    names, indices = RUN_NAMES, for_indices(RUN_NAMES)
    programs = {
        "inputs-outputs": in_tensors(names, schedules=("fused", None)),
        "case": in_tensors(["t", "T", "tl", "Tl", "TL", "range", "Range", "torch", "Torch", "KERNELS", "Kernels"],
                           schedules=("grid",)),
        "tensors": as_tensors(names[:5]),
        "tensors-2": as_tensors(names[5:10]),
        "iterators": as_iterators(indices[:7]),
        "iterators-2": as_iterators(indices[14:21]),
        "loops": as_loops(indices[:7]),
        "loops-2": as_loops(indices[21:28]),
        "norm-tensors": norm_tensors(["l_i", "T", "r_1", "v_ss", "tl"]),
        "norm-indices": norm_indices(["range", "l0", "bx", "vid", "INTERPRET"]),
        "sizes": as_sizes(["range", "tl", "T"]),
        "sizes-2": as_sizes(["pid_x", "bx", "l0"]),
        "sizes-3": as_sizes(["INTERPRET", "num_warps", "_check"]),
    }
    programs.update({f"kernel-{n}": as_kernel(n) for n in ["tl", "T", "range"]})
    programs.update({f"kernel-{n}": Scale(n) for n in ["torch", "_check", "KERNELS", "f_0", "tuple", "num_warps"]})
    for name, p in programs.items():
        for schedule in p.schedules:
            yield pytest.param(p, schedule, id=f"{name}-{schedule}")


@pytest.mark.parametrize("program,schedule", list(_run_cases()))
def test_hostile_programs_compute_the_program_on_every_backend(program, schedule, tmp_path):
    sizes = program.sizes(small=schedule is None)
    model = loads(program.text(), "hostile.tdsl", sizes=sizes).schedule().model
    inputs = random_inputs(model, seed=7)
    reference = interpret(model, loads(program.text(), "hostile.tdsl", sizes=sizes).schedule().time_map(), inputs)
    for target, backend in targets_of(program):
        text = emitted(program, schedule, target, backend)
        assert_nothing_shadowed(text)
        where = f"{target}/{backend} schedule {schedule}"
        if backend == "triton":
            outputs = _run_triton(text, model, inputs, tmp_path / "triton.py")
        elif target == "nvidia":
            outputs = None
            if lower_module is not None:
                assert lower_module(load_module(text, tmp_path / "tilelang.py"), "sm_90a")
        else:
            if target == "ascend-950" and lower_module is not None:
                assert lower_module(load_module(text, tmp_path / "ascend950.py"), "ascend")
            outputs = simulate(text, inputs, target, sizes=_size_identifiers(program, schedule, sizes)).tensors
        for t in model.outputs() if outputs is not None else []:
            result = compare(reference[t.name].astype(np.float32), outputs[t.name].astype(np.float32), t.dtype)
            assert result.ok, f"{where}: {t.name}: {result.summary()}"


def _run_triton(text, model, inputs, path) -> dict:
    """Call the launcher by the module's names for the kernel and its outputs (RENAMED), outputs as keywords."""
    from tdsl.backends.triton.interpreter_bounds import checked_memory

    module = load_module(text, path)
    renamed = getattr(module, "RENAMED", {})
    launch = getattr(module, renamed.get(model.name, model.name))
    args = [to_torch(inputs[t.name], t.dtype, "cpu") for t in model.inputs()]
    outs = {renamed.get(t.name, t.name): to_torch(np.full(t.shape, np.nan, np.float32), t.dtype, "cpu")
            for t in model.outputs()}
    with checked_memory():
        launch(*args, **outs)
    return {t.name: outs[renamed.get(t.name, t.name)].float().numpy() for t in model.outputs()}


def _size_identifiers(program: Gemm, schedule, sizes: dict) -> dict:
    """Run-time sizes by the identifiers the module gives them (its T.dynamic names)."""
    if not program.params:
        return {}
    names = ModuleNames(lower(loads(program.text(), "hostile.tdsl").schedule(schedule)))
    return {names.var(n): v for n, v in sizes.items()}


# ---------------------------------------------------------------- the module's names


def test_a_name_is_renamed_only_when_it_collides_and_then_everywhere_the_same():
    p = Gemm(A="tl", B="range", outputs=(("acc_C", ("i", "j")), ("Cp_i", ("i", "j"))), inputs=("f_0", "pid_x"))
    text = emitted(p, "grid", "nvidia", "triton")
    renamed = re.search(r"^RENAMED = (.*)$", text, re.M).group(1)
    assert ast.literal_eval(renamed) == {"tl": "tl_1", "range": "range_1"}  # program names not reserved: kept
    assert "def f(tl_1, range_1, f_0, pid_x, Y=None, acc_C=None, Cp_i=None):" in text
    assert "f_0_1[" in text  # the kernel function yields to the tensor f_0
    assert re.search(r"^    acc_C_1 = tl\.full", text, re.M)  # the accumulator yields to the output acc_C
    assert re.search(r"^        Cp_i_1 = ", text, re.M)  # and C's partial-step iterator to the output Cp_i
    assert "tl.store(acc_C + " in text and "tl.store(Cp_i + " in text


def test_a_name_that_collides_with_nothing_keeps_its_spelling_beside_a_renamed_one():
    text = emitted(Gemm(A="T", B="T_1", C="t"), "grid", "nvidia", "tilelang")  # T is TileLang's namespace
    assert ast.literal_eval(re.search(r"^RENAMED = (.*)$", text, re.M).group(1)) == {"T": "T_2"}
    assert "def f(T_2, T_1, Y=None):" in text and "acc_t = T.alloc_fragment" in text  # t differs from T


def test_ordinary_names_print_as_before():
    text = emitted(Gemm(), "grid", "nvidia", "triton")
    assert "RENAMED" not in text and "def f(A, B, Y=None):" in text and "acc_C = tl.full" in text


# ---------------------------------------------------------------- names the frontend refuses


@pytest.mark.parametrize("role,build", [
    ("tensor", lambda n: Gemm(Y=n)), ("kernel", lambda n: Gemm(kernel=n)), ("iterator", lambda n: Gemm(i=n)),
    ("size", lambda n: Gemm(M=n)), ("loop", lambda n: Gemm(io=n)),
])
@pytest.mark.parametrize("name", ["None", "lambda", "class", "if", "__x", "__init__"])
def test_python_keywords_and_dunder_names_are_refused_with_a_located_error(role, build, name):
    _assert_refused(build(name), name)


@pytest.mark.parametrize("role,build", [
    ("iterator", lambda n: Gemm(i=n)), ("size", lambda n: Gemm(M=n)), ("loop", lambda n: Gemm(io=n)),
])
@pytest.mark.parametrize("name", ["min", "max", "floor", "MOD"])
def test_isl_keywords_are_refused_as_iterators_sizes_and_loops(role, build, name):
    _assert_refused(build(name), name)


def _assert_refused(p: Gemm, name: str) -> None:
    with pytest.raises(TdslError) as err:
        prog = loads(p.text(), "hostile.tdsl")
        prog.schedule("grid")
    message = str(err.value)
    assert re.match(r"hostile\.tdsl:\d+:\d+: error: ", message), message
    assert f"'{name}'" in message, message


# ---------------------------------------------------------------- the chapter's swiglu_quant: a tensor named T


@pytest.mark.skipif(lower_module is None, reason="needs tilelang")
@pytest.mark.parametrize("target", ["nvidia", "ascend-950"])
@pytest.mark.parametrize("schedule", ["fused", None])
def test_swiglu_quant_with_its_tensor_T_lowers_for_tilelang(target, schedule, tmp_path):
    sizes = None if schedule else {"M": 5, "N": 1030}  # program order: one tile per statement, so small sizes
    prog = load(EXAMPLES / "swiglu_quant.tdsl", sizes=sizes)
    text = generate(prog, schedule, target=target, backend="tilelang")
    assert_nothing_shadowed(text)
    module = load_module(text, tmp_path / "swiglu_quant.py")
    assert set(lower_module(module, "sm_90a" if target == "nvidia" else "ascend")) == set(module.KERNELS)
    if schedule is None:
        assert module.RENAMED == {"T": "T_1"} and "T_1: T.Tensor(" in text
    if target == "ascend-950":
        small = load(EXAMPLES / "swiglu_quant.tdsl", sizes={"M": 5, "N": 1030})
        model = small.schedule().model
        inputs = random_inputs(model, seed=3)
        reference = interpret(model, small.schedule().time_map(), inputs)
        sim = simulate(generate(small, schedule, target=target), inputs, target)
        for name in ("Q",) + (("T",) if schedule is None else ()):  # T is a GM temporary in program order
            t = model.tensors[name]
            result = compare(reference[name].astype(np.float32), sim.tensors[name].astype(np.float32), t.dtype)
            assert result.ok, f"{name}: {result.summary()}"


# ---------------------------------------------------------------- ahead-of-time compilation of renamed kernels


def test_renamed_kernels_and_parameters_compile_ahead_of_time_for_sm90(tmp_path):
    """backends/triton/aot.py finds a renamed kernel function (`f_0_1`, beside the tensor `f_0`) and takes its
    renamed parameters (`num_warps_1`, `grid_1`) by position."""
    from tdsl.backends.triton.aot import compile_in_subprocess

    p = in_tensors(["num_warps", "grid", "f_0", "debug", "pid_x", "tl"], schedules=("fused",))
    prog = loads(p.text(), "hostile.tdsl", sizes=p.sizes())
    path = tmp_path / "hostile_aot.py"
    path.write_text(generate(prog, "fused"))
    program = lower(prog.schedule("fused"))
    results = compile_in_subprocess(path, program.kernels, program=program)
    assert set(results) == {"f_0"} and results["f_0"]["shared"] > 0
