"""Random schedule steps drawn from the current schedule tree.

Every generator looks at the tree a `Schedule` has built so far and proposes one primitive call whose
arguments name things that exist there (statements, their loops, tensors they read or write), with
arguments chosen to reach the corners: non-divisor factors, factor 1, factors above the extent, loops of
one iteration, binds of any loop to any axis, pipelines of point loops, placements at every level.
A proposal may still be illegal or misused; the schedule then raises a typed error, which is an outcome the
fuzzer counts, not a finding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from tdsl.compiler.schedule.schedule import Schedule
from tdsl.frontend import ast
from tdsl.compiler.schedule.schedule import Step as TraceStep
from tdsl.compiler.schedule.tree import Leaf, Loop, statements_under, walk_loops, walks_reduction

FACTORS = (1, 1, 2, 2, 3, 4, 4, 5, 7, 8, 8, 16, 16, 32, 64, 128, 1000)
HUGE_FACTORS = (2**31 - 1, 2**31, 2**40)  # the largest integer a schedule block can write, and beyond
# Names a schedule block cannot write back (or that collide): not NAME, words of the grammar, Python and isl
# keywords in any case, '__' names, non-ASCII letters.
BAD_NAMES = ("1bad", "x y", "", "a.b", "const", "kernel", "accum", "for", "lambda", "floor", "MOD", "__x", "é")
SCOPES = ("shared", "shared", "register", "local", "global", "L1", "UB")
AXES = ("grid.x", "grid.x", "grid.y", "grid.z")
DTYPES = ("bf16", "f16", "f32", "f8e4m3")


@dataclass(frozen=True)
class Step:
    """One primitive call: applied through the Python API, printed in .tdsl syntax."""

    primitive: str
    args: tuple
    kwargs: tuple = ()  # (key, value) pairs
    names: Optional[tuple] = None

    def apply(self, sched: Schedule):
        kwargs = dict(self.kwargs)
        if self.names is not None:
            kwargs["names"] = list(self.names)
        return getattr(sched, self.primitive)(*self.args, **kwargs)

    def __str__(self) -> str:
        return str(TraceStep(self.primitive, self.args, dict(self.kwargs), self.names or ()))


@dataclass
class _Pick:
    rng: random.Random
    sched: Schedule
    fresh: list = field(default_factory=list)

    # ------------------------------------------------------------ what the tree holds

    def stmts(self) -> list[str]:
        return self.sched.tree.leaves()

    def path(self, stmt: str) -> list[Loop]:
        return self.sched.tree.path(stmt)

    def stmt_with_loops(self) -> Optional[str]:
        candidates = [s for s in self.stmts() if self.path(s)]
        return self.rng.choice(candidates) if candidates else None

    def loop_ref(self, stmt: str, loop: Loop) -> str:
        return f"{stmt}.{loop.name}"

    def any_loop(self) -> Optional[tuple[str, Loop]]:
        stmt = self.stmt_with_loops()
        if stmt is None:
            return None
        return stmt, self.rng.choice(self.path(stmt))

    def factor(self) -> int:
        return self.rng.choice(HUGE_FACTORS) if self.rng.random() < 0.02 else self.rng.choice(FACTORS)

    def new_names(self, n: int) -> Optional[tuple]:
        """Mostly the default names; sometimes explicit fresh ones (occasionally colliding on purpose)."""
        roll = self.rng.random()
        if roll < 0.75:
            return None
        if roll < 0.95:
            return tuple(f"z{self.rng.randrange(1000)}_{k}" for k in range(n))
        existing = [l.name for l in walk_loops(self.sched.tree.body)] or ["i"]
        sizes = list(self.sched.model.sizes)  # a loop may not take a size's name
        return tuple(self.rng.choice(existing + sizes + ["io"] + list(BAD_NAMES)) for _ in range(n))

    def model(self):
        return self.sched.model


# ---------------------------------------------------------------- one generator per primitive


def gen_split(p: _Pick) -> Optional[Step]:
    got = p.any_loop()
    if got is None:
        return None
    stmt, loop = got
    return Step("split", (p.loop_ref(stmt, loop), p.factor()), names=p.new_names(2))


def gen_tile(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    path = p.path(stmt)
    if len(path) < 2:
        return Step("tile", (p.loop_ref(stmt, path[0]), p.factor()), names=p.new_names(2))
    start = p.rng.randrange(len(path) - 1)
    width = 2 if p.rng.random() < 0.8 or start + 2 >= len(path) else 3
    loops = path[start:start + width]
    factors = tuple(p.factor() for _ in loops)
    return Step("tile", tuple(p.loop_ref(stmt, l) for l in loops) + factors, names=p.new_names(2 * len(loops)))


def gen_reorder(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    path = p.path(stmt)
    if len(path) < 2:
        return None
    lo = p.rng.randrange(len(path) - 1)
    hi = p.rng.randrange(lo + 2, len(path) + 1)
    chain = [l.name for l in path[lo:hi]]
    order = chain[:]
    while order == chain:
        p.rng.shuffle(order)
    if p.rng.random() < 0.3:  # name only some of them
        order = order[: max(2, len(order) - 1)]
    return Step("reorder", (stmt, *order))


def gen_fuse(p: _Pick) -> Optional[Step]:
    loops = [(s, l) for s in p.stmts() for l in p.path(s)]
    nested = [(s, l) for s, l in loops if len(l.body) == 1 and isinstance(l.body[0], Loop)]
    siblings = []
    for body in _bodies(p.sched.tree.body):
        for a, b in zip(body, body[1:]):
            if isinstance(a, Loop) and isinstance(b, Loop):
                siblings.append((a, b))
    if siblings and (not nested or p.rng.random() < 0.5):
        a, b = p.rng.choice(siblings)
        sa, sb = _first_stmt(a), _first_stmt(b)
        return Step("fuse", (f"{sa}.{a.name}", f"{sb}.{b.name}"), names=p.new_names(1))
    if not nested:
        return None
    stmt, loop = p.rng.choice(nested)
    return Step("fuse", (p.loop_ref(stmt, loop), p.loop_ref(stmt, loop.body[0])), names=p.new_names(1))


def gen_reverse(p: _Pick) -> Optional[Step]:
    got = p.any_loop()
    if got is None:
        return None
    return Step("reverse", (p.loop_ref(*got),))


def gen_skew(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    path = p.path(stmt)
    if len(path) < 2 or p.rng.random() < 0.05:  # sometimes a loop by itself or by an inner loop (refused)
        a, b = p.rng.choice(path), p.rng.choice(path)
    else:
        inner = p.rng.randrange(1, len(path))
        a, b = path[inner], path[p.rng.randrange(inner)]
    factor = p.rng.choice((1, 1, 1, 2, 2, 3)) if p.rng.random() > 0.02 else p.rng.choice((0, -1) + HUGE_FACTORS)
    return Step("skew", (p.loop_ref(stmt, a), p.loop_ref(stmt, b), factor), names=p.new_names(1))


def gen_shift(p: _Pick) -> Optional[Step]:
    got = p.any_loop()
    if got is None:
        return None
    offset = p.rng.choice((1, 1, 2, 3, -1, -2, 5)) if p.rng.random() > 0.02 else p.rng.choice((0,) + HUGE_FACTORS)
    return Step("shift", (p.loop_ref(*got), offset))


def gen_distribute(p: _Pick) -> Optional[Step]:
    loops = [(s, l) for s in p.stmts() for l in p.path(s)]
    several = [(s, l) for s, l in loops if len(l.body) > 1]
    if several and p.rng.random() < 0.9:
        return Step("distribute", (p.loop_ref(*p.rng.choice(several)),))
    if loops and p.rng.random() < 0.1:  # sometimes a loop around one node (refused)
        return Step("distribute", (p.loop_ref(*p.rng.choice(loops)),))
    return None


def gen_compute_at(p: _Pick) -> Optional[Step]:
    return _placement(p, "compute_at", producer_moves=True)


def gen_recompute_at(p: _Pick) -> Optional[Step]:
    return _placement(p, "recompute_at", producer_moves=True)


def gen_reverse_compute_at(p: _Pick) -> Optional[Step]:
    return _placement(p, "reverse_compute_at", producer_moves=False)


def _placement(p: _Pick, primitive: str, producer_moves: bool) -> Optional[Step]:
    model = p.model()
    pairs = []
    for s in model.stmts:
        for r in s.reads:
            if r.tensor in {t.name for t in model.stmts}:
                pairs.append((r.tensor, s.name))  # producer, consumer
    leaves = set(p.stmts())
    pairs = [(a, b) for a, b in pairs if a in leaves and b in leaves and a != b]
    if primitive == "recompute_at" and p.rng.random() < 0.9:  # mostly what it takes: a temporary, not a sum
        pairs = [(a, b) for a, b in pairs if model.tensors[a].kind == "temp" and not model.stmt(a).is_reduction]
    served = {s for b in p.sched.tree.buffers for s in b.stmts if s in leaves}
    if served and p.rng.random() < 0.4:  # move a statement that a cache buffer serves (out of its loop, or not)
        moved = p.rng.choice(sorted(served))
        target = p.rng.choice(sorted(leaves - {moved}) or [moved])
    elif pairs and p.rng.random() < 0.85:
        producer, consumer = p.rng.choice(pairs)
        moved, target = (producer, consumer) if producer_moves else (consumer, producer)
    else:
        names = sorted(leaves)
        moved, target = p.rng.choice(names), p.rng.choice(names)
    path = p.path(target)
    if not path or (moved == target and p.rng.random() < 0.9):  # a statement placed in its own loop (refused)
        return None
    outside = [loop for loop in path if moved not in statements_under(loop)]  # not a loop of the moved statement
    loop = p.rng.choice(outside) if outside and p.rng.random() < 0.9 else p.rng.choice(path)
    return Step(primitive, (moved, p.loop_ref(target, loop)))


def gen_compute_inline(p: _Pick) -> Optional[Step]:
    model = p.model()
    temps = [s.name for s in model.stmts if model.tensors[s.name].kind == "temp" and s.name in p.stmts()]
    if not temps:
        return None
    kwargs = (("round", False),) if p.rng.random() < 0.1 else ()
    return Step("compute_inline", (p.rng.choice(temps),), kwargs)


def gen_cache_read(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    reads = sorted({r.tensor for r in p.model().stmt(stmt).reads})
    if not reads:
        return None
    loop = p.rng.choice(p.path(stmt))
    kwargs = [("at", p.loop_ref(stmt, loop))]
    if p.rng.random() < 0.15:
        kwargs.append(("dtype", p.rng.choice(DTYPES)))
    return Step("cache_read", (p.rng.choice(reads), p.rng.choice(SCOPES)), tuple(kwargs))


def gen_cache_write(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    loop = p.rng.choice(p.path(stmt))
    kwargs = [("at", p.loop_ref(stmt, loop))]
    if p.rng.random() < 0.15:
        kwargs.append(("dtype", p.rng.choice(DTYPES)))
    return Step("cache_write", (stmt, p.rng.choice(SCOPES)), tuple(kwargs))


def gen_fold_storage(p: _Pick) -> Optional[Step]:
    model = p.model()
    temps = [s for s in model.stmts if s.name in p.stmts() and model.tensors[s.name].kind == "temp" and s.lhs_iters
             and not s.is_reduction]  # what fold_storage takes: a temporary a plain statement writes
    if p.rng.random() < 0.05:  # sometimes any tensor (mostly refused)
        return Step("fold_storage", (p.rng.choice(list(model.tensors)), "i", 1))
    if not temps:
        return None
    stmt = p.rng.choice(temps)
    dim = stmt.loops[0] if stmt.loops and p.rng.random() < 0.7 else p.rng.choice(stmt.lhs_iters)  # a time loop's
    extent = model.tensors[stmt.name].shape[stmt.lhs_iters.index(dim)]
    top = extent - 1 if isinstance(extent, int) and extent > 1 else 4
    return Step("fold_storage", (stmt.name, dim, p.rng.choice((1, 1, 2, min(3, top), top))))


def gen_store_in(p: _Pick) -> Optional[Step]:
    """An output stored in an input of its dtype and shape (often legal only in some orders), sometimes a pair
    that does not match or is not an output and an input (refused)."""
    model = p.model()
    pairs = [(o.name, i.name) for o in model.outputs() for i in model.inputs()
             if o.dtype == i.dtype and [str(d) for d in o.shape] == [str(d) for d in i.shape]]
    if not pairs or p.rng.random() < 0.1:
        names = list(model.tensors)
        return Step("store_in", (p.rng.choice(names), p.rng.choice(names)))
    return Step("store_in", p.rng.choice(pairs))


def gen_pipeline(p: _Pick) -> Optional[Step]:
    got = p.any_loop()
    if got is None:
        return None
    return Step("pipeline", (p.loop_ref(*got),), (("stages", p.rng.choice((1, 2, 3, 4))),))


def gen_bind(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    path = p.path(stmt)
    # Mostly outer loops (what a kernel author binds), sometimes any loop.
    loop = path[0] if p.rng.random() < 0.5 else p.rng.choice(path)
    return Step("bind", (p.loop_ref(stmt, loop), p.rng.choice(AXES)))


def gen_launch(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    options = (("warps", p.rng.choice((1, 2, 4, 8))),)
    if p.rng.random() < 0.3:  # one program per multiprocessor walking the tiles (refused without a bound loop)
        options += (("persistent", True),)
    return Step("launch", (stmt,), options)


def gen_host(p: _Pick) -> Optional[Step]:
    stmt = p.stmt_with_loops()
    if stmt is None:
        return None
    path = p.path(stmt)
    # Mostly the outermost loop (a time loop run by the launcher), sometimes any loop (refused inside a kernel loop).
    loop = path[0] if p.rng.random() < 0.7 else p.rng.choice(path)
    return Step("host", (p.loop_ref(stmt, loop),))


def gen_rfactor(p: _Pick) -> Optional[Step]:
    model = p.model()
    reductions = [s.name for s in model.stmts if s.is_reduction and s.name in p.stmts() and p.path(s.name)]
    if not reductions:
        return None
    stmt = p.rng.choice(reductions)
    # Mostly a loop over the terms (rfactor takes the outer piece of a split of them, or the loop itself with
    # segments=), sometimes any loop (refused).
    walking = [loop for loop in p.path(stmt) if any(walks_reduction(model.stmt(stmt), pa) for pa in loop.exprs[stmt])]
    loop = p.rng.choice(walking) if walking and p.rng.random() < 0.8 else p.rng.choice(p.path(stmt))
    kwargs = []
    if p.rng.random() < (0.5 if loop in walking else 0.3):
        kwargs.append(("segments", p.rng.choice((1, 2, 3, 4, 8))))
    if p.rng.random() < 0.2:
        kwargs.append(("dtype", p.rng.choice(DTYPES)))
    return Step("rfactor", (p.loop_ref(stmt, loop),), tuple(kwargs))


def gen_online(p: _Pick) -> Optional[Step]:
    model = p.model()
    maxima = [s.name for s in model.stmts if s.reduce_op == "max" and s.name in p.stmts()]
    if not maxima:
        return None
    return Step("online", (p.rng.choice(maxima),), ())


GENERATORS = {
    "split": (gen_split, 6),
    "tile": (gen_tile, 5),
    "reorder": (gen_reorder, 4),
    "fuse": (gen_fuse, 3),
    "reverse": (gen_reverse, 1),
    "skew": (gen_skew, 2),
    "shift": (gen_shift, 2),
    "distribute": (gen_distribute, 2),
    "compute_at": (gen_compute_at, 4),
    "recompute_at": (gen_recompute_at, 3),
    "reverse_compute_at": (gen_reverse_compute_at, 4),
    "compute_inline": (gen_compute_inline, 2),
    "cache_read": (gen_cache_read, 2),
    "cache_write": (gen_cache_write, 2),
    "fold_storage": (gen_fold_storage, 2),
    "store_in": (gen_store_in, 2),
    "pipeline": (gen_pipeline, 2),
    "bind": (gen_bind, 6),
    "launch": (gen_launch, 1),
    "host": (gen_host, 1),
    "rfactor": (gen_rfactor, 1),
    "online": (gen_online, 2),
}


def named_steps(prog, name: str) -> list[Step]:
    """A file's `schedule NAME { ... }` block as fuzz steps, loop references written as text, so that a
    sequence can start from a hand-written schedule and be replayed and shrunk like any other."""
    steps = []
    for step in prog.block(name).steps:
        args = tuple(_as_text(a.value) for a in step.args if a.keyword is None)
        kwargs = tuple((a.keyword, _as_text(a.value)) for a in step.args if a.keyword is not None)
        steps.append(Step(step.primitive, args, kwargs, tuple(n.name for n in step.results) or None))
    return steps


def _as_text(value):
    """A schedule block's argument as the Python API takes it (a loop reference as 'stmt.loop')."""
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    if isinstance(value, ast.LoopRef):
        return f"{value.stmt}.{value.loop}" if value.stmt else value.loop
    return value


def random_step(rng: random.Random, sched: Schedule) -> Optional[Step]:
    names = list(GENERATORS)
    weights = [GENERATORS[n][1] for n in names]
    primitive = rng.choices(names, weights)[0]
    return GENERATORS[primitive][0](_Pick(rng, sched))


def _bodies(body):
    yield body
    for node in body:
        if isinstance(node, Loop):
            yield from _bodies(node.body)


def _first_stmt(node) -> str:
    while isinstance(node, Loop):
        node = node.body[0]
    assert isinstance(node, Leaf)
    return node.stmt
