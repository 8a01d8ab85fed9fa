"""Tile-program passes for the Ascend 910B's vector cores, and the facts about its kernels that they and the
910B printer share.

    program = widen_narrow_tiles(program)   # rows of 32 bytes (GM <-> UB copies), 128 elements with E4M3
    program = split_vector_rows(program)    # each of the AI core's two vector cores takes half the rows
    program = refuse_uncopyable_operands(program)  # no product operand that no one copy moves
    program = assign_cross_core(program)    # GM workspaces and cross-core flags between cube and vector cores

All are pure (`TileProgram -> TileProgram`) and run in compiler/lower/pipeline.py after the units are assigned
(compiler/analysis/placement.py): they rewrite only the vector statements' tiles, never a product on the cube.
`split_vector_rows` records its decision in `TileKernel.vector_rows`; the rows of vector core `vid` start at
`offset + VID * vector_rows`, `VID` being a variable the printer binds.  `assign_cross_core` records in
`TileKernel.cross_core` which statements pass tiles between the cube and the vector cores, through which
workspaces and with which of the 910B's 11 cross-core flags, refusing a kernel that needs more.

Facts (`Kernel910B`): which ops run on the vector cores, how a tile lies in a tensor for one T.copy.  Which
comparisons of a store's mask a clipped copy does not enforce is the tile program's (`unclipped`,
compiler/lower/passes/store_masks.py); `widen_narrow_tiles` marks the stores it widens again.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from tdsl.compiler.model.dtypes import BYTES as DTYPE_BYTES
from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower.lane_masks import atoms, conjunction, expr_of, expr_text, linear, mentions
from tdsl.compiler.analysis.placement import MATRIX, matrix_statements, operand_layout, unit_of
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.recurrence import passes_through_memory
from tdsl.compiler.lower.passes.store_masks import tensor_dims, unclipped_atoms
from tdsl.compiler.lower.tileir import expr_vars, simplify
from tdsl.compiler.model import reduce_ops

VID = "__vid"  # the vector core (0 or 1) of a tile whose rows the two vector cores share
UB_ROW_BYTES = 32  # a GM <-> UB copy starts every UB row on a 32-byte block
E4M3_TILE = 128  # E4M3 conversions compare whole 256-byte repeats of f16: 128 elements per tile
BYTES = {**DTYPE_BYTES, "u8": 1}  # u8: the 910B printer's raw byte buffers


# ---------------------------------------------------------------- the passes


def widen_narrow_tiles(program: T.TileProgram) -> T.TileProgram:
    """Vector tiles whose rows are narrower than 32 bytes of the kernel's narrowest tensor dtype, widened to
    that, the extra lanes masked (see `Kernel910B.widen`)."""
    return dataclasses.replace(program, kernels=[Kernel910B(program, k).widened() for k in program.kernels])


def split_vector_rows(program: T.TileProgram) -> T.TileProgram:
    """Every vector tile's rows halved between the two vector cores, where that is possible (`rows_per_core`)."""
    out = []
    for k in program.kernels:
        facts = Kernel910B(program, k)
        half = facts.rows_per_core()
        if half:
            k = dataclasses.replace(k, body=T.map_ops(k.body, lambda op: facts.halve(op, half)), vector_rows=half)
        out.append(k)
    return dataclasses.replace(program, kernels=out)


DEEP_REGION = "it spans more than two tile axes, and a T.copy moves rows and columns"  # why it goes lane by lane


def deep_axes(indices, tile: T.Tile) -> list:
    """The tile axes of more than one element that `indices` walk, in order of appearance.  More than two: no one
    GM <-> UB copy moves the region (it moves validRow x validCol of the region's last two dimensions only,
    compiler/verify/ascend_sim/copy_rules.py), so the printer reads and writes it lane by lane."""
    sizes = {a.iter: a.size for a in tile.axes}
    return list(dict.fromkeys(v.name for i in indices for v in expr_vars(i) if sizes.get(v.name, 1) > 1))


def axes_not_last(indices, tile: T.Tile) -> list:
    """The tile axes a product operand's `indices` walk, in index order, when they are not its tensor's last
    dimensions (a fixed index after one of them: `A[i, q, k]` over i and k at one q); [] when they are, so that
    one copy of the region's last two dimensions moves the tile.  Both Ascend printers ask it (the 950's copies
    move the region's last dimensions too)."""
    by_name = {a.iter: a for a in tile.axes}
    at = [n for n, i in enumerate(indices) if any(v.name in by_name for v in expr_vars(i))]
    if at == list(range(len(indices) - len(at), len(indices))):
        return []
    return [by_name[v.name] for n in at for v in expr_vars(indices[n]) if v.name in by_name]


