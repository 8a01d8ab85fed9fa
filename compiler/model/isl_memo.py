"""A cache for functions of isl objects, keyed by the objects' printed form.

The legality checks run after every schedule step on time maps that mostly did not change, and building those maps
and intersecting them with the dependences is most of a step's time.  isl objects hash and compare by value
(`is_equal`), so a cache keyed on the objects themselves would hand back a result computed from another
representation of an equal set, which prints differently (a tree's domains, a counterexample): the output would
depend on what ran before.  Keyed by text, a hit is a call on the same representation, and its result is what the
call computes."""

from __future__ import annotations

from functools import lru_cache, wraps


class _Text:
    """An isl object as a cache key: equal to another when both print the same."""

    __slots__ = ("obj", "text")

    def __init__(self, obj):
        self.obj = obj
        self.text = str(obj)

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Text) and self.text == other.text


def _key(arg):
    return _Text(arg) if hasattr(arg, "get_ctx") else arg  # isl objects by their text, the rest as they are


def by_text(maxsize: int):
    """Decorator: cache a function whose arguments are isl objects (and hashable values) by their text."""

    def wrap(fn):
        @lru_cache(maxsize=maxsize)
        def cached(*keys):
            return fn(*(k.obj if isinstance(k, _Text) else k for k in keys))

        @wraps(fn)
        def call(*args):
            return cached(*map(_key, args))

        call.cache_clear = cached.cache_clear
        return call

    return wrap
