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
    """Choices that move one knob one step along its values (a switch flips, with its new knobs at their first
    values when they were off)."""
    out = []
    for p in sketch.params:
        if p.name not in choice:
            continue
        at = p.values.index(choice[p.name])
        for step in (-1, 1):
            if 0 <= at + step < len(p.values):
                moved = dict(choice, **{p.name: p.values[at + step]})
                for q in sketch.params:  # knobs the move turned on start at their first value
                    if q.active(moved) and q.name not in moved:
                        moved[q.name] = q.values[0]
                out.append(canonical(sketch.params, moved))
    return out

