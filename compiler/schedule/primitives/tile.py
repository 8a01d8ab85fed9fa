"""tile: split several nested loops and move all outer (tile) loops outside the inner (point) loops.

Before::                           After ``io, jo, ii, jj = tile(C.i, C.j, 64, 64)``::

    for i: for j: C                    for io: for jo: for ii: for jj: C

`tile(L1, ..., Ln, f1, ..., fn)` is `split` of each loop followed by
`reorder(outer loops..., inner loops...)`; it returns the n outer names
then the n inner names.  The loops must form a perfect nest.
"""

from __future__ import annotations

from tdsl.compiler.errors import ScheduleError
from tdsl.compiler.schedule.primitives.common import State, as_ref, find_loop
from tdsl.compiler.schedule.primitives.registry import LOOPS_THEN_FACTORS, primitive, rest
from tdsl.compiler.schedule.primitives.reorder import reorder_loops
from tdsl.compiler.schedule.primitives.split import split_loop


@primitive(rest("args", LOOPS_THEN_FACTORS), new_loops=True, rank=20)
def tile(state: State, *args, names=None) -> list[str]:
    loops = [a for a in args if not isinstance(a, int)]
    factors = [a for a in args if isinstance(a, int)]
    if not loops or len(loops) != len(factors) or args[: len(loops)] != tuple(loops):
        raise ScheduleError("tile", "expected loops then one factor per loop, e.g. tile(C.i, C.j, 64, 64)")
    n = len(loops)
    names = list(names or [])
    if names and len(names) != 2 * n:
        raise ScheduleError("tile", f"tiling {n} loops gives {2 * n} loops; name all of them or none")
    stmt = find_loop(state, "tile", loops[0])[1]
    full = []  # each loop as STMT.L
    for loop in loops:
        ref = as_ref(loop, "tile")
        if ref.stmt is not None and ref.stmt != stmt:
            raise ScheduleError("tile", f"tile the loops of one statement: {stmt} and {ref.stmt} differ")
        full.append(f"{stmt}.{ref.loop}")
    if len({id(find_loop(state, "tile", f)[0]) for f in full}) != n:  # the second split would not find it
        raise ScheduleError("tile", "a loop is named twice")
    outers, inners = [], []
    for k, (loop, factor) in enumerate(zip(full, factors)):
        pair = (names[k], names[n + k]) if names else None
        o, i = split_loop(state, loop, factor, pair, "tile")
        outers.append(o)
        inners.append(i)
    reorder_loops(state, (stmt, *outers, *inners), "tile")
    return outers + inners