def refuse_uncopyable_operands(program: T.TileProgram) -> T.TileProgram:
    """BackendError for a product whose operand tiles no one copy moves: on the vector cores a region of more than
    two tile axes of more than one element (`deep_axes`; one whose axes are not the tensor's last dimensions is
    read lane by lane, vector.py `_operand_f32`), on the cube one whose axes are not the tensor's last dimensions
    (`axes_not_last`: the GM -> L1 copy moves the region's last two).  Other loads and stores of such regions go
    lane by lane (values.py `_load`, stores.py `_store`)."""
    for kernel in program.kernels:
        cube = matrix_statements(kernel)
        for op in T.walk_ops(kernel.body):
            if not (isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot)):
                continue
            for load in [n for side in (op.partial.lhs, op.partial.rhs) for n in T.nodes_in(side, T.Load)]:
                if op.stmt in cube and axes_not_last(load.indices, op.tile):
                    raise BackendError(
                        f"{op.stmt}: the matrix product's operand {expr_text(load)} "
                        f"has a fixed index after its tile's axes, and the 910B's GM -> L1 copy moves the region's "
                        f"last two dimensions; make the tile's axes the last indices of {load.tensor}, or generate "
                        f"for NVIDIA or ascend-950")
                deep = deep_axes(load.indices, op.tile)
                if op.stmt not in cube and len(deep) > 2:
                    raise BackendError(
                        f"the load of {load.tensor} in statement {op.stmt} covers {len(deep)} tile axes of more "
                        f"than one element ({', '.join(deep)}), but the 910B's GM <-> UB copies move 2-D regions "
                        f"(rows and columns); give each tile one value of {', '.join(deep[:-2])} (bind or host its "
                        f"loop, or split it so that the tile holds one element of it)")
    return program


CROSS_CORE_FLAGS = 11  # flag ids 0..10 (CrossCoreSetFlag on Atlas A2)


def assign_cross_core(program: T.TileProgram) -> T.TileProgram:
    """Each kernel's `cross_core`: in program order, every FP8 product (operands decoded by the vector cores)
    and every cube reduction whose result passes through the vector cores (`needs_vector`), with its
    workspaces and flag ids.  BackendError if the kernel needs more flags than the 910B has, or a workspace
    on a grid of run-time size."""
    return dataclasses.replace(program, kernels=[_with_cross_core(program, k) for k in program.kernels])


def _with_cross_core(program: T.TileProgram, kernel: T.TileKernel) -> T.TileKernel:
    facts = Kernel910B(program, kernel)
    flags, out, acc_shapes = iter(range(CROSS_CORE_FLAGS)), [], {}
    taken: dict = {}  # (statement, kind) -> its flags: the parts of a split loop pass the same tiles with them

    def take(stmt: str, kind: str, n: int) -> list:
        if (stmt, kind) in taken:
            return taken[stmt, kind]
        got = [next(flags, None) for _ in range(n)]
        if None in got:
            raise BackendError(f"{stmt}: this kernel needs more than the 910B's {CROSS_CORE_FLAGS} cross-core flags "
                               f"(0..{CROSS_CORE_FLAGS - 1}); split it into more kernels")
        taken[stmt, kind] = got
        return got

    def add(transfer: T.CrossCore) -> None:
        if transfer not in out:
            out.append(transfer)

    for op in T.walk_ops(kernel.body):
        if isinstance(op, T.AccInit) and op.on_matrix:
            acc_shapes[op.stmt] = [a.size for a in op.tile.axes]
        elif isinstance(op, T.AccUpdate) and op.stmt in facts.fp8_dots:
            _, operands = operand_layout(op)
            blocks = _blocks(kernel, op.stmt)
            spaces = [T.Workspace([blocks] + list(shape), "f16") for _, _, shape, _ in operands]
            add(T.CrossCore(op.stmt, "fp8-operands", take(op.stmt, "fp8-operands", 2), spaces))
        elif isinstance(op, T.AccUpdate) and facts.on_cube(op):
            for transfer in _vector_sides_of_a_cube_step(kernel, op, take):
                add(transfer)
        elif isinstance(op, T.AccFinish) and op.on_matrix and facts.needs_vector(op):
            space = T.Workspace([_blocks(kernel, op.stmt)] + acc_shapes[op.stmt], "f32")
            add(T.CrossCore(op.stmt, "cube-result", take(op.stmt, "cube-result", 1), [space]))
    return dataclasses.replace(kernel, cross_core=out)


