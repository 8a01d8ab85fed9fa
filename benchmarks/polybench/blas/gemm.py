"""gemm: PolyBench/C 4.2.1 linear-algebra/blas/gemm/gemm.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/blas/gemm/gemm.c"
ILLEGAL_RULE = "parallel-dependence"

ALPHA, BETA = 1.5, 1.2


def init(sizes: dict) -> dict:
    ni, nj, nk = sizes["NI"], sizes["NJ"], sizes["NK"]
    c = np.array([[((i * j + 1) % ni) / ni for j in range(nj)] for i in range(ni)], dtype=np.float64)
    a = np.array([[(i * (j + 1) % nk) / nk for j in range(nk)] for i in range(ni)], dtype=np.float64)
    b = np.array([[(i * (j + 2) % nj) / nj for j in range(nj)] for i in range(nk)], dtype=np.float64)
    return {"C_in": c, "A": a, "B": b}


def reference(inputs: dict, sizes: dict) -> dict:
    ni, nj, nk = sizes["NI"], sizes["NJ"], sizes["NK"]
    c, a, b = inputs["C_in"].copy(), inputs["A"], inputs["B"]
    for i in range(ni):
        for j in range(nj):
            c[i, j] *= BETA
        for k in range(nk):
            for j in range(nj):
                c[i, j] += ALPHA * a[i, k] * b[k, j]
    return {"C": c}
