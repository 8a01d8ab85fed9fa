"""The tile program as text: what the middle end hands every backend, one line per fact.

    print(program_text(lower(schedule)))

The text is the contract between lowering and the printers: `tests/lower/` keeps a golden of it for every
example schedule and target, so a change in what lowering decides (a tile, a mask, a buffer, the unit of a
product) shows up there once, not as four backends' diffs.  Every field of every op is printed; nothing is
summarised, so two programs print the same text only if they are the same program.
"""

from __future__ import annotations

from tdsl.compiler.lower.tileir import (
    AccFinish,
    AccInit,
    AccUpdate,
    Bin,
    Call,
    Compute,
    Const,
    Dot,
    Load,
    Neg,
    NegInfAsZero,
    Preload,
    Preloaded,
    Reduce,
    Reference,
    Reg,
    RegOperand,
    Round,
    Running,
    Select,
    SerialLoop,
    Barrier,
    Tile,
    TileKernel,
    TileProgram,
    Var,
    simplify,
)

_INDENT = "  "


def program_text(program: TileProgram) -> str:
    sizes = ", ".join(f"{k}={'?' if v is None else v}" for k, v in program.sizes.items())
    lines = [f"program {program.name}({sizes})"]
    for role, args in (("input", program.inputs), ("output", program.outputs), ("temp", program.temps)):
        for t in args:
            lines.append(f"{_INDENT}{role} {t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]")
    for kernel in program.kernels:
        lines.extend(kernel_lines(kernel))
    return "\n".join(lines) + "\n"


def kernel_lines(k: TileKernel) -> list[str]:
    split = f" vector_rows={k.vector_rows}" if k.vector_rows else ""
    group = f" group={k.grid_group}" if k.grid_group > 1 else ""
    group += " persistent" if k.persistent else ""
    lines = [f"kernel {k.name}  warps={k.num_warps} stages={k.num_stages}{group}{split}  # {k.comment}"]
    for h in k.host:
        lines.append(f"{_INDENT}host loop {h.var} in [{expr_text(h.lower)}, {expr_text(h.upper)})")
    for g in k.grid:
        parts = [f"{v} in [{expr_text(lo)}, {expr_text(n) if simplify(lo) == Const(0) else f'{expr_text(lo)} + {expr_text(n)}'})"
                 for v, n, lo in zip(g.vars, g.extents, g.lowers)]
        lines.append(f"{_INDENT}grid.{g.axis}: {', '.join(parts)}")
    if k.sizes:
        lines.append(f"{_INDENT}sizes: {', '.join(k.sizes)}")
    for t in k.tensors:
        held = f" in {t.stored_in}" if t.stored_in else ""  # store_in: the input's array
        lines.append(f"{_INDENT}tensor {t.role} {t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]{held}")
    for buf in k.buffers:
        lines.append(f"{_INDENT}{buffer_text(buf)}")
    for c in k.cross_core:
        spaces = ", ".join(f"{w.dtype}[{', '.join(map(str, w.shape))}]" for w in c.workspaces)
        lines.append(f"{_INDENT}cross-core {c.stmt}: {c.kind} flags {', '.join(map(str, c.flags))} workspaces {spaces}")
    lines.extend(_ops(k.body, 1))
    return lines


def buffer_text(b) -> str:
    stages = f" x{b.stages}" if b.stages > 1 else ""
    at = f" at {b.loop}" if b.loop else ""
    return f"buffer {b.kind} {b.tensor}: {b.scope} {b.dtype}[{', '.join(map(str, b.shape))}]{stages}{at}"


def warp_specialized_text(ws) -> str:
    part = f" ({ws.part} part)" if ws.part else ""
    return (f"warp-specialised{part}: {ws.stages}-slot ring; {', '.join(ws.first)} of the next iteration issued "
            f"before {', '.join(ws.last)}")


