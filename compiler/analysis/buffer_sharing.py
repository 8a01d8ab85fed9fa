"""Which buffers of one kernel share memory, and whether they fit: an elementwise last use of an intermediate
writes its result in place (one slot); the working set of a scope is the largest total of the slots live at one
position (buffers whose live ranges do not overlap never count together); a working set over the target's hard
per-block capacity of its scope is a `Violation`.
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.analysis.buffer_records import PlannedBuffer, Violation


class _WorkingSets:
    """Mixed into `_KernelPlanner` (compiler/analysis/buffer_planner.py), whose `model`, `stmts`, `target`, `name`
    and `buffers` (placed, with their live ranges) it reads."""

    # ------------------------------------------------------------ working sets

    def _slots(self) -> list[list[PlannedBuffer]]:
        """Buffers grouped into memory slots: an elementwise last use of an intermediate writes in place."""
        slot_of: dict[int, list] = {}
        slots: list[list[PlannedBuffer]] = []
        for buf in self.buffers:
            slot_of[id(buf)] = [buf]
            slots.append(slot_of[id(buf)])
        for buf in self.buffers:
            if buf.kind not in ("temp", "write") or len(buf.stmts) == 0:
                continue
            writer = self.model.stmt(buf.stmts[0])
            if writer.is_reduction:
                continue
            for other in self.buffers:
                if other is buf or other.kind not in ("temp", "write") or other.scope != buf.scope:
                    continue
                if other.loop != buf.loop or other.last != writer.name or other.bytes < buf.bytes:
                    continue
                if slot_of[id(other)] is slot_of[id(buf)] or slot_of[id(other)][-1] is not other:
                    continue
                if not _elementwise_read(self.model, writer, other.tensor):
                    continue
                merged = slot_of[id(other)]
                slots.remove(slot_of[id(buf)])
                merged.append(buf)
                slot_of[id(buf)] = merged
                buf.shares = other.label
                break
        return slots

    def _working_sets(self):
        self.slots = self._slots()
        return working_sets(self.buffers, self.slots, len(self.stmts))

    def _violations(self, working, peaks) -> list[Violation]:
        return violations(self.name, working, peaks, self.target)


def working_sets(buffers: list[PlannedBuffer], slots: list[list[PlannedBuffer]], positions: int,
                 size=lambda b: b.bytes) -> tuple[dict, dict]:
    """(scope -> the largest total of the slots live at one position, scope -> the buffers live at that peak).

    A slot counts with its largest buffer; `size` gives a buffer's bytes (the plan's; `tdsl cost --fit` passes
    the bytes of the padded tiles a code generator allocates)."""
    working, peaks = {}, {}
    for scope in dict.fromkeys(b.scope for b in buffers):  # in the order of the buffers, as the report lists them
        mine = [s for s in slots if s[0].scope == scope]
        best, best_at = -1, 0
        for p in range(positions):
            total = sum(max(size(b) for b in slot) for slot in mine
                        if min(b.live[0] for b in slot) <= p <= max(b.live[1] for b in slot))
            if total > best:
                best, best_at = total, p
        working[scope] = max(best, 0)
        peaks[scope] = [b for slot in mine for b in slot
                        if min(x.live[0] for x in slot) <= best_at <= max(x.live[1] for x in slot)]
    return working, peaks


def violations(kernel: str, working: dict, peaks: dict, target) -> list[Violation]:
    """The working sets over the target's hard per-block capacity of their scope (none without a target)."""
    if target is None:
        return []
    found = []
    for scope, need in working.items():
        info = target.scope(scope)
        if info.hard and info.per_block is not None and need > info.per_block:
            found.append(Violation(kernel, scope, need, info.per_block, peaks[scope]))
    return found


def _elementwise_read(model, writer, tensor: str) -> bool:
    """Does `writer` read `tensor` only element for element (X[i, j] = f(T[i, j]))?"""
    reads = [a for a in writer.reads if a.tensor == tensor]
    if not reads:
        return False
    for acc in reads:
        rel = acc.relation.reverse().apply_range(writer.write.relation)  # T element -> written element
        if rel.dim(isl.dim_type.in_) != rel.dim(isl.dim_type.out):
            return False
        rel = rel.set_tuple_name(isl.dim_type.in_, "t").set_tuple_name(isl.dim_type.out, "t")
        deltas = rel.deltas()
        zero = isl.Set.read_from_str(rel.get_ctx(), "{ t[" + ", ".join(["0"] * rel.dim(isl.dim_type.in_)) + "] }")
        if deltas.is_empty() or not deltas.is_subset(zero.align_params(deltas.get_space())):
            return False
    return True
