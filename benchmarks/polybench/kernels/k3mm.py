"""3mm: PolyBench/C 4.2.1 linear-algebra/kernels/3mm/3mm.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/kernels/3mm/3mm.c"
ILLEGAL_RULE = "dependence"


def init(sizes: dict) -> dict:
    ni, nj, nk, nl, nm = sizes["NI"], sizes["NJ"], sizes["NK"], sizes["NL"], sizes["NM"]
    A = np.array([[((i * j + 1) % ni) / (5 * ni) for j in range(nk)] for i in range(ni)], dtype=np.float64)
    B = np.array([[((i * (j + 1) + 2) % nj) / (5 * nj) for j in range(nj)] for i in range(nk)], dtype=np.float64)
    C = np.array([[(i * (j + 3) % nl) / (5 * nl) for j in range(nm)] for i in range(nj)], dtype=np.float64)
    D = np.array([[((i * (j + 2) + 2) % nk) / (5 * nk) for j in range(nl)] for i in range(nm)], dtype=np.float64)
    return {"A": A, "B": B, "C": C, "D": D}


def reference(inputs: dict, sizes: dict) -> dict:
    ni, nj, nk, nl, nm = sizes["NI"], sizes["NJ"], sizes["NK"], sizes["NL"], sizes["NM"]
    A, B, C, D = inputs["A"], inputs["B"], inputs["C"], inputs["D"]
    E, F, G = np.zeros((ni, nj)), np.zeros((nj, nl)), np.zeros((ni, nl))
    for i in range(ni):
        for j in range(nj):
            E[i, j] = 0.0
            for k in range(nk):
                E[i, j] += A[i, k] * B[k, j]
    for i in range(nj):
        for j in range(nl):
            F[i, j] = 0.0
            for k in range(nm):
                F[i, j] += C[i, k] * D[k, j]
    for i in range(ni):
        for j in range(nl):
            G[i, j] = 0.0
            for k in range(nj):
                G[i, j] += E[i, k] * F[k, j]
    return {"G": G}
