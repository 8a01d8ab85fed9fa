"""seidel-2d: PolyBench/C 4.2.1 stencils/seidel-2d/seidel-2d.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "stencils/seidel-2d/seidel-2d.c"
ILLEGAL_RULE = "dependence"
# The tiled schedule launches one kernel per wavefront of each step (40 x 357 at SMALL), too many for the Triton
# interpreter; it checks a smaller grid (the GPU runs SMALL).
INTERPRETER_SIZES = {"TSTEPS": 3, "N": 14}


def init(sizes: dict) -> dict:
    n = sizes["N"]
    i = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(n, dtype=np.float64)[None, :]
    return {"A_in": (i * (j + 2) + 2) / n}


def reference(inputs: dict, sizes: dict) -> dict:
    a = inputs["A_in"].copy()
    n = sizes["N"]
    for _ in range(sizes["TSTEPS"]):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = (a[i - 1, j - 1] + a[i - 1, j] + a[i - 1, j + 1]
                           + a[i, j - 1] + a[i, j] + a[i, j + 1]
                           + a[i + 1, j - 1] + a[i + 1, j] + a[i + 1, j + 1]) / 9.0
    return {"A": a}
