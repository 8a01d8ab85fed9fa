"""lu: PolyBench/C 4.2.1 linear-algebra/solvers/lu/lu.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/solvers/lu/lu.c"
ILLEGAL_RULE = "dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    a = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1):
            a[i, j] = float(-j) / n + 1  # C's (-j % n) is -j for 0 <= j < n (truncating remainder)
        a[i, i] = 1
    b = np.zeros((n, n), dtype=np.float64)
    for t in range(n):  # B[r][s] += A[r][t] * A[s][t] for every r, s: each element sums over t in C's order
        b += np.outer(a[:, t], a[:, t])
    return {"A_in": b}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    A = inputs["A_in"].copy()
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]
    return {"A": A}
