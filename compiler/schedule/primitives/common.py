"""What every primitive needs: resolving loop and statement names, and the state it edits."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Union

from tdsl.frontend.ast import LoopRef
from tdsl.frontend.limits import MAX_INT, MAX_NAME_CHARS, expression_problem, reserved_name_problem
from tdsl.frontend.parser import GRAMMAR_PATH

from tdsl.compiler.model.dependences import Dependence
from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.model.program import KernelModel
from tdsl.compiler.schedule.tree import Loop, Tree, statements_under, walk_loops

LoopLike = Union[str, LoopRef]

SCOPES = ("global", "shared", "register", "local", "L1", "L0A", "L0B", "L0C", "UB")
GRID_AXES = ("x", "y", "z")


@dataclass
class State:
    """What a schedule has built so far: the (possibly rewritten) model, its tree and its dependences."""

    model: KernelModel
    tree: Tree
    deps: list[Dependence]

    def copy(self) -> "State":
        return State(self.model, self.tree.copy(), self.deps)


def as_ref(loop: LoopLike, primitive: str = "schedule") -> LoopRef:
    if isinstance(loop, LoopRef):
        return loop
    if not isinstance(loop, str) or not loop:
        raise ScheduleError(primitive, f"expected a loop such as 'C.ko', got {loop!r}")
    stmt, dot, name = loop.rpartition(".")
    return LoopRef(stmt or None, name)


def ref_text(loop: LoopLike, primitive: str = "schedule") -> str:
    return as_ref(loop, primitive).text


def check_stmt(state: State, primitive: str, stmt: str) -> str:
    if isinstance(stmt, LoopRef):
        stmt = ref_text(stmt, primitive)
    if not isinstance(stmt, str):
        raise ScheduleError(primitive, f"expected a statement, named by the tensor it writes, got {stmt!r}")
    names = state.tree.leaves()
    if stmt not in names:
        raise ScheduleError(primitive, f"unknown statement '{stmt}'{_suggest(stmt, names)} (statements: {', '.join(names)})")
    return stmt


def find_loop(state: State, primitive: str, loop: LoopLike) -> tuple[Loop, str]:
    """The loop node a reference names, and a statement under it (the one named, or the first)."""
    ref = as_ref(loop, primitive)
    tree = state.tree
    if ref.stmt is not None:
        stmt = check_stmt(state, primitive, ref.stmt)
        path = tree.path(stmt)
        for node in path:
            if node.name == ref.loop:
                return node, stmt
        names = [node.name for node in path]
        raise ScheduleError(
            primitive,
            f"statement {stmt} has no loop '{ref.loop}'{_suggest(ref.loop, names)}; its loops are {', '.join(names) or 'none'}",
        )
    matches = [node for node in walk_loops(tree.body) if node.name == ref.loop]
    if len(matches) == 1:
        return matches[0], statements_under(matches[0])[0]
    if not matches:
        every = sorted({node.name for node in walk_loops(tree.body)})
        raise ScheduleError(primitive, f"no loop is named '{ref.loop}'{_suggest(ref.loop, every)}")
    owners = ", ".join(f"{statements_under(m)[0]}.{ref.loop}" for m in matches)
    raise ScheduleError(primitive, f"loop name '{ref.loop}' is ambiguous ({owners}); write STATEMENT.{ref.loop}")


def names_around(tree: Tree, loops: list[Loop]) -> set[str]:
    """The names a loop replacing `loops` (a nested pair, or adjacent siblings, or one loop) must not take: those
    of the loops enclosing them and of every loop inside them.  Loop names are unique along every
    root-to-statement path, so these are the only ones the new loop could meet."""
    names = {node.name for node in tree.enclosing_loops(loops[0])}
    for loop in loops:
        names.update(node.name for node in walk_loops(loop.body) if not any(node is l for l in loops))
    return names


def loop_name_problem(name) -> Optional[str]:
    """Why `name` cannot name a loop, or None.  A loop name is printed into the trace (`io, ii = split(...)`)
    and read back by the parser, so it must be what the grammar reads as a name (NAME, not one of its words)
    and not a word the frontend reserves for loops (frontend/limits.py)."""
    if not isinstance(name, str) or not _grammar_name().fullmatch(name):
        return (f"{name!r} is not a valid loop name: a name is an ASCII letter or '_' followed by letters, "
                f"digits or '_'")
    if name in _grammar_words():
        return f"'{name}' is a word of the tdsl language and cannot name a loop"
    return reserved_name_problem(name, "loop")


@lru_cache(maxsize=1)
def _grammar_name() -> "re.Pattern":
    """The grammar's NAME token (frontend/grammar.lark), so the two cannot drift apart."""
    match = re.search(r"^NAME:\s*/(.+)/\s*$", GRAMMAR_PATH.read_text(), re.M)
    return re.compile(match.group(1))