def staged_text(st) -> str:
    stages = f" x{st.stages}" if st.stages > 1 else ""
    where = f" in each {st.loop}" if st.loop else " once"
    layout = " transposed" if st.transposed else ""
    cache = f" = cache_read at {st.cache.loop}" if st.cache is not None else ""
    return f"stage {st.tensor}: {st.scope} {st.dtype}[{', '.join(map(str, st.shape))}]{stages}{layout}{where}{cache}"


def _ops(ops, depth: int) -> list[str]:
    pad = _INDENT * depth
    lines = []
    for op in ops:
        if isinstance(op, SerialLoop):
            stages = f" stages={op.stages}" if op.stages else ""
            lines.append(f"{pad}for {op.var} in [{expr_text(op.lower)}, {expr_text(op.upper)}){stages}  # {op.note}")
            if op.warp_specialized is not None:
                lines.append(f"{pad}{_INDENT}{warp_specialized_text(op.warp_specialized)}")
            for buf in op.buffers:
                lines.append(f"{pad}{_INDENT}{buffer_text(buf)}")
            lines.extend(_ops(op.body, depth + 1))
        elif isinstance(op, Compute):
            flags = _flags(store=op.store, keep=op.keep)
            lines.append(f"{pad}{op.stmt}[{', '.join(op.lhs)}] = {op.dtype}({expr_text(op.value)}){flags}")
            lines.append(f"{pad}{_INDENT}{tile_text(op.tile)}")
            lines.extend(_unclipped(op, pad))
        elif isinstance(op, AccInit):
            follows = f" follows {expr_text(op.follows)}" if op.follows is not None else ""
            where = " on matrix" if op.on_matrix else ""
            start = f" from {expr_text(op.start)}" if op.start is not None else ""
            lines.append(f"{pad}init {op.stmt}: {op.op} accum {op.accum}{start}{follows}{where}")
            lines.append(f"{pad}{_INDENT}{tile_text(op.tile)}")
        elif isinstance(op, AccUpdate):
            either = "" if op.zeros or op.op == "sum" else ", either zero"
            lines.append(f"{pad}update {op.stmt} {op.op}= {expr_text(op.partial)}  (accum {op.accum}{either})")
            if op.rescale is not None:
                lines.append(f"{pad}{_INDENT}rescale by {expr_text(op.rescale.factor)} to "
                             f"{expr_text(op.rescale.current)}")
            lines.append(f"{pad}{_INDENT}{tile_text(op.tile)}")
            for st in op.staged:
                lines.append(f"{pad}{_INDENT}{staged_text(st)}")
        elif isinstance(op, Preload):
            guard = f" if {expr_text(op.guard)}" if op.guard is not None else ""
            lines.append(f"{pad}preload {op.name} = {expr_text(op.load)}: {op.dtype}{guard}")
            lines.append(f"{pad}{_INDENT}{tile_text(op.tile)}")
        elif isinstance(op, AccFinish):
            flags = _flags(store=op.store, keep=op.keep, on_matrix=op.on_matrix)
            scaled = f" * {op.scale!r}" if op.scale != 1.0 else ""
            lines.append(f"{pad}finish {op.stmt}[{', '.join(op.lhs)}]{scaled} -> {op.dtype}{flags}")
            lines.append(f"{pad}{_INDENT}{tile_text(op.tile)}")
            if op.fill is not None:
                lines.append(f"{pad}{_INDENT}outside the mask: {op.fill!r} (masked once)")
            lines.extend(_unclipped(op, pad))
        elif isinstance(op, Barrier):
            why = []
            if op.tensors:
                why.append(f"{', '.join(op.tensors)} pass through memory")
            if op.overwrites:
                why.append(f"{', '.join(op.overwrites)} overwritten after other threads read it")
            lines.append(f"{pad}barrier  # {'; '.join(why)}")
        else:  # pragma: no cover - the Op union is closed
            raise TypeError(f"not a tile op: {op!r}")
    return lines


