"""`tdsl tree --format dot|svg`: schedule trees drawn with Graphviz.

One digraph; each tree shown (program order, then the schedule) is a cluster of isl's node kinds:

    Domain     the root: every statement's iteration domain (and the folded storage)
    Mark       above a band whose first loop carries marks: grid axis, host, pipeline stages, launch warps
    Band       its loops, each with how many values it takes in one iteration of the loops around it, its kind
               (tile / point) and annotations; then each statement's expressions, as in the text view
    Sequence   a body of several children, in order, each under a Filter {statements}
    statement  a leaf, with its dtypes and reduction
    buffer     a cache_read / cache_write copy (scope, shape, dtype, stages, users), joined by a dashed edge
               to the band whose loop holds it

Bands are grouped as in the YAML form (a loop with marks starts a band).  tdsl's trees have no extension
nodes.  Node ids are generated; every text passes `graphviz.escape` and is quoted by the graphviz package, so
no name of a program or a file can break the DOT.  `svg` runs Graphviz's `dot` program.
"""

from __future__ import annotations

import shutil
from typing import Optional

import islpy as isl

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.errors import InternalError
from tdsl.compiler.model.isl_code import integer_bounds
from tdsl.compiler.schedule.schedule import Schedule
from tdsl.compiler.schedule.tree import Leaf, Loop, Node, Tree, pw_affs_to_map, statements_under
from tdsl.compiler.schedule.tree_view import bands, expr_text, instance_note, loop_marks, storage_lines

NO_DOT = ("--format svg runs Graphviz's `dot` program, which is not installed: install Graphviz (apt-get install "
          "graphviz, brew install graphviz or conda install graphviz) or use --format dot for the DOT source")

STYLE = {  # node kind -> Graphviz attributes
    "domain": {"shape": "box", "style": "filled", "fillcolor": "#eeeeee"},
    "mark": {"shape": "note", "style": "filled", "fillcolor": "#fff5cc"},
    "band": {"shape": "box"},
    "sequence": {"shape": "ellipse"},
    "filter": {"shape": "box", "style": "dashed"},
    "statement": {"shape": "box", "style": "rounded,filled", "fillcolor": "#dde8ff"},
    "buffer": {"shape": "cylinder", "style": "filled", "fillcolor": "#e2f3e2"},
}


def dot_source(views: list[tuple[str, Schedule]], title: str = "") -> str:
    """The DOT text of the trees: one (caption, schedule) per cluster, in order."""
    graphviz = _graphviz()
    graph = graphviz.Digraph("tdsl")
    graph.attr("graph", fontname="Helvetica", labelloc="t", label=_text(title), nodesep="0.3", ranksep="0.35")
    graph.attr("node", fontname="Helvetica", fontsize="10")
    graph.attr("edge", fontname="Helvetica", arrowsize="0.6")
    for n, (caption, sched) in enumerate(views):
        with graph.subgraph(name=f"cluster_{n}") as cluster:
            cluster.attr(label=_text(caption), fontsize="12", style="rounded", color="gray")
            _TreeDrawing(cluster, f"t{n}_", sched).draw()
    return graph.source


def svg_text(source: str) -> str:
    """The drawing of a DOT text as SVG, by Graphviz's `dot`; a TdslError saying what to do when it is missing."""
    graphviz = _graphviz()
    if shutil.which("dot") is None:
        raise TdslError(NO_DOT)
    try:
        return graphviz.Source(source).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise TdslError(NO_DOT) from None
    except graphviz.CalledProcessError as err:  # our DOT is always valid: a failure here is a bug
        raise InternalError(f"Graphviz's dot refused the tree's DOT: {err.stderr or err}") from None


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise TdslError("--format dot and svg need the graphviz package: pip install graphviz") from None
    return graphviz


def _text(line: str) -> str:
    """One line of user text as a DOT label: backslashes literal, never read as an HTML-like label."""
    import graphviz

    return graphviz.nohtml(graphviz.escape(line))


def _label(lines: list[str]) -> str:
    """Lines of text as one left-aligned label (`\\l` ends each line)."""
    import graphviz

    return graphviz.nohtml("".join(graphviz.escape(line) + "\\l" for line in lines))


