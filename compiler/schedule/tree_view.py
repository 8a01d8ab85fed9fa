"""Show a schedule tree: a readable Domain / Band / Sequence / Filter / Mark view, and isl's own YAML.

Readable form of the tiled GEMM::

    Domain { C[i, j, k] : 0 <= i < 1024 and 0 <= j < 12288 and 0 <= k < 4096 }
    └── Band {io, jo, ko}
        │   io = floor(i/64)   jo = floor(j/64)   ko = floor(k/32)
        └── Band {ii, jj, kk}
            │   ii = i mod 64   jj = j mod 64   kk = k mod 32
            └── C

Consecutive loops of one kind (tile loops from split/tile, or point loops)
with a single child form one Band, like isl's band nodes; a body of several
children is a Sequence with one Filter per child; buffers, pipelining and
grid bindings appear as Marks above the band that holds them.
"""

from __future__ import annotations

import re
from typing import Optional

import islpy as isl

from tdsl.compiler.model.program import KernelModel
from tdsl.compiler.model.storage import stored_shape
from tdsl.compiler.schedule.tree import Leaf, Loop, Node, Tree, statements_under
from tdsl.frontend.printer import expr_text as source_text


def bands(node: Loop, tree: Optional[Tree] = None) -> list[Loop]:
    """The loops shown as one Band, starting at `node`.

    With `tree`, a loop that carries marks (buffers, pipeline, bind) starts
    a new band, because isl places a Mark node above a band, not inside it.
    """
    group = [node]
    while len(group[-1].body) == 1 and isinstance(group[-1].body[0], Loop) and group[-1].body[0].kind == node.kind:
        if tree is not None and _marks(group[-1].body[0], tree):
            break
        group.append(group[-1].body[0])
    return group


# ---------------------------------------------------------------- readable text


def tree_text(model: KernelModel, tree: Tree) -> str:
    lines = ["Domain " + _domain_text(model, tree)] + storage_lines(model)
    _body_lines(model, tree, tree.body, "", lines)
    return "\n".join(lines)


def storage_lines(model: KernelModel) -> list[str]:
    """The storage decisions: where each element of a folded tensor (`fold_storage`) is stored, e.g.
    `Storage T[t, i] -> T[t mod 2, i]`, and the outputs stored in inputs (`store_in`)."""
    lines = []
    for stmt in model.stmts:
        t = model.tensors.get(stmt.name)
        if t is not None and t.stored_in:
            lines.append(f"Storage {t.name}[{', '.join(stmt.lhs_iters)}] -> {t.stored_in}[{', '.join(stmt.lhs_iters)}]  "
                         f"(store_in: {t.stored_in} is updated in place)")
        if t is None or not t.fold:
            continue
        planes = dict(t.fold)
        where = [f"{it} mod {planes[k]}" if k in planes and planes[k] > 1 else ("0" if k in planes else it)
                 for k, it in enumerate(stmt.lhs_iters)]
        lines.append(f"Storage {t.name}[{', '.join(stmt.lhs_iters)}] -> {t.name}[{', '.join(where)}]  "
                     f"(fold_storage: {' x '.join(str(d) for d in stored_shape(t))} elements)")
    return lines


def _domain_text(model: KernelModel, tree: Tree) -> str:
    parts = []
    for stmt in tree.leaves():
        text = str(model.stmt(stmt).domain)
        parts.append(text[text.index("{") + 1 : text.rindex("}")].strip())
    prefix = f"[{', '.join(model.params)}] -> " if model.params else ""
    return prefix + "{ " + "; ".join(parts) + " }"


def _body_lines(model, tree, body: list[Node], indent: str, lines: list[str]) -> None:
    if len(body) == 1:
        _node_lines(model, tree, body[0], indent, True, lines)
        return
    lines.append(f"{indent}└── Sequence")
    inner = indent + "    "
    for n, child in enumerate(body):
        last = n == len(body) - 1
        branch = "└── " if last else "├── "
        lines.append(f"{inner}{branch}Filter {{{', '.join(statements_under(child))}}}")
        _node_lines(model, tree, child, inner + ("    " if last else "│   "), True, lines)


def _node_lines(model, tree, node: Node, indent: str, last: bool, lines: list[str]) -> None:
    if isinstance(node, Leaf):
        stmt = model.stmt(node.stmt)
        lines.append(f"{indent}└── {node.stmt}{instance_note(stmt, model, tree)}")
        return
    group = bands(node)
    names = ", ".join(loop.name for loop in group)
    lines.append(f"{indent}└── Band {{{names}}}")
    for stmt in statements_under(node):
        exprs = "   ".join(f"{loop.name} = {expr_text(d)}" for loop in group for d in loop.exprs[stmt])
        lines.append(f"{indent}    │   {stmt}: {exprs}")
    for loop in group:
        for mark in _marks(loop, tree):
            lines.append(f"{indent}    │   Mark {mark}")
    _body_lines(model, tree, group[-1].body, indent + "    ", lines)


def _marks(loop: Loop, tree: Tree) -> list[str]:
    return loop_marks(loop) + buffer_marks(loop, tree)


def loop_marks(loop: Loop) -> list[str]:
    """The marks a loop carries itself: its grid axis, host, pipeline stages, launch order."""
    marks = []
    if loop.bind:
        marks.append(f"bind {loop.name} -> grid.{loop.bind}")
    if loop.host:
        marks.append(f"host {loop.name} (the launcher's loop: each iteration launches the kernels below)")
    if loop.pipeline:
        marks.append(f"pipeline {loop.name} stages={loop.pipeline}" + (" warp_specialize" if loop.warp_specialize else ""))
    if loop.group:
        marks.append(f"launch group={loop.group} (programs start in groups of {loop.group} along grid.x)")
    if loop.persistent:
        marks.append("launch persistent (one program per multiprocessor walks the tiles)")
    return marks