def _vector_sides_of_a_cube_step(kernel: T.TileKernel, op: T.AccUpdate, take) -> list:
    """The transfers of one product step on the cube that the vector cores take part in: an operand they hold
    (P in attention's P·V after online(): "vector-operand", in the operand dtype), and the step's product for
    a sum they keep (`Dot.sum_on_vector`: "cube-step", f32).  One flag each; the workspaces need no second
    flag for their reuse, as the steps alternate (docs/target-ascend.md, "The 910B's one-pass softmax")."""
    out = []
    (i, j, _), operands = operand_layout(op)
    for n, (load, _, shape, dtype) in enumerate(operands):
        if isinstance(load, T.RegOperand):
            if dtype == "f8e4m3":
                raise BackendError(f"{op.stmt}: an E4M3 operand held by the vector cores ({load.reg.stmt}) has no "
                                   f"ascend-910b form (the 910B has no FP8 type); store {load.reg.stmt} in bf16")
            space = T.Workspace([_blocks(kernel, op.stmt)] + list(shape), dtype)
            kind = f"vector-operand-{n}"
            out.append(T.CrossCore(op.stmt, kind, take(op.stmt, kind, 1), [space]))
    if op.partial.sum_on_vector:
        size = {a.iter: a.size for a in op.tile.axes}
        space = T.Workspace([_blocks(kernel, op.stmt), size[i], size[j]], "f32")
        out.append(T.CrossCore(op.stmt, "cube-step", take(op.stmt, "cube-step", 1), [space]))
    return out


def _blocks(kernel: T.TileKernel, stmt: str) -> int:
    """The kernel's number of blocks (one workspace slot each): a constant, or BackendError."""
    blocks = 1
    for axis in kernel.grid:
        for e in axis.extents:
            e = simplify(e)
            if not isinstance(e, T.Const):
                raise BackendError(f"{stmt}: a GM workspace between the cores needs a constant number of blocks")
            blocks *= e.value
    return blocks


# ---------------------------------------------------------------- facts about one kernel


