"""Hand-edit experiment (not a backend feature): does overlapping the FP8 promotion with the next step's wgmma
close the gap to cuBLASLt?  The TileLang printer promotes each step synchronously (T.gemm waits for its wgmma,
then `acc += part`).  This rewrites a generated module's steps of one k tile into DeepGEMM's order: two
fragments in turn, step s + 1 issued asynchronously (T.wgmma_gemm) before step s is added
(`T.wait_wgmma(1)`), the last added after `T.wait_wgmma(0)`.  The same products are added to the f32 sum in
the same order, so the result must be bit-identical to the module as generated.

    .venv/bin/python benchmarks/gpu/fp8_accum.py build
    .venv/bin/python benchmarks/gpu/experiments/fp8_promotion_overlap.py MODULE...   # writes *_overlap.py beside
    then fp8_accum.py run with a manifest naming both
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

GEMM = re.compile(r"^(?P<pad> *)T\.gemm\((?P<args>.*), part_P(?P<flags>.*), clear_accum=True\)$")


def overlapped(text: str) -> str:
    lines = text.splitlines()
    out, n = [], 0
    steps = []  # (indent, args, flags) of one k tile's steps
    while n < len(lines):
        m = GEMM.match(lines[n])
        if m and lines[n + 2].strip() == "acc_P[l0, l1] = acc_P[l0, l1] + part_P[l0, l1]":
            steps.append((m["pad"], m["args"], m["flags"]))
            n += 3
            continue
        if steps:
            out += _schedule(steps, lines_for_add=lambda pad, part: [
                f"{pad}for l0, l1 in T.Parallel(128, 128):", f"{pad}    acc_P[l0, l1] = acc_P[l0, l1] + {part}[l0, l1]"])
            steps = []
        if "part_P = T.alloc_fragment(" in lines[n]:
            out.append(lines[n])
            out.append(lines[n].replace("part_P", "part_Q"))
            n += 1
            continue
        out.append(lines[n])
        n += 1
    return "\n".join(out) + "\n"


def _schedule(steps, lines_for_add) -> list[str]:
    parts = ["part_P", "part_Q"]
    pad = steps[0][0]
    issue = [f"{pad}T.wgmma_gemm({args}, {parts[s % 2]}{flags}, clear_accum=True)"
             for s, (_, args, flags) in enumerate(steps)]
    out = [issue[0]]
    for s in range(1, len(steps)):
        out.append(issue[s])
        out.append(f"{pad}T.wait_wgmma(1)")
        out += lines_for_add(pad, parts[(s - 1) % 2])
    out.append(f"{pad}T.wait_wgmma(0)")
    out += lines_for_add(pad, parts[(len(steps) - 1) % 2])
    return out


if __name__ == "__main__":
    for name in sys.argv[1:]:
        path = Path(name)
        edited = overlapped(path.read_text())
        target = path.with_name(path.stem + "_overlap.py")
        target.write_text(edited)
        print("wrote", target)
