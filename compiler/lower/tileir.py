"""The tile program: a backend-neutral description of the kernels a schedule asks for.

`compiler/lower/build.py` derives it from a scheduled tree; every backend (Triton,
TileLang) consumes it unchanged and re-derives no schedule decision.

A `TileKernel` is one launch: grid axes (bound loops), run-time size
arguments, the tensors it touches, and a body of ops:

* `SerialLoop` -- a loop every program runs in order (e.g. `ko`), maybe pipelined;
* `Compute`    -- one elementwise statement over a tile (its axes are the
  statement iterators that vary inside one iteration of the enclosing loops);
* `AccInit` / `AccUpdate` / `AccFinish` -- a reduction: the accumulator is
  created before the loops that walk the reduction, updated with one tile's
  partial result (a tile `Dot` or a tile `Reduce`) inside them, and rounded
  to the statement's dtype after them.

Expressions (`Expr`) are a small tree: integer index arithmetic over loop
variables and sizes (from isl), and f32 value arithmetic over tiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Optional, Union


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Var:
    """A loop variable (grid or serial), a run-time size, or an iterator of the current tile."""

    name: str


@dataclass(frozen=True)
class Const:
    value: Union[int, float]


@dataclass(frozen=True)
class Bin:
    """Integer or value arithmetic, comparisons and boolean and/or.

    op: + - * / // (floor division) % (non-negative remainder) min max
        < <= > >= == != and or
    """

    op: str
    lhs: "Expr"
    rhs: "Expr"


@dataclass(frozen=True)
class Neg:
    operand: "Expr"


@dataclass(frozen=True)
class Select:
    cond: "Expr"
    then: "Expr"
    other: "Expr"


@dataclass(frozen=True)
class Load:
    """Read a global tensor at broadcast index tiles; masked lanes read `other`."""

    tensor: str
    indices: tuple
    mask: Optional["Expr"]
    other: float = 0.0
    # The mask excludes only lanes outside the tensor (trivially so without a mask): a copy clipped at the
    # tensor's edges, zero-filling the rest, reads exactly these lanes.  Decided with isl by the lowering.
    mask_is_bounds: bool = False
    # Triton: read through a TMA tensor descriptor whose box is this many elements per tensor dimension, at the
    # tile's offsets, instead of pointers (compiler/lower/passes/tma.py); (): pointers.  Other backends ignore it.
    box: tuple = ()


@dataclass(frozen=True)
class Reg:
    """The register tile of an earlier statement of the same kernel (already rounded to its dtype).

    `axes[n]` is the position, in the reading statement's tile, of the
    producer's tile axis n (the producer's tile is broadcast along the others).
    """

    stmt: str
    axes: tuple = ()


@dataclass(frozen=True)
class Running:
    """The current value of a reduction's accumulator, read before the reduction is complete: the running maximum
    an exponential reads after `online` (compiler/model/online.py), rounded to the statement's dtype.  `axes` as
    in `Reg`."""

    stmt: str
    axes: tuple = ()
    dtype: str = "f32"


@dataclass(frozen=True)
class NegInfAsZero:
    """A maximum read by its exponential exp((X - m)·c) when it declares `combine online`: its value, 0 where it
    is -inf (compiler/model/online.py `mark_exponent_reads`: exp(-inf - 0) = 0 on a row that has met only -inf
    terms, not exp(-inf - (-inf)) = NaN)."""

    operand: "Expr"


@dataclass(frozen=True)
class Reference:
    """The running maximum a rescaled accumulator was last brought to (see `Rescaling`); `axes` as in `Reg`."""

    stmt: str  # the accumulator's statement
    axes: tuple = ()


@dataclass(frozen=True)
class RegOperand:
    """A tile product's operand held in registers: an earlier statement's tile of this kernel, 0 outside `mask`
    (so that lanes outside the reduction add nothing)."""

    reg: Reg
    mask: Optional["Expr"]
    mask_is_bounds: bool = False  # never a copy of memory
    # the statement the operand stands for when `reg` is the tile it rounds to the operand dtype (P = bf16(E): the
    # product reads E, converted once; compiler/lower/passes/rounded_operands.py); "": `reg` itself
    rounds: str = ""


@dataclass(frozen=True)
class Preloaded:
    """A product operand loaded once before the loops it does not change in (a `Preload` op of that name)."""

    name: str


@dataclass(frozen=True)
class Call:
    """A primitive function (compiler/model/functions.py): exp log sqrt tanh abs max min, on f32 values."""

    func: str
    args: tuple
    # max / min: a use can tell the zero it returns, so it is IEEE's (-0.0 below +0.0), not the hardware's
    # either-zero (compiler/analysis/zero_signs.py)
    zeros: bool = True


@dataclass(frozen=True)
class Round:
    """Round an f32 value to a storage dtype (bf16, f16, f8e4m3 saturating); the result is f32 again."""

    dtype: str
    operand: "Expr"


@dataclass(frozen=True)
class Reduce:
    """Tile reduction over some axes of the current statement's tile."""

    op: str  # sum | max | min
    operand: "Expr"
    axes: tuple  # axis positions in the statement's tile
    zeros: bool = True  # max / min: IEEE's zero, as Call.zeros


