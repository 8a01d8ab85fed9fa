"""Which loops of a kernel run serially: the one rule the buffer plan and the tile lowering share.

A loop not bound to a grid axis runs its iterations one after another in every program, rather than as the
lanes of one tile, when it is

* a tile loop (from split / tile) or a pipelined loop;
* a loop around several statements: a tile holds one statement, so the loop's iterations run each statement's
  tile in turn, in program order (`compute_at(r, Y.ii)` puts r inside Y's point loop ii, which then walks the
  rows one at a time);
* a loop that walks a `sum` whose accumulator is narrower than f32: the program rounds that accumulator after
  every term, so one step may add only one term (lanes of a tile would be added at f32, then rounded once);
* a loop that carries a dependence between the instances under it (a recurrence, or the statements of a `for`
  block): its iterations pass values through memory, one after the other.

Everything inside the innermost serial or bound loop is one tile: what the lowering vectorises and the buffer
plan sizes (compiler/analysis/buffer_planner.py `tile_level`, compiler/lower/loops.py).
"""

from __future__ import annotations

from tdsl.compiler.legality.checks import carried_by
from tdsl.compiler.schedule.tree import Loop, statements_under, walks_reduction


class SerialLoops:
    """The rule for one schedule (its model, tree and dependences), with the dependences each loop carries
    computed once."""

    def __init__(self, model, tree, deps):
        self.model = model
        self.tree = tree
        self.deps = deps
        self.carried_cache: dict = {}  # id(loop) -> the dependences it carries

    @classmethod
    def of(cls, schedule) -> "SerialLoops":
        """The rule for a schedule; the lowering makes one and hands it to the plan, so each loop's carried
        dependences are found once."""
        return cls(schedule.model, schedule.tree, schedule.deps)

    def __call__(self, loop: Loop) -> bool:
        """Does every program run this loop's iterations one after another?"""
        if loop.bind:
            return False
        if loop.kind == "tile" or loop.pipeline is not None:
            return True
        under = statements_under(loop)
        return len(under) > 1 or any(self.rounds_every_term(s, loop) for s in under) or bool(self.carried(loop))

    def carried(self, loop: Loop) -> list:
        """The dependences between instances under `loop` that it carries (pairs in different iterations of it),
        each with its pairs.  Under a loop of one statement only a recurrence (a statement that reads its own
        tensor, compiler/model/recurrences.py) has them; under a loop of several, the statements of a `for`
        block."""
        if id(loop) not in self.carried_cache:
            under = set(statements_under(loop))
            deps = [d for d in self.deps if d.kind in ("flow", "anti", "output") and d.src in under and d.dst in under]
            self.carried_cache[id(loop)] = carried_by(self.model, deps, self.tree, loop) if deps else []
        return self.carried_cache[id(loop)]

    def rounds_every_term(self, stmt_name: str, loop: Loop) -> bool:
        stmt = self.model.stmt(stmt_name)
        return (stmt.reduce_op == "sum" and (stmt.accum_dtype or "f32") != "f32"
                and any(walks_reduction(stmt, pa) for pa in loop.exprs[stmt_name]))
