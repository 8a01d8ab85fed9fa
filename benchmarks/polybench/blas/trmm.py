"""trmm: PolyBench/C 4.2.1 linear-algebra/blas/trmm/trmm.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/blas/trmm/trmm.c"
ILLEGAL_RULE = "dependence"

ALPHA = 1.5


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    a = np.zeros((m, m))  # the upper triangle is left unset by init_array and never read
    b = np.zeros((m, n))
    for i in range(m):
        for j in range(i):
            a[i, j] = ((i + j) % m) / m
        a[i, i] = 1.0
        for j in range(n):
            b[i, j] = ((n + (i - j)) % n) / n
    return {"A": a, "B_in": b}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    a, b = inputs["A"], inputs["B_in"].copy()
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                b[i, j] += a[k, i] * b[k, j]
            b[i, j] = ALPHA * b[i, j]
    return {"B": b}
