"""bicg: PolyBench/C 4.2.1 linear-algebra/kernels/bicg/bicg.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/kernels/bicg/bicg.c"
ILLEGAL_RULE = "parallel-reduction"


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    p = np.array([(i % m) / m for i in range(m)], dtype=np.float64)
    r = np.array([(i % n) / n for i in range(n)], dtype=np.float64)
    A = np.array([[(i * (j + 1) % n) / n for j in range(m)] for i in range(n)], dtype=np.float64)
    return {"A": A, "r": r, "p": p}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    A, r, p = inputs["A"], inputs["r"], inputs["p"]
    s, q = np.zeros(m), np.zeros(n)
    for i in range(m):
        s[i] = 0.0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]
    return {"s": s, "q": q}
