"""atax: PolyBench/C 4.2.1 linear-algebra/kernels/atax/atax.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/kernels/atax/atax.c"
ILLEGAL_RULE = "parallel-reduction"


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    fn = float(n)
    x = np.array([1 + (i / fn) for i in range(n)], dtype=np.float64)
    A = np.array([[((i + j) % n) / (5 * m) for j in range(n)] for i in range(m)], dtype=np.float64)
    return {"A": A, "x": x}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    A, x = inputs["A"], inputs["x"]
    y, tmp = np.zeros(n), np.zeros(m)
    for i in range(n):
        y[i] = 0.0
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i, j] * tmp[i]
    return {"y": y}
