"""Choices of a sketch's parameters: drawn at random, and the neighbours of one choice.

A choice is a dict {param name: value}; a conditional knob whose switch is off is absent, so two choices that
build the same steps are the same dict.  `key` is its canonical, JSON-friendly form (the tuning log's).
"""

from __future__ import annotations

import random
from typing import Iterator

from tdsl.compiler.tune.sketches import Param, Sketch


def canonical(params: list[Param], choice: dict) -> dict:
    """The choice without the knobs its switches turn off, in the sketch's parameter order."""
    return {p.name: choice[p.name] for p in params if p.active(choice) and p.name in choice}


def key(choice: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in choice.items())


def draw(sketch: Sketch, rng: random.Random) -> dict:
    choice: dict = {}
    for p in sketch.params:  # a switch is declared before the knobs it turns on
        if p.active(choice):
            choice[p.name] = rng.choice(p.values)
    return choice


def sample(sketch: Sketch, count: int, seed: int = 0) -> list[dict]:
    """`count` distinct choices: every one when the space is that small, else drawn at random (seeded)."""
    if sketch.size() <= count:
        return list(enumerate_all(sketch))
    rng = random.Random(seed)
    seen: dict = {}
    attempts = 0
    while len(seen) < count and attempts < 20 * count:
        c = canonical(sketch.params, draw(sketch, rng))
        seen.setdefault(key(c), c)
        attempts += 1
    return list(seen.values())


def enumerate_all(sketch: Sketch) -> Iterator[dict]:
    def extend(choice: dict, rest: list[Param]) -> Iterator[dict]:
        if not rest:
            yield dict(choice)
            return
        p, tail = rest[0], rest[1:]
        if not p.active(choice):
            yield from extend(choice, tail)
            return
        for v in p.values:
            choice[p.name] = v
            yield from extend(choice, tail)
        del choice[p.name]

    yield from extend({}, list(sketch.params))


def neighbours(sketch: Sketch, choice: dict) -> list[dict]:
    """Choices that move one knob one step along its values, or exchange the values of two knobs that take the
    same values (`_swaps`).  A switch that flips turns on knobs that were off
    (an epilogue run as a kernel of its own gets a tile): the move comes with those knobs at their first values,
    and with each of them in turn at every other value (the rest at their first), so that the branch is judged
    by a reasonable setting of its own knobs, not only by the first one."""
    out = _swaps(sketch, choice)
    for p in sketch.params:
        if p.name not in choice:
            continue
        at = p.values.index(choice[p.name])
        for step in (-1, 1):
            if 0 <= at + step < len(p.values):
                moved = dict(choice, **{p.name: p.values[at + step]})
                new = [q for q in sketch.params if q.active(moved) and q.name not in moved]
                moved = _first_values(sketch, moved)
                out.append(canonical(sketch.params, moved))
                out += [canonical(sketch.params, _first_values(sketch, dict(moved, **{q.name: v})))
                        for q in new for v in q.values[1:]]
    return out


def orders(sketch: Sketch, choice: dict) -> list[dict]:
    """Every choice that differs from `choice` only in knobs that change the order programs run in (grid axis,
    launch groups, persistence): the launch-order variants of one kernel, whose effects combine in ways no
    one-knob step shows (on the H200 the GEMM's grouped order helped only with a persistent launch)."""
    knobs = [p for p in sketch.params if p.order_only and p.name in choice]
    out = [dict(choice)]
    for p in knobs:
        out = [dict(c, **{p.name: v}) for c in out for v in p.values]
    return [canonical(sketch.params, c) for c in out if c != choice]


def _swaps(sketch: Sketch, choice: dict) -> list[dict]:
    """The choice with the values of two knobs of the same values exchanged (a 256 x 128 tile turned 128 x 256):
    a move of the same size that one-knob steps only reach through a detour (128 x 128 first, often worse)."""
    out = []
    knobs = [p for p in sketch.params if p.name in choice]
    for i, p in enumerate(knobs):
        for q in knobs[i + 1:]:
            if p.values == q.values and choice[p.name] != choice[q.name]:
                swapped = dict(choice, **{p.name: choice[q.name], q.name: choice[p.name]})
                out.append(canonical(sketch.params, _first_values(sketch, swapped)))
    return out


def _first_values(sketch: Sketch, choice: dict) -> dict:
    """The choice with every knob its switches turn on and it lacks at its first value."""
    out = dict(choice)
    for q in sketch.params:  # a switch is declared before the knobs it turns on
        if q.active(out) and q.name not in out:
            out[q.name] = q.values[0]
    return out

