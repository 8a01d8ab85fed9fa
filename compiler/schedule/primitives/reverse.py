"""reverse: run a loop backwards.

Before::                   After ``reverse(C.k)``::

    for k in 0..K: C(k)        for k in K-1..0: C(k)      # time coordinate -k

Legal only where no dependence is carried by the loop; reversing the
loop of a strict reduction changes the order its terms are combined
(rule reduction-order).
"""

from __future__ import annotations

from tdsl.compiler.legality.checks import check_dependences
from tdsl.compiler.schedule.primitives.common import LoopLike, State, find_loop
from tdsl.compiler.schedule.primitives.registry import LOOP, arg, primitive


@primitive(arg("loop", LOOP), rank=50)
def reverse(state: State, loop: LoopLike) -> None:
    node, _ = find_loop(state, "reverse", loop)
    node.exprs = {s: [e.neg() for e in dims] for s, dims in node.exprs.items()}
    check_dependences(state.model, state.deps, state.tree, "reverse")