class Kernel910B:
    def __init__(self, program: T.TileProgram, kernel: T.TileKernel):
        self.program, self.kernel = program, kernel
        self.cube = matrix_statements(kernel)  # the products on the cube (compiler/analysis/placement.py)
        # the cube's FP8 products: the vector cores decode their E4M3 operand tiles to f16 first
        self.fp8_dots = {op.stmt for op in T.walk_ops(kernel.body)
                         if isinstance(op, T.AccUpdate) and op.stmt in self.cube and op.partial.lhs_dtype == "f8e4m3"}
        # one row width for the whole kernel, so that every statement's tiles keep the same shape
        self.min_row = UB_ROW_BYTES // min(BYTES[t.dtype] for t in kernel.tensors)
        self.e4m3_tiles = any(t.dtype == "f8e4m3" for t in kernel.tensors)

    def dims(self, tensor: str) -> list:
        return tensor_dims(self.program, next(t for t in self.kernel.tensors if t.name == tensor))

    def planes(self, tensor: str) -> dict:
        """Dimension -> planes of a tensor the schedule folds (fold_storage; {} when it does not): index d of the
        dimension is stored at d mod planes, so the printer reads and writes its tiles lane by lane (a copy
        region could cross the planes' wrap-around)."""
        return dict(next((t.fold for t in self.kernel.tensors if t.name == tensor), ()))

    # ------------------------------------------------------------ which core runs an op

    def on_cube(self, op) -> bool:
        """Whether the cube runs an op: its products on the cube (placement.py's unit), and the start and end of
        the sums it keeps in L0C (`on_matrix`); a sum the vector cores keep (`sum_on_vector`) is theirs."""
        if isinstance(op, T.AccUpdate):
            return isinstance(op.partial, T.Dot) and unit_of(op) == MATRIX
        return isinstance(op, (T.AccInit, T.AccFinish)) and op.on_matrix

    def is_vector_op(self, op) -> bool:
        if isinstance(op, T.Compute):
            return True
        if isinstance(op, (T.AccInit, T.AccUpdate)):
            return not self.on_cube(op)
        if isinstance(op, T.AccFinish):
            return not self.on_cube(op) or self.needs_vector(op)
        return False

    def needs_vector(self, op: T.AccFinish) -> bool:
        """Does a finished cube reduction pass through the vector core (scaling, rounding, masking, a register
        value), or can L0C go straight to GM?"""
        if not (op.store and not op.keep and op.dtype == "f32" and op.scale == 1.0
                and list(op.lhs) == [a.iter for a in op.tile.axes]) or self.planes(op.stmt):
            return True  # (a folded tensor is stored lane by lane by the vector cores)
        return bool(op.unclipped)  # lanes inside the tensor that the store must leave as they are

    def vector_ops(self, ops):
        for op in ops:
            if isinstance(op, T.SerialLoop):
                yield from self.vector_ops(op.body)
            elif self.is_vector_op(op):
                yield op

    # ------------------------------------------------------------ both vector cores

    def rows_per_core(self) -> Optional[int]:
        """Half the rows of the kernel's vector tiles, if both vector cores can each take half of them.

        Each AI core of the 910B has two vector cores with a UB each; splitting the tile rows between them
        halves the UB a tile needs and the vector work per core.  That needs every vector statement's tile to
        have the same rows (the first axis, at least 2-D, an even count) and no reduction across rows."""
        ops = list(self.vector_ops(self.kernel.body))
        if not ops or passes_through_memory(self.kernel):
            return None  # a core's barrier orders its own stores and loads, not the other core's
        rows = set()
        for op in ops:
            if len(op.tile.axes) < 2:
                return None
            if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Reduce) and 0 in op.partial.axes:
                return None
            if self.e4m3_tiles and math.prod(a.size for a in op.tile.axes) // 2 < E4M3_TILE:
                return None  # the E4M3 conversions need 128 elements per tile (whole 256-byte f16 repeats)
            first = op.tile.axes[0]
            if any(a.op == "==" and mentions(a, first.iter) for a in atoms(op.tile.mask)):
                # one row at a time (a serial loop over the rows): a core's half may lie wholly past the tensor
                # with no upper bound in the mask to guard its copies (the printer's first-row test)
                return None
            rows.add((first.size, repr(simplify(first.offset))))
            if self._written_back_by_another_row_owner(op):
                return None
        if len(rows) != 1:
            return None
        size = rows.pop()[0]
        return size // 2 if size >= 2 and size % 2 == 0 else None

    def _written_back_by_another_row_owner(self, op) -> bool:
        """Whether a masked store writes back lanes that the next iteration of a loop stores, while that loop
        also moves the tile's rows (the causal triangle of a column loop): split between the vector cores, a
        row would belong to one core in this iteration and to the other in the next, and the two race."""
        if not getattr(op, "store", False):
            return False
        moving = {v.name for v in expr_vars(op.tile.axes[0].offset)}
        col = op.tile.axes[-1].iter  # the comparisons that exclude lanes of a row inside the tensor
        return any(moving & {v.name for v in expr_vars(side)} for a in atoms(conjunction(list(op.unclipped))) if mentions(a, col)
                   for side in (a.lhs, a.rhs))

    def halve(self, op, half: int):
        """The vector statement's tile: this vector core's half of the rows (vid 0 the first, vid 1 the second)."""
        if not self.is_vector_op(op):
            return op
        first, *rest = op.tile.axes
        tile = T.Tile(axes=[half_rows(first, half)] + rest, scalars=op.tile.scalars, mask=op.tile.mask)
        return dataclasses.replace(op, tile=tile)

    # ------------------------------------------------------------ narrow tiles

    def widened(self) -> T.TileKernel:
        widths: dict = {}
        T.map_ops(self.kernel.body, lambda op: self._want_width(op, widths))
        return dataclasses.replace(self.kernel, body=T.map_ops(self.kernel.body, lambda op: self.widen(op, widths)))

    def _want_width(self, op, widths: dict):
        """Record the width each axis of a vector tile needs (below); an axis takes the largest any statement of
        the kernel needs, so that the tiles of an accumulator, its partial results and the statements reading
        it keep one shape (a row maximum over [16, 32] lanes goes into 16 lanes of its accumulator, not 128)."""
        if self._keeps_its_width(op):
            return op
        size = self._row_widths(op)
        if self.e4m3_tiles and math.prod(size.values()) < E4M3_TILE:
            last = op.tile.axes[-1].iter
            size[last] *= E4M3_TILE // math.prod(size.values())
        for a in op.tile.axes:
            widths[_axis_key(a)] = max(widths.get(_axis_key(a), a.size), size[a.iter])
        return op

    def _row_widths(self, op) -> dict:
        """Each axis of `op`'s tile at its own size, every axis after the first (the rows copied to UB) at least 32
        bytes of the kernel's narrowest dtype."""
        return {a.iter: (max(a.size, self.min_row) if n else a.size) for n, a in enumerate(op.tile.axes)}

    def _keeps_its_width(self, op) -> bool:
        """A barrier (no tile), an op the cube alone runs, or a tile without axes is never widened.  A cube result
        the vector cores take from the workspace (`needs_vector`) is one of their tiles: the statements reading
        it are widened, so it is too (the workspace keeps the cube's shape; the copy into UB is clipped to it)."""
        return isinstance(op, T.Barrier) or not op.tile.axes or not self.is_vector_op(op)

    def widen(self, op, widths: dict):
        """Vector tiles whose rows are narrower than 32 bytes of the kernel's narrowest tensor dtype, widened to
        that, the extra lanes masked.

        A GM <-> UB copy starts every UB row on a 32-byte block (DataCopyPad, tilelang-ascend common.h), so a
        multi-row UB tile copied from or to GM needs rows of a multiple of 32 bytes; in a kernel with E4M3
        tensors every tile also needs a multiple of 128 elements (its conversions compare whole 256-byte repeats
        of f16).  The extra lanes are read from GM (clipped at the tensor) and are outside the statement's mask,
        so they are never reduced over and a store keeps their GM values.  A store would race with the block
        that owns those lanes, so a widened axis must reach past the end of the stored tensor."""
        if self._keeps_its_width(op):
            return op
        size = {a.iter: widths[_axis_key(a)] for a in op.tile.axes}
        narrow = [a for a in op.tile.axes if size[a.iter] != a.size]
        if not narrow:
            return op
        extra = [T.Bin("<=", T.Var(a.iter), simplify(T.Bin("+", a.offset, T.Const(a.size - 1)))) for a in narrow]
        if getattr(op, "store", False) and self.store_form(op.stmt, op.tile, op.lhs)[0] == "direct":
            self._check_widened_store(op, narrow, size)  # a column or lane-by-lane store writes only its lanes
        axes = [T.Axis(a.iter, a.offset, size[a.iter], a.offset_isl) for a in op.tile.axes]
        tile = T.Tile(axes=axes, scalars=op.tile.scalars, mask=conjunction(atoms(op.tile.mask) + extra))
        changes = {"tile": tile}
        if getattr(op, "store", False):  # the new comparisons keep lanes inside the tensor too
            changes["unclipped"] = unclipped_atoms(tile, op.lhs, self.dims(op.stmt))
        if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Reduce):
            body = op.partial.operand
            if isinstance(body, T.Select):
                body = T.Select(conjunction(atoms(body.cond) + extra), body.then, body.other)
            else:
                identity = T.Const(reduce_ops.identity(op.op))
                body = T.Select(conjunction(extra), body, identity)
            changes["partial"] = dataclasses.replace(op.partial, operand=body)
        return dataclasses.replace(op, **changes)

    def _check_widened_store(self, op, narrow, size) -> None:
        dims = self.dims(op.stmt)
        for a in narrow:
            if a.iter in op.lhs:
                dim = dims[list(op.lhs).index(a.iter)]
                if not isinstance(dim, int) or dim > a.size:
                    why = self._widening_reason(op, a, size[a.iter])
                    raise BackendError(
                        f"{op.stmt}: its tile of {a.size} lanes along {a.iter} (its extent in the tile -- a split's "
                        f"factor, or the span of a skewed or short loop -- rounded up to a power of two) would be widened to {size[a.iter]} lanes "
                        f"({why}), and the wider tile would write lanes of the neighbouring tile; use tiles of at "
                        f"least {size[a.iter]} along {a.iter} (or one tile spanning the dimension)")

    def _widening_reason(self, op, axis, width: int) -> str:
        """Why `axis` of `op`'s tile is `width` lanes wide (`_want_width`): its own row of 32 bytes, the E4M3
        conversions' 128 elements, or the width another statement of the kernel gives the same axis."""
        own = self._row_widths(op)
        if own[axis.iter] == width:
            return (f"a tile row copied between GM and UB is a whole number of 32-byte blocks ({self.min_row} lanes "
                    f"of this kernel's narrowest dtype)")
        if self.e4m3_tiles and math.prod(own.values()) < E4M3_TILE:
            return "the E4M3 conversions compare whole 256-byte repeats (128 f16 values)"
        return (f"another statement of the kernel needs this axis {width} lanes wide, and the tiles of a kernel "
                f"share one width per axis so that the values they pass keep one shape")

    # ------------------------------------------------------------ how a tile lies in a tensor

    def store_form(self, stmt, tile, lhs) -> tuple:
        """(form, why) of a store of `tile` to stmt[lhs]: `layout`'s "direct" or "column", or "lanes" where no one
        T.copy moves the region (more than two tile axes, `deep_axes`, or no copy form: `NoCopyForm`), with why.
        The fixed iterators count as constants: only the axes matter."""
        if len(deep_axes([T.Var(it) for it in lhs], tile)) > 2:
            return "lanes", DEEP_REGION
        axes = [a.iter for a in tile.axes]
        try:
            return layout(stmt, [T.Var(it) if it in axes else T.Const(0) for it in lhs], axes, "store"), None
        except NoCopyForm:
            return "lanes", "no T.copy moves its region"