@dataclass(frozen=True)
class Dot:
    """Matrix product of two tiles loaded in their storage dtype: lhs [I, K] x rhs [K, J] (f32 result)."""

    lhs: "Expr"
    rhs: "Expr"
    lhs_dtype: str
    rhs_dtype: str
    unit: str = ""  # matrix | vector, decided per backend by compiler/analysis/placement.py ("" until then)
    warp_rows: bool = False  # each warp owns whole rows of the product tile (placement.py; TileLang's FullRow)
    # the matrix unit forms each step's product alone (a cleared accumulator) and the vector unit adds it to the
    # sum, which the vector unit holds: a sum it rescales (online) where the matrix unit's accumulator is out of
    # its reach (Ascend's L0C); placement.py: sums_on_vector
    sum_on_vector: bool = False
    # FP8 products the matrix unit may keep in its reduced-precision accumulator before adding them to the f32
    # sum: 0 none (the default), N (`combine fast_accum(N)`), None any number (`combine fast_accum`)
    # (dependences.imprecise_products)
    imprecise: Optional[int] = 0
    # some lane multiplies an element the program reads by one it does not (a causal condition masks one
    # operand only: compiler/lower/reductions.py `_absent_terms`): the masked operand is 0 there, and 0 times an
    # infinite or NaN element is NaN, so a backend computes such a product so that those lanes add nothing
    # (placement.MatrixUnit.absent_terms: computed term by term where an operand that meets those zeros holds an
    # infinite or NaN element, on the matrix unit elsewhere; or each term under its lanes' mask on the vector unit)
    absent_terms: bool = False
    absent_where: Optional["Expr"] = None  # the loop iterations that hold such lanes (None: every one)
    # (lhs, rhs): whether that operand's elements meet the other's masked zeros at such lanes (V's, in P·V): the
    # operands a printer looks at for an infinite or NaN element
    absent_met: tuple = (False, False)


def promotion_interval(dot: Dot, k: int) -> Optional[int]:
    """How many terms of an FP8 product over tiles of k terms the kernel lets the matrix unit sum in its
    reduced-precision accumulator before adding them to the f32 sum: at most k (promoting after every tile is within
    "at most N"), 0 after every instruction (no declaration).  None: nothing to promote (not an FP8 product, or
    `combine fast_accum`, which allows any number).  Every printer of a matrix product honours it or refuses."""
    if not dot.lhs_dtype == dot.rhs_dtype == "f8e4m3" or dot.imprecise is None:
        return None
    return min(dot.imprecise, k)


Expr = Union[Var, Const, Bin, Neg, Select, Load, Reg, Running, NegInfAsZero, Reference, RegOperand, Preloaded, Call,
             Round, Reduce, Dot]


# ---------------------------------------------------------------- tiles and ops


class _Value:
    """Tiles, ops, kernels and programs are values: once built, no pass or printer can change them.

    The dataclasses below are frozen, and on construction their lists become tuples and their dicts read-only
    views, so a backend that wants another form of an op builds a new one (`dataclasses.replace`) and emitting
    one program twice, or with several backends, always sees the same program."""

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))
            elif isinstance(value, dict):
                object.__setattr__(self, f.name, MappingProxyType(dict(value)))


