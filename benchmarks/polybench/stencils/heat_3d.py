"""heat-3d: PolyBench/C 4.2.1 stencils/heat-3d/heat-3d.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "stencils/heat-3d/heat-3d.c"
ILLEGAL_RULE = "parallel-dependence"
# The time-tiled kernels walk planes serially inside a tile: minutes in the Triton interpreter at SMALL (the GPU
# runs SMALL); the interpreter checks a smaller grid.
INTERPRETER_SIZES = {"TSTEPS": 5, "N": 9}


def init(sizes: dict) -> dict:
    n = sizes["N"]
    i, j, k = np.meshgrid(*(np.arange(n, dtype=np.float64),) * 3, indexing="ij")
    a = (i + j + (n - k)) * 10 / n
    return {"A_in": a, "B_in": a.copy()}


def _sweep(src, dst):
    """dst[i][j][k] for 1 <= i, j, k < N - 1 from src, as the C loop body (every point reads src only)."""
    c = src[1:-1, 1:-1, 1:-1]
    dst[1:-1, 1:-1, 1:-1] = (0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * c + src[:-2, 1:-1, 1:-1])
                             + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * c + src[1:-1, :-2, 1:-1])
                             + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * c + src[1:-1, 1:-1, :-2])
                             + c)


def reference(inputs: dict, sizes: dict) -> dict:
    a, b = inputs["A_in"].copy(), inputs["B_in"].copy()
    for _ in range(1, sizes["TSTEPS"] + 1):
        _sweep(a, b)
        _sweep(b, a)
    return {"A": a, "B": b}