def buffer_marks(loop: Loop, tree: Tree) -> list[str]:
    """The cache_read / cache_write buffers placed at a loop."""
    marks = []
    for buf in tree.buffers:
        if buf.at is loop:
            scope = f"{buf.scope} {buf.dtype}" if getattr(buf, "dtype", None) else buf.scope
            marks.append(f"cache_{buf.kind} {buf.tensor} -> {scope} at {loop.name} (for {', '.join(buf.stmts)})")
    return marks


def instance_note(stmt, model, tree) -> str:
    """A leaf's note: dtype, and for a reduction its operator, iterators and accumulator."""
    if stmt.is_reduction:
        start = f" from {source_text(stmt.init)}" if stmt.init is not None else ""
        return (f"   ({stmt.reduce_op} over {', '.join(stmt.red_iters)}{start}, accum {stmt.accum_dtype}, store "
                f"{stmt.dtype}{_online_note(stmt, model, tree)})")
    return f"   (store {stmt.dtype}{_online_note(stmt, model, tree)})"


def _online_note(stmt, model, tree) -> str:
    """What `online` made of a statement: the running maximum, its readers, the sums that follow it."""
    if stmt.name in tree.online:
        sums = [s for s in model.stmts if s.rescale is not None and s.rescale.stat == stmt.name]
        readers = sorted({s.rescale.source or s.name for s in sums})
        return (f"; running maximum: {', '.join(readers)} read it as it grows, "
                f"{', '.join(s.name for s in sums)} rescaled")
    if stmt.rescale is not None:
        return f"; rescaled to the running {stmt.rescale.stat}"
    return ""


def expr_text(pa: isl.PwAff) -> str:
    """`{ C[i, j, k] -> [(floor((i)/64))] : ... }` -> `floor(i/64)`."""
    text = str(pa.coalesce())
    pieces = re.findall(r"->\s*\[\((.*?)\)\]\s*(?::\s*([^;}]*))?", text)
    if not pieces:
        return text
    rendered = []
    for expr, cond in pieces:
        expr = re.sub(r"\((\w+)\)", r"\1", expr)
        rendered.append(expr if len(pieces) == 1 else f"{expr} if {cond.strip()}")
    return " ; ".join(rendered)


# ---------------------------------------------------------------- isl schedule tree


def to_isl_schedule(model: KernelModel, tree: Tree) -> isl.Schedule:
    from tdsl.compiler.model.dependences import compute_dependences

    return _body_schedule(model, tree, tree.body, compute_dependences(model))


def _body_schedule(model, tree, body: list[Node], deps) -> isl.Schedule:
    schedules = [_node_schedule(model, tree, n, deps) for n in body]
    result = schedules[0]
    for s in schedules[1:]:
        result = result.sequence(s)
    return result


def _node_schedule(model, tree, node: Node, deps) -> isl.Schedule:
    if isinstance(node, Leaf):
        return isl.Schedule.from_domain(isl.UnionSet.from_set(model.stmt(node.stmt).domain))
    group = bands(node, tree)
    child = _body_schedule(model, tree, group[-1].body, deps)
    mupa = _band_mupa(model, group)
    sched = child.insert_partial_schedule(mupa)
    band = sched.get_root().child(0)
    if len(group) > 1 and _permutable(model, tree, group, deps):
        band = band.band_set_permutable(1)
    for mark in reversed(_marks(node, tree)):
        band = band.insert_mark(isl.Id.read_from_str(model.ctx, _mark_id(mark)))
    return band.get_schedule()


def _permutable(model, tree, group: list[Loop], deps) -> bool:
    """isl's meaning: within one iteration of the outer loops, no dependence goes backwards along any member."""
    from tdsl.compiler.schedule.tree import pw_affs_to_map

    under = set(statements_under(group[0]))
    outer = tree.enclosing_loops(group[0])
    for dep in deps:
        if dep.src not in under or dep.dst not in under:
            continue
        rel = dep.relation
        if outer:
            o_s = pw_affs_to_map([d for l in outer for d in l.exprs[dep.src]], model.stmt(dep.src).domain)
            o_t = pw_affs_to_map([d for l in outer for d in l.exprs[dep.dst]], model.stmt(dep.dst).domain)
            rel = rel.intersect(o_s.apply_range(o_t.reverse()))
        for loop in group:
            for d_s, d_t in zip(loop.exprs[dep.src], loop.exprs[dep.dst]):
                m_s = pw_affs_to_map([d_s], model.stmt(dep.src).domain)
                m_t = pw_affs_to_map([d_t], model.stmt(dep.dst).domain)
                if not rel.intersect(m_s.lex_gt_map(m_t)).is_empty():
                    return False
    return True


def _band_mupa(model, group: list[Loop]) -> isl.MultiUnionPwAff:
    stmts = list(group[0].exprs)
    mupa = None
    for loop in group:
        for d in range(loop.n_dims):
            upa = None
            for stmt in stmts:
                pa = loop.exprs[stmt][d].intersect_domain(model.stmt(stmt).domain)
                piece = isl.UnionPwAff.from_pw_aff(pa)
                upa = piece if upa is None else upa.union_add(piece)
            column = isl.MultiUnionPwAff.from_union_pw_aff(upa)
            mupa = column if mupa is None else mupa.flat_range_product(column)
    return mupa


def _mark_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")


def yaml_text(model: KernelModel, tree: Tree) -> str:
    sched = to_isl_schedule(model, tree)
    printer = isl.Printer.to_str(model.ctx).set_yaml_style(isl.yaml_style.BLOCK)
    return printer.print_schedule(sched).get_str()
