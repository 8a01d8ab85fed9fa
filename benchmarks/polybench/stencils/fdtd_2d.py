"""fdtd-2d: PolyBench/C 4.2.1 stencils/fdtd-2d/fdtd-2d.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "stencils/fdtd-2d/fdtd-2d.c"
ILLEGAL_RULE = "dependence"
# The time-tiled kernels walk rows serially inside a tile: minutes in the Triton interpreter at SMALL (the GPU
# runs SMALL); the interpreter checks a smaller grid.
INTERPRETER_SIZES = {"TMAX": 6, "NX": 19, "NY": 23}


def init(sizes: dict) -> dict:
    tmax, nx, ny = sizes["TMAX"], sizes["NX"], sizes["NY"]
    i = np.arange(nx, dtype=np.float64)[:, None]
    j = np.arange(ny, dtype=np.float64)[None, :]
    return {"ex_in": i * (j + 1) / nx, "ey_in": i * (j + 2) / ny, "hz_in": i * (j + 3) / nx,
            "fict": np.arange(tmax, dtype=np.float64)}


def reference(inputs: dict, sizes: dict) -> dict:
    ex, ey, hz = inputs["ex_in"].copy(), inputs["ey_in"].copy(), inputs["hz_in"].copy()
    fict = inputs["fict"]
    for t in range(sizes["TMAX"]):
        # each sweep reads only arrays it does not write, so a whole-array update is the C loop
        ey[0, :] = fict[t]
        ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return {"ex": ex, "ey": ey, "hz": hz}
