"""Experiment: which differences between the generated flash_ws kernel and the hand-written one (flash_ws.py) cost
the time?  Each variant is the generated TileLang module of examples/mha_fa_exp2.tdsl's flash_ws schedule (and
its causal twin, built by attention_mha.py) with one more textual edit, applied in this order:

    gen      -- as generated
    ex2      -- exp2 as ex2.approx.ftz.f32 (the spelling of __expf's exponential) instead of CUDA's exp2f, whose
                subnormal handling adds a compare and two multiplies per element
    p        -- + P's bf16 fragment written from E directly (no f32 copy of the rounded value in between)
    red      -- + the row max and row sum read S and E themselves (no copies into p_m, p_l)

`build --tree` adds this tree's printer's module (tree), the causal one with reverse(l.qo) (tree_rev), the
module with S masked once by a textual edit (tree_mask1: meant for a printer before compiler/lower/passes/
masked_scores.py, which does this itself), and the schedule launched persistently (tree_persist:
`launch(l, warps=8, persistent=true)`, one program per multiprocessor walking the tiles).  A persistent module
is also checked at the ragged size with 3 programs, so that each walks many tiles.

Each variant is checked against the float64 reference (poisoned output) before it is timed beside SDPA.

    .venv/bin/python benchmarks/gpu/attention_mha.py build          # here, first
    .venv/bin/python benchmarks/gpu/experiments/flash_ws_generated.py build [--tree]
    PYTHONPATH=... python3 benchmarks/gpu/experiments/flash_ws_generated.py run --out $OUT/ws_generated.json
"""
import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU = HERE.parent
OUT = GPU / "generated" / "experiments"
SHAPES = [(1, 1, 8192), (8, 32, 4096), (2, 32, 16384)]
EX2 = ('extern "C" __device__ __forceinline__ float tdsl_ex2(float x) '
       '{ float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }\n')


def ex2(text: str) -> str:
    text = text.replace("T.exp2(", 'T.call_extern("float32", "tdsl_ex2", ')
    return re.sub(r"^(\s*)(with T\.ws\(2\):)", lambda m: f"{m[1]}T.import_source({EX2!r})\n{m[1]}{m[2]}", text,
                  count=1, flags=re.M)


def p_direct(text: str) -> str:
    text = re.sub(r"^\s*for l0, l1 in T\.Parallel\(128, 128\):\n\s*v_P\[l0, l1\] = .*\n", "", text, flags=re.M)
    return text.replace("v_P[l0, l1]", "v_E[l0, l1]")


