"""syr2k: PolyBench/C 4.2.1 linear-algebra/blas/syr2k/syr2k.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/blas/syr2k/syr2k.c"
ILLEGAL_RULE = "parallel-dependence"

ALPHA, BETA = 1.5, 1.2


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    a = np.array([[((i * j + 1) % n) / n for j in range(m)] for i in range(n)], dtype=np.float64)
    b = np.array([[((i * j + 2) % m) / m for j in range(m)] for i in range(n)], dtype=np.float64)
    c = np.array([[((i * j + 3) % n) / m for j in range(n)] for i in range(n)], dtype=np.float64)
    return {"C_in": c, "A": a, "B": b}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    c, a, b = inputs["C_in"].copy(), inputs["A"], inputs["B"]
    for i in range(n):
        for j in range(i + 1):
            c[i, j] *= BETA
        for k in range(m):
            for j in range(i + 1):
                c[i, j] += a[j, k] * ALPHA * b[i, k] + b[j, k] * ALPHA * a[i, k]
    return {"C": c}
