"""symm: PolyBench/C 4.2.1 linear-algebra/blas/symm/symm.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/blas/symm/symm.c"
ILLEGAL_RULE = "parallel-dependence"

ALPHA, BETA = 1.5, 1.2


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    c = np.array([[((i + j) % 100) / m for j in range(n)] for i in range(m)], dtype=np.float64)
    b = np.array([[((n + i - j) % 100) / m for j in range(n)] for i in range(m)], dtype=np.float64)
    a = np.array([[((i + j) % 100) / m if j <= i else -999.0 for j in range(m)] for i in range(m)],
                 dtype=np.float64)
    return {"C_in": c, "A": a, "B": b}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    c, a, b = inputs["C_in"].copy(), inputs["A"], inputs["B"]
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                c[k, j] += ALPHA * b[i, j] * a[i, k]
                temp2 += b[k, j] * a[i, k]
            c[i, j] = BETA * c[i, j] + ALPHA * b[i, j] * a[i, i] + ALPHA * temp2
    return {"C": c}
