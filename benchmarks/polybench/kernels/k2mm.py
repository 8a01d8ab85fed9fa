"""2mm: PolyBench/C 4.2.1 linear-algebra/kernels/2mm/2mm.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/kernels/2mm/2mm.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    ni, nj, nk, nl = sizes["NI"], sizes["NJ"], sizes["NK"], sizes["NL"]
    A = np.array([[((i * j + 1) % ni) / ni for j in range(nk)] for i in range(ni)], dtype=np.float64)
    B = np.array([[(i * (j + 1) % nj) / nj for j in range(nj)] for i in range(nk)], dtype=np.float64)
    C = np.array([[((i * (j + 3) + 1) % nl) / nl for j in range(nl)] for i in range(nj)], dtype=np.float64)
    D = np.array([[(i * (j + 2) % nk) / nk for j in range(nl)] for i in range(ni)], dtype=np.float64)
    return {"A": A, "B": B, "C": C, "D_in": D}


def reference(inputs: dict, sizes: dict) -> dict:
    ni, nj, nk, nl = sizes["NI"], sizes["NJ"], sizes["NK"], sizes["NL"]
    alpha, beta = 1.5, 1.2
    A, B, C, D = inputs["A"], inputs["B"], inputs["C"], inputs["D_in"].copy()
    tmp = np.zeros((ni, nj))
    for i in range(ni):
        for j in range(nj):
            tmp[i, j] = 0.0
            for k in range(nk):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(ni):
        for j in range(nl):
            D[i, j] *= beta
            for k in range(nj):
                D[i, j] += tmp[i, k] * C[k, j]
    return {"D": D}