@dataclass(frozen=True)
class Axis(_Value):
    """One tile dimension: iterator values offset + 0..size-1 (size a power of two; lanes past the domain masked)."""

    iter: str
    offset: Expr
    size: int
    # The offset as isl saw it (a function of the loop variables), for exact comparisons during lowering.
    offset_isl: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Tile(_Value):
    """Where a statement's instances lie within one iteration of the enclosing loops."""

    axes: list[Axis]  # iterators that vary inside the tile, in tile-axis order
    scalars: dict[str, Expr]  # iterators fixed by the enclosing loops: iterator -> value
    mask: Optional[Expr]  # domain membership of a lane (None: every lane is inside)
    # the scalars' values as isl saw them (functions of the loop variables) and the loop values at which the tile
    # holds instances, for exact comparisons during lowering
    scalars_isl: dict = field(default_factory=dict, compare=False, repr=False)
    held_isl: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class BufferDecl(_Value):
    """A buffer the schedule creates (cache_read / cache_write, or a fused intermediate), from the buffer plan.

    It belongs to the loop it is allocated for, one copy per iteration (per stage when pipelined): a
    `SerialLoop` holds those of its own iterations, the `TileKernel` those of its grid loops and of loops
    inside a tile.  The lowering attaches each to the loop it was planned at by identity, never by name."""

    tensor: str
    kind: str  # read | write | temp
    scope: str  # as the schedule names it (shared, register, local ...)
    loop: str  # the schedule's name of the loop it is allocated at ("" = once per program)
    shape: tuple  # elements per dimension, from the plan
    dtype: str
    stages: int  # copies in flight (the loop's pipeline depth), 1 when not pipelined


@dataclass(frozen=True)
class Compute(_Value):
    stmt: str
    tile: Tile
    value: Expr
    dtype: str  # storage dtype: the value is rounded to it
    store: bool  # write the tile to the global tensor
    keep: bool  # later statements of this kernel read it from registers
    lhs: tuple = ()  # the written tensor's index iterators, in dimension order
    # a store's mask comparisons that exclude lanes inside the tensor, which a copy clipped at the tensor's edges
    # would write (compiler/lower/passes/store_masks.py); () none, None not decided yet
    unclipped: Optional[tuple] = None
    # Triton: store through a TMA tensor descriptor of this box (elements per tensor dimension, in the order of
    # `lhs`) instead of pointers (compiler/lower/passes/tma.py); (): pointers.  Other backends ignore it.
    store_box: tuple = ()


@dataclass(frozen=True)
class Rescaling(_Value):
    """A sum that follows a running maximum (`online`): before each update the accumulator is multiplied by
    `factor` -- the program's exponential of (Reference - Running)·c as it is written, exp or exp2 -- unless the
    maximum it was built with equals the current one (also when both are -inf), and then follows the current
    maximum (docs/interpreter.md)."""

    current: Union[Running, "Reg"]  # the maximum now, broadcast to the accumulator's tile (Reg: already complete)
    factor: Expr


@dataclass(frozen=True)
class AccInit(_Value):
    stmt: str
    tile: Tile  # the accumulator's tile: the left-hand iterators only
    op: str  # sum | max
    accum: str
    follows: Optional[Running] = None  # a rescaled sum: the running maximum (its Reference starts at -inf)
    # the accumulator lives in the matrix unit's own storage (Ascend's L0C), which only its products add to:
    # every update is a matrix product that sums there (placement.py: assign_units)
    on_matrix: bool = False
    # the value a sum starts from (`sum(k) ... from x`) over the accumulator's tile, already rounded to `accum` (a
    # Round, folded for a constant: compiler/lower/reductions.py `_start`); None: the identity of `op`
    start: Optional[Expr] = None


@dataclass(frozen=True)
class Staged(_Value):
    """The on-chip copy a tile product reads one operand from (decided per backend by compiler/analysis/placement.py)."""

    tensor: str
    scope: str  # shared (NVIDIA) | L1 (Ascend cube) | UB (Ascend vector)
    shape: tuple  # the operand's box as stored, in the tensor's index order
    transposed: bool  # stored [K, M] (lhs) or [N, K] (rhs): the product reads it transposed
    dtype: str
    stages: int  # copies in flight: the pipeline depth of the loop it is staged in (1: not pipelined)
    loop: str  # the tile program's variable of the loop it is copied in each iteration of ("" = once)
    cache: Optional[BufferDecl] = None  # the schedule's cache_read of this tensor at that loop, if any


