"""On-chip capacities of the Ascend targets (bytes one block may allocate), for the buffer checks.

They come from `compiler/targets/` (`get_target("ascend-910b" | "ascend-950").scope(S).per_block`, each
figure with its source there).
"""

from __future__ import annotations

from tdsl.compiler.errors import BackendError

SCOPES = ("L1", "L0A", "L0B", "L0C", "UB")


def capacities(name: str) -> dict:
    from tdsl.compiler.targets import get_target

    target = get_target(name)
    caps = {s: target.scope(s).per_block for s in SCOPES}
    caps["name"] = name
    return caps


class _Targets(dict):
    def __missing__(self, key):
        self[key] = capacities(key)
        return self[key]


TARGETS = _Targets()


def check_capacity(kernel: str, target: dict, footprint: dict) -> None:
    for scope, used in footprint.items():
        cap = target.get(scope)
        if cap is not None and used > cap:
            raise BackendError(
                f"{kernel}: the buffers in {scope} need {used:,} B but {target['name']} allows {cap:,} B per block; "
                f"use smaller tiles (split the loops further) or fewer stages")
