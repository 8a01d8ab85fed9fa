"""gramschmidt: PolyBench/C 4.2.1 linear-algebra/solvers/gramschmidt/gramschmidt.c, init_array and kernel in float64."""

import math

import numpy as np

UPSTREAM = "linear-algebra/solvers/gramschmidt/gramschmidt.c"
ILLEGAL_RULE = "parallel-dependence"
F64_UNREACHABLE = ("not checkable in f32 (no f64 dtype), and ill-posed even in f64: gramschmidt.tdsl is a complete port whose "
           "interpreter output equals a float32 run of the C code bit for bit (Triton too, under the tiled schedule), "
           "but the SMALL init gives A of rank 41 < N = 80 columns: from column 37 on R[k][k] is rounding residue "
           "(1e-13 in f64, 1e-4 in f32) and Q's columns are that residue normalised, so Q differs by 100% and R by 7% "
           "of their largest values from the float64 reference (a 1e-15 relative change of A moves the float64 "
           "result as much)")


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    a = np.empty((m, n), dtype=np.float64)
    for i in range(m):
        for j in range(n):
            a[i, j] = (float((i * j) % m) / m) * 100 + 10
    return {"A_in": a}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    A = inputs["A_in"].copy()
    R = np.zeros((n, n))
    Q = np.zeros((m, n))
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i, k] * A[i, k]
        R[k, k] = math.sqrt(nrm)
        for i in range(m):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = 0.0
            for i in range(m):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(m):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]
    return {"R": R, "Q": Q}
