"""The warp-specialised loop (`pipeline(L, warp_specialize=true)`, `SerialLoop.warp_specialized`) per backend.

TileLang (NVIDIA) prints FlashAttention-3's arrangement (backends/tilelang/warp_specialized.py): a producer warp
group copies the product operands through TMA into a ring of shared-memory slots, and the consumer warp groups
issue the first product of iteration k+1 before the last group of iteration k.  `check_warp_specialized` refuses,
with what to change, every loop that does not have the form that arrangement needs:

* the loop directly in the kernel body (not inside another serial loop); one such loop per kernel (its two parts
  when the lowering split it at its masked iterations, with only the preloads of the second between them);
* its body: the first product (init, one product of a whole sum, finish; statement `first`), then statements
  without a matrix product (elementwise, tile reductions, rescaled sums), then the last product (`last`): one
  update of a sum by a product whose left operand is a register tile (P) and whose right operand is copied from
  memory (V), maybe rescaled;
* both products on the tensor cores with whole rows per warp (`Dot.warp_rows`), an f32 accumulator, 64 rows per
  consumer warp group; 4 or 8 warps (one or two consumer warp groups: the producer is a fourth or a third);
* the operands copied in each iteration TMA boxes: the tensor's rows 16-byte multiples, at most 256 elements per
  box dimension, masked at most by the tensor's bounds (TMA fills zeros outside it), not folded; the ring and the
  operands loaded once fit the 227 KB a block may have;
* no barrier anywhere in the kernel (the producer would never reach the consumers' `__syncthreads`).

Every other backend runs the loop as a plain pipelined loop (`plain_pipelines`, the record removed; the loop's
note says so in the generated code).
"""

from __future__ import annotations

from dataclasses import replace

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.tma import SHARED_PER_BLOCK
from tdsl.compiler.model.dtypes import BYTES

ROWS_PER_WARP_GROUP = 64  # one wgmma instruction's M: each consumer warp group owns this many rows of a product
WARP_GROUP = 4  # warps
TMA_BOX_LIMIT = 256  # elements per box dimension
TMA_ALIGN = 16  # bytes: a tensor's rows (its strides) and a box's inner extent


def check_warp_specialized(program: T.TileProgram) -> T.TileProgram:
    """TileLang: every warp-specialised loop has the form backends/tilelang/warp_specialized.py prints (see the
    module); the program is returned unchanged."""
    for kernel in program.kernels:
        parts = specialized_parts(kernel)
        if parts:
            _check_kernel(kernel, parts)
    return program


def plain_pipelines(program: T.TileProgram) -> T.TileProgram:
    """Every backend but TileLang: a warp-specialised loop runs as the pipelined loop it also is."""
    def plain(ops):
        return [replace(op, body=plain(op.body), warp_specialized=None) if isinstance(op, T.SerialLoop) else op
                for op in ops]

    return replace(program, kernels=[replace(k, body=plain(k.body)) for k in program.kernels])


def specialized_parts(kernel: T.TileKernel) -> list[T.SerialLoop]:
    """The warp-specialised loops of a kernel's body, in order (one loop, or the two parts of a split one)."""
    return [op for op in kernel.body if isinstance(op, T.SerialLoop) and op.warp_specialized is not None]


def ring_loads(parts: list[T.SerialLoop]) -> list[tuple[T.AccUpdate, int]]:
    """(product, operand index) of every operand copied in each iteration (the ring's), in the first part's order."""
    return [(op, n) for op in parts[0].body if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot)
            for n, x in enumerate((op.partial.lhs, op.partial.rhs)) if isinstance(x, T.Load)]


# ---------------------------------------------------------------- the checks


def _refuse(loop: T.SerialLoop, why: str, change: str) -> BackendError:
    return BackendError(f"loop {loop.var} is warp-specialised (pipeline(..., warp_specialize=true)) but {why}; "
                        f"{change}, or drop warp_specialize (or generate with --backend triton, which runs the loop "
                        f"pipelined)")


def _check_kernel(kernel: T.TileKernel, parts: list[T.SerialLoop]) -> None:
    loop = parts[0]
    nested = [op for op in T.walk_ops(kernel.body) if isinstance(op, T.SerialLoop) and op.warp_specialized
              is not None and not any(op is p for p in parts)]
    if nested:
        raise _refuse(nested[0], "it is inside another serial loop", "make it a loop directly under the grid loops")
    at = [n for n, op in enumerate(kernel.body) if any(op is p for p in parts)]
    between = kernel.body[at[0] + 1:at[-1]]
    if len(parts) > 2 or any(not isinstance(op, T.Preload) for op in between) or (
            len(parts) == 2 and [p.warp_specialized.part for p in parts] != ["full", "rest"]):
        raise _refuse(loop, "the kernel has several such loops", "specialise one loop per kernel")
    if kernel.num_warps not in (WARP_GROUP, 2 * WARP_GROUP):
        raise _refuse(loop, f"the kernel runs {kernel.num_warps} warps",
                      "launch it with warps=4 or warps=8 (one or two consumer warp groups; the producer warp group "
                      "is added)")
    if any(isinstance(op, T.Barrier) or (isinstance(op, T.SerialLoop) and op.barrier) for op in T.walk_ops(kernel.body)):
        raise _refuse(loop, "the kernel passes values through memory with barriers",
                      "keep those statements in another kernel")
    _check_alone(kernel, parts)
    for part in parts:
        _check_body(kernel, part)
    _check_shared(kernel, parts)


