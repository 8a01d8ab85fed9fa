"""floyd-warshall: PolyBench/C 4.2.1 medley/floyd-warshall/floyd-warshall.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "medley/floyd-warshall/floyd-warshall.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    path = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            path[i, j] = i * j % 7 + 1
            if (i + j) % 13 == 0 or (i + j) % 7 == 0 or (i + j) % 11 == 0:
                path[i, j] = 999
    return {"path_in": path}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    path = inputs["path_in"].copy()
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = path[i, j] if path[i, j] < path[i, k] + path[k, j] else path[i, k] + path[k, j]
    return {"path": path}