def mask_once(text: str) -> str:
    """The masked blocks set S to -inf outside the domain once (in the row max's branch); l and P then read E
    unmasked (E = 2^-inf = 0 there).  Exact only where every stored row has a finite maximum by each block it
    visits: true for causal attention with the diagonal in blocks of the same size, as here."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        head = re.match(r"^(\s*)if .*:  # the blocks with full tiles$", lines[i])
        if not head:
            out.append(lines[i])
            i += 1
            continue
        indent = head[1]
        end_if = next(n for n in range(i + 1, len(lines)) if lines[n] == f"{indent}else:  # the rest: masked")
        end = next(n for n in range(end_if + 1, len(lines))
                   if lines[n].strip() and len(lines[n]) - len(lines[n].lstrip()) <= len(indent))
        body, masked = lines[i + 1:end_if], lines[end_if + 1:end]
        if any("p_m[" in line for line in body):  # the row max: the masked branch writes S itself
            out += lines[i:end_if + 1]
            for line in masked:
                m = re.match(r"^(\s*)p_m\[l0, l1\] = (T\.if_then_else\(.*, acc_S\[l0, l1\], .*\))$", line)
                out += [f"{m[1]}acc_S[l0, l1] = {m[2]}", f"{m[1]}p_m[l0, l1] = acc_S[l0, l1]"] if m else [line]
        else:  # l and P: the unmasked form for every block
            out += [line[4:] for line in body]
        i = end
    return "\n".join(out)


def reduce_in_place(text: str) -> str:
    for part, src, op in (("p_m", "acc_S", "reduce_max"), ("p_l", "v_E", "reduce_sum")):
        text = re.sub(rf"^\s*for l0, l1 in T\.Parallel\(128, 128\):\n\s*{part}\[l0, l1\] = {src}\[l0, l1\]\n"
                      rf"(\s*)T\.{op}\({part},", rf"\1T.{op}({src},", text, flags=re.M)
    return text


VARIANTS = {"gen": [], "ex2": [ex2], "p": [ex2, p_direct], "red": [ex2, p_direct, reduce_in_place]}
# `build --tree`: the variant "tree" is the module this tree's printer generates (the others edit the modules
# attention_mha.py built, "gen"), for comparing a printer change with the modules before it in one run
TREE = "tree"
REVERSED = "tree_rev"  # causal: with reverse(l.qo), each head's longest query blocks launched first
MASK_ONCE = "tree_mask1"  # S masked once on the diagonal blocks by a textual edit (mask_once), for a printer before it
PERSISTENT = "tree_persist"  # launch(l, warps=8, persistent=true)
TREE_VARIANTS = (TREE, REVERSED, MASK_ONCE, PERSISTENT)


def name(example, b, h, length, variant):
    return f"{example}__b{b}h{h}l{length}__ws_{variant}"


def build(tree: bool = False):
    OUT.mkdir(parents=True, exist_ok=True)
    for example in ("mha_fa_exp2", "mha_causal_fa_exp2"):
        for b, h, length in [(2, 3, 1000)] + SHAPES:
            src = (GPU / "generated" / "tilelang" / f"{example}__b{b}h{h}l{length}__flash_ws.py").read_text()
            for variant, edits in VARIANTS.items():
                text = src
                for edit in edits:
                    new = edit(text)
                    if new == text:  # the printer does this already (a module of a later tree)
                        break
                    text = new
                else:
                    (OUT / f"{name(example, b, h, length, variant)}.py").write_text(text)
            if tree:
                text = tree_module(example, b, h, length)
                for variant, edited in ((TREE, text), (MASK_ONCE, mask_once(text))):
                    (OUT / f"{name(example, b, h, length, variant)}.py").write_text(edited)
                (OUT / f"{name(example, b, h, length, PERSISTENT)}.py").write_text(
                    tree_module(example, b, h, length, persistent=True))
                if "causal" in example:  # the longest query blocks of each head first (reverse(l.qo))
                    (OUT / f"{name(example, b, h, length, REVERSED)}.py").write_text(
                        tree_module(example, b, h, length, reverse=True))
    print("built", len(list(OUT.glob("*.py"))), "modules in", OUT)


def tree_module(example: str, b: int, h: int, length: int, reverse: bool = False, persistent: bool = False) -> str:
    """The flash_ws module of `example` (as attention_mha.py writes its program) from this tree's printer;
    `reverse`: the schedule with reverse(l.qo) before the query blocks are bound to the grid; `persistent`: with
    launch(l, warps=8, persistent=true)."""
    import tempfile

    sys.path.insert(0, str(GPU))
    from attention_mha import ROOT, fa_exponential, fa_rounding  # noqa: E402
    from tdsl.compiler.driver.api import load
    from tdsl.compiler.driver.generate import generate

    base = "mha_causal" if "causal" in example else "mha"
    text = fa_exponential(fa_rounding((ROOT / "examples" / f"{base}.tdsl").read_text()), base)
    if reverse:
        ws = text.index("schedule flash_ws {")
        bind = text.index("  bind(l.qo, grid.x)\n", ws)
        text = text[:bind] + "  reverse(l.qo)\n" + text[bind:]
    if persistent:
        ws = text.index("schedule flash_ws {")
        launch = text.index("  launch(l, warps=8)\n", ws)
        text = text[:launch] + "  launch(l, warps=8, persistent=true)\n" + text[launch + len("  launch(l, warps=8)\n"):]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{example}.tdsl"
        path.write_text(text)
        prog = load(path, sizes={"B": b, "H": h, "L": length})
        return generate(prog, "flash_ws", target="nvidia", backend="tilelang")


def _compile(path: str) -> str:
    """Compile a module's kernels (TileLang's cache keeps them for the run); in a worker process."""
    sys.path.insert(0, str(GPU))
    from run_tilelang import module  # noqa: E402

    mod = module(Path(path))
    for key in mod.KERNELS:
        mod._kernel(key)
    return path


def precompile(paths: list) -> None:
    """nvcc the modules' kernels in parallel processes first: compiling them one by one in the run takes most of a
    device call."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(min(8, len(paths))) as pool:
        for done in pool.imap_unordered(_compile, [str(p) for p in paths]):
            print("compiled", Path(done).name, flush=True)


