"""Which forms of IEEE max / min of two zeros survive Triton's compiler on the GPU (29th session).

The generated `_minimum_nan` (-((-a) + (-b)) for two zeros) and the row minimum -max(-x) gave the wrong zero on
an H100 while the Triton interpreter gave the right one.  Each form below runs on the four pairs of zeros and
prints the sign bits it returns, next to the IEEE answer; the PTX of the current helper is saved.

    python3 benchmarks/gpu/experiments/zero_sign_forms.py --out $OUT/zero_sign_forms.json
"""

import argparse
import json

import torch
import triton
import triton.language as tl

FORMS = 21
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: under TRITON_INTERPRET=1


@triton.jit
def _forms(A, B, OUT, N: tl.constexpr):
    k = tl.arange(0, N)
    a = tl.load(A + k)
    b = tl.load(B + k)
    zeros = (a == 0) & (b == 0)
    ia = a.to(tl.int32, bitcast=True)
    ib = b.to(tl.int32, bitcast=True)
    _put(OUT, 0, N, k, -a)  # negation
    _put(OUT, 1, N, k, a + b)  # sum (max of zeros)
    _put(OUT, 2, N, k, -((-a) + (-b)))  # the 28th session's min of zeros
    _put(OUT, 3, N, k, tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL))  # min.NaN
    _put(OUT, 4, N, k, tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL))  # max.NaN
    _put(OUT, 5, N, k, (ia | ib).to(tl.float32, bitcast=True))  # OR of the bits (min of zeros)
    _put(OUT, 6, N, k, (ia & ib).to(tl.float32, bitcast=True))  # AND of the bits (max of zeros)
    _put(OUT, 7, N, k, tl.where(zeros, -((-a) + (-b)), tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)))
    _put(OUT, 8, N, k, a * -1.0)
    _put(OUT, 9, N, k, 0.0 - a)
    _put(OUT, 10, N, k, tl.where(zeros, tl.where(zeros, a, 0.0), 1.0))  # a kept where a == 0
    _put(OUT, 11, N, k, -((a + 1.0) - (b + 1.0)))  # -(1 - 1): -0 in IEEE
    _put(OUT, 12, N, k, -(a + b))
    _put(OUT, 13, N, k, (a + 1.0) * -0.0)  # the literal -0.0
    _put(OUT, 14, N, k, (a + 1.0) * float("-0.0"))
    # 30th session: forms 13 and 14 gave +0: the constant -0.0 reaches the kernel as +0.0.  Other spellings:
    _put(OUT, 15, N, k, ((a + 1.0) * -1.0) * 0.0)  # x * -0.0 as (x * -1.0) * 0.0, no -0.0 constant
    _put(OUT, 16, N, k, (a + 1.0) * tl.full([N], -2147483648, tl.int32).to(tl.float32, bitcast=True))
    _put(OUT, 17, N, k, tl.where(a == a, -0.0, a))  # the literal as a value
    _put(OUT, 18, N, k, tl.where(a == a, tl.full([N], -2147483648, tl.int32).to(tl.float32, bitcast=True), a))
    _put(OUT, 19, N, k, (a + 1.0) * tl.full([N], -0.0, tl.float32))
    _put(OUT, 20, N, k, a + -0.0)  # x + -0.0 = x for every x (+0 + -0 = +0)


@triton.jit
def _put(OUT, n: tl.constexpr, N: tl.constexpr, k, value):
    tl.store(OUT + n * N + k, value.to(tl.int32, bitcast=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="zero_sign_forms.json")
    args = ap.parse_args()
    a = torch.tensor([0.0, 0.0, -0.0, -0.0], device=DEVICE)
    b = torch.tensor([0.0, -0.0, 0.0, -0.0], device=DEVICE)
    out = torch.zeros(FORMS * 4, dtype=torch.int32, device=DEVICE)
    kernel = _forms[(1,)](a, b, out, N=4)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    signs = [["-" if v < 0 else "+" for v in out[n * 4:(n + 1) * 4].tolist()] for n in range(FORMS)]
    ieee = {"neg": ["-", "-", "+", "+"], "max": ["+", "+", "+", "-"], "min": ["+", "-", "-", "-"]}
    names = ["-a", "a + b", "-((-a) + (-b))", "minimum.NaN", "maximum.NaN", "OR bits", "AND bits", "helper min",
             "a * -1.0", "0.0 - a", "where(a == 0, a, 0.0)", "-((a + 1) - (b + 1))", "-(a + b)",
             "(a + 1) * -0.0", "(a + 1) * float(\"-0.0\")", "((a + 1) * -1.0) * 0.0", "(a + 1) * bits(-0.0)",
             "where(a == a, -0.0, a)", "where(a == a, bits(-0.0), a)", "(a + 1) * full(-0.0)", "a + -0.0"]
    want = [ieee["neg"], ieee["max"], ieee["min"], ieee["min"], ieee["max"], ieee["min"], ieee["max"], ieee["min"],
            ieee["neg"], ["+", "+", "+", "+"], ["+", "+", "-", "-"], ["-", "-", "-", "-"], ["-", "-", "-", "+"],
            ["-", "-", "-", "-"], ["-", "-", "-", "-"], ["-", "-", "-", "-"], ["-", "-", "-", "-"],
            ["-", "-", "-", "-"], ["-", "-", "-", "-"], ["-", "-", "-", "-"], ["+", "+", "-", "-"]]
    rows = []
    for name, got, expected in zip(names, signs, want):
        rows.append({"form": name, "got": "".join(got), "ieee": "".join(expected), "ok": got == expected})
        print(f"{name:24s} got {''.join(got)}  ieee {''.join(expected)}  {'ok' if got == expected else 'WRONG'}")
    ptx = kernel.asm.get("ptx", "") if DEVICE == "cuda" else ""
    json.dump({"device": torch.cuda.get_device_name() if DEVICE == "cuda" else "Triton interpreter", "pairs": "(+0,+0) (+0,-0) (-0,+0) (-0,-0)", "rows": rows,
               "ptx": ptx}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
