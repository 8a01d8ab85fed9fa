"""The Ascend backends: mainline TileLang's Ascend dialect (ascend-950) and the tilelang-ascend API (ascend-910b)."""

from __future__ import annotations


def emit_module(program, target: str, buffers=(), **common) -> str:
    if target == "ascend-950":
        from .emit import emit_950

        return emit_950(program, buffers=buffers, **common)
    if target == "ascend-910b":
        from .emit import emit_910b

        return emit_910b(program, buffers=buffers, **common)
    raise ValueError(f"unknown Ascend target {target}")
