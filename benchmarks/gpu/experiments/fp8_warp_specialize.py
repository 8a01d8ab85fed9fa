"""Hand-edit experiment (not a backend feature): does Triton's automatic warp specialisation hide the FP8
product's promotions?  Under `combine fast_accum(128)` Triton waits for each promotion's wgmma before adding it
to the f32 sum (RESULTS "FP8 products in TileLang kernels"), which cuBLASLt overlaps with its two consumer warp
groups taking turns.  `warp_specialize=True` on the K loop asks Triton to split the loop into a producer (the
loads) and consumer partitions; with 8 warps the two warp groups' promotions might interleave the same way.

Each generated Triton module of the product under `fast_accum(128)` and `fast_accum` (K-major B) gets two edits:
`ws` (the K loop warp-specialised, the warps as generated) and `ws_w8` (the same on 8 warps).  The edits change
no arithmetic: each must give the bits of the module it was edited from (`same_as`, checked by fp8_accum.py).

    .venv/bin/python benchmarks/gpu/experiments/fp8_warp_specialize.py     # here: *_ws*.py, manifest_ws.json
    python3 benchmarks/gpu/fp8_accum.py run --manifest manifest_ws.json --out $OUT/fp8_ws.json   # on the H200
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fp8_accum import GENERATED  # noqa: E402

K_LOOP = re.compile(r"(tl\.range\(0, [^()]*num_stages=\d+)\)")
ACCUMULATIONS = ("fast_accum(128)", "fast_accum")


def edits(text: str) -> dict:
    ws = K_LOOP.sub(r"\1, warp_specialize=True)", text)
    return {"ws": ws, "ws_w8": re.sub(r"num_warps=\d+", "num_warps=8", ws)}


def main() -> None:
    manifest = json.loads((GENERATED / "manifest.json").read_text())
    chosen = [m for m in manifest if m["backend"] == "triton" and m["layout"] == "k_major"
              and m["accumulation"] in ACCUMULATIONS]
    out = []
    for m in chosen:
        out.append(m)
        text = (GENERATED / m["module"]).read_text()
        seen = {text}
        for name, edited in edits(text).items():
            if edited in seen:  # a module on 8 warps already: its ws_w8 is its ws
                continue
            seen.add(edited)
            module = m["module"].replace(".py", f"_{name}.py")
            (GENERATED / module).write_text(edited)
            out.append({**m, "schedule": f"{m['schedule']}_{name}", "module": module, "same_as": m["module"]})
    (GENERATED / "manifest_ws.json").write_text(json.dumps(out, indent=1))
    print(f"{len(out)} modules in {GENERATED / 'manifest_ws.json'}")


if __name__ == "__main__":
    main()
