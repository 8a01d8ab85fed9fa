"""gesummv: PolyBench/C 4.2.1 linear-algebra/blas/gesummv/gesummv.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/blas/gesummv/gesummv.c"
ILLEGAL_RULE = "parallel-dependence"

ALPHA, BETA = 1.5, 1.2


def init(sizes: dict) -> dict:
    n = sizes["N"]
    x = np.array([(i % n) / n for i in range(n)], dtype=np.float64)
    a = np.array([[((i * j + 1) % n) / n for j in range(n)] for i in range(n)], dtype=np.float64)
    b = np.array([[((i * j + 2) % n) / n for j in range(n)] for i in range(n)], dtype=np.float64)
    return {"A": a, "B": b, "x": x}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    a, b, x = inputs["A"], inputs["B"], inputs["x"]
    tmp, y = np.zeros(n), np.zeros(n)
    for i in range(n):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(n):
            tmp[i] = a[i, j] * x[j] + tmp[i]
            y[i] = b[i, j] * x[j] + y[i]
        y[i] = ALPHA * tmp[i] + BETA * y[i]
    return {"tmp": tmp, "y": y}
