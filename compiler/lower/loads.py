"""Values and loads: a statement's expression as a tile expression, and which lanes of each load may read
memory.

* `_value` turns the statement's expression into tileir (`Const`, `Var`, `Bin`, `Round`, `Select`, calls;
  compositions expanded from compiler/model/functions.py); arithmetic on constants is folded now with the
  program's f32 semantics (`fold_constants`).
* A read of a tensor is a register tile of a statement of the same kernel (compiler/lower/registers.py), or
  a `Load` from global memory (`_access`); a value computed in this kernel and read with another tile (or at an
  earlier iteration of a loop that carries it) is loaded back from global memory after a barrier
  (`_memory_read`).
* A load's mask (`_access_mask`) keeps it inside its tensor over the lanes its pointer tile spans, and says
  whether the mask is exactly the tensor's bounds (`Load.mask_is_bounds`); a matrix-product operand
  (`_operand_load`) must also be 0 on the lanes of k outside the reduction.

`ValueLowering` is mixed into `_KernelLowering` (compiler/lower/build.py) and reads its fields (`model`,
`produced`, `kernel_of`, `index`, `temps`, `memory_reads`) and the geometry (compiler/lower/geometry.py).
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.frontend import ast
from tdsl.frontend.printer import expr_text as expr_source

from tdsl.compiler.errors import BackendError
from tdsl.compiler.model.functions import COMPOSITIONS, TileAlgebra, expand_tile
from tdsl.compiler.model.program import Stmt, read_relation
from tdsl.compiler.lower.geometry import _Geometry, _embed, _mask_expr, _project_onto, _total_map
from tdsl.compiler.lower.tileir import Bin, Call, Const, Expr, Load, NegInfAsZero, Neg, Round, Select, Tile, Var
from tdsl.compiler.schedule.tree import Loop

CASTS = ast.DTYPES  # the casts of the language, one per dtype


class NeedsMemory(Exception):
    """A temporary that this kernel reads back other than from registers: it must be kept in global memory (raised
    during lowering; compiler/lower/build.py adds it to the temporaries and lowers the program again)."""

    def __init__(self, tensor: str):
        super().__init__(tensor)
        self.tensor = tensor


class ValueLowering:
    """Tile expressions and loads of one kernel's statements (see the module docstring)."""

    def _value(self, e: ast.Expr, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        v = lambda x: self._value(x, stmt, tile, context)  # noqa: E731
        if isinstance(e, ast.FloatLit):
            return Const(float(e.value))
        if isinstance(e, ast.IntLit):
            return Const(float(e.value))
        if isinstance(e, ast.Name):
            return self._name(e.name, stmt, value=True)
        if isinstance(e, ast.Neg):
            return fold_constants(Neg(v(e.operand)))
        if isinstance(e, ast.BinOp):
            if e.op in ("//", "%"):
                raise BackendError(f"'{e.op}' is only allowed in indices")
            return fold_constants(Bin(e.op, v(e.lhs), v(e.rhs)))
        if isinstance(e, ast.Compare):
            return Bin(e.op, v(e.lhs), v(e.rhs))
        if isinstance(e, ast.Call):
            if e.func in CASTS:
                return fold_constants(Round(e.func, v(e.args[0]))) if e.func != "f32" else v(e.args[0])
            if e.func == "where":
                return Select(v(e.args[0]), v(e.args[1]), v(e.args[2]))
            if e.func in COMPOSITIONS:  # backends implement primitives only (compiler/model/functions.py)
                return expand_tile(e.func, v(e.args[0]), _FOLDING)
            zeros = self.zero_signs.call(e) if e.func in ("max", "min") else True
            return fold_constants(Call(e.func, tuple(v(a) for a in e.args), zeros))
        if isinstance(e, ast.Access):
            return self._access(e, stmt, tile, context)
        raise BackendError(f"{expr_source(e)}: no tile form for this expression")

    def _name(self, name: str, stmt: Stmt, value: bool) -> Expr:
        if name in stmt.iters:
            return Var(name)
        size = self.model.sizes.get(name)
        if size is None and name in self.model.params:
            return Var(name)
        if isinstance(size, float) or value:
            return Const(float(size) if value else size)
        return Const(size)

    def _index(self, e: ast.Expr, stmt: Stmt) -> Expr:
        if isinstance(e, ast.IntLit):
            return Const(e.value)
        if isinstance(e, ast.Name):
            return self._name(e.name, stmt, value=False)
        if isinstance(e, ast.Neg):
            return Neg(self._index(e.operand, stmt))
        if isinstance(e, ast.BinOp):
            return Bin(e.op, self._index(e.lhs, stmt), self._index(e.rhs, stmt))
        raise BackendError(f"the index {expr_source(e)} is not an affine expression of iterators and sizes")

    def _access(self, e: ast.Access, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        read = self._read(e, stmt, tile, context)
        return NegInfAsZero(read) if e.neg_inf_as_zero and not isinstance(read, Const) else read

    def _read(self, e: ast.Access, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        if _never_taken(e, stmt):
            # a `where` branch no instance takes at these sizes: its value is never used, so it reads nothing --
            # no load, no stored temporary, no barrier (the buffer plan ignores such reads alike)
            return Const(0.0)
        if e.tensor == stmt.name:
            # A recurrence reads elements it computed in earlier iterations of the serial loops that carry it
            # (each iteration ends with a barrier: SerialLoop.barrier), never a lane of this tile (a loop that
            # carries it is serial, compiler/lower/loops.py): from global memory, where they were stored.
            return self._load(e, stmt, tile, context)
        producer = self.produced.get(e.tensor)
        if producer is not None and producer.keep:
            reg = self._register(e, stmt, tile, producer, context)
            if reg is not None:
                return reg
        running = self._running_read(e, stmt, tile, context)
        if running is not None:
            return running
        if self.kernel_of.get(e.tensor) == self.index:
            return self._memory_read(e, stmt, tile, context)
        return self._load(e, stmt, tile, context)

    def _memory_read(self, e: ast.Access, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        """A read of a value this kernel computes, other than element for element from its register tile: from
        global memory, where the producer stored it.  The schedule is legal, so every instance that writes an
        element read runs before the reader and in the same program (a bound loop carries no dependence); the
        program's threads wait between the store and the load (`Barrier`, or `SerialLoop.barrier` when a loop
        carries the dependence: compiler/lower/build.py).  Not while the producer's reduction is still being
        summed (its accumulator is stored after the loop that walks it), nor when the producer has not run yet
        and no loop around carries the value from an earlier iteration (unless the read is never taken: a `where`
        branch with no instance here)."""
        if self._accumulation_loop(e.tensor, context) is not None or (
                e.tensor not in self.produced and self._depends(e.tensor, stmt.name)
                and not self._carried_into(e.tensor, stmt.name, context)):
            raise BackendError(self._early_read(stmt.name, e.tensor, context))
        if self.model.tensors[e.tensor].kind == "temp" and e.tensor not in self.temps:
            raise NeedsMemory(e.tensor)  # lower() keeps it in global memory and lowers again
        self.memory_reads.add(e.tensor)
        return self._load(e, stmt, tile, context)

    def _depends(self, producer: str, reader: str) -> bool:
        """Does the reader read anything the producer writes (a read in a `where` branch never taken does not)?"""
        return any(d.kind == "flow" and d.src == producer and d.dst == reader for d in self.deps)

    def _carried_into(self, producer: str, reader: str, context: list[Loop]) -> bool:
        """Does a loop around the reader carry a dependence from the producer to it (the value comes from an
        earlier iteration)?"""
        return any(d.src == producer and d.dst == reader for loop in context for d, _ in self._carried(loop))

    def _load(self, e: ast.Access, stmt: Stmt, tile: Tile, context: list[Loop]) -> Expr:
        mask, bounds = self._access_mask(e, stmt, tile, context)
        if isinstance(mask, Const) and not mask.value:
            # no lane reads inside the tensor: a read in a `where` branch never taken in this tile (the model
            # checked that every taken read is inside), so its value is never used
            return Const(0.0)
        return Load(e.tensor, tuple(self._index(i, stmt) for i in e.indices), mask, mask_is_bounds=bounds)

    def _early_read(self, reader: str, reduction: str, context: list[Loop]) -> str:
        """Why `reader` cannot read `reduction` here: inside the loop that walks it, the value is an accumulator."""
        loop = self._accumulation_loop(reduction, context)
        if loop is None:
            return f"{reader} reads {reduction} before {reduction} is computed in this kernel"
        around = context[: context.index(loop)]
        fix = f"reverse_compute_at({reader}, {reduction}.{around[-1].name})" if around else "a separate kernel"
        return (f"{reader} reads {reduction} inside loop {loop.name}, which walks the reduction of {reduction}: in a "
                f"kernel its accumulator is final only after that loop; place {reader} after it ({fix})")

    def _access_mask(self, e: ast.Access, stmt: Stmt, tile: Tile, context) -> tuple[Optional[Expr], bool]:
        """Which lanes of a load may read memory: those whose index lies inside the tensor (and whether the mask
        is exactly that).

        A lane's value matters only where the statement has an instance, and there the index is inside (the
        model checked every read); every other lane is masked where the statement stores, reduces or keeps
        its value, so it may read anything -- as long as the read stays inside the tensor.  Over the lanes the
        pointer tile spans (the iterators the access uses), simplified against what the code guarantees: a
        read that never leaves its tensor has no mask."""
        used = {n.name for i in e.indices for n in ast.walk(i) if isinstance(n, ast.Name)} & set(stmt.iters)
        if not used:
            return None, True
        g = self._geometry(stmt, context, [it for it in stmt.iters if it in used])
        inside = self._in_bounds(stmt, e, g)
        if inside is None:  # not one affine function: the instances' lanes are inside, and only they are read
            return self._mask(g), False
        return _mask_expr(inside, g.box), True

    def _operand_load(self, stmt: Stmt, context, iters, node: ast.Access, outer: str) -> Load:
        """The load of a matrix-product operand over (`outer`, k): the lanes that must hold their values, the
        rest 0.

        For every row (or column) `outer` of the accumulator that holds an instance -- in any step of the
        loops that walk the reduction, not only this one -- the lanes of k outside the reduction must be 0 so
        that the product adds nothing for them; rows with no instance at all are masked where the product is
        stored, so there a lane only has to stay inside the tensor.  When those lanes are exactly the ones
        inside the tensor, `mask_is_bounds` says so (a clipped copy then loads the operand)."""
        indices = tuple(self._index(x, stmt) for x in node.indices)
        g = self._geometry(stmt, context, iters)
        inside = self._in_bounds(stmt, node, g)
        if inside is None:
            return Load(node.tensor, indices, self._mask(g))
        around = self._anchor(stmt, context)
        rows = self._geometry(stmt, context if around is None else around, [outer])
        rows = _embed(rows.members, rows.loop_names + [outer], g.loop_names + g.iters)
        needed = g.members.union(inside.subtract(rows.align_params(inside.get_space())))
        lanes = _mask_expr(needed, g.box)
        valid = None if g.exact else self._valid_loop_values(g.rel, g.facts)
        mask = lanes if valid is None else valid if lanes is None else Bin("and", valid, lanes)
        box = g.box.align_params(inside.get_space())
        bounds = valid is None and inside.intersect(box).is_subset(needed.align_params(inside.get_space()))
        return Load(node.tensor, indices, mask, mask_is_bounds=bounds)

    def _in_bounds(self, stmt: Stmt, node: ast.Access, g: "_Geometry") -> Optional[isl.Set]:
        """The lanes of `g` at which the access `node` reads inside its tensor (a set over the loop variables and
        `g.iters`), or None when the access is not one affine function of the iterators."""
        # the read's indices as the code computes them at every lane, from the node itself (a step that rewrites
        # the value makes new nodes), not only at the instances: there isl may write them with another iterator
        # equal to theirs (r[i2, i] with i = i2 reads ss[i2]), which says nothing of the lanes of i; and a read in
        # a `where` branch is taken at fewer instances (Access.relation), but the generated code evaluates both
        # branches, so its mask must keep every lane inside the tensor
        function = _total_map(read_relation(self.model, stmt, node, everywhere=True))
        if function is None:
            return None
        box = self.model.tensors[node.tensor].box
        inside = function.intersect_range(box.align_params(function.get_space().range())).domain()
        inside = _project_onto(inside, stmt.iters, g.iters)
        return _embed(inside, g.iters, g.loop_names + g.iters).align_params(g.box.get_space())


def fold_constants(e: Expr) -> Expr:
    """Arithmetic, roundings and primitive functions of constants, computed now with the program's f32 semantics
    (each operation rounded to f32; a cast rounds to its dtype; a function as the reference interpreter computes
    it), so no backend evaluates them in another precision (Python floats are f64), has to apply a rounding
    helper to a plain number, or hands Python a constant expression it refuses (`1.0 / 0.0` of
    `fast_inverse(0.0)` raises ZeroDivisionError where the interpreter's f32 division gives infinity)."""
    import numpy as np

    from tdsl.compiler.model import dtypes
    from tdsl.compiler.reference.runtime import primitive_function

    def value(x):
        return np.float32(x.value) if isinstance(x, Const) else None

    with np.errstate(all="ignore"):
        if isinstance(e, Call) and all(value(a) is not None for a in e.args):  # the interpreter's own function
            return Const(float(primitive_function(e.func)(*(value(a) for a in e.args))))
        if isinstance(e, Neg) and value(e.operand) is not None:
            return Const(float(-value(e.operand)))
        if isinstance(e, Round) and value(e.operand) is not None:
            return Const(float(dtypes.round_to(e.dtype, value(e.operand))))
        if isinstance(e, Bin) and e.op in _F32_OPS and value(e.lhs) is not None and value(e.rhs) is not None:
            return Const(float(_F32_OPS[e.op](value(e.lhs), value(e.rhs))))
    return e


class _FoldingAlgebra(TileAlgebra):
    """Builds a composition's expansion with each new node folded (`fold_constants`), as `_value` folds the
    program's own operators: `silu(0.0 / 0.0)` becomes one constant, and the argument is not walked again."""

    def neg(self, x):
        return fold_constants(super().neg(x))

    def add(self, x, y):
        return fold_constants(super().add(x, y))

    def mul(self, x, y):
        return fold_constants(super().mul(x, y))

    def div(self, x, y):
        return fold_constants(super().div(x, y))

    def call(self, func, x):
        return fold_constants(super().call(func, x))


_FOLDING = _FoldingAlgebra()


_F32_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}


def _never_taken(e: ast.Access, stmt: Stmt) -> bool:
    """Is `e` a read that no instance of the statement takes (its access relation is empty)?  The model's reads
    hold copies of the nodes, so every read equal to `e` counts (one taken elsewhere, after compute_inline copied
    a node into two branches, keeps the load)."""
    same = [r for r in stmt.reads if r.node == e]
    return bool(same) and all(r.relation.is_empty() for r in same)
