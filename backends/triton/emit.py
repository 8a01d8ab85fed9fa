"""Emit a Triton module from a tile program.

The module text comes from `templates/module.py.j2`; this file prints the
kernel bodies.  Every schedule decision (grid, serial loops, tile shapes,
masks, what stays in registers) is read from the tile program; nothing is
re-derived here.  Values are computed in f32 and rounded where the program
stores (`.to(tl.bfloat16)`), exactly where the tile program says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from tdsl.backends.common.dtypes import TRITON
from tdsl.backends.common.module import launcher_fields, module_text
from tdsl.backends.common.names import ModuleNames
from tdsl.backends.common.printer import PrinterBase, call_code, float_literal
from tdsl.backends.triton.index import Frame, condition_code, index_code, mask_code, strides
from tdsl.backends.triton.launcher import GRID_AXES, launcher
from tdsl.compiler.analysis.placement import VECTOR, unit_of
from tdsl.compiler.errors import InternalError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.tma import descriptors
from tdsl.compiler.lower.tileir import simplify
from tdsl.compiler.model import reduce_ops

TEMPLATES = Path(__file__).parent / "templates"

TL_DTYPES = TRITON  # backends/common/dtypes.py
DESCRIPTOR_DTYPES = {"bf16": "bf16", "f16": "fp16", "f32": "fp32"}  # Triton's names in a descriptor's type
F8_MAX = 448.0
NEGATIVE_ZERO = "_negative_zero()"  # the template's helper (see `_literal`)


def emit_module(program: T.TileProgram, **common) -> str:
    """The module text: the kernels of `program`, their helpers and torch launcher (templates/module.py.j2)."""
    names = ModuleNames(program)
    printers = [_KernelPrinter(program, k, names) for k in program.kernels]
    kernels = [p.render() for p in printers]
    return module_text(TEMPLATES, program, names, kernels, **common,
                       tensor_descriptors=any(descriptors(k) for k in program.kernels),
                       absent_terms=any(p.absent_terms for p in printers),
                       persistent=any(k.persistent for k in program.kernels),
                       negative_zero=any(NEGATIVE_ZERO in line for k in kernels for line in k["lines"]),
                       **launcher_fields(program, names, launcher(program, names)))


# ---------------------------------------------------------------- kernels


@dataclass
class _KernelPrinter(PrinterBase):
    program: T.TileProgram
    kernel: T.TileKernel
    names: ModuleNames
    lines: list = field(default_factory=list)
    depth: int = 0
    counter: int = 0
    loops: list = field(default_factory=list)
    acc_tiles: dict = field(default_factory=dict)  # statement -> its accumulator's tile (from its AccInit)
    absent_terms: bool = False  # a product with absent terms was printed: the module needs its helpers

    def __post_init__(self):
        self.locals = self.names.function()
        self.top = Frame([], {}, {}, self.names.variables)  # outside any tile: loop variables and sizes

    def render(self) -> dict:
        k = self.kernel
        params = [self.names.tensor(t.name) for t in k.tensors] + [self.names.var(s) for s in k.scalars]
        # typed, for ahead-of-time compilation (backends/triton/aot.py): Triton's name of the type it is given
        params += [f'{self.descriptor_name(tensor, box)}: "tensordesc<{DESCRIPTOR_DTYPES[self._dtype(tensor)]}'
                   f'[{", ".join(map(str, box))}]>"' for tensor, box in descriptors(k)]
        self._grid()
        for op in k.body:
            self._op(op)
        return {"name": self.names.kernel(k.name), "params": params, "lines": self.lines, "comment": k.comment}

    FRESH = "{stem}{n}"
    BARRIER = "tl.debug_barrier()"

    def loop_header(self, op: T.SerialLoop, lo: str, hi: str) -> str:
        var = self.loop_var(op.var)
        return f"for {var} in tl.range({lo}, {hi}, num_stages={op.stages}):" if op.stages else f"for {var} in range({lo}, {hi}):"

    def index(self, e: T.Expr) -> str:
        return index_code(e, self.top)

    def loop_var(self, var: str) -> str:
        return self.names.var(var)

    def value_name(self, stmt: str) -> str:
        """The register tile of a statement's (rounded) value."""
        return self.locals.local(("value", stmt), f"v_{stmt}")

    def acc_name(self, stmt: str) -> str:
        return self.locals.local(("acc", stmt), f"acc_{stmt}")

    def _grid(self) -> None:
        pids = self._grid_pids()
        for axis in self.kernel.grid:
            pid = pids[axis.axis]
            if len(axis.vars) == 1:
                lower = simplify(axis.lowers[0])
                start = "" if lower == T.Const(0) else f"{index_code(lower, self.top)} + "
                self.emit(f"{self.names.var(axis.vars[0])} = {start}{pid}  # grid.{axis.axis}")
                continue
            rest = self.locals.local(("program id", axis.axis), f"pid_{axis.axis}")
            self.emit(f"{rest} = {pid}")
            for var, extent, lower in reversed(list(zip(axis.vars, axis.extents, axis.lowers))):
                ext = index_code(simplify(extent), self.top)
                self.emit(f"{self.names.var(var)} = {index_code(simplify(lower), self.top)} + {rest} % {ext}")
                self.emit(f"{rest} = {rest} // {ext}")

    def _grid_pids(self) -> dict:
        """Each grid axis's program index: tl.program_id, or for a kernel launched in groups (`launch(group=G)`:
        TileKernel.grid_group) the x and y indices of the grouped order, decoded from one linear index (the
        launcher starts x * y programs on axis 0).  A persistent kernel (`TileKernel.persistent`) walks the
        linear indices of all its programs, a stride of the launched programs' count apart, and decodes each
        the same way (x fastest, then y, then z)."""
        pids = {axis.axis: f"tl.program_id({GRID_AXES[axis.axis]})" for axis in self.kernel.grid}
        group = self.kernel.grid_group
        extent = {axis.axis: " * ".join(f"({index_code(simplify(e), self.top)})" for e in axis.extents)
                  for axis in self.kernel.grid}
        if self.kernel.persistent:
            return self._persistent_walk(extent, group)
        if group == 1:
            return pids
        return {**pids, **self._grouped("tl.program_id(0)", extent, group)}

    def _persistent_walk(self, extent: dict, group: int) -> dict:
        """`for tile in tl.range(pid, programs, launched, flatten=True):` around the kernel's body (the depth stays
        one deeper), and each axis's index of that program."""
        tile = self.locals.local(("persistent", "tile"), "tile")
        total = " * ".join(extent[a] for a in ("x", "y", "z") if a in extent)
        self.emit("# one program per multiprocessor walks the programs of the grid (launch persistent=true)")
        self.emit(f"for {tile} in tl.range(tl.program_id(0), {total}, tl.num_programs(0), flatten=True):")
        self.depth += 1
        pids, rest = {}, tile
        if group > 1:  # the grouped order within each z
            if "z" not in extent:
                return self._grouped(tile, extent, group)
            xy = self.locals.local(("persistent", "xy"), "tile_xy")
            self.emit(f"{xy} = {tile} % ({extent['x']} * {extent['y']})")
            return {**self._grouped(xy, extent, group), "z": f"({tile} // ({extent['x']} * {extent['y']}))"}
        for axis in ("x", "y", "z"):
            if axis not in extent:
                continue
            last = axis == max(extent, key="xyz".index)
            pids[axis] = rest if last else f"({rest} % {extent[axis]})"
            rest = f"({rest} // {extent[axis]})"
        return pids

    def _grouped(self, pid_code: str, extent: dict, group: int) -> dict:
        """The x and y indices of linear index `pid_code` in the grouped order (`launch(group=G)`)."""
        pid, width, first, rows, x, y = (self.locals.local(("grouped order", n), n)
                                         for n in ("pid", "group_width", "group_first", "group_rows", "pid_x", "pid_y"))
        self.emit(f"# programs start in groups of {group} along grid.x, grid.y sweeping each group (launch group=)")
        self.emit(f"{pid} = {pid_code}")
        self.emit(f"{width} = {group} * {extent['y']}")
        self.emit(f"{first} = ({pid} // {width}) * {group}")
        self.emit(f"{rows} = tl.minimum({extent['x']} - {first}, {group})")
        self.emit(f"{x} = {first} + ({pid} % {width}) % {rows}")
        self.emit(f"{y} = ({pid} % {width}) // {rows}")
        return {"x": x, "y": y}

    # ------------------------------------------------------------ ops

    def _op(self, op) -> None:
        if isinstance(op, T.SerialLoop):
            self.serial(op, lambda body: [self._op(inner) for inner in body])
        elif isinstance(op, T.Compute):
            self.emit(f"# {self.text(op.stmt)}{self.tile_note(op.tile)}")
            frame = self._frame(op.stmt, op.tile)
            self.emit(f"{self.value_name(op.stmt)} = {self._round(op.dtype, self._value(op.value, frame))}")
            if op.store:
                self._store(op, frame)
        elif isinstance(op, T.AccInit):
            shape = "[" + ", ".join(str(a.size) for a in op.tile.axes) + "]"
            fill = _literal(reduce_ops.identity(op.op))
            self.emit(f"# {self.text(op.stmt)}")
            self.emit(f"# {op.stmt}: {op.op} accumulator ({op.accum}), tile {shape}")
            if op.start is None:
                self.emit(f"{self.acc_name(op.stmt)} = tl.full({shape}, {fill}, tl.float32)")
            else:
                start = self._value(op.start, self._frame(op.stmt, op.tile))  # rounded to the accumulator already
                self.emit(f"# {op.stmt} starts from its own value, once per element")
                self.emit(f"{self.acc_name(op.stmt)} = tl.broadcast_to(tl.cast({start}, tl.float32), {shape})")
            self.acc_tiles[op.stmt] = op.tile
            if op.follows is not None:
                ref_shape = "[" + ", ".join(str(op.tile.axes[p].size) for p in op.follows.axes) + "]"
                self.emit(f"# {op.stmt} follows the running maximum {op.follows.stmt}: the maximum it was built with")
                self.emit(f"{self.ref_name(op.stmt)} = tl.full({ref_shape}, float(\"-inf\"), tl.float32)")
        elif isinstance(op, T.AccUpdate):
            how = "matrix product" if isinstance(op.partial, T.Dot) else f"tile {op.op}"
            if op.rescale is not None:
                self._rescale(op)
            self.emit(f"# {op.stmt}: partial result of one tile{self.tile_note(op.tile)} by {how}")
            frame = self._frame(op.stmt, op.tile, suffix="p")
            acc = self.acc_name(op.stmt)
            if isinstance(op.partial, T.Dot):
                a, b = self._dot_operands(op.partial, op.tile, frame)
                # a product the tensor cores do not take exactly (compiler/analysis/placement.py) is multiplied in f32
                precise = ', input_precision="ieee"' if unit_of(op) == VECTOR else ""
                interval = T.promotion_interval(op.partial, op.tile.axes[2].size)
                if interval is not None:
                    # On sm_90 Triton otherwise keeps FP8 products in the tensor core's reduced-precision
                    # accumulator for the whole loop (`combine fast_accum` keeps that default)
                    precise = f", max_num_imprecise_acc={interval}"
                if op.partial.absent_terms:
                    self._absent_terms(op, a, b, frame, precise)
                else:
                    self.emit(self._dot_update(op, a, b, precise))
                return
            partial = self._value(op.partial, frame)
            how = reduce_ops.combine(op.op)
            combined = f"{acc} + {partial}" if how == "+" else _call(how, [acc, partial], op.zeros)
            self.emit(f"{acc} = {self._round(op.accum, combined)}")
        elif isinstance(op, T.Barrier):
            self.barrier(op)
        elif isinstance(op, T.Preload):
            self.emit(f"# {op.load.tensor}: the same tile in every iteration of the loop below, loaded once")
            lanes = op.load.mask if op.guard is None else (
                op.guard if op.load.mask is None else T.Bin("and", op.guard, op.load.mask))
            self._load_operand(self.preload_name(op.name), op.load, lanes, self._frame(op.name, op.tile), op.dtype)
        elif isinstance(op, T.AccFinish):
            where = "stored" if op.store else "kept in registers"
            self.emit(f"# {op.stmt}: the reduction is complete; round to {op.dtype} as the store would ({where})")
            if op.scale != 1.0:
                self.emit(f"{self.acc_name(op.stmt)} = {self.acc_name(op.stmt)} * {_literal(op.scale)}  "
                          f"# every term's constant factor, applied to the sum")
            self.emit(f"{self.value_name(op.stmt)} = {self._round(op.dtype, self.acc_name(op.stmt))}")
            if op.fill is not None:
                self._fill_outside(op)
            if op.store:
                self._store(op, None if op.store_box else self._frame(op.stmt, op.tile))
        else:
            raise TypeError(f"unknown tile op {op!r}")

    def _fill_outside(self, op: T.AccFinish) -> None:
        """The finished tile outside its mask set once to `op.fill` (compiler/lower/passes/masked_scores.py)."""
        self.emit(f"# {op.stmt} outside its mask set once to {op.fill!r}: what is computed from it needs no mask")
        frame = self._frame(op.stmt, op.tile)
        own = T.Reg(op.stmt, tuple(range(len(op.tile.axes))))
        value = self._value(T.Select(op.tile.mask, own, T.Const(op.fill)), frame)
        self.emit(f"{self.value_name(op.stmt)} = {value}")

    def descriptor_name(self, tensor: str, box: tuple) -> str:
        """The parameter holding the TMA descriptor of `tensor` with this box (the launcher makes it)."""
        return self.locals.local(("descriptor", tensor, box), f"{self.names.tensor(tensor)}_desc")

    def preload_name(self, name: str) -> str:
        return self.locals.local(("preload", name), f"t_{name}")

    def ref_name(self, stmt: str) -> str:
        return self.locals.local(("reference", stmt), f"ref_{stmt}")

    def _rescale(self, op: T.AccUpdate) -> None:
        """Bring the accumulator from the maximum it was built with to the current one (tileir.Rescaling): one
        factor per row, 1 where the two are equal (also both -inf, where the exponent would be NaN)."""
        rows = Frame([a.iter for a in self.acc_tiles[op.stmt].axes], {}, {}, self.names.variables)
        acc, current = self.acc_name(op.stmt), op.rescale.current
        same = f"{self._value(T.Reference(op.stmt, current.axes), rows)} == {self._value(current, rows)}"
        factor = self.fresh(f"alpha_{op.stmt}_")
        self.emit(f"# {op.stmt} follows the running maximum {current.stmt}: rescale what it holds to the current one")
        self.emit(f"{factor} = tl.where({same}, 1.0, {self._value(op.rescale.factor, rows)})")
        self.emit(f"{acc} = {self._round(op.accum, f'{acc} * {factor}')}")
        now = (self._round(current.dtype, self.acc_name(current.stmt)) if isinstance(current, T.Running)
               else self.value_name(current.stmt))
        self.emit(f"{self.ref_name(op.stmt)} = {now}")

    def _frame(self, stmt: str, tile: T.Tile, suffix: str = "") -> Frame:
        """Define the tile's iterator variables; return how to print them."""
        vectors, scalars = {}, {}
        for it, value in tile.scalars.items():
            name = self.locals.local(("iterator", stmt, suffix, it), f"{stmt}{suffix}_{it}")
            self.emit(f"{name} = {index_code(simplify(value), self.top)}")
            scalars[it] = name
        for axis in tile.axes:
            name = self.locals.local(("iterator", stmt, suffix, axis.iter), f"{stmt}{suffix}_{axis.iter}")
            self.emit(f"{name} = {index_code(simplify(axis.offset), self.top)} + tl.arange(0, {axis.size})")
            vectors[axis.iter] = name
        return Frame([a.iter for a in tile.axes], vectors, scalars, self.names.variables)

    def _store(self, op, frame: Frame) -> None:
        tile, dtype = op.tile, op.dtype
        if op.store_box:  # through a TMA descriptor (compiler/lower/passes/tma.py): the box at the tile's offsets
            axes = {a.iter: a for a in tile.axes}
            offsets = ", ".join(index_code(simplify(axes[it].offset), self.top) for it in op.lhs)
            value = self.value_name(op.stmt) + (".T" if [a.iter for a in tile.axes] != list(op.lhs) else "")
            self.emit(f"{self.descriptor_name(op.stmt, op.store_box)}.store([{offsets}], "
                      f"{self._narrow(value, dtype)})")
            return
        pointer = self._pointer(op.stmt, [T.Var(it) for it in op.lhs], frame)
        value = self.value_name(op.stmt)  # already rounded to the storage dtype: the conversion is exact
        lhs = [T.Var(it) for it in op.lhs]
        if dtype == "f8e4m3":  # NaN must stay NaN, also under the interpreter (_store_f8e4m3)
            code = mask_code(tile.mask, frame, lhs) if tile.mask is not None else "None"
            self.emit(f"_store_f8e4m3({pointer}, {value}, {code}, INTERPRET)")
            return
        mask = f", mask={mask_code(tile.mask, frame, lhs)}" if tile.mask is not None else ""
        self.emit(f"tl.store({pointer}, {self._narrow(value, dtype)}{mask})")

    def _pointer(self, tensor: str, indices, frame: Frame) -> str:
        arg = next(t for t in self.kernel.tensors if t.name == tensor)
        steps = strides([d if isinstance(d, int) else self.names.dim(d) for d in arg.shape])
        planes = dict(arg.fold)  # a folded dimension (fold_storage) stores index d at d mod planes
        terms = []
        for k, (index, stride) in enumerate(zip(indices, steps)):
            code = index_code(simplify(index), frame)
            if k in planes:  # also `% 1`: a tile axis's index keeps the pointer's shape (a bare 0 dropped that axis)
                code = f"(({code}) % {planes[k]})"
            terms.append(code if stride == "1" else f"{code} * {stride}")
        base = self.names.tensor(tensor)
        return f"{base} + " + " + ".join(terms) if terms else base

    def _dtype(self, tensor: str) -> str:
        return next(t.dtype for t in self.kernel.tensors if t.name == tensor)

    @staticmethod
    def _widen(code: str, dtype: str) -> str:
        """A loaded tile as f32 (E4M3 and bf16 through _widen_f8e4m3 and _widen_bf16: NaN and subnormals keep their
        values under the interpreter too)."""
        helper = {"f8e4m3": "_widen_f8e4m3", "bf16": "_widen_bf16"}.get(dtype)
        return f"{helper}({code}, INTERPRET)" if helper else f"{code}.to(tl.float32)"

    @staticmethod
    def _narrow(code: str, dtype: str) -> str:
        """A value held in f32, already rounded to `dtype`, in `dtype` for a store (exact; bf16 through _to_bf16,
        whose interpreter path keeps subnormals)."""
        return f"_to_bf16({code}, INTERPRET)" if dtype == "bf16" else f"{code}.to({TL_DTYPES[dtype]})"

    def _round(self, dtype: str, code: str) -> str:
        if dtype == "f32":
            return code
        if dtype == "f8e4m3":
            return f"_round_f8e4m3({code}, INTERPRET)"
        if dtype == "bf16":
            return f"_round_bf16({code}, INTERPRET)"
        return f"({code}).to({TL_DTYPES[dtype]}).to(tl.float32)"

    def _dot_operands(self, dot: T.Dot, tile: T.Tile, frame: Frame) -> tuple[str, str]:
        axes = [a.iter for a in tile.axes]
        i, j, k = axes
        mixed = dot.lhs_dtype != dot.rhs_dtype
        names = []
        for load, frame_axes, dtype in ((dot.lhs, [i, k], dot.lhs_dtype), (dot.rhs, [k, j], dot.rhs_dtype)):
            sub = _operand_frame(frame, frame_axes)
            if isinstance(load, T.RegOperand):
                names.append(self._register_operand(load, sub, dtype))
                continue
            if isinstance(load, T.Preloaded):
                if mixed:
                    raise InternalError("a preloaded operand of a mixed-dtype product")  # hoist.py leaves them
                names.append(self.preload_name(load.name))
                continue
            if load.box:  # through a TMA descriptor (compiler/lower/passes/tma.py)
                names.append(self._descriptor_operand(load, tile, frame_axes, dtype, mixed))
                continue
            # The pointer tile is built in the operand's (row, column) frame, whatever the storage order.
            names.append(self._load_operand(self.fresh(f"t_{load.tensor}_"), load, load.mask, sub, dtype, mixed))
        return names[0], names[1]

    def _dot_update(self, op: T.AccUpdate, a: str, b: str, precise: str) -> str:
        """The line adding the tile product to its accumulator: tl.dot accumulates into an f32 sum; another
        accumulator dtype takes the product and rounds the sum."""
        acc = self.acc_name(op.stmt)
        if op.accum == "f32":
            return f"{acc} = tl.dot({a}, {b}, {acc}{precise})"
        return f"{acc} = {self._round(op.accum, f'{acc} + tl.dot({a}, {b}{precise})')}"

    def _absent_terms(self, op: T.AccUpdate, a: str, b: str, frame: Frame, precise: str) -> None:
        """A product whose tile multiplies elements the program reads by lanes it does not (`Dot.absent_terms`:
        the causal diagonal of P·V), added to its accumulator.  The tensor cores add a masked 0 times the other
        operand there, which is NaN for an infinite or NaN element where the program has no term: where an
        operand that meets the other's masked zeros holds an infinite or NaN element (V on the diagonal), the
        product is computed term by term over the lanes the program reads (`_product_by_terms`); otherwise
        those zeros meet finite elements and add nothing, and tl.dot adds the tile into the sum as for any
        product.  Only the iterations of `Dot.absent_where` hold such lanes; the others take tl.dot at once."""
        i, j, k = (ax.iter for ax in op.tile.axes)
        sizes = {ax.iter: ax.size for ax in op.tile.axes}
        operands = (op.partial.lhs, op.partial.rhs)
        present = [self._operand_lanes(x, _operand_frame(frame, axes), [sizes[n] for n in axes])
                   for x, axes in zip(operands, ([i, k], [k, j]))]
        met = [name for name, meets in zip((a, b), op.partial.absent_met) if meets]
        self.absent_terms = True
        acc = self.acc_name(op.stmt)
        dot = self._dot_update(op, a, b, precise)
        by_terms = (f"_product_by_terms(tl.zeros([{sizes[i]}, {sizes[j]}], tl.float32), {a}, {present[0]}, {b}, "
                    f"{present[1]})")
        self.emit(f"# {op.stmt}: lanes outside the program's terms multiply a masked 0 by the other operand, which is "
                  f"NaN for an infinite or NaN element: where {' or '.join(met)} holds one, the tile is computed term "
                  f"by term")
        pad = ""
        if op.partial.absent_where is not None:  # only some iterations hold such lanes (the diagonal block)
            self.emit(f"if {condition_code(op.partial.absent_where, frame, python=True)}:")
            pad = "    "
        self.emit(f"{pad}if {' or '.join(f'_any_nonfinite({x})' for x in met)}:")
        self.emit(f"{pad}    {acc} = {self._round(op.accum, f'{acc} + {by_terms}')}")
        self.emit(f"{pad}else:")
        self.emit(f"{pad}    {dot}")
        if pad:
            self.emit("else:")
            self.emit(f"    {dot}")

    def _operand_lanes(self, x, frame: Frame, shape: list) -> str:
        """The lanes of a product operand the program reads, as a boolean tile of `shape`."""
        if isinstance(x, T.Preloaded):  # compiler/lower/passes/hoist.py leaves these products' operands in place
            raise InternalError("a preloaded operand of a product with absent terms")
        full = f"tl.full([{shape[0]}, {shape[1]}], 1, tl.int1)"
        if x.mask is None:
            return full
        code = condition_code(x.mask, frame) if isinstance(x, T.RegOperand) else mask_code(x.mask, frame, x.indices)
        return f"({code}) & {full}"

    def _descriptor_operand(self, load: T.Load, tile: T.Tile, frame_axes: list, dtype: str, mixed: bool) -> str:
        """`name = desc.load([...])`: the operand's box at the tile's offsets, in the tensor's index order (the
        copy clips at the tensor's edges and reads 0 outside, which is the load's mask); transposed when the
        tensor stores the operand's columns first."""
        name = self.fresh(f"t_{load.tensor}_")
        axes = {a.iter: a for a in tile.axes}
        iters = [ix.name for ix in load.indices]
        offsets = ", ".join(index_code(simplify(axes[it].offset), self.top) for it in iters)
        turn = ".T" if iters != list(frame_axes) else ""
        self.emit(f"{name} = {self.descriptor_name(load.tensor, load.box)}.load([{offsets}]){turn}")
        return self._operand_dtype(name, dtype, mixed)

    def _load_operand(self, name: str, load: T.Load, lanes, frame: Frame, dtype: str, mixed: bool = False) -> str:
        """`name = tl.load(...)` of a product operand, masked to `lanes` (0 elsewhere), in its storage dtype for the
        tensor cores; widened to f32 under the interpreter, and always when the product's operands differ."""
        pointer = self._pointer(load.tensor, load.indices, frame)
        mask = f", mask={mask_code(lanes, frame, load.indices)}, other=0.0" if lanes is not None else ""
        self.emit(f"{name} = tl.load({pointer}{mask})")
        return self._operand_dtype(name, dtype, mixed)

    def _operand_dtype(self, name: str, dtype: str, mixed: bool) -> str:
        """A loaded operand stays in its storage dtype for the tensor cores; widened to f32 under the interpreter,
        and always when the product's operands differ."""
        if dtype != "f32" and mixed:
            self.emit(f"{name} = {self._widen(name, dtype)}  # operands of different dtypes meet in f32")
        elif dtype != "f32":
            self.emit("if INTERPRET:")
            self.emit(f"    {name} = {self._widen(name, dtype)}")
        return name

    def _register_operand(self, operand: T.RegOperand, frame: Frame, dtype: str) -> str:
        """A product operand held in registers (already rounded to `dtype`, or rounded to it here when it stands
        for a rounding of the tile: `RegOperand.rounds`), 0 outside the reduction; in its storage type for the
        tensor cores (exact), in f32 under the interpreter like the loaded operands."""
        name = self.fresh(f"t_{operand.reg.stmt}_")
        value = self.value_name(operand.reg.stmt)
        if operand.mask is not None:
            value = f"tl.where({condition_code(operand.mask, frame)}, {value}, 0.0)"
        self.emit(f"{name} = {value}")
        if dtype != "f32":
            self.emit("if not INTERPRET:")
            self.emit(f"    {name} = {name}.to({TL_DTYPES[dtype]})")
            if operand.rounds:  # the tile P = dtype(E) would hold: under the interpreter rounded here, in f32
                self.emit("else:")
                self.emit(f"    {name} = {self._round(dtype, name)}")
        return name

    # ------------------------------------------------------------ values (f32)

    def _value(self, e: T.Expr, frame: Frame) -> str:
        v = lambda x: self._value(x, frame)  # noqa: E731
        if isinstance(e, T.Const):
            return _literal(e.value)
        if isinstance(e, T.Var):  # an iterator or size used as a value: its integer, as an f32
            return f"({frame.var(e.name)} + 0.0)"
        if isinstance(e, T.Neg):
            # not `-x`: Triton before 3.9 (3.6 on the H100 machines) computes it as 0 - x, +0.0 for x = +0.0
            # (benchmarks/gpu/experiments/zero_sign_forms.py); x * -1.0 is exact, with the opposite zero
            return f"({v(e.operand)} * -1.0)"
        if isinstance(e, T.Bin):
            if e.op in ("and", "or"):
                return f"(({v(e.lhs)}) {'&' if e.op == 'and' else '|'} ({v(e.rhs)}))"
            if e.op == "/":
                return _divide(v(e.lhs), e.rhs, v(e.rhs))
            return f"({v(e.lhs)} {e.op} {v(e.rhs)})"
        if isinstance(e, T.Select):
            return f"tl.where({self._cond(e.cond, frame)}, {v(e.then)}, {v(e.other)})"
        if isinstance(e, T.Load):
            pointer = self._pointer(e.tensor, e.indices, frame)
            mask = f", mask={mask_code(e.mask, frame, e.indices)}, other={e.other}" if e.mask is not None else ""
            return self._widen(f"tl.load({pointer}{mask})", self._dtype(e.tensor))
        if isinstance(e, T.Reg):
            rank = len(frame.axes)
            name = self.value_name(e.stmt)
            if not e.axes or (len(e.axes) == rank and list(e.axes) == list(range(rank))):
                return name
            index = ", ".join(":" if k in e.axes else "None" for k in range(rank))
            return f"{name}[{index}]"
        if isinstance(e, T.Running):  # a running maximum: its accumulator now, rounded as a store would
            return self._broadcast(self._round(e.dtype, self.acc_name(e.stmt)), e.axes, frame)
        if isinstance(e, T.Reference):
            return self._broadcast(self.ref_name(e.stmt), e.axes, frame)
        if isinstance(e, T.NegInfAsZero):  # on the maximum's own shape (one value per row), before broadcasting
            x = v(e.operand)
            return f"tl.where({x} == float(\"-inf\"), 0.0, {x})"
        if isinstance(e, T.Call):
            return _call(e.func, [v(a) for a in e.args], e.zeros)
        if isinstance(e, T.Round):
            return self._round(e.dtype, v(e.operand))
        if isinstance(e, T.Reduce):
            code = v(e.operand)
            for axis in sorted(e.axes, reverse=True):
                if e.op == "sum":
                    code = f"tl.sum({code}, axis={axis})"
                else:  # keeps NaN, as the interpreter does (a min, not -max(-x): see T.Neg above)
                    code = f"_{e.op}_nan{'' if e.zeros else '_either'}({code}, axis={axis})"
            return code
        raise TypeError(f"cannot print value {e!r}")

    @staticmethod
    def _broadcast(code: str, axes: tuple, frame: Frame) -> str:
        """A tile with axes at positions `axes` of the frame's tile, broadcast along the others."""
        rank = len(frame.axes)
        if not axes or list(axes) == list(range(rank)):
            return code
        index = ", ".join(":" if k in axes else "None" for k in range(rank))
        return f"({code})[{index}]"

    def _cond(self, e: T.Expr, frame: Frame) -> str:
        """A mask (integer arithmetic on loop variables and iterators) prints as index code; a comparison of
        values (`where(x > y, ...)`) as values."""
        return condition_code(e, frame) if _is_index(e) else self._value(e, frame)


