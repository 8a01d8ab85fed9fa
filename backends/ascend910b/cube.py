"""The cube core's side of a 910B kernel: accumulators in L0C, T.mma from staged L1 operands, FP8 operands
decoded by the vector cores through GM workspaces, and a finished accumulator to GM or to the vector cores
(through the workspace and flag that `assign_cross_core` gave it).
"""

from __future__ import annotations

import math

from tdsl.backends.ascend910b import e4m3
from tdsl.backends.ascend910b.common import index_code, _Opnd
from tdsl.backends.tilelang.emit import operand_region
from tdsl.compiler.analysis.placement import operand_layout, operand_name
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.ascend910b import half_rows
from tdsl.compiler.lower.tileir import simplify


class CubeSide:
    """Methods of `Ascend910BPrinter` (emit.py); `self` is the printer."""

    def _cube_op(self, op) -> None:
        if isinstance(op, T.SerialLoop):
            self.serial(op, lambda body: [self._cube_op(o) for o in body])
        elif isinstance(op, T.AccInit):
            shape = [a.size for a in op.tile.axes]
            self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}")
            acc = self.alloc(self.local(("L0C", op.stmt), f"{op.stmt}_L0C"), shape, "f32", "L0C",
                             "accumulator, cleared by the first T.mma (init)")
            self.accs[op.stmt] = (acc, shape)
            self.acc_depth[op.stmt] = len(self.loops)
        elif isinstance(op, T.AccUpdate):
            self._mma(op)

    def _mma(self, op: T.AccUpdate) -> None:
        _, operands = operand_layout(op)
        loop = self.loops[-1] if self.loops else None
        stages = op.staged[0].stages  # the L1 copies of compiler/analysis/placement.py
        fp8 = op.stmt in self.fp8_dots
        if fp8:
            decoded = self.cross_core[op.stmt, "fp8-operands"].flags[0]
            self.emit(f"T.wait_cross_flag({decoded})  # the vector core decoded this step")
        for n, (load, _, _, _) in enumerate(operands):
            if isinstance(load, T.RegOperand):
                (written,) = self.cross_core[op.stmt, f"vector-operand-{n}"].flags
                self.emit(f"T.wait_cross_flag({written})  # the vector cores wrote {load.reg.stmt}")
        l0 = []
        for n, ((load, transposed, shape, dtype), scope) in enumerate(zip(operands, ("L0A", "L0B"))):
            name = operand_name(load)
            if transposed and scope == "L0A":
                raise BackendError(f"{op.stmt}: operand {name} is stored [K, M]; T.mma takes L0A [M, K] and "
                                   f"this backend emits the transposing L1 -> L0 copy only for L0B: store {name} "
                                   f"as [M, K] (or swap the operands, computing the transposed product), keep the "
                                   f"product off the cube (tiles below its smallest), or compile for ascend-950 or "
                                   f"nvidia")
            cache = op.staged[n].cache
            note = f"cache_read {name} -> {cache.scope} at {cache.loop}" if cache else "staged for the cube"
            dtype = "f16" if fp8 else dtype
            l1 = self.alloc(self.local(("L1", name), f"{name}_L1"), [stages] + shape, dtype, "L1", note)
            slot = f"{self.vars[loop.var]} % {stages}" if stages > 1 else "0"
            if fp8:
                ws = self._decoded_workspace(op, n)
                self.emit(f"T.copy({ws}[{self.cid}, 0, 0], {l1}[{slot}, :, :])  # GM workspace (decoded FP8) -> L1")
            elif isinstance(load, T.RegOperand):
                ws = self._operand_workspace(op, n)
                self.emit(f"T.copy({ws}[{self.cid}, 0, 0], {l1}[{slot}, :, :])  # GM workspace ({load.reg.stmt} from "
                          f"the vector cores) -> L1")
            else:
                region = operand_region(self.tensor(load.tensor), load, op.tile, self.vars)
                self.emit(f"T.copy({region}, {l1}[{slot}, :, :])  # GM -> L1")
            l0_shape = list(reversed(shape)) if transposed else shape
            buf = self.alloc(self.local((scope, name), f"{name}_{scope}"), l0_shape, dtype, scope)
            flip = ", transpose=True" if transposed else ""
            self.emit(f"T.copy({l1}[{slot}, :, :], {buf}{flip})  # L1 -> {scope}")
            l0.append(buf)
        if op.partial.sum_on_vector:
            return self._cube_step(op, l0)
        acc, _ = self.accs[op.stmt]
        first = [f"{self.vars[l.var]} == {index_code(simplify(l.lower), self.vars)}"
                 for l in self.loops[self.acc_depth[op.stmt]:]]
        init = "True" if not first else first[0]
        for c in first[1:]:
            init = f"T.And({init}, {c})"
        self.emit(f"T.mma({l0[0]}, {l0[1]}, {acc}, init={init})")
        if fp8 and loop is not None:
            self.emit(f"if {self.vars[loop.var]} < {index_code(simplify(loop.upper), self.vars)} - 1:")
            consumed = self.cross_core[op.stmt, "fp8-operands"].flags[1]
            self.emit(f'    T.set_cross_flag("MTE2", {consumed})  # workspace read: decode the next step')

    def _cube_step(self, op: T.AccUpdate, l0: list) -> None:
        """A step of a sum the vector cores keep (`sum_on_vector`): its product alone, to this block's workspace."""
        (i, j, _), _ = operand_layout(op)
        size = {a.iter: a.size for a in op.tile.axes}
        part = self.alloc(self.local(("step L0C", op.stmt), f"{op.stmt}_step_L0C"), [size[i], size[j]], "f32", "L0C",
                          "one step's product, for the vector cores")
        self.emit(f"T.mma({l0[0]}, {l0[1]}, {part}, init=True)  # this step's product alone")
        transfer = self.cross_core[op.stmt, "cube-step"]
        ws = self._workspace(self.local(("step workspace", op.stmt), f"{op.stmt}_step_ws"), transfer.workspaces[0])
        self.emit(f"T.copy({part}, {ws}[{self.cid}, 0, 0])  # L0C -> this block's GM workspace slot")
        self.emit(f'T.set_cross_flag("FIX", {transfer.flags[0]})  # tell the vector cores')

    def _operand_workspace(self, op: T.AccUpdate, n: int) -> str:
        load = (op.partial.lhs, op.partial.rhs)[n]
        space = self.cross_core[op.stmt, f"vector-operand-{n}"].workspaces[0]
        return self._workspace(self.local(("operand workspace", op.stmt, n), f"{load.reg.stmt}_ws"), space)

    def _operands_to_cube(self, op: T.AccUpdate) -> None:
        """The V side before a product step on the cube that reads a tile the vector cores hold (P in attention's
        P·V after online()): the tile, 0 outside the operand's mask, in the operand dtype, to this block's
        workspace (each vector core its rows when they split the tiles)."""
        _, operands = operand_layout(op)
        for n, (load, _, shape, dtype) in enumerate(operands):
            if not isinstance(load, T.RegOperand):
                continue
            value = self.values.get(load.reg.stmt)
            if value is None or value.kind != "tile":
                raise BackendError(f"{op.stmt}: the operand {load.reg.stmt} is not a tile the vector cores hold")
            axes = [op.tile.axes[p] for p in load.reg.axes]
            rows = shape[0]
            if self.half:  # this vector core's half of the rows
                axes[0] = half_rows(axes[0], self.half)
                rows = self.half
            held = [rows] + list(shape[1:])
            if list(self.shapes.get(load.reg.stmt, held)) != held:
                raise BackendError(f"{op.stmt}: the operand {load.reg.stmt} is held as a "
                                   f"{self.shapes[load.reg.stmt]} tile, and the cube takes {held}")
            self.emit(f"# {load.reg.stmt} for the cube's {op.stmt} step: in {dtype}, 0 outside the step's lanes")
            src = value.code
            if load.mask is not None:
                masked = self.temp("t", held, note=f"{load.reg.stmt}, 0 outside the product's lanes")
                self.emit(f"T.copy({src}, {masked})  # UB -> UB")
                self._mask_lanes(masked, T.Tile(axes=axes, scalars=op.tile.scalars, mask=load.mask), load.mask,
                                 scalar="0.0")
                src = masked
            low = self.temp(f"t_{dtype}", held, dtype)
            self.emit(f'T.tile.cast({low}, {src}, "CAST_RINT", {math.prod(held)})  # exact: already rounded')
            ws = self._operand_workspace(op, n)
            row = f"{self.vid} * {self.half}" if self.half else "0"
            self.emit(f"T.copy({low}, {ws}[{self.cid}, {row}, 0])  # UB -> this block's GM workspace slot")
            self.done(low)
            if src != value.code:
                self.done(_Opnd("tile", src))
            (written,) = self.cross_core[op.stmt, f"vector-operand-{n}"].flags
            self.flags_after.append(f'T.set_cross_flag("MTE3", {written})  # tell the cube (it waits for both '
                                    f'vector cores)')

    def _add_cube_step(self, op: T.AccUpdate) -> None:
        """The V side after a product step on the cube, for a sum the vector cores keep: wait for the step's
        product, rescale the sum first if it follows a running maximum, and add the product to it."""
        transfer = self.cross_core[op.stmt, "cube-step"]
        self.flags_before.append(f"T.wait_cross_flag({transfer.flags[0]})  # the step's product is in the "
                                 f"workspace")
        if op.rescale is not None:
            self._rescale(op)
        acc, shape = self.accs[op.stmt]
        ws = self._workspace(self.local(("step workspace", op.stmt), f"{op.stmt}_step_ws"), transfer.workspaces[0])
        part = self.alloc(self.local(("step in UB", op.stmt), f"{op.stmt}_step_ub"), shape, "f32", "UB",
                          "one step's product")
        rows = [self.cid, f"{self.vid} * {self.half}" if self.half else "0"] + ["0"] * (len(shape) - 1)
        self.emit(f"# {op.stmt}: this step's product from the cube, added to the sum")
        self.emit(f"T.copy({ws}[{', '.join(rows)}], {part})  # GM workspace -> UB")
        self.emit(f"T.tile.add({acc}, {acc}, {part})")

    def _decode_split(self, op: T.AccUpdate) -> bool:
        """Whether both vector cores decode half of each FP8 operand tile's rows."""
        _, operands = operand_layout(op)
        return all(shape[0] >= 2 and shape[0] % 2 == 0 for _, _, shape, _ in operands)

    def _decoded_workspace(self, op: T.AccUpdate, n: int) -> str:
        return self.local(("workspace", op.stmt, n), f"{op.stmt}_ws{'AB'[n]}")

    def _decode_operands(self, op: T.AccUpdate) -> None:
        """The V side of an FP8 matrix step: operand bytes GM -> UB, decoded to f16, UB -> this block's workspace."""
        _, operands = operand_layout(op)
        loop = self.loops[-1] if self.loops else None
        transfer = self.cross_core[op.stmt, "fp8-operands"]
        decoded, consumed = transfer.flags
        self.emit(f"# {self.program.statements.get(op.stmt, op.stmt)}: FP8 operands decoded for the cube")
        if loop is not None:
            self.flags_before.append(f"if {self.vars[loop.var]} > {index_code(simplify(loop.lower), self.vars)}:")
            self.flags_before.append(f"    T.wait_cross_flag({consumed})  # the cube has read the previous step's workspace")
        split = self._decode_split(op)
        for n, (load, _, shape, _) in enumerate(operands):
            ws = self._workspace(self._decoded_workspace(op, n), transfer.workspaces[n])
            axes = {a.iter: a for a in op.tile.axes}
            tile_axes = [axes[x.name] for x in load.indices]
            if split:  # each vector core decodes half of the operand tile's rows
                half = shape[0] // 2
                tile_axes[0] = half_rows(tile_axes[0], half)
                shape = [half] + shape[1:]
            raw = self.alloc(self.fresh(f"{load.tensor}_bytes"), shape, "f8e4m3", "UB", f"E4M3 bytes of {load.tensor}")
            starts = [index_code(simplify(a.offset), self.vars) for a in tile_axes]
            tile = T.Tile(axes=tile_axes, scalars=op.tile.scalars, mask=load.mask)
            depth = self.depth
            # this core's half may lie past the tensor: then it writes zeros for the cube
            outside = split and self._guard_end_lanes(tile, load.mask)
            self.emit(f"T.copy({self.tensor(load.tensor)}[{', '.join(starts)}], {raw})  # GM -> UB (clipped: zero bytes "
                      f"are 0.0)")
            values = e4m3.decode_e4m3(self, raw, shape)
            if load.mask is not None:  # a clipped copy leaves uint8 lanes unfilled (no 8-bit Duplicate): zero them
                self._mask_lanes(values, tile, load.mask, scalar="0.0")
            if outside:
                self.depth = depth
                self.emit("else:")
                self.emit(f"    T.tile.fill({values}, 0.0)")
            row = f"{self.vid} * {shape[0]}" if split else "0"
            self.emit(f"T.copy({values}, {ws}[{self.cid}, {row}, 0])  # UB -> this block's GM workspace slot")
        self.flags_after.append(f'T.set_cross_flag("MTE3", {decoded})  # tell the cube (it waits for both vector cores)')

    def _cube_finish(self, op: T.AccFinish) -> None:
        """The C side of a finished cube reduction: L0C -> GM (stored f32) or -> this block's workspace slot."""
        acc, shape = self.accs[op.stmt]
        starts = [index_code(simplify(a.offset), self.vars) for a in op.tile.axes]
        if not self.facts.needs_vector(op):
            clipped = "  (clipped to the tensor)" if op.tile.mask is not None else ""
            self.emit(f"T.copy({acc}, {self.tensor(op.stmt)}[{', '.join(starts)}])  # L0C -> GM{clipped}")
            return
        transfer = self.cross_core[op.stmt, "cube-result"]
        ws = self._workspace(self.local(("workspace", op.stmt), f"{op.stmt}_ws"), transfer.workspaces[0])
        (flag,) = transfer.flags
        self.ws_flag[op.stmt] = (ws, flag)
        self.emit(f"T.copy({acc}, {ws}[{', '.join([self.cid] + ['0'] * len(shape))}])  # L0C -> this block's GM "
                  f"workspace slot")
        self.emit(f'T.set_cross_flag("FIX", {flag})  # tell the vector cores')

    def _from_cube(self, op: T.AccFinish) -> None:
        """The V side: wait for the cube, bring the tile into UB, round it, store it if the program stores it."""
        shape = [a.size for a in op.tile.axes]
        ws, flag = self.ws_flag[op.stmt]
        self.flags_before.append(f"T.wait_cross_flag({flag})  # the cube's result is in the workspace")
        ub = self.alloc(self.local(("from L0C", op.stmt), f"{op.stmt}_ub"), shape, "f32", "UB", "cube result")
        self.expr_temps.add(ub)  # read only by the rounding below, which may write its result here
        rows = [self.cid, f"{self.vid} * {self.half}" if self.half else "0"] + ["0"] * (len(shape) - 1)
        self.emit(f"T.copy({ws}[{', '.join(rows)}], {ub})  # GM workspace -> UB")
        value = self._round(op.dtype, self._scaled(op, _Opnd("tile", ub), shape), shape)
        self.values[op.stmt] = value
        self.expr_temps.discard(value.code)
        self.shapes[op.stmt] = shape
        if op.store:
            self._store(op.stmt, op.tile, op.lhs, value, op.unclipped)