def _check_alone(kernel: T.TileKernel, parts: list[T.SerialLoop]) -> None:
    """The loop's two products are the kernel's only ones, and its preloads the only ones: the consumers share no
    other shared memory (the kernel is compiled without TileLang's automatic thread syncs)."""
    inside = {id(op) for part in parts for op in T.walk_ops(part.body)}
    used = {x.name for part in parts for op in part.body if isinstance(op, T.AccUpdate)
            and isinstance(op.partial, T.Dot) for x in (op.partial.lhs, op.partial.rhs) if isinstance(x, T.Preloaded)}
    for op in T.walk_ops(kernel.body):
        other_product = isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot) and id(op) not in inside
        other_preload = isinstance(op, T.Preload) and op.name not in used
        if other_product or other_preload:
            raise _refuse(parts[0], f"the kernel has another product or preloaded operand "
                                    f"({getattr(op, 'stmt', getattr(op, 'name', ''))})",
                          "keep the loop's two products the kernel's only ones")


def _check_body(kernel: T.TileKernel, loop: T.SerialLoop) -> None:
    ws = loop.warp_specialized
    if len(ws.first) != 1 or len(ws.last) != 1:
        raise _refuse(loop, f"its first group holds {', '.join(ws.first)} and its last {', '.join(ws.last)}",
                      "make the first and the last node of the loop one statement each (the two products)")
    first, last = ws.first[0], ws.last[0]
    body = list(loop.body)
    issue = [op for op in body if getattr(op, "stmt", None) == first and isinstance(op, (T.AccInit, T.AccUpdate))]
    if [type(op) for op in body[:2]] != [T.AccInit, T.AccUpdate] or body[:2] != issue:
        raise _refuse(loop, f"its first statement {first} is not one whole matrix product in each iteration",
                      f"place the whole reduction of {first} inside the loop (its init, one product, its finish)")
    init, product = issue
    if not (len(body) > 3 and isinstance(body[2], T.AccFinish) and body[2].stmt == first):
        raise _refuse(loop, f"the sum {first} is not finished in each iteration",
                      f"place the whole reduction of {first} inside the loop")
    if init.start is not None or init.follows is not None or init.op != "sum" or product.rescale is not None:
        raise _refuse(loop, f"{first} starts from a value or is rescaled", f"compute {first} as a plain sum")
    _check_product(kernel, loop, product, operand_from_registers=False)
    update = body[-1]
    if not (isinstance(update, T.AccUpdate) and update.stmt == last and isinstance(update.partial, T.Dot)):
        raise _refuse(loop, f"its last statement {last} is not the update of a sum by a matrix product",
                      f"end the loop with the accumulating product (reverse_compute_at({last}, ...))")
    _check_product(kernel, loop, update, operand_from_registers=True)
    for op in body[2:-1]:
        if isinstance(op, T.SerialLoop) or (isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot)):
            raise _refuse(loop, f"{getattr(op, 'stmt', op.var)} between the two products is a loop or a product",
                          "keep only elementwise statements and tile reductions between the first and the last")
        if isinstance(op, (T.AccInit, T.AccFinish, T.AccUpdate, T.Compute)) and op.stmt == last:
            raise _refuse(loop, f"{last} is also updated between the two products", f"update {last} once")