def _is_index(e: T.Expr) -> bool:
    """Integer arithmetic over variables and integer constants only."""
    if isinstance(e, T.Const):
        return isinstance(e.value, int)
    if isinstance(e, T.Var):
        return True
    if isinstance(e, T.Neg):
        return _is_index(e.operand)
    if isinstance(e, (T.Bin, T.Select)):
        parts = (e.lhs, e.rhs) if isinstance(e, T.Bin) else (e.cond, e.then, e.other)
        return (not isinstance(e, T.Bin) or e.op != "/") and all(_is_index(p) for p in parts)
    return False


def _divide(lhs: str, divisor: T.Expr, rhs: str) -> str:
    """A program's `/` rounds like IEEE division (Triton's plain `/` is approximate and would move rounding
    points); dividing by a power of two is multiplying by its exact reciprocal, which is the same value."""
    if isinstance(divisor, T.Const) and divisor.value:
        mantissa, exponent = math.frexp(float(divisor.value))
        # Both the power of two and its reciprocal must be normal f32 numbers: 2^130 is not an f32 at all, and
        # the reciprocal of 2^-140 overflows, so those are divided like any other divisor.
        if abs(mantissa) == 0.5 and -125 <= exponent - 1 <= 126:
            return f"({lhs} * {1.0 / float(divisor.value)!r})"
    return f"tl.div_rn({lhs}, {rhs})"


