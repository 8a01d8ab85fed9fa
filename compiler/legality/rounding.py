"""Rounding legality of buffers in another dtype (`cache_read` / `cache_write` with `dtype=`): a buffer must round
exactly where the program rounds (rules rounding-added / rounding-removed, docs/rules/), with a concrete value
whose result changes; and the kernel as such buffers would compute it, for the interpreter to show the
difference (`buffer_semantics`).  The witnesses (`witness_text`) and first instances named in the messages are
shared with rfactor and compute_inline.
"""

from __future__ import annotations

from typing import Optional

import islpy as isl

from tdsl.compiler.errors import RoundingAdded, RoundingRemoved
from tdsl.compiler.model import reduce_ops
from tdsl.compiler.model.program import KernelModel, first_point
from tdsl.compiler.schedule.tree import Buffer, Tree, statements_under


# Which dtypes hold every value of which: a copy in a wider type is exact.
_HOLDS = {
    "f32": {"f32", "bf16", "f16", "f8e4m3"},
    "bf16": {"bf16", "f8e4m3"},
    "f16": {"f16", "f8e4m3"},
    "f8e4m3": {"f8e4m3"},
}


def holds(wide: str, narrow: str) -> bool:
    """Every value of `narrow` is exactly a value of `wide`."""
    return narrow in _HOLDS.get(wide, {wide})


def rounding_witness(exact: str, rounded: str) -> Optional[float]:
    """A value that `exact` represents and rounding to `rounded` changes (1 + half an ulp of `rounded`, or a value
    out of its range), or None when every value of `exact` survives."""
    from tdsl.compiler.model import dtypes as dt

    candidates = [1.0 + 2.0 ** -dt.PRECISION_BITS.get(rounded, 24), 65536.0, 512.0, 2.0 ** -25, 1e38]
    for v in candidates:
        if float(dt.round_to(exact, v)) == v and float(dt.round_to(rounded, v)) != v:
            return v
    return None


def _value_text(v: float) -> str:
    return repr(float(v)) if abs(v) >= 1e-3 or v == 0 else f"2^{int(round(__import__('math').log2(v)))}"


def witness_text(exact: str, rounded: str, what: str = "value") -> str:
    v = rounding_witness(exact, rounded)
    if v is None:
        return ""
    from tdsl.compiler.model import dtypes as dt

    article = "a" if exact.startswith("b") else "an"
    return (f"{article} {exact} {what} such as {_value_text(v)} becomes {_value_text(float(dt.round_to(rounded, v)))} "
            f"in {rounded}")


def stored_dtype(model: KernelModel, tensor: str) -> str:
    """The dtype of the values a tensor holds in the program: its writer's store dtype, or an input's dtype."""
    for stmt in model.stmts:
        if stmt.write.tensor == tensor:
            return stmt.dtype
    return model.tensors[tensor].dtype