@dataclass(frozen=True)
class AccUpdate(_Value):
    stmt: str
    tile: Tile  # left-hand and reduction iterators of one partial step
    partial: Expr  # the partial result over the accumulator's tile (a Dot or a Reduce)
    op: str
    accum: str
    staged: tuple = ()  # a Dot's operands (lhs, rhs) as Staged, for a backend that copies them on chip first
    rescale: Optional[Rescaling] = None  # a sum that follows a running maximum
    zeros: bool = True  # max / min: the accumulator combines with IEEE's zero, as Call.zeros


@dataclass(frozen=True)
class AccFinish(_Value):
    stmt: str
    tile: Tile  # the accumulator's tile
    dtype: str
    store: bool
    keep: bool
    lhs: tuple = ()
    on_matrix: bool = False  # the accumulator is in the matrix unit's own storage (as its AccInit says)
    # the constant factor of every term of a matrix product, multiplied into the finished sum before it is rounded
    # (placement.product_form: exact for a power of two; other factors only under `combine reassoc`)
    scale: float = 1.0
    unclipped: Optional[tuple] = None  # as in Compute
    store_box: tuple = ()  # as in Compute
    # the lanes outside the tile's mask are set to this value once the sum is complete (so that what is computed
    # from it needs no mask: compiler/lower/passes/masked_scores.py); None: left as they are
    fill: Optional[float] = None


@dataclass(frozen=True)
class WarpSpecialized(_Value):
    """`pipeline(L, stages=S, warp_specialize=true)`: a producer warp group copies the loop's product operands into
    a ring of `stages` slots, and the consumers issue the product of `first` for iteration k+1 before the ops of
    `last` for iteration k and wait for it after (compiler/legality/overlap.py: the statements of the loop body's
    first and last node).  TileLang (NVIDIA) prints it (backends/tilelang/warp_specialized.py), after
    compiler/lower/passes/warp_specialize.py checked its form; the other backends run a plain pipelined loop."""

    stages: int  # slots of the ring
    first: tuple  # the statements whose product is issued one iteration ahead
    last: tuple  # the statements of the last group (the accumulating product and its rescaling)
    part: str = ""  # "full" / "rest": a part of a loop split at its masked iterations; the arrangement walks both


@dataclass(frozen=True)
class SerialLoop(_Value):
    var: str
    lower: Expr
    upper: Expr  # exclusive
    stages: Optional[int]
    body: list["Op"] = field(default_factory=list)
    note: str = ""  # what the schedule placed at this loop (buffers, pipelining), for comments
    buffers: list[BufferDecl] = field(default_factory=list)  # allocated for each iteration of this loop
    # Values pass through global memory from one iteration to the next (a recurrence, or statements of a `for`
    # block: the threads of a program store them, later iterations load them): every thread of the program waits
    # at the end of each iteration
    barrier: bool = False
    warp_specialized: Optional[WarpSpecialized] = None  # the schedule asks for the warp-specialised arrangement


@dataclass(frozen=True)
class Barrier(_Value):
    """Every thread of the program waits here, and the global-memory stores before it become visible to the loads
    after it: a later statement of the same iteration reads what an earlier one stored, other than element for
    element (compiler/lower/build.py, `_synchronised`)."""

    tensors: tuple = ()  # what passes through memory here (for comments)
    # arrays earlier statements read that a later one overwrites (an output stored in an input's array, a folded
    # tensor's plane): every thread has read them before any thread stores
    overwrites: tuple = ()


@dataclass(frozen=True)
class Preload(_Value):
    """Load a product operand before a serial loop whose iterations all read the same tile of it (an input that
    no statement of the kernel writes, at indices and a mask that do not depend on the loop): the operand is
    then `Preloaded(name)` inside (compiler/lower/passes/hoist.py)."""

    name: str
    load: Load
    tile: Tile  # the operand's axes (their offsets do not depend on the loop) and the scalars it uses
    dtype: str
    guard: Optional[Expr] = None  # read only where this holds (the loop runs at least once)
    scope: str = ""  # where it is copied (compiler/analysis/placement.py: stage_operands); "": registers


Op = Union[Compute, AccInit, AccUpdate, AccFinish, SerialLoop, Preload, Barrier]


