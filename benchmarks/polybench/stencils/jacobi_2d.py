"""jacobi-2d: PolyBench/C 4.2.1 stencils/jacobi-2d/jacobi-2d.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "stencils/jacobi-2d/jacobi-2d.c"
ILLEGAL_RULE = "dependence"
# The time-tiled kernels walk rows serially inside a tile: minutes in the Triton interpreter at SMALL (the GPU
# runs SMALL); the interpreter checks a smaller grid.
INTERPRETER_SIZES = {"TSTEPS": 6, "N": 21}


def init(sizes: dict) -> dict:
    n = sizes["N"]
    i = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(n, dtype=np.float64)[None, :]
    return {"A_in": (i * (j + 2) + 2) / n, "B_in": (i * (j + 3) + 3) / n}


def reference(inputs: dict, sizes: dict) -> dict:
    a, b = inputs["A_in"].copy(), inputs["B_in"].copy()
    n = sizes["N"]
    for _ in range(sizes["TSTEPS"]):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, 1 + j] + a[1 + i, j] + a[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = 0.2 * (b[i, j] + b[i, j - 1] + b[i, 1 + j] + b[1 + i, j] + b[i - 1, j])
    return {"A": a, "B": b}
