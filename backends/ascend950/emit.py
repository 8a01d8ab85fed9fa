"""Ascend 950: mainline TileLang's Ascend dialect (`tilelang.ascend.language`, tilelang 0.1.15).

The kernel printer of the NVIDIA TileLang backend, with the Ascend memory
hierarchy instead of shared memory and registers:

| tile program                         | Ascend 950 (cube = AIC, vector = AIV)                             |
|--------------------------------------|-------------------------------------------------------------------|
| grid axes                            | `with T.Kernel(n_blocks) as cid` (1-D), decomposed row-major      |
| `Dot` of one dtype, unmasked operands | cube: `T.copy` GM->L1 (`T.alloc_l1`), L1->L0A/L0B, `T.gemm` into L0C, `clear_accum` on the first step |
| any other `Dot` (f32 / mixed / masked)| vector: operands GM->UB, exact f32 multiply-add in `T.SimtVF`    |
| elementwise, reductions, rounding    | vector: UB buffers (`T.alloc_shared`), `T.Parallel` in `T.SimtVF(threads=...)` |
| L0C result read by vector work       | `T.copy(acc_l0c, C_ub)` (L0C -> UB), then rounded in UB          |
| L0C result stored as f32             | `T.copy(acc_l0c, C[r0, c0])` (fixpipe L0C -> GM)                 |

Core assignment and synchronisation are left to the dialect's automatic
scheduler, which puts copies into L1/L0 and `T.gemm` on the AIC and the
SIMT functions on the AIV (the tests check that in the AscendC source).
Every buffer's bytes are summed per scope and checked against the target's
capacities (`targets.py`); a schedule that does not fit is a `BackendError`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path


from tdsl.backends.common.launcher import launch_order
from tdsl.backends.common.module import dynamic_sizes, module_text
from tdsl.backends.tilelang.emit import (BYTES, FUNCTIONS, TL_DTYPES, KernelPrinter, index_code,
                                       kernel_arrays, operand_region, shape_code)
from tdsl.compiler.analysis.placement import VECTOR, matrix_statements, unit_of
from tdsl.compiler.lower.tileir import simplify
from tdsl.compiler.errors import InternalError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.ascend910b import axes_not_last

from tdsl.backends.ascend910b.common import subexpressions
from tdsl.compiler.lower.tileir import registers_read
from tdsl.backends.common.ascend_capacity import TARGETS, check_capacity
from tdsl.backends.common.extrema import needs_zero_order
from tdsl.backends.common.names import ModuleNames

SIMT_THREADS = 128
# max and min are IEEE 754-2019's maximum and minimum, +0.0 above -0.0 (backends/common/extrema.py): AscendC's Max /
# Min compare, so two zeros are added instead where both operands are zeros.
IEEE_EXTREMA = {
    "max": "T.if_then_else(T.And({0} == 0.0, {1} == 0.0), {0} + {1}, T.max({0}, {1}))",
    "min": "T.if_then_else(T.And({0} == 0.0, {1} == 0.0), -(-{0} + -{1}), T.min({0}, {1}))",
}


class Ascend950Printer(KernelPrinter):
    # every pipe of the core completes what it was given (AscendC `asc_sync()`): values through memory are the
    # vector cores' alone (compiler/lower/passes/recurrence.py `refuse_cube_recurrences`), each reading its own
    BARRIER = 'T.ascend_pipe_barrier("PIPE_ALL")'
    vector_scope = "UB"
    functions = FUNCTIONS  # the AscendC spellings (NVIDIA's __expf has no counterpart here)
    helper_functions = frozenset()  # no CUDA source here
    ordered_keys = False  # a max / min tile reduction is T.reduce_max / T.reduce_min of the floats
    # an operand hidden from TVM's simplifier (backends/tilelang/ieee.py): the Ascend codegen spells a round trip
    # through int32 bits as a local and a pointer cast (NVIDIA's through float64 keeps loads vectorised)
    HIDDEN = 'T.reinterpret(T.reinterpret({0}, "int32"), "float32")'

    def __init__(self, program, kernel, names=None, target="ascend-950"):
        super().__init__(program, kernel, names)
        self.target = TARGETS[target]
        self.cube = matrix_statements(kernel)  # the products on the cube (compiler/analysis/placement.py)
        self.vf_depth = 0
        self.ub_shapes = {}  # UB buffer -> (shape, dtype)
        self.reuse = None  # a dead value's UB buffer the statement being emitted writes its value into

    def render(self) -> dict:
        out = super().render()
        check_capacity(self.kernel.name, self.target, self.footprint)
        out["cube"] = sorted(self.cube)
        return out

    def call(self, func: str, args: list, zeros: bool = True) -> str:
        if func in IEEE_EXTREMA and zeros and needs_zero_order(args):
            return IEEE_EXTREMA[func].format(*args)
        return super().call(func, args, zeros)

    def barrier_code(self, what: str) -> str:
        return self.BARRIER  # no reload helper: the vector functions read GM through pointers the barrier orders

    def _params(self) -> list[str]:
        params = [f'{self.tensor(t.name)}: T.Tensor({self.names.shape(t.shape)}, "{TL_DTYPES[t.dtype]}")'
                  for t in kernel_arrays(self.kernel)]
        return params + [f"{self.names.var(h.var)}: T.int32" for h in self.kernel.host]  # the host loops' values

    def alloc(self, name, shape, dtype, scope, note="", copies=1):
        shape = list(shape) or [1]
        if self.reuse is not None and scope == self.vector_scope and self.ub_shapes[self.reuse] == (shape, dtype):
            buf, self.reuse = self.reuse, None
            return buf
        if self.declared_before(name, shape, dtype, scope):
            return name
        call = {"UB": "T.alloc_shared", "L1": "T.alloc_l1", "L0A": "T.alloc_l0a", "L0B": "T.alloc_l0b",
                "L0C": "T.alloc_l0c", "fragment": "T.alloc_shared", "shared": "T.alloc_shared"}[scope]
        scope = "UB" if scope in ("fragment", "shared") else scope
        self.allocs.append(f'{name} = {call}({shape_code(shape)}, "{TL_DTYPES[dtype]}")  # {scope}'
                           + (f": {note}" if note else ""))
        self.footprint[scope] = self.footprint.get(scope, 0) + math.prod(shape) * BYTES[dtype] * copies
        if scope == "UB":
            self.ub_shapes[name] = (shape, dtype)
        return name

    # ------------------------------------------------------------ values: a dead one's UB buffer is reused

    def _compute(self, op: T.Compute) -> None:
        donor = self._dead_value(op)
        if donor is not None:
            stmt, buf = donor
            self.emit(f"# {op.stmt} is written over {stmt} in {buf}: nothing reads {stmt} after it, and it reads "
                      f"{stmt} lane by lane")
            self.reuse = buf
        try:
            super()._compute(op)
        finally:
            self.reuse = None

    def _dead_value(self, op: T.Compute):
        """(statement, UB buffer) of a value this statement may write its own over: outside serial loops, an f32
        value of the same tile that no later statement of the kernel reads, and that this one reads only lane
        for lane (each lane reads its element before it writes it, so no lane sees another's result)."""
        body = self.kernel.body
        if self.loops or not op.tile.axes or not any(o is op for o in body):
            return None
        at = next(n for n, o in enumerate(body) if o is op)
        later = set().union(*[registers_read(o) for o in body[at + 1:]]) if at + 1 < len(body) else set()
        shape, iters = [a.size for a in op.tile.axes], [a.iter for a in op.tile.axes]
        lanewise = _lanewise_reads(op.value, len(shape))
        for stmt in sorted(registers_read(op) - later):
            value = self.values.get(stmt)
            if (value is not None and lanewise.get(stmt) and value.iters == iters
                    and self.ub_shapes.get(value.buffer) == (shape, "f32")):
                return stmt, value.buffer
        return None

    # ------------------------------------------------------------ grid: one dimension of AI cores

    def _kernel_head(self) -> None:
        k = self.kernel
        vars_, exts, lowers, axes = [], [], [], []
        for axis in sorted(k.grid, key=lambda a: "xyz".index(a.axis)):
            for var, ext, lo in zip(axis.vars, axis.extents, axis.lowers):
                vars_.append(self.vars[var])
                exts.append(index_code(simplify(ext), self.vars))
                lowers.append(simplify(lo))
                axes.append(axis.axis)
        par = lambda x: x if x.isidentifier() or x.isdigit() else f"({x})"  # noqa: E731
        total = " * ".join(par(e) for e in exts) if exts else "1"
        cid = self.local(("core",), "cid")  # the block: one AI core
        self.head_lines = [f"with T.Kernel({total}) as {cid}:"]
        for n, var in enumerate(vars_):
            inner = " * ".join(par(x) for x in exts[n + 1:])
            q = f"{cid} // {par(inner) if len(exts) - n > 2 else inner}" if inner else cid
            start = "" if lowers[n] == T.Const(0) else f"{index_code(lowers[n], self.vars)} + "
            self.emit(f"{var} = {start}{q} % {par(exts[n])}  # grid.{axes[n]}" if len(vars_) > 1
                      else f"{var} = {start}{cid}  # grid.{axes[n]}")

    # ------------------------------------------------------------ vector sections

    def enter_vector(self) -> None:
        if self.vf_depth == 0:
            self.emit(f"with T.SimtVF(threads={SIMT_THREADS}):  # vector core (AIV)")
            self.depth += 1
        self.vf_depth += 1

    def exit_vector(self) -> None:
        self.vf_depth -= 1
        if self.vf_depth == 0:
            self.depth -= 1

    # ------------------------------------------------------------ accumulators

    def launch_order(self) -> None:
        """The AI cores take the blocks of T.Kernel in the runtime's order: `launch(group=)` changes nothing here."""
        if self.kernel.grid_group > 1:
            self.emit(f"# launch group={self.kernel.grid_group}: no block order to set on the 950 (the runtime "
                      f"hands blocks to the AI cores)")
        if self.kernel.persistent:
            self.emit("# launch persistent=true: one block per tile (the runtime hands blocks to the AI cores)")

    def acc_alloc(self, op, shape) -> str:
        if op.on_matrix:
            planned = self.cache_write(op.stmt)
            note = f"cube accumulator{f' (cache_write {op.stmt} -> {planned.scope})' if planned else ''}"
            return self.alloc(self.local(("acc", op.stmt, "L0C"), f"acc_{op.stmt}"), shape, "f32", "L0C", note)
        return self.alloc(self.local(("acc", op.stmt, "UB"), f"acc_{op.stmt}"), shape, "f32", "UB", "vector accumulator")

    def acc_fill(self, op, buf) -> None:
        if op.on_matrix:
            if op.start is not None:
                raise InternalError(f"{op.stmt} starts from a value in L0C (placement.sums_on_vector keeps it in UB)")
            self.emit(f"# {buf} is cleared by the first T.gemm (clear_accum)")
            return
        super().acc_fill(op, buf)

    def fill(self, buf: str, shape, value: str) -> None:
        lanes = self.lane_list(len(shape))
        self.enter_vector()
        self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, shape)) or '1'}):")
        self.emit(f"    {buf}[{', '.join(lanes) if shape else '0'}] = {f'({value})' if value.startswith('-') else value}")
        self.exit_vector()

    # ------------------------------------------------------------ matrix products

    def dot(self, op: T.AccUpdate) -> None:
        if unit_of(op) == VECTOR:
            return self._vector_dot(op)
        (la, sa, da), (lb, sb, db) = [(st.tensor, list(st.shape), st.dtype) for st in op.staged]
        ta, tb = (st.transposed for st in op.staged)
        acc, shape = self.accs[op.stmt]
        a1 = self._l1(op, 0)
        b1 = self._l1(op, 1)
        a0 = self.alloc(self.local(("L0A", la), f"{la}_l0a"), sa, da, "L0A", "cube operand")
        b0 = self.alloc(self.local(("L0B", lb), f"{lb}_l0b"), sb, db, "L0B", "cube operand")
        self.emit(f"T.copy({a1}, {a0})  # L1 -> L0A")
        self.emit(f"T.copy({b1}, {b0})  # L1 -> L0B")
        flags = (", transpose_A=True" if ta else "") + (", transpose_B=True" if tb else "")
        if op.partial.sum_on_vector:  # the step's product alone, added to the sum the vector cores hold
            return self._sum_on_vector(op, a0, b0, flags)
        first = [f"{self.vars[l.var]} == {index_code(simplify(l.lower), self.vars)}"
                 for l in self.loops[self.acc_depth[op.stmt]:]]
        clear = "True" if not first else (first[0] if len(first) == 1 else _and(first))
        self.emit(f"T.gemm({a0}, {b0}, {acc}{flags}, clear_accum={clear})  # cube core (AIC)")

    def _sum_on_vector(self, op: T.AccUpdate, a0: str, b0: str, flags: str) -> None:
        """A sum the vector cores rescale (online): the cube forms this step's product in L0C, the vector cores
        add a UB copy of it to the sum in UB."""
        acc, shape = self.accs[op.stmt]
        part = self.alloc(self.local(("step product", op.stmt), f"part_{op.stmt}"), shape, "f32", "L0C",
                          "one step's product")
        self.emit(f"T.gemm({a0}, {b0}, {part}{flags}, clear_accum=True)  # cube core (AIC)")
        ub = self.alloc(self.local(("step product in UB", op.stmt), f"part_{op.stmt}_ub"), shape, "f32", "UB",
                        "one step's product, for the vector cores")
        self.emit(f"T.copy({part}, {ub})  # L0C -> UB")
        self.add_into(acc, ub, shape, op.accum)

    def _l1(self, op, n: int) -> str:
        """Operand n's L1 copy (`op.staged`, compiler/analysis/placement.py), filled from GM, or from UB for an
        operand the vector cores hold (P in attention's P·V after online())."""
        st, load = op.staged[n], (op.partial.lhs, op.partial.rhs)[n]
        if isinstance(load, T.Preloaded):
            return self.preloads[load.name]
        if isinstance(load, T.RegOperand):
            ub = self.register_operand(op, replace(st, scope=self.vector_scope), load)  # cast where it is held
            buf = self.alloc(self.local(("L1", load.reg.stmt), f"{load.reg.stmt}_l1"), list(st.shape), st.dtype,
                             "L1", f"{load.reg.stmt} from the vector cores")
            self.emit(f"T.copy({ub}, {buf})  # UB -> L1 (vector cores to the cube)")
            return buf
        shape, cache = list(st.shape), st.cache
        if not self.region_copy(op, load):  # (the cube's operands are unmasked)
            return self._gathered_l1(op, load, shape, st.dtype)
        note = (f"cache_read {load.tensor} -> {cache.scope} at {cache.loop}" if cache
                else f"{load.tensor} staged for the cube (no cache_read in the schedule)")
        buf = self.alloc(self.local(("L1", load.tensor), f"{load.tensor}_l1"), shape, st.dtype, st.scope,
                         note + (f", x{st.stages} stages" if st.stages > 1 else ""))
        self.footprint["L1"] += math.prod(shape) * BYTES[st.dtype] * (st.stages - 1)
        self.emit(f"T.copy({operand_region(self.tensor(load.tensor), load, op.tile, self.vars)}, {buf})  # GM -> L1")
        return buf

    def _gathered_l1(self, op, load: T.Load, shape: list, dtype: str) -> str:
        """A cube operand no one GM -> L1 copy moves: a tile of a tensor the schedule folds (fold_storage: a region
        could cross the planes' wrap-around), or one whose axes are not the tensor's last dimensions (`A[i, q, k]`
        at one q: a copy moves the region's last two).  Gathered element by element into UB by the vector cores
        (`copy_in`), then UB -> L1."""
        ub = self.alloc(self.local(("gathered operand", load.tensor), f"{load.tensor}_ub"), shape, dtype, "UB",
                        f"{load.tensor}, gathered element by element")
        self.copy_in(op, load, ub, shape, dtype)
        buf = self.alloc(self.local(("L1", load.tensor), f"{load.tensor}_l1"), shape, dtype, "L1",
                         f"{load.tensor} from the vector cores")
        self.emit(f"T.copy({ub}, {buf})  # UB -> L1 (vector cores to the cube)")
        return buf

    def _vector_dot(self, op: T.AccUpdate) -> None:
        i, j, k = [a.iter for a in op.tile.axes]  # rows, columns, reduction (the Dot's layout)
        ta, tb = (st.transposed for st in op.staged)
        acc, shape = self.accs[op.stmt]
        size = {a.iter: a.size for a in op.tile.axes}
        a = self.stage_operand(op, 0, "ub")
        b = self.stage_operand(op, 1, "ub")
        self._fma_loop(op, a, ta, b, tb, acc, size[i], size[j], size[k])

    def region_copy(self, op, load) -> bool:
        # the Ascend copies move the region's last dimensions: a fixed index after a tile axis goes by element
        return super().region_copy(op, load) and not axes_not_last(load.indices, op.tile)

    def copy_in(self, op, load, buf, shape, dtype) -> None:
        if self.region_copy(op, load):
            scope = self.allocated[buf][2]
            self.emit(f"T.copy({operand_region(self.tensor(load.tensor), load, op.tile, self.vars)}, {buf})  # GM -> "
                      f"{scope}")
            return
        super().copy_in(op, load, buf, shape, dtype)

    # ------------------------------------------------------------ tile reductions: SIMT, one lane per result

    def tile_reduce(self, op, part, shape, red, acc, acc_shape, keys: bool = False) -> None:  # never keys here
        keep = [n for n in range(len(shape)) if n not in red]
        lanes = [self.lane(n) for n in range(len(shape))]
        self.emit(f"# {op.stmt}: {op.op} over tile axes {red} (vector core, one lane per result, in order)")
        self.enter_vector()
        # a result of rank 0 still needs one lane; it is numbered past the reduced axes' lanes, which it encloses
        outer = [lanes[n] for n in keep] or [self.lane(len(shape))]
        self.emit(f"for {', '.join(outer)} in T.Parallel({', '.join(str(shape[n]) for n in keep) or '1'}):")
        depth = 1
        for n in red:
            self.emit("    " * depth + f"for {lanes[n]} in T.serial({shape[n]}):")
            depth += 1
        idx = ", ".join(lanes[n] for n in keep) if acc_shape else "0"
        term = f"{part}[{', '.join(lanes)}]"
        combined = self.combine(op.op, f"{acc}[{idx}]", term, op.zeros)
        self.emit("    " * depth + f"{acc}[{idx}] = {self.round(op.accum, combined)}")
        self.exit_vector()

    # ------------------------------------------------------------ results

    def finish_buffer(self, op: T.AccFinish, acc: str, shape) -> str:
        if op.on_matrix:
            plain = op.tile.mask is None and list(op.lhs) == [a.iter for a in op.tile.axes]
            if op.store and not op.keep and op.dtype == "f32" and op.scale == 1.0 and plain:
                return acc  # stored straight from L0C (fixpipe)
            ub = self.alloc(self.local(("from L0C", op.stmt), f"{op.stmt}_ub"), shape, "f32", "UB",
                            "cube result for the vector core")
            self.emit(f"T.copy({acc}, {ub})  # L0C -> UB")
            acc = ub
        if op.dtype != "f32" or op.scale != 1.0:
            self.enter_vector()
            super().finish_buffer(op, acc, shape)
            self.exit_vector()
        return acc