@dataclass(frozen=True)
class GridAxis(_Value):
    axis: str  # x | y | z
    vars: list[str]  # one loop variable, or several for a fused loop (row-major)
    extents: list[Expr]  # number of iterations of each var (over run-time sizes)
    lowers: list[Expr]


@dataclass(frozen=True)
class TensorArg(_Value):
    name: str
    dtype: str
    shape: list  # ints or size names: the array's, `planes` along a folded dimension
    role: str  # input | output | temp
    fold: tuple = ()  # ((dim, planes), ...): index d of that dimension is stored at d mod planes (fold_storage)
    stored_in: Optional[str] = None  # an output kept in this input's array (store_in): the launcher passes the input


@dataclass(frozen=True)
class Workspace(_Value):
    """A GM tensor with one slot per block (its first dimension), through which the cube core and the vector
    cores of one AI core pass a tile."""

    shape: list  # [blocks, tile dims...]
    dtype: str


@dataclass(frozen=True)
class CrossCore(_Value):
    """Ascend 910B: a statement whose tiles pass between the cube core and the vector cores, the GM workspaces
    they pass through and the cross-core flags that order it (compiler/lower/passes/ascend910b.py).

    kind "cube-result": the cube's finished accumulator goes to the vector cores (rounding, masks, registers);
    flags (ready,).  kind "fp8-operands": the vector cores decode the E4M3 operand tiles of each step of a
    product for the cube; flags (decoded, consumed), one workspace per operand.  kind "vector-operand-<n>": operand
    n of each step of a product on the cube is a tile the vector cores hold (`RegOperand`), written in the operand
    dtype; flags (written,).  kind "cube-step": each step's product, formed alone, for a sum the vector cores keep
    (`Dot.sum_on_vector`); flags (ready,)."""

    stmt: str
    kind: str
    flags: list[int]
    workspaces: list[Workspace]


@dataclass(frozen=True)
class HostLoop(_Value):
    """A loop the launcher runs (schedule step `host`): the kernel is launched once per value of `var` in
    [lower, upper), the value passed as an argument.  Consecutive kernels with the same `key` share the loop."""

    var: str
    lower: Expr  # over run-time sizes and outer host loop variables
    upper: Expr  # exclusive
    key: int  # the schedule loop it comes from


@dataclass(frozen=True)
class TileKernel(_Value):
    name: str
    grid: list[GridAxis]
    tensors: list[TensorArg]
    sizes: list[str]  # run-time size arguments
    body: list[Op]
    num_warps: int = 4
    num_stages: int = 2
    # programs start in groups of this many grid.x values, grid.y sweeping within a group (`launch(group=)`); 1: in
    # the order of their linear index (x fastest)
    grid_group: int = 1
    # one program per multiprocessor walks the grid's programs in order, a stride of the programs' count apart
    # (`launch(persistent=true)`); the launcher picks the count (Triton; the other backends launch one per program)
    persistent: bool = False
    comment: str = ""  # the statements and schedule steps this kernel comes from
    buffers: list[BufferDecl] = field(default_factory=list)  # planned buffers not owned by a SerialLoop
    # Ascend 910B: each of an AI core's two vector cores takes this many rows of every vector tile (the
    # rows of core VID start at offset + VID * vector_rows); None: not split (compiler/lower/passes/ascend910b.py)
    vector_rows: Optional[int] = None
    cross_core: list[CrossCore] = field(default_factory=list)  # Ascend 910B, in program order
    # the loops the launcher runs around this kernel (`host`), outermost first: their variables are arguments
    host: list[HostLoop] = field(default_factory=list)

    @property
    def scalars(self) -> list[str]:
        """The kernel's integer arguments after its tensors: run-time sizes, then host loop variables."""
        return list(self.sizes) + [h.var for h in self.host]


@dataclass(frozen=True)
class TileProgram(_Value):
    name: str  # the .tdsl kernel
    kernels: list[TileKernel]
    inputs: list[TensorArg]
    outputs: list[TensorArg]
    temps: list[TensorArg]  # global intermediates written by one launch and read by a later one
    sizes: dict  # size name -> int (compile-time) or None (run-time argument)
    schedule: str = ""  # the schedule's trace, for comments
    statements: dict = field(default_factory=dict)  # statement -> its .tdsl text, for comments
    size_limit: Optional[int] = None  # the largest run-time size the launcher accepts (KernelModel.size_limit)