def _check_product(kernel: T.TileKernel, loop: T.SerialLoop, op: T.AccUpdate, operand_from_registers: bool) -> None:
    dot = op.partial
    if not isinstance(dot, T.Dot):  # a sum of one term at these sizes is lowered as an elementwise product
        sizes = " x ".join(str(a.size) for a in op.tile.axes)
        raise _refuse(loop, f"{op.stmt} is not lowered as a matrix product: its tile ({sizes}) is below the "
                            f"smallest the tensor cores multiply (placement.makes_dot: 16 rows and columns, 16 "
                            f"terms for bf16), its operands are not plain [i, k] and [k, j] reads, or its sum has "
                            f"one term at these sizes", "use blocks of at least 16 rows and 16 keys")
    if dot.unit != "matrix" or not dot.warp_rows or dot.sum_on_vector or op.accum != "f32":
        raise _refuse(loop, f"the product of {op.stmt} is not on the tensor cores with whole rows per warp and an "
                            f"f32 accumulator", "use blocks of at least 16 rows per warp and bf16 or f16 operands")
    if T.promotion_interval(dot, op.tile.axes[2].size) is not None:
        raise _refuse(loop, f"the FP8 product of {op.stmt} adds its products to the f32 sum at an interval, which "
                            f"the warp-specialised loop does not print", "declare `combine fast_accum`")
    rows = op.tile.axes[0].size
    groups = kernel.num_warps // WARP_GROUP
    if rows % (ROWS_PER_WARP_GROUP * groups):
        raise _refuse(loop, f"the product of {op.stmt} has {rows} rows for {groups} consumer warp group(s)",
                      f"use blocks of {ROWS_PER_WARP_GROUP * groups} rows (or a multiple), or fewer warps")
    lhs, rhs = dot.lhs, dot.rhs
    if operand_from_registers and not isinstance(lhs, T.RegOperand):
        raise _refuse(loop, f"the left operand of {op.stmt} is not a tile the loop computes in registers",
                      f"compute it in the loop (compute_at) so that {op.stmt} reads it from registers")
    if not operand_from_registers and not isinstance(lhs, (T.Load, T.Preloaded)):
        raise _refuse(loop, f"the left operand of {op.stmt} is not copied from memory",
                      f"read a tensor of the program in {op.stmt}")
    if not isinstance(rhs, T.Load):
        raise _refuse(loop, f"the right operand of {op.stmt} is not copied from memory",
                      f"read a tensor of the program in {op.stmt}")
    for n, x in enumerate((lhs, rhs)):
        if isinstance(x, T.Load):
            _check_box(kernel, loop, op.staged[n], x)


def _check_box(kernel: T.TileKernel, loop: T.SerialLoop, st: T.Staged, load: T.Load) -> None:
    tensor = next(t for t in kernel.tensors if t.name == load.tensor)
    if st.scope != "shared":
        raise _refuse(loop, f"{load.tensor} is staged in {st.scope}", "stage the product's operands in shared memory")
    if load.mask is not None and not load.mask_is_bounds:
        raise _refuse(loop, f"{load.tensor} is read under a mask other than its bounds (TMA zero-fills only outside "
                            f"the tensor)", "read whole boxes")
    if tensor.fold or tensor.stored_in:
        raise _refuse(loop, f"{load.tensor} is folded or stored in another tensor", "keep it a plain tensor")
    inner = tensor.shape[-1]
    if not isinstance(inner, int) or inner * BYTES[tensor.dtype] % TMA_ALIGN or st.shape[-1] * BYTES[st.dtype] % TMA_ALIGN:
        raise _refuse(loop, f"the rows of {load.tensor} or of its box are not multiples of {TMA_ALIGN} bytes (TMA)",
                      "bind its sizes and use rows of 8 bf16 elements or a multiple")
    if max(st.shape) > TMA_BOX_LIMIT:
        raise _refuse(loop, f"the box of {load.tensor} {list(st.shape)} exceeds {TMA_BOX_LIMIT} elements along a "
                            f"dimension (TMA)", "use smaller blocks")


def _check_shared(kernel: T.TileKernel, parts: list[T.SerialLoop]) -> None:
    """The ring (stages slots of every operand copied per iteration) and the operands loaded once, in one block."""
    stages = parts[0].warp_specialized.stages
    ring = sum(_bytes(op.staged[n]) for op, n in ring_loads(parts)) * stages
    once = sum(_bytes(op.staged[n]) for op in parts[0].body if isinstance(op, T.AccUpdate) and op.staged
               for n, x in enumerate((op.partial.lhs, op.partial.rhs)) if isinstance(x, T.Preloaded))
    # a product with absent terms reads its register operand from a copy in shared memory where it runs the
    # exact product (backends/tilelang/emit.py `checked_product`), one per statement
    copies = {(op.stmt, n): _bytes(op.staged[n]) for part in parts for op in part.body
              if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot) and op.partial.absent_terms
              for n, x in enumerate((op.partial.lhs, op.partial.rhs)) if isinstance(x, T.RegOperand)}
    need = ring + once + sum(copies.values())
    if need > SHARED_PER_BLOCK:
        raise _refuse(parts[0], f"its ring of {stages} slots and the operands loaded once"
                                f"{' (and the copy its masked product reads)' if copies else ''} need {need:,} B of "
                                f"shared memory, more than the {SHARED_PER_BLOCK:,} B a block may have",
                      "use fewer stages or smaller blocks")


def _bytes(st: T.Staged) -> int:
    n = BYTES[st.dtype]
    for d in st.shape:
        n *= d
    return n