class NoCopyForm(BackendError):
    """A region that no one T.copy moves (`layout`): a load or a store of it goes lane by lane instead (values.py
    `_load`, `Kernel910B.store_form`)."""


def layout(tensor: str, indices, axes, what: str) -> str:
    """How a tile with `axes` lies in `tensor` indexed by `indices`: "direct" when the axes are the tensor's
    last dimensions in the tile's order (a T.copy of the UB tile moves exactly that region: TileLang
    right-aligns the tile's extents on the GM point), "column" for a 1-D tile along the dimension before the
    last with the last one fixed (its elements are a row apart: the printer's `_load_column`, `_store_column`).
    An index may be its axis shifted by what does not vary along the tile (`X[i + 1, j]`, `X[t - 1, i, j - 1]`):
    the region starts there (`shifted_axis`)."""
    at = [n for n, i in enumerate(indices) if any(v.name in axes for v in expr_vars(i))]
    order = [shifted_axis(indices[n], axes) for n in at]
    if order != list(axes):
        raise NoCopyForm(f"{what} of {tensor} is not a whole tile in the tile's axis order; no T.copy form for "
                           f"ascend-910b")
    if at == list(range(len(indices) - len(axes), len(indices))):
        return "direct"
    if len(axes) == 1 and at == [len(indices) - 2]:
        return "column"
    raise NoCopyForm(f"{what} of {tensor}: the tile's axes {', '.join(axes)} are not the last dimensions of "
                       f"{tensor}, so its elements are not one T.copy region of the tile's shape; no ascend-910b "
                       f"form (make them the innermost iterators of {tensor}'s indices)")


