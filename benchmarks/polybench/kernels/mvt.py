"""mvt: PolyBench/C 4.2.1 linear-algebra/kernels/mvt/mvt.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/kernels/mvt/mvt.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    x1 = np.array([(i % n) / n for i in range(n)], dtype=np.float64)
    x2 = np.array([((i + 1) % n) / n for i in range(n)], dtype=np.float64)
    y_1 = np.array([((i + 3) % n) / n for i in range(n)], dtype=np.float64)
    y_2 = np.array([((i + 4) % n) / n for i in range(n)], dtype=np.float64)
    A = np.array([[(i * j % n) / n for j in range(n)] for i in range(n)], dtype=np.float64)
    return {"A": A, "y_1": y_1, "y_2": y_2, "x1_in": x1, "x2_in": x2}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    A, y_1, y_2 = inputs["A"], inputs["y_1"], inputs["y_2"]
    x1, x2 = inputs["x1_in"].copy(), inputs["x2_in"].copy()
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i, j] * y_1[j]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j, i] * y_2[j]
    return {"x1": x1, "x2": x2}