def value_operands(e) -> list:
    """The sub-expressions a value expression computes from (a Select's condition is a mask, not one of them)."""
    if isinstance(e, Bin):
        return [e.lhs, e.rhs]
    if isinstance(e, (Neg, Round, Reduce, NegInfAsZero)):
        return [e.operand]
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Select):
        return [e.then, e.other]
    if isinstance(e, Dot):
        return [e.lhs, e.rhs]
    if isinstance(e, RegOperand):
        return [e.reg]
    return []


def expr_vars(e):
    """The variables of an index expression (a mask, an offset, a bound), each time it uses one."""
    if isinstance(e, Var):
        yield e
    elif isinstance(e, Bin):
        yield from expr_vars(e.lhs)
        yield from expr_vars(e.rhs)
    elif isinstance(e, Neg):
        yield from expr_vars(e.operand)
    elif isinstance(e, Select):
        yield from expr_vars(e.cond)
        yield from expr_vars(e.then)
        yield from expr_vars(e.other)


def op_expressions(op) -> list:
    """The values an op computes from: a Compute's value, an AccUpdate's partial, a Preload's load, an AccInit's
    start value (the index expressions of its tile aside)."""
    return [e for e in (getattr(op, name, None) for name in ("value", "partial", "load", "start")) if e is not None]


def values_read(op) -> list:
    """The value expressions an op reads: `op_expressions` and a sum's rescaling."""
    exprs = list(op_expressions(op))
    rescale = getattr(op, "rescale", None)
    if rescale is not None:
        exprs += [rescale.current, rescale.factor]
    return exprs


def registers_read(op) -> set:
    """The statements whose register tiles an op reads (a loop: every op of its body): in its values, the
    conditions of its selects (`where(x > y, ...)` compares values) and a sum's rescaling."""
    if isinstance(op, SerialLoop):
        return set().union(*(registers_read(o) for o in op.body))
    return set().union(*(registers_in(e) for e in values_read(op)))


def registers_in(e) -> set:
    """The statements whose register tiles an expression reads (in a select's condition too)."""
    return {reg.stmt for reg in nodes_in(e, Reg)}


def nodes_in(e, kind) -> list:
    """The sub-expressions of class `kind` an expression reads through, in order (in a select's condition too:
    a comparison of values reads; `value_operands` leaves the condition out)."""
    if isinstance(e, kind):
        return [e]
    found = nodes_in(e.cond, kind) if isinstance(e, Select) else []
    return found + [n for x in value_operands(e) for n in nodes_in(x, kind)]


def walk_ops(body):
    """Every op of a body, loops before what they hold, in program order."""
    for op in body:
        yield op
        if isinstance(op, SerialLoop):
            yield from walk_ops(op.body)


def map_ops(ops, fn) -> list:
    """`fn` applied to every statement op, through serial loops (a new body; `ops` is unchanged)."""
    return [replace(op, body=map_ops(op.body, fn)) if isinstance(op, SerialLoop) else fn(op) for op in ops]


def kernel_buffers(kernel: TileKernel) -> list[BufferDecl]:
    """Every planned buffer of a kernel: its own, then those of its serial loops in program order."""
    return list(kernel.buffers) + [b for op in walk_ops(kernel.body) if isinstance(op, SerialLoop) for b in op.buffers]


def simplify(e: Expr) -> Expr:
    """Fold constant integer arithmetic, so generated bounds read `128`, not `((127 - 0) + 1)`."""
    if isinstance(e, Bin):
        a, b = simplify(e.lhs), simplify(e.rhs)
        if isinstance(a, Const) and isinstance(b, Const) and isinstance(a.value, int) and isinstance(b.value, int):
            ops = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
                   "//": lambda x, y: x // y, "%": lambda x, y: x % y, "min": min, "max": max}
            if e.op in ops:
                return Const(ops[e.op](a.value, b.value))
        if e.op in ("+", "-") and isinstance(b, Const) and b.value == 0:
            return a
        if e.op == "+" and isinstance(a, Const) and a.value == 0:
            return b
        return Bin(e.op, a, b)
    if isinstance(e, Neg):
        return Neg(simplify(e.operand))
    return e