def shifted_axis(index, axes) -> Optional[str]:
    """The tile axis an index walks one element a lane (`j`, `j - 1`, `i + t + 2`), or None (`2 * j`, `i + j`,
    `j // 2`): an affine index with coefficient 1 on one of the tile's axes and 0 on the others."""
    form = linear(simplify(index))
    if form is None:
        return None
    along = [name for name, c in form[0].items() if name in axes and c != 0]
    return along[0] if len(along) == 1 and form[0][along[0]] == 1 else None


def shift_of(index, axis: str) -> T.Expr:
    """`index` less its axis (`j - 1` -> -1, `t + j` -> t): where the region starts, from the axis's start."""
    coefs, const = linear(simplify(index))
    return expr_of(({name: c for name, c in coefs.items() if name != axis}, const))


# ---------------------------------------------------------------- helpers


def half_rows(axis: T.Axis, half: int) -> T.Axis:
    """A tile's first axis as vector core `VID` takes it: its half of the rows (vid 0 the first, vid 1 the
    second)."""
    return T.Axis(axis.iter, simplify(T.Bin("+", axis.offset, T.Bin("*", T.Var(VID), T.Const(half)))), half)


def _axis_key(axis: T.Axis) -> tuple:
    """A tile axis as the statements of a kernel share it (an accumulator and its partial results, a value and
    its readers): its iterator and where it starts."""
    return axis.iter, repr(simplify(axis.offset))


