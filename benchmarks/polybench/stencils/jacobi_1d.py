"""jacobi-1d: PolyBench/C 4.2.1 stencils/jacobi-1d/jacobi-1d.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "stencils/jacobi-1d/jacobi-1d.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    i = np.arange(n, dtype=np.float64)
    return {"A_in": (i + 2) / n, "B_in": (i + 3) / n}


def reference(inputs: dict, sizes: dict) -> dict:
    a, b = inputs["A_in"].copy(), inputs["B_in"].copy()
    n = sizes["N"]
    for _ in range(sizes["TSTEPS"]):
        b[1:n - 1] = 0.33333 * (a[0:n - 2] + a[1:n - 1] + a[2:n])
        a[1:n - 1] = 0.33333 * (b[0:n - 2] + b[1:n - 1] + b[2:n])
    return {"A": a, "B": b}
