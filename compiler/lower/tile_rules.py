"""The tile rules of the tile lowering, which every code generator built on it inherits.

A tile gives each iterator a power-of-two number of lanes (`tl.arange` and the TileLang / Ascend buffers are
sized by it; lanes past the domain are masked), and one tile holds at most `MAX_TILE_ELEMENTS` elements.
The lowering (compiler/lower/geometry.py) applies them; `tdsl cost --fit / --sweep` read the same functions
to judge a tile factor by the buffers the generated code would really allocate.
"""

from __future__ import annotations

# Largest tile (elements) one statement may hold in registers; beyond it the schedule must split more.
MAX_TILE_ELEMENTS = 1 << 16


def lanes(values: int) -> int:
    """The lanes a tile gives an iterator that takes `values` values: the next power of two (1 stays 1)."""
    return 1 if values <= 1 else 1 << (values - 1).bit_length()


def padded_shape(shape) -> list[int]:
    """A buffer's shape as the generated code allocates it: every dimension rounded up to its lanes."""
    return [lanes(d) for d in shape]


def too_many_elements(elements: int) -> bool:
    return elements > MAX_TILE_ELEMENTS