def _unclipped(op, pad: str) -> list[str]:
    """The store's mask comparisons that a copy clipped at the tensor's edges does not enforce, if any; the
    descriptor it stores through, if any."""
    lines = []
    if op.unclipped:
        lines.append(f"{pad}{_INDENT}store mask inside {op.stmt}: {' and '.join(expr_text(a) for a in op.unclipped)}")
    if op.store_box:
        lines.append(f"{pad}{_INDENT}store via descriptor [{', '.join(map(str, op.store_box))}]")
    return lines


def _flags(**flags) -> str:
    on = [name for name, value in flags.items() if value]
    return f"  [{' '.join(on)}]" if on else ""


def tile_text(tile: Tile) -> str:
    axes = " ".join(f"{a.iter}:{a.size}@{expr_text(a.offset)}" for a in tile.axes) or "scalar"
    scalars = "".join(f" {it}={expr_text(v)}" for it, v in tile.scalars.items())
    mask = f" mask {expr_text(tile.mask)}" if tile.mask is not None else ""
    return f"tile {axes}{scalars}{mask}"


def expr_text(e) -> str:
    """An expression in a Python-like syntax, fully parenthesised where two operators meet."""
    e = simplify(e)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, Bin):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_text(e.lhs)}, {expr_text(e.rhs)})"
        return f"({expr_text(e.lhs)} {e.op} {expr_text(e.rhs)})"
    if isinstance(e, Neg):
        return f"-{expr_text(e.operand)}"
    if isinstance(e, Select):
        return f"select({expr_text(e.cond)}, {expr_text(e.then)}, {expr_text(e.other)})"
    if isinstance(e, Load):
        bounds = " (the tensor's bounds)" if e.mask_is_bounds else ""
        mask = "" if e.mask is None else f" if {expr_text(e.mask)}{bounds} else {e.other!r}"
        box = f" via descriptor [{', '.join(map(str, e.box))}]" if e.box else ""
        return f"{e.tensor}[{', '.join(expr_text(x) for x in e.indices)}{mask}]{box}"
    if isinstance(e, Reg):
        return f"reg {e.stmt}{list(e.axes)}"
    if isinstance(e, Preloaded):
        return f"preloaded {e.name}"
    if isinstance(e, Running):
        return f"running {e.stmt}{list(e.axes)}" + (f" as {e.dtype}" if e.dtype != "f32" else "")
    if isinstance(e, NegInfAsZero):
        return f"({expr_text(e.operand)}, 0 where -inf)"
    if isinstance(e, Reference):
        return f"reference {e.stmt}{list(e.axes)}"
    if isinstance(e, RegOperand):
        mask = "" if e.mask is None else f" if {expr_text(e.mask)} else 0.0"
        rounds = f" (= {e.rounds})" if e.rounds else ""
        return f"{expr_text(e.reg)}{rounds}{mask}"
    if isinstance(e, Call):
        either = "" if e.zeros or e.func not in ("max", "min") else "~"  # the hardware's: either zero
        return f"{e.func}{either}({', '.join(expr_text(a) for a in e.args)})"
    if isinstance(e, Round):
        return f"{e.dtype}({expr_text(e.operand)})"
    if isinstance(e, Reduce):
        either = "" if e.zeros or e.op == "sum" else "~"
        return f"{e.op}{either}[axes {', '.join(map(str, e.axes))}]({expr_text(e.operand)})"
    if isinstance(e, Dot):
        on = (f" on {e.unit}" if e.unit else "") + (", warps by rows" if e.warp_rows else "") + (
            ", summed on the vector unit" if e.sum_on_vector else "")
        if e.absent_terms:  # lanes the program has no term at (a masked 0 times the other operand)
            met = " and ".join(side for side, meets in zip(("lhs", "rhs"), e.absent_met) if meets)
            on += f", absent terms meeting the {met}" + (
                f" where {expr_text(e.absent_where)}" if e.absent_where is not None else "")
        return f"dot({expr_text(e.lhs)}: {e.lhs_dtype}, {expr_text(e.rhs)}: {e.rhs_dtype}){on}"
    raise TypeError(f"not a tile expression: {e!r}")  # pragma: no cover
