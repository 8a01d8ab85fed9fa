"""cholesky: PolyBench/C 4.2.1 linear-algebra/solvers/cholesky/cholesky.c, its init_array and kernel in float64."""

import math

import numpy as np

UPSTREAM = "linear-algebra/solvers/cholesky/cholesky.c"
ILLEGAL_RULE = "parallel-dependence"


def spd_init(n: int) -> np.ndarray:
    """The init_array shared by cholesky, lu and ludcmp: a lower triangle with a unit diagonal, times itself."""
    a = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1):
            a[i, j] = float(-j) / n + 1  # C's (-j % n) is -j for 0 <= j < n (truncating remainder)
        a[i, i] = 1
    b = np.zeros((n, n), dtype=np.float64)
    for t in range(n):  # B[r][s] += A[r][t] * A[s][t] for every r, s: each element sums over t in C's order
        b += np.outer(a[:, t], a[:, t])
    return b


def init(sizes: dict) -> dict:
    return {"A_in": spd_init(sizes["N"])}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    A = inputs["A_in"].copy()
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])
    return {"A": A}
