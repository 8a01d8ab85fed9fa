"""The Ascend backends: mainline TileLang's Ascend dialect (ascend-950) and the tilelang-ascend API (ascend-910b)."""

from __future__ import annotations


def emit_module(program, target: str, **common) -> str:
    if target == "ascend-950":
        from .emit import emit_950

        return emit_950(program, **common)
    if target == "ascend-910b":
        from .emit import emit_910b

        return emit_910b(program, **common)
    raise ValueError(f"unknown Ascend target {target}")
