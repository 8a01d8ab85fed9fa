"""trisolv: PolyBench/C 4.2.1 linear-algebra/solvers/trisolv/trisolv.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/solvers/trisolv/trisolv.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    L = np.zeros((n, n), dtype=np.float64)  # the upper triangle is never written by init_array nor read
    b = np.empty(n, dtype=np.float64)
    for i in range(n):
        b[i] = i
        for j in range(i + 1):
            L[i, j] = float(i + n - j + 1) * 2 / n
    return {"L": L, "b": b}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    L, b = inputs["L"], inputs["b"]
    x = np.full(n, -999.0)
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return {"x": x}