def check_buffer_rounding(model: KernelModel, tree: Tree, buf: Buffer, primitive: str) -> None:
    """A buffer in another dtype (cache_read / cache_write `dtype=`) must round exactly where the program rounds.

    A rounding the buffer adds or drops is harmless where the values already lie on that dtype's grid
    (compiler/legality/grids.py): then the rounding is the identity."""
    from tdsl.compiler.legality.grids import accumulator_grids, statement_grids, tensor_grids

    dtype = getattr(buf, "dtype", None)
    if dtype is None:
        return
    if buf.kind == "read":
        values = stored_dtype(model, buf.tensor)
        if dtype in tensor_grids(model, buf.tensor):  # a wider copy, or values that already lie on its grid
            return
        reader, inst, element = first_read(model, buf.stmts, buf.tensor)
        _raise_rounding(
            RoundingAdded, model, tree, primitive, [reader],
            f"the {buf.scope} copy of {buf.tensor} in {dtype} would round the {values} values of {buf.tensor} "
            f"that {', '.join(buf.stmts)} read{'s' * (len(buf.stmts) == 1)}",
            f"{inst} reads {element} through the copy: {witness_text(values, dtype)}",
        )
    writer = model.stmt(buf.stmts[0])
    store = writer.dtype
    readers = [s for s in statements_under(buf.at)
               if s != writer.name and any(r.tensor == buf.tensor for r in model.stmt(s).reads)]
    if writer.is_reduction:
        accum = writer.accum_dtype or "f32"
        if not (holds(dtype, accum) or _selecting_accumulator_on_grid(model, writer, dtype)):
            point = first_instance(writer)
            _raise_rounding(
                RoundingAdded, model, tree, primitive, [writer.name],
                f"the {buf.scope} copy of {buf.tensor} in {dtype} would hold the {accum} accumulator of the "
                f"reduction {writer.name} and round it after every update",
                f"{point} adds a term to {element_of(writer, first_coords(writer))}: "
                f"{witness_text(accum, dtype, reduce_ops.PARTIAL[writer.reduce_op][0])}",
            )
        if readers and store not in accumulator_grids(model, writer):  # the store rounding is not the identity
            reader, inst, element = first_read(model, readers, buf.tensor)
            _raise_rounding(
                RoundingRemoved, model, tree, primitive, [writer.name, reader],
                f"{reader} would read {buf.tensor} from the {dtype} {buf.scope} copy inside loop {buf.at.name}, "
                f"skipping the rounding of {writer.name} to {store}",
                f"{inst} reads {element}: the program rounds the {accum} {reduce_ops.RESULT[writer.reduce_op]} to {store} "
                f"before {reader} uses it; "
                f"{witness_text(dtype, store)}",
            )
        return
    exact = statement_grids(model, writer)  # roundings to these dtypes change no value
    if readers and dtype != store and not {dtype, store} <= exact:
        reader, inst, element = first_read(model, readers, buf.tensor)
        if holds(dtype, store):
            changed, why = value_rounding_witness(model, writer, store, held_in=dtype)
            reader, inst, element = first_read(model, readers, buf.tensor, changed)
            _raise_rounding(
                RoundingRemoved, model, tree, primitive, [writer.name, reader],
                f"{reader} would read {buf.tensor} from the {dtype} {buf.scope} copy inside loop {buf.at.name}, "
                f"skipping the rounding of {writer.name} to {store}",
                f"{inst} reads {element}: the program rounds it to {store} first; {why}",
            )
        _raise_rounding(
            RoundingAdded, model, tree, primitive, [writer.name, reader],
            f"{reader} would read {buf.tensor} from the {dtype} {buf.scope} copy inside loop {buf.at.name}, "
            f"rounded to {dtype} instead of {store}",
            f"{inst} reads {element}: {witness_text('f32', dtype)}",
        )
    if dtype not in (store, "f32") and dtype not in exact:
        point = first_instance(writer)
        _raise_rounding(
            RoundingAdded, model, tree, primitive, [writer.name],
            f"the {dtype} {buf.scope} copy of {buf.tensor} would round the values of {writer.name} before they are "
            f"stored as {store} (two roundings)",
            f"{point} writes {element_of(writer, first_coords(writer))}: {witness_text('f32', dtype)} before "
            f"the store rounds it to {store}",
        )


def _selecting_accumulator_on_grid(model: KernelModel, writer, dtype: str) -> bool:
    """A `max` or `min` accumulator kept in `dtype` instead of its accum dtype holds the same values: both
    roundings are the identity on the extrema of its terms (the terms lie on both grids, and an extremum is one
    of its terms)."""
    from tdsl.compiler.legality.grids import statement_grids

    if not reduce_ops.selecting(writer.reduce_op):
        return False
    terms = statement_grids(model, writer)
    return {dtype, writer.accum_dtype or "f32"} <= terms


def _raise_rounding(cls, model, tree, primitive, statements, detail, example):
    err = cls(primitive, sorted(set(statements)), detail, example)
    err.rejected_model = buffer_semantics(model, tree)
    raise err


