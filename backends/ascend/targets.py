"""On-chip capacities of the Ascend targets (bytes one block may allocate), for the buffer checks.

They come from `compiler/targets/` (`get_target("ascend-910b" | "ascend-950").scope(S).per_block`, each
figure with its source there).  Should that package be unavailable, the fallback table below holds the
values it had when this backend was written (910B: CANN platform config less tilelang-ascend's 256 B
reserves; 950: CANN platform config, UB less an 8 KiB reserve).
"""

from __future__ import annotations

from tdsl.compiler.errors import BackendError

SCOPES = ("L1", "L0A", "L0B", "L0C", "UB")
_FALLBACK = {
    "ascend-910b": {"L1": 524_032, "L0A": 65_536, "L0B": 65_536, "L0C": 131_072, "UB": 196_352},
    "ascend-950": {"L1": 524_288, "L0A": 65_536, "L0B": 65_536, "L0C": 262_144, "UB": 253_952},
}


def capacities(name: str) -> dict:
    try:
        from tdsl.compiler.targets import get_target

        target = get_target(name)
        caps = {s: target.scope(s).per_block for s in SCOPES}
    except Exception:  # the targets package is someone else's and may change; keep the backend usable
        caps = dict(_FALLBACK[name])
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