class _TreeDrawing:
    """The nodes and edges of one tree, added to a (sub)graph; ids are `prefix` + a counter."""

    def __init__(self, graph, prefix: str, sched: Schedule):
        self.graph, self.prefix = graph, prefix
        self.model, self.tree = sched.model, sched.tree
        self.count = 0
        self.shapes = _buffer_shapes(sched)

    def draw(self) -> None:
        root = self._node("domain", ["Domain"] + _domain_lines(self.model, self.tree) + storage_lines(self.model))
        self._body(root, self.tree.body)

    def _node(self, kind: str, lines: list[str], parent: Optional[str] = None) -> str:
        name = f"{self.prefix}n{self.count}"
        self.count += 1
        self.graph.node(name, label=_label(lines), **STYLE[kind])
        if parent is not None:
            self.graph.edge(parent, name)
        return name

    def _body(self, parent: str, body: list[Node]) -> None:
        if len(body) == 1:
            self._child(parent, body[0])
            return
        sequence = self._node("sequence", ["Sequence"], parent)
        for child in body:
            self._child(self._node("filter", [f"Filter {{{', '.join(statements_under(child))}}}"], sequence), child)

    def _child(self, parent: str, node: Node) -> None:
        if isinstance(node, Leaf):
            self._node("statement", [node.stmt, instance_note(self.model.stmt(node.stmt), self.model, self.tree).strip()],
                       parent)
            return
        group = bands(node, self.tree)
        marks = loop_marks(node) + ([f"launch {node.warps} warps"] if node.warps else [])
        if marks:
            parent = self._node("mark", ["Mark"] + marks, parent)
        band = self._node("band", ["Band"] + [self._loop_line(loop) for loop in group] + _expr_lines(group), parent)
        for loop in group:
            self._buffers(band, loop)
        self._body(band, group[-1].body)

    def _loop_line(self, loop: Loop) -> str:
        extent = " x ".join(_values(self.model, self.tree, loop))
        notes = [f"grid.{loop.bind}"] if loop.bind else []
        notes += ["host"] if loop.host else []
        notes += [f"pipeline {loop.pipeline} stages"] if loop.pipeline else []
        notes += ["warp-specialised"] if loop.warp_specialize else []
        return f"{loop.name}: {extent} values, {loop.kind}" + "".join(f", {n}" for n in notes)

    def _buffers(self, band: str, loop: Loop) -> None:
        for buf in self.tree.buffers:
            if buf.at is not loop:
                continue
            shape = self.shapes.get(id(buf))
            lines = [f"cache_{buf.kind} {buf.tensor}", f"{buf.scope} {shape}" if shape else buf.scope,
                     f"for {', '.join(buf.stmts)}"]
            name = self._node("buffer", lines)
            self.graph.edge(band, name, style="dashed", arrowhead="none", label=_text(f"at {loop.name}"), fontsize="9")


def _domain_lines(model, tree: Tree) -> list[str]:
    lines = [f"params {', '.join(model.params)}"] if model.params else []
    for stmt in tree.leaves():
        text = str(model.stmt(stmt).domain)
        lines.append(text[text.index("{") + 1 : text.rindex("}")].strip())
    return lines


def _expr_lines(group: list[Loop]) -> list[str]:
    """Each statement's time coordinates in the band, as in the text view; statements placed alike share a line."""
    placed: dict[str, list[str]] = {}
    for stmt in group[0].exprs:
        text = "   ".join(f"{loop.name} = {expr_text(d)}" for loop in group for d in loop.exprs[stmt])
        placed.setdefault(text, []).append(stmt)
    return [f"{', '.join(stmts)}: {text}" for text, stmts in placed.items()]


def _values(model, tree: Tree, loop: Loop) -> list[str]:
    """Per dimension of the loop, the most values it takes in one iteration of the loops around it: a number,
    an expression of the parameters (`floor((127 + L)/128)`), or `?` when neither is one piece."""
    found = []
    for d in range(loop.n_dims):
        spans = [_span(model, tree, loop, stmt, dims[d]) for stmt, dims in loop.exprs.items()]
        numbers = [s for s in spans if isinstance(s, int)]
        if len(numbers) == len(spans):
            found.append(f"{max(numbers):,}")
        else:
            texts = {s for s in spans if isinstance(s, str)}
            found.append(texts.pop() if len(numbers) == 0 and len(texts) == 1 else "?")
    return found


def _span(model, tree: Tree, loop: Loop, stmt: str, pa: isl.PwAff):
    """How many values `pa` (one dim of `loop` for `stmt`) takes at most in one iteration of the outer loops:
    an int, the text of a one-piece expression of the parameters, or None."""
    domain = model.stmt(stmt).domain
    path = tree.path(stmt)
    outer = [dim for l in path[: next(i for i, l in enumerate(path) if l is loop)] for dim in l.exprs[stmt]]
    rel = pw_affs_to_map(outer, domain).reverse().apply_range(pw_affs_to_map([pa], domain))  # outer -> this
    try:
        width = rel.dim_max(0).sub(rel.dim_min(0)).coalesce()
        most = integer_bounds(width)[1]
    except isl.Error:
        return None
    if most.is_int():
        return most.to_python() + 1
    text = expr_text(width.add(isl.PwAff.val_on_domain(width.domain(), isl.Val.one(width.get_ctx()))).coalesce())
    return None if " if " in text else text


def _buffer_shapes(sched: Schedule) -> dict:
    """id(tree buffer) -> "128x64 bf16 x 3 stages" from the buffer plan; empty when it cannot be planned (sizes
    left as parameters)."""
    from tdsl.compiler.analysis.buffer_plan import plan

    try:
        planned = plan(sched)
    except TdslError:
        return {}
    shapes = {}
    for buf in sched.tree.buffers:
        for p in planned:
            if p.at is buf.at and p.tensor == buf.tensor and p.kind == buf.kind:
                stages = f" x {p.stages} stages" if p.stages > 1 else ""
                shapes[id(buf)] = f"{'x'.join(map(str, p.shape)) or '1'} {p.dtype}{stages}"
    return shapes