def _lanewise_reads(expr, rank: int) -> dict:
    """stmt -> whether every register read of it in `expr` is lane for lane (axes 0, 1, ..., rank - 1)."""
    out: dict = {}

    def walk(e):
        if isinstance(e, T.Reg):
            out[e.stmt] = out.get(e.stmt, True) and tuple(e.axes) == tuple(range(rank))
        for c in subexpressions(e):
            walk(c)

    walk(expr)
    return out


def _and(terms: list[str]) -> str:
    code = terms[0]
    for t in terms[1:]:
        code = f"T.And({code}, {t})"
    return code


def _store(self, stmt, tile, lhs, dtype, buf) -> None:
    """DMA copies cannot convert: values are cast to the tensor's dtype in UB (inside a VF) before T.copy."""
    arg = next(t for t in self.kernel.tensors if t.name == stmt)
    axes = [a.iter for a in tile.axes]
    plain = tile.mask is None and axes and list(lhs) == axes and not self._planes(stmt)
    if arg.dtype == "f32" or not plain:
        return KernelPrinter.store(self, stmt, tile, lhs, dtype, buf)
    shape = [a.size for a in tile.axes]
    out = self.alloc(self.local(("stored", stmt), f"{stmt}_out"), shape, arg.dtype, "UB",
                     f"{stmt} in {arg.dtype} for the DMA to GM")
    lanes = [self.lane(n) for n in range(len(shape))]
    self.enter_vector()
    self.emit(f"for {', '.join(lanes)} in T.Parallel({', '.join(map(str, shape))}):")
    self.emit(f'    {out}[{", ".join(lanes)}] = T.Cast("{TL_DTYPES[arg.dtype]}", {buf}[{", ".join(lanes)}])')
    self.exit_vector()
    starts = [index_code(simplify(a.offset), self.vars) for a in tile.axes]
    self.emit(f"T.copy({out}, {self.tensor(stmt)}[{', '.join(starts)}])  # UB -> GM")


Ascend950Printer.store = _store


TEMPLATES = Path(__file__).parent / "templates"


def emit_module(program: T.TileProgram, **common) -> str:
    """The module text: the kernels of `program` and their launch order (templates/module.py.j2)."""
    names = ModuleNames(program)
    kernels = [Ascend950Printer(program, k, names).render() for k in program.kernels]
    return module_text(TEMPLATES, program, names, kernels, **common, dynamic=dynamic_sizes(program, names),
                       launches=launch_order(program, names))