def buffer_semantics(model: KernelModel, tree: Tree) -> KernelModel:
    """The kernel as its buffers with a `dtype` would compute it (what a rejected buffer does, for the interpreter):
    a read copy rounds what its readers read, a write copy holds the written values (and a reduction's
    accumulator) in its dtype; readers outside the copy's loop read the value rounded to the store dtype."""
    from dataclasses import replace

    from tdsl.frontend import ast as tast

    stmts = {s.name: s for s in model.stmts}

    def cast_reads(stmt, tensor, dtype):
        def cast(e):
            if isinstance(e, tast.Access):
                return tast.Call(dtype, [e], e.span) if e.tensor == tensor else e
            return None

        init = None if stmt.init is None else tast.rewrite(stmt.init, cast)
        return replace(stmt, value=tast.rewrite(stmt.value, cast), init=init)

    for buf in tree.buffers:
        dtype = getattr(buf, "dtype", None)
        if dtype is None:
            continue
        if buf.kind == "read":
            for name in buf.stmts:
                stmts[name] = cast_reads(stmts[name], buf.tensor, dtype)
            continue
        writer = stmts[buf.stmts[0]]
        under = set(statements_under(buf.at))
        changes = {"dtype": dtype}
        if writer.is_reduction and not holds(dtype, writer.accum_dtype or "f32"):
            changes["accum_dtype"] = dtype
        stmts[writer.name] = replace(writer, **changes)
        for name, stmt in list(stmts.items()):
            if name != writer.name and name not in under and any(r.tensor == buf.tensor for r in stmt.reads):
                stmts[name] = cast_reads(stmt, buf.tensor, writer.dtype)
    return replace(model, stmts=[stmts[s.name] for s in model.stmts])


def first_read(model: KernelModel, readers: list[str], tensor: str,
               element: Optional[isl.Set] = None) -> tuple[str, str, str]:
    """The first reader instance of `tensor` (of `element` of it, if given) among `readers`:
    (reader, 'Y(i=0, j=0)', 'C[0, 0]')."""
    from tdsl.compiler.model.program import first_pair

    for name in readers:
        for acc in model.stmt(name).reads:
            if acc.tensor != tensor:
                continue
            relation = acc.relation if element is None else acc.relation.intersect_range(element)
            if not relation.is_empty():
                inst, shown = first_pair(relation)
                return name, inst, shown
    if element is not None:
        return first_read(model, readers, tensor)
    return readers[0], readers[0], tensor


def value_rounding_witness(model: KernelModel, writer, dtype: str,
                           held_in: str = "f32") -> tuple[Optional[isl.Set], str]:
    """Why rounding the value of an elementwise `writer` (held in `held_in`) to `dtype` changes it: for an
    integer value of the iterators, the instance whose value changes (and the element it writes); else a value of
    `held_in` that the rounding changes."""
    from tdsl.compiler.legality.integers import integer_counterexample, iterator_ranges

    found = integer_counterexample(model, writer.value, iterator_ranges(writer), dtype)
    if found is None:
        return None, witness_text(held_in, dtype)
    element = written_element(writer, list(found.coords)) if found.coords else None
    return element, found.text()


def first_coords(stmt) -> Optional[list[int]]:
    """The coordinates of a statement's first instance; None where it has none at the sizes given
    (compiler/schedule/empty_statements.py): a rule about what it writes still refuses there."""
    return None if stmt.domain.is_empty() else first_point(stmt.domain)[1]


def first_instance(stmt) -> str:
    """The statement's first instance as text (`S(i=0, j=1)`); its iterators where it has none at these sizes."""
    from tdsl.compiler.model.program import instance_text

    coords = first_coords(stmt)
    if coords is None:
        return f"{stmt.name}({', '.join(stmt.iters)}) (at other sizes: {stmt.name} has no instance at these)"
    return instance_text(stmt.name, stmt.iters, coords)


def written_element(stmt, coords: list[int]) -> isl.Set:
    """The element one instance of a statement writes."""
    rel = stmt.write.relation
    for pos, value in enumerate(coords):
        rel = rel.fix_val(isl.dim_type.in_, pos, isl.Val.int_from_si(rel.get_ctx(), value))
    return rel.range()


def element_of(stmt, coords: Optional[list[int]]) -> str:
    if coords is None:  # a statement without instances at these sizes (first_coords)
        return f"an element of {stmt.write.tensor}"
    _, element = first_point(written_element(stmt, coords))
    return f"{stmt.write.tensor}[{', '.join(map(str, element))}]"