FUNCTIONS = {  # the primitives of compiler/model/functions.py in Triton
    "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})",  # ex2.approx.f32
    "fma": "tl.fma({0}, {1}, {2})",  # fma.rn.f32, rounded once (the interpreter's _fma)
    "log": "tl.log({0})",
    "sqrt": "tl.sqrt_rn({0})",
    "tanh": "_tanh({0}, INTERPRET)",
    "abs": "tl.abs({0})",
    # Triton's plain `/` on f32 is div.full.f32 (an approximate reciprocal and a multiply, within 2 ulp): what a
    # program declares with fast_inverse, and what its own `/` must not be (_divide)
    "fast_inverse": "(1.0 / {0})",
    # IEEE maximum / minimum: a NaN operand gives NaN (docs/interpreter.md)
    "max": "_maximum_nan({0}, {1})",
    "min": "_minimum_nan({0}, {1})",
    # where no use can tell the zero they return (compiler/analysis/zero_signs.py): max.NaN / min.NaN
    "max_either_zero": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "min_either_zero": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
}


def _operand_frame(frame: Frame, axes: list) -> Frame:
    """A product tile's frame narrowed to one operand's (row, column) axes."""
    return Frame(axes, {x: frame.vectors[x] for x in axes}, frame.scalars, frame.variables)


def _call(func: str, args: list, zeros: bool = True) -> str:
    return call_code(FUNCTIONS, func, args, zeros)


def _literal(value) -> str:
    """A float constant as Triton code (Python's own spellings of infinity and NaN)."""
    # -0.0 as the helper that reinterprets its bits: Triton 3.6 makes every float constant -0.0 +0.0 on the GPU
    # (the literal, float("-0.0"), tl.full(..., -0.0); x * -0.0 gave +0.0 for x > 0: GPU fuzz seed 49), and
    # computes a tensor's -x as 0 - x (benchmarks/gpu/experiments/zero_sign_forms.py, RESULTS, 29th-30th sessions)
    return float_literal(value, {"inf": 'float("inf")', "-inf": 'float("-inf")', "nan": 'float("nan")',
                                 "-0": NEGATIVE_ZERO})
