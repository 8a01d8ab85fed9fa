"""What every primitive needs: resolving loop and statement names, and the state it edits."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Union

from tdsl.frontend.ast import LoopRef

from ..dependences import Dependence
from ..errors import ScheduleError
from ..model import KernelModel
from ..tree import Loop, Tree, walk_loops

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


def as_ref(loop: LoopLike) -> LoopRef:
    if isinstance(loop, LoopRef):
        return loop
    if not isinstance(loop, str) or not loop:
        raise TypeError(f"expected a loop such as 'C.ko', got {loop!r}")
    stmt, dot, name = loop.rpartition(".")
    return LoopRef(stmt or None, name)


def ref_text(loop: LoopLike) -> str:
    ref = as_ref(loop)
    return f"{ref.stmt}.{ref.loop}" if ref.stmt else ref.loop


def check_stmt(state: State, primitive: str, stmt: str) -> str:
    if not isinstance(stmt, str):
        stmt = ref_text(stmt)
    names = state.tree.leaves()
    if stmt not in names:
        raise ScheduleError(primitive, f"unknown statement '{stmt}'{_suggest(stmt, names)} (statements: {', '.join(names)})")
    return stmt


def find_loop(state: State, primitive: str, loop: LoopLike) -> tuple[Loop, str]:
    """The loop node a reference names, and a statement under it (the one named, or the first)."""
    ref = as_ref(loop)
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
        from ..tree import statements_under

        return matches[0], statements_under(matches[0])[0]
    if not matches:
        every = sorted({node.name for node in walk_loops(tree.body)})
        raise ScheduleError(primitive, f"no loop is named '{ref.loop}'{_suggest(ref.loop, every)}")
    from ..tree import statements_under

    owners = ", ".join(f"{statements_under(m)[0]}.{ref.loop}" for m in matches)
    raise ScheduleError(primitive, f"loop name '{ref.loop}' is ambiguous ({owners}); write STATEMENT.{ref.loop}")


def loop_names_through(tree: Tree, loop: Loop) -> set[str]:
    """Every loop name on any path that passes through `loop` (new names must not collide with these)."""
    from ..tree import statements_under

    names: set[str] = set()
    for stmt in statements_under(loop):
        names.update(node.name for node in tree.path(stmt))
    for node in walk_loops(loop.body):
        names.add(node.name)
    return names


def check_new_names(tree: Tree, primitive: str, loop: Loop, new: list[str], replaced: set[str]) -> None:
    taken = loop_names_through(tree, loop) - replaced
    for name in new:
        if not isinstance(name, str) or not name.isidentifier():
            raise ScheduleError(primitive, f"'{name}' is not a valid loop name")
        if name in taken:
            raise ScheduleError(primitive, f"a loop named '{name}' already exists here; choose another name")
    if len(set(new)) != len(new):
        raise ScheduleError(primitive, f"new loop names must differ: {', '.join(new)}")


def positive_int(primitive: str, what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScheduleError(primitive, f"{what} must be a positive integer, got {value!r}")
    return value


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