def run(out_path, only=None, shapes=None):
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(GPU))
    from attention_mha import SCALE, check_heads  # noqa: E402
    from run import bench, check, poisoned  # noqa: E402
    from run_tilelang import module  # noqa: E402

    timed_shapes = [s for s in SHAPES if shapes is None or s[2] in shapes]
    variants = only or [*VARIANTS, *TREE_VARIANTS]
    precompile([OUT / f"{name(e, b, h, length, v)}.py" for b, h, length in [(2, 3, 1000)] + timed_shapes
                for e in ("mha_fa_exp2", "mha_causal_fa_exp2") for v in variants
                if (OUT / f"{name(e, b, h, length, v)}.py").exists()])
    rows = []
    for b, h, length in [(2, 3, 1000)] + timed_shapes:
        timed = (b, h, length) in SHAPES
        for example, causal in (("mha_fa_exp2", False), ("mha_causal_fa_exp2", True)):
            torch.manual_seed(1)
            q, k, v = (torch.randn(b, h, length, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
            flops = 4 * b * h * length * length * 128 * (0.5 if causal else 1.0)
            sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE)  # noqa: E731
            t_sdpa = bench(sdpa) if timed else None
            for variant in variants:  # any module of OUT by its variant name
                if not (OUT / f"{name(example, b, h, length, variant)}.py").exists():
                    continue
                row = {"example": example, "variant": variant, "B": b, "H": h, "L": length}
                out = poisoned((b, h, length, 128), torch.bfloat16)
                try:
                    launch = getattr(module(OUT / f"{name(example, b, h, length, variant)}.py"), example)
                    launch(q, k, v, O=out)
                    torch.cuda.synchronize()
                except Exception as err:  # noqa: BLE001
                    row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
                row.update(check_heads(example.replace("_fa_exp2", ""), out, q, k, v, causal, check))
                if not timed and "persist" in variant:  # 3 programs, each walking many tiles of the ring
                    few = poisoned((b, h, length, 128), torch.bfloat16)
                    mod = module(OUT / f"{name(example, b, h, length, variant)}.py")
                    mod._kernel(next(iter(mod.KERNELS)))(q, k, v, few, 3)
                    torch.cuda.synchronize()
                    row["walk3_equal"] = bool(torch.equal(few, out))
                if timed:
                    t = bench(lambda: launch(q, k, v, O=out))
                    row.update(us=t, sdpa_us=t_sdpa, tflops=flops / t / 1e6, vs_sdpa=t_sdpa / t)
                rows.append(row)
                print(json.dumps({k_: row[k_] for k_ in row if k_ != "detail"}), flush=True)
                Path(out_path).write_text(json.dumps(rows, indent=1))  # what is done so far, if the call runs out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "run"])
    ap.add_argument("--out", default="ws_generated.json")
    ap.add_argument("--tree", action="store_true", help="build: also the modules of this tree's printer")
    ap.add_argument("--variants", nargs="+", help="run: only these variants")
    ap.add_argument("--lengths", nargs="+", type=int, help="run: only the timed shapes of these L (and the ragged one)")
    args = ap.parse_args()
    build(args.tree) if args.step == "build" else run(args.out, args.variants, args.lengths)
