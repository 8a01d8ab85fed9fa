"""Storage decisions checked in program order, or in the schedule's (rule storage-overwrite).

A storage decision makes values share a place: `fold_storage` keeps a few planes of a temporary (element d + p
replaces element d), `store_in` keeps an output in an input's array (the output's element replaces the input's).
The program itself must allow that: in program order (for `store_in`, in the schedule's order at the step),
no read may come after a write that replaces the value it reads.  Checked here with isl for every read of a
tensor whose storage is shared, after every step that makes such a decision or rewrites the program (rfactor,
compute_inline); the schedule's own order is then checked through the anti and output dependences on locations
(compiler/model/dependences.py).

One write is not a replacement: a sum that starts from a value (`sum(k) ... from C_in[i, j]`) and is stored in
that value's place reads it once, before its first term, into the accumulator that its updates write back.
"""

from __future__ import annotations

from tdsl.compiler.errors import StorageOverwrite
from tdsl.compiler.model.dependences import first_terms, own_start_pairs, program_order_maps
from tdsl.compiler.model.program import KernelModel, Stmt, element_at, first_point
from tdsl.compiler.model.storage import located


def check_storage_order(model: KernelModel, primitive: str, tree=None) -> None:
    """Refuse (StorageOverwrite) a read that finds its value replaced: a folded tensor's in program order, an
    input's that an output replaces (`store_in`) in the order of `tree`, the schedule at the step (program order
    without one: a signature's `in`).  `reverse(Y.j); store_in(Y, X)` keeps a left neighbour's old value that Y
    reads in place, which program order would have replaced first (probe of the 27th session)."""
    stored_in = {t.stored_in: t.name for t in model.tensors.values() if t.stored_in}
    if not stored_in and not any(t.fold for t in model.tensors.values()):
        return
    involved = {s.name for s in model.stmts if any(r.tensor in stored_in or model.tensors[r.tensor].fold
                                                   for r in s.reads if r.tensor in model.tensors)}
    involved |= {s.name for s in model.stmts if s.name in stored_in.values() or model.tensors[s.name].fold}
    order = program_order_maps(model, involved)
    times = tree.time_maps(model) if tree is not None else order
    for reader in model.stmts:
        for read in reader.reads:
            t = model.tensors.get(read.tensor)
            if t is not None and t.fold:
                _check_folded_read(model, order, reader, read, primitive)
            if read.tensor in stored_in:
                _check_input_read(model, times, reader, read, model.stmt(stored_in[read.tensor]), primitive)


def _check_folded_read(model: KernelModel, order: dict, reader: Stmt, read, primitive: str) -> None:
    """No read of a folded tensor may find its element's location written again, after the value it reads,
    before it reads it: that read would get the other element's value."""
    tensor = read.tensor
    t = model.tensors[tensor]
    write = model.stmt(tensor).write.relation
    later = order[tensor].lex_lt_map(order[tensor])  # w -> w2: w2 runs after w
    source = read.relation.apply_range(write.reverse())  # r -> the instance that wrote its value
    same_place = located(t, read.relation).apply_range(located(t, write).reverse())
    others = same_place.subtract(source)  # r -> w2: writes another element to the read's location
    before_read = others.intersect(order[reader.name].lex_gt_map(order[tensor]))
    triples = source.range_product(before_read)  # r -> [w -> w2]
    clobbered = triples.intersect_range(later.wrap())
    if clobbered.is_empty():
        return
    params, coords = first_point(clobbered.wrap())
    writer = model.stmt(tensor)
    r, rest = coords[:len(reader.iters)], coords[len(reader.iters):]
    w, w2 = rest[:len(writer.iters)], rest[len(writer.iters):]
    element, other = element_at(read.relation, r, params), element_at(writer.write.relation, w2, params)
    detail = f"{reader.name} reads {_at(tensor, element)} after {_at(tensor, other)}, stored in the same place, has " \
             f"replaced it"
    example = (f"{_instance(writer, w)} writes {_at(tensor, element)}; {_instance(writer, w2)} writes "
               f"{_at(tensor, other)} in its place; then {_instance(reader, r)} reads {_at(tensor, element)}"
               f"{_with(params)}")
    raise StorageOverwrite(primitive, sorted({reader.name, tensor}), detail, example)


def _check_input_read(model: KernelModel, order: dict, reader: Stmt, read, writer: Stmt, primitive: str) -> None:
    """No read of an input may come after a write of the output stored in it to the read's element (the read
    wants the input's value), other than a sum's start value in its own element's place."""
    x = model.tensors[writer.name]
    reads = read.relation.intersect_domain(first_terms(reader)) if read.start else read.relation  # read once
    same_place = reads.apply_range(located(x, writer.write.relation).reverse())  # r -> w: w writes there
    clobbered = same_place.intersect(order[reader.name].lex_gt_map(order[writer.name]))  # ... before r reads
    own = own_start_pairs(writer, read) if reader is writer else None
    if own is not None:
        clobbered = clobbered.subtract(own)  # a start value read in its own place
    if clobbered.is_empty():
        return
    params, coords = first_point(clobbered.wrap())
    r, w = coords[:len(reader.iters)], coords[len(reader.iters):]
    element, written = element_at(read.relation, r, params), element_at(writer.write.relation, w, params)
    detail = (f"{reader.name} reads {_at(read.tensor, element)} after {writer.name}, stored in {read.tensor}, has "
              f"replaced it")
    example = (f"{_instance(writer, w)} writes {_at(writer.name, written)} in the place of "
               f"{_at(read.tensor, element)}; then {_instance(reader, r)} reads {_at(read.tensor, element)}"
               f"{_with(params)}")
    raise StorageOverwrite(primitive, sorted({reader.name, writer.name}), detail, example)


def _instance(stmt: Stmt, point) -> str:
    return f"{stmt.name}({', '.join(f'{i}={v}' for i, v in zip(stmt.iters, point))})"


def _at(tensor: str, element) -> str:
    return f"{tensor}[{', '.join(map(str, element))}]"


def _with(params: dict) -> str:
    """The run-time sizes a counterexample holds at (` with N=4`), or nothing."""
    return f" with {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""
