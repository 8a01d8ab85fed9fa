"""gemver: PolyBench/C 4.2.1 linear-algebra/blas/gemver/gemver.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/blas/gemver/gemver.c"
ILLEGAL_RULE = "dependence"

ALPHA, BETA = 1.5, 1.2


def init(sizes: dict) -> dict:
    n = sizes["N"]
    fn = float(n)
    i = np.arange(n, dtype=np.float64)
    a = np.array([[(p * q % n) / n for q in range(n)] for p in range(n)], dtype=np.float64)
    return {"A_in": a, "u1": i.copy(), "u2": ((i + 1) / fn) / 2.0, "v1": ((i + 1) / fn) / 4.0,
            "v2": ((i + 1) / fn) / 6.0, "y": ((i + 1) / fn) / 8.0, "z": ((i + 1) / fn) / 9.0,
            "x_in": np.zeros(n), "w_in": np.zeros(n)}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    a = inputs["A_in"].copy()
    u1, v1, u2, v2 = inputs["u1"], inputs["v1"], inputs["u2"], inputs["v2"]
    x, w, y, z = inputs["x_in"].copy(), inputs["w_in"].copy(), inputs["y"], inputs["z"]
    for i in range(n):
        for j in range(n):
            a[i, j] = a[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        for j in range(n):
            x[i] = x[i] + BETA * a[j, i] * y[j]
    for i in range(n):
        x[i] = x[i] + z[i]
    for i in range(n):
        for j in range(n):
            w[i] = w[i] + ALPHA * a[i, j] * x[j]
    return {"A": a, "x": x, "w": w}
