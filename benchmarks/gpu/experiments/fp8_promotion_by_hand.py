"""Hand-edit experiment (not a backend feature): can a Triton kernel of the FP8 product under `combine
fast_accum(128)` overlap each promotion with the next k tile's wgmma, as cuBLASLt does?

The printer writes `acc = tl.dot(a, b, acc, max_num_imprecise_acc=128)` with 128-deep k tiles: Triton forms each
tile's product in a cleared tensor-core accumulator, waits for it, and adds it to the f32 sum (RESULTS "Triton's
own operand copies in the cost model; warp specialisation of the FP8 product").  Two edits with the same
arithmetic (each tile's product formed from zero in the tensor core, then one f32 addition per tile, in k order):

* `part`: `acc = acc + tl.dot(a, b)`, the promotion written out;
* `lagged`: the addition of tile k's product is written after tile k + 1's `tl.dot` is issued (a loop-carried
  `part`), so that nothing waits for tile k + 1's wgmma before the addition of tile k.

Each edited module must give the bits of the module it was edited from (`same_as`, checked by fp8_accum.py).
Beside them, tdsl-generated tilings the earlier runs did not have: 3 stages (three programs an SM at 64 x 128),
and persistent launches.

Result (H100, 2026-12-06, RESULTS.md sixteenth session): `part` gives the generated kernel's time, `lagged` is
4-21 % slower on every tiling; the best is the generated 64 x 128 x 128 with 3 stages on 4 warps, 0.83x
`_scaled_mm`, which the tuner finds.

    .venv/bin/python benchmarks/gpu/experiments/fp8_promotion_by_hand.py     # here: modules, manifest_by_hand.json
    python3 benchmarks/gpu/fp8_accum.py run --manifest manifest_by_hand.json --out $OUT/fp8_by_hand.json  # GPU
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fp8_accum import GENERATED, K, M, N  # noqa: E402

DOT = re.compile(r"^(?P<pad> +)acc_P = tl\.dot\((?P<a>\w+), (?P<b>\w+), acc_P, max_num_imprecise_acc=128\)$",
                 re.M)
LOOP = re.compile(r"^(?P<pad> +)for ko in tl\.range\(", re.M)
STORE_ROUND = re.compile(r"^(?P<pad> +)# P: the reduction is complete", re.M)
# BM, BN, BK, stages, warps, group, persistent
TILINGS = [(64, 128, 128, 4, 4, 1, False), (64, 128, 128, 3, 4, 1, False), (64, 128, 128, 3, 4, 8, False),
           (64, 128, 128, 4, 4, 8, True), (128, 128, 128, 4, 8, 8, True), (64, 256, 128, 3, 8, 8, False),
           (128, 128, 128, 3, 8, 1, False)]


def source() -> str:
    text = (f"const M = {M}, K = {K}, N = {N}\n"
            "kernel q(Aq: f8e4m3[M, K], Wt: f8e4m3[N, K]) -> (P: bf16[M, N]) {\n"
            "  P[i, j] = sum(k) Aq[i, k] * Wt[j, k] accum f32 combine fast_accum(128)\n}\n")
    for bm, bn, bk, stages, warps, group, persistent in TILINGS:
        launch = f"warps={warps}, group={group}" + (", persistent=true" if persistent else "")
        text += (f"schedule {_name(bm, bn, bk, stages, warps, group, persistent)} {{\n"
                 f"  io, jo, ii, jj = tile(P.i, P.j, {bm}, {bn})\n  ko, kk = split(P.k, {bk})\n"
                 "  reorder(P, io, jo, ko, ii, jj, kk)\n  cache_read(Aq, shared, at=P.ko)\n"
                 f"  cache_read(Wt, shared, at=P.ko)\n  pipeline(P.ko, stages={stages})\n"
                 f"  bind(P.io, grid.x)\n  bind(P.jo, grid.y)\n  launch(P, {launch})\n}}\n")
    return text


def _name(bm, bn, bk, stages, warps, group, persistent) -> str:
    return (f"t{bm}x{bn}x{bk}_s{stages}_w{warps}" + (f"_g{group}" if group > 1 else "")
            + ("_persistent" if persistent else ""))


def part(text: str) -> str:
    return DOT.sub(lambda m: f"{m['pad']}acc_P = acc_P + tl.dot({m['a']}, {m['b']})", text)


def lagged(text: str) -> str:
    dot = DOT.search(text)
    shape = re.search(r"acc_P = tl\.full\((\[\d+, \d+\]), 0\.0, tl\.float32\)", text)
    if not (dot and shape):
        return text
    loop = LOOP.search(text)
    text = (text[:loop.start()] + f"{loop['pad']}part_P = tl.full({shape[1]}, 0.0, tl.float32)\n"
            + text[loop.start():])
    text = DOT.sub(lambda m: (f"{m['pad']}next_P = tl.dot({m['a']}, {m['b']})\n"
                              f"{m['pad']}acc_P = acc_P + part_P\n{m['pad']}part_P = next_P"), text)
    done = STORE_ROUND.search(text)
    return text[:done.start()] + f"{done['pad']}acc_P = acc_P + part_P\n" + text[done.start():]


def main() -> None:
    from tdsl.compiler.driver.api import loads
    from tdsl.compiler.driver.generate import generate

    GENERATED.mkdir(parents=True, exist_ok=True)
    prog = loads(source(), filename="q_by_hand.tdsl")
    out = []
    for tiling in TILINGS:
        name = _name(*tiling)
        text = generate(prog, name, target="h200", backend="triton")
        module = f"triton_by_hand_fast_accum128_{name}.py"
        (GENERATED / module).write_text(text)
        row = {"backend": "triton", "layout": "k_major", "accumulation": "fast_accum(128)", "schedule": name,
               "module": module, "imprecise_acc": "128"}
        out.append(row)
        for edit in (part, lagged):
            edited = edit(text)
            if edited == text:
                print(f"{name}: {edit.__name__} did not apply")
                continue
            edited_module = module.replace(".py", f"_{edit.__name__}.py")
            (GENERATED / edited_module).write_text(edited)
            out.append({**row, "schedule": f"{name}_{edit.__name__}", "module": edited_module, "same_as": module})
    (GENERATED / "manifest_by_hand.json").write_text(json.dumps(out, indent=1))
    print(f"{len(out)} modules in {GENERATED / 'manifest_by_hand.json'}")


if __name__ == "__main__":
    main()