@lru_cache(maxsize=1)
def _grammar_words() -> frozenset:
    """The keywords of the grammar ("const", "kernel", "accum"...): the lexer never reads them as a NAME."""
    return frozenset(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', GRAMMAR_PATH.read_text()))


def check_new_names(state: State, primitive: str, loops: list[Loop], new: list[str], defaults: bool = False) -> None:
    """Names for the loops that replace `loops`: valid loop names, not sizes of the kernel (a loop becomes an
    iterator in rfactor, and iterators cannot be sizes), different from each other and from every loop name they
    could meet on a path (`names_around`).  `defaults`: the primitive made the names up."""
    yours = " (a default name: give the new loops names of your own)" if defaults else ""
    for name in new:
        problem = loop_name_problem(name)
        if problem is None and name in state.model.sizes:
            what = "a float constant" if isinstance(state.model.sizes[name], float) else "a size"
            problem = f"'{name}' is {what} of the kernel; loops need fresh names"
        if problem is not None:
            raise ScheduleError(primitive, problem + yours)
    if len(set(new)) != len(new):
        raise ScheduleError(primitive, f"new loop names must differ: {', '.join(new)}")
    taken = names_around(state.tree, loops)
    for name in new:
        if name in taken:
            raise ScheduleError(primitive, f"a loop named '{name}' already exists here; choose another name")


def single_name(primitive: str, names) -> Optional[str]:
    """The one loop name a step that makes one loop was given (`f = fuse(...)`, `w = skew(...)`), or None for its
    default; a wrong count or a name that is not a loop name is refused here."""
    if names is None:
        return None
    names = [names] if isinstance(names, str) else list(names)
    if len(names) != 1:
        raise ScheduleError(primitive, f"{primitive} makes one loop; name one, not {len(names)}")
    problem = loop_name_problem(names[0])
    if problem is not None:
        raise ScheduleError(primitive, problem)
    return names[0]


def fresh_loop_name(base: str, taken: set[str]) -> str:
    """`base` if it is a valid loop name not in `taken`, else the first valid `base2`, `base3`, ... (or `loopN`),
    the stem shortened so that stem and number stay within the name limit (a 64-character `base` that is taken
    had every `base2`, `base3`, ... refused for its length, and the search never ended: probe HH)."""
    stem = base[:MAX_NAME_CHARS]
    stem = stem if loop_name_problem(stem) is None else "loop"
    candidate, n = stem, 1
    while candidate in taken or loop_name_problem(candidate) is not None:
        n += 1
        candidate = stem[:MAX_NAME_CHARS - len(str(n))] + str(n)
    return candidate


def grid_bindings(tree: Tree, stmts) -> dict[str, dict[str, str]]:
    """{statement: {grid axis: loop name}}: the axes each statement runs on, from its enclosing bound loops."""
    return {s: {loop.bind: loop.name for loop in tree.path(s) if loop.bind} for s in stmts}


def check_bindings_kept(state: State, primitive: str, before: dict[str, dict[str, str]]) -> None:
    """A step that moves a statement into other loops (compute_at, reverse_compute_at, recompute_at, fuse) keeps
    every grid axis it ran on.  The loops it merges into may not be bound, and a binding dropped with its loop
    would silently turn parallel work serial; the user binds the loop they mean after the step."""
    leaves = set(state.tree.leaves())
    for stmt, axes in before.items():
        if stmt not in leaves:
            continue
        now = {loop.bind for loop in state.tree.path(stmt) if loop.bind}
        for axis, loop in axes.items():
            if axis not in now:
                raise ScheduleError(primitive, f"{stmt}.{loop} is bound to grid.{axis}, and after this step no loop "
                                               f"around {stmt} would be: {primitive} merges {stmt}'s loop {loop} into "
                                               f"loops that are not bound, dropping the binding; apply {primitive} "
                                               f"first, then bind the loop that should run on grid.{axis}")


def check_buffers_in_place(state: State, primitive: str) -> None:
    """The invariant every step keeps: each cache buffer's loop exists and encloses every statement it serves.

    A buffer is one copy per iteration of its loop, shared by the statements under that loop; a step that would
    take a statement out of that loop (compute_at, reverse_compute_at) or remove the loop (compute_inline of the
    only statement under it) would leave the statement using a copy that no longer exists around it.  Such a
    step is refused; the statement can be moved first and cached afterwards.  Statements that a step removes
    from the kernel (compute_inline) simply stop using a read copy, as long as it still serves someone."""
    tree = state.tree
    loops = list(walk_loops(tree.body))
    leaves = set(tree.leaves())
    for buf in tree.buffers:
        what = f"the {buf.scope} {'copy' if buf.kind == 'read' else 'buffer'} of {buf.tensor}"
        if not any(buf.at is loop for loop in loops):
            raise ScheduleError(primitive, f"{what} is placed at loop {buf.at.name} (cache_{buf.kind}), which this "
                                           f"step would remove; apply {primitive} before cache_{buf.kind}")
        under = set(statements_under(buf.at))
        for stmt in buf.stmts:
            if stmt in leaves and stmt not in under:
                verb = "reads" if buf.kind == "read" else "writes"
                raise ScheduleError(
                    primitive, f"{stmt} {verb} {buf.tensor} through {what} at loop {stmt}.{buf.at.name} "
                               f"(cache_{buf.kind}); this step would take {stmt} out of that loop, away from the "
                               f"{'copy' if buf.kind == 'read' else 'buffer'}: move {stmt} before caching {buf.tensor}")
        if not _buffer_users(state, buf, under, leaves):
            gone = ", ".join(s for s in buf.stmts if s not in leaves)
            raise ScheduleError(primitive, f"{what} at loop {buf.at.name} (cache_{buf.kind}) would serve no statement "
                                           f"once {gone} is gone; apply {primitive} before cache_{buf.kind}")
        _check_one_program(buf, what, primitive)


def _check_one_program(buf, what: str, primitive: str) -> None:
    """A copy on chip belongs to one program: its loop may not enclose a loop bound to the grid, whose iterations
    are programs with no on-chip memory in common (probe U of the 28th session: the cost report counted one fill
    of a shared copy at io for the programs of a bound jo inside, the kernel loaded in each of them)."""
    bound = next((loop for loop in walk_loops(buf.at.body) if loop.bind), None)
    if bound is not None:
        raise ScheduleError(primitive, f"{what} at loop {buf.at.name} (cache_{buf.kind}) would be shared by the "
                                       f"programs of loop {bound.name}, bound to grid.{bound.bind} inside it, which "
                                       f"have no on-chip memory in common: place the copy at loop {bound.name} or "
                                       f"inside it, or bind a loop outside {buf.at.name} instead")


def _buffer_users(state: State, buf, under: set, leaves: set) -> list[str]:
    """The statements still using a buffer: those it lists that remain, and for a read copy every reader under
    its loop (legality.check_invariants re-derives a read copy's statements that way)."""
    users = [s for s in buf.stmts if s in leaves]
    if buf.kind == "read":
        users += [s for s in under if any(r.tensor == buf.tensor for r in state.model.stmt(s).reads)]
    return users


def check_expression_size(primitive: str, stmt: str, exprs: list, instead: str) -> None:
    """A statement's expressions built by a primitive from several (inlined, recomputed) stay within the limits
    the parser keeps written ones to (frontend/limits.py: the code generated for them must stay valid Python
    of a size that compiles)."""
    for expr in exprs:
        problem = None if expr is None else expression_problem(expr)
        if problem is not None:
            raise ScheduleError(primitive, f"{stmt} would compute an expression too large to generate: {problem}; "
                                           f"or {instead}")


def flag(primitive: str, name: str, value) -> bool:
    """A true / false option: a bool from Python, `true` / `false` from a schedule block."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ScheduleError(primitive, f"{name} must be true or false, got {value!r}")


def positive_int(primitive: str, what: str, value) -> int:
    """A count or factor: an int from 1 to 2^31 - 1, the integers a schedule block can write (frontend/limits.py)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScheduleError(primitive, f"{what} must be a positive integer, got {value!r}")
    if value > MAX_INT:
        raise ScheduleError(primitive, f"{what} must be at most {MAX_INT} (2^31 - 1), got {value}")
    return value


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
