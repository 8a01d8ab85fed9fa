"""ludcmp: PolyBench/C 4.2.1 linear-algebra/solvers/ludcmp/ludcmp.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/solvers/ludcmp/ludcmp.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    fn = float(n)
    b = np.array([(i + 1) / fn / 2.0 + 4 for i in range(n)], dtype=np.float64)
    a = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1):
            a[i, j] = float(-j) / n + 1  # C's (-j % n) is -j for 0 <= j < n (truncating remainder)
        a[i, i] = 1
    m = np.zeros((n, n), dtype=np.float64)
    for t in range(n):  # B[r][s] += A[r][t] * A[s][t] for every r, s: each element sums over t in C's order
        m += np.outer(a[:, t], a[:, t])
    return {"A_in": m, "b": b}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    A = inputs["A_in"].copy()
    b = inputs["b"]
    x = np.zeros(n)
    y = np.zeros(n)
    for i in range(n):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, n):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
    for i in range(n):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    for i in range(n - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, n):
            w -= A[i, j] * x[j]
        x[i] = w / A[i, i]
    return {"x": x}
