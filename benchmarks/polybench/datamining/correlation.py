"""correlation: PolyBench/C 4.2.1 datamining/correlation/correlation.c, its init_array and kernel in float64."""

import math

import numpy as np

UPSTREAM = "datamining/correlation/correlation.c"
ILLEGAL_RULE = "dependence"


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    data = np.empty((n, m), dtype=np.float64)
    for i in range(n):
        for j in range(m):
            data[i, j] = float(i * j) / m + i
    return {"data": data}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    float_n = float(n)
    eps = 0.1
    data = inputs["data"].copy()
    mean = np.zeros(m)
    stddev = np.zeros(m)
    corr = np.zeros((m, m))
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for j in range(m):
        stddev[j] = 0.0
        for i in range(n):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] /= float_n
        stddev[j] = math.sqrt(stddev[j])
        stddev[j] = 1.0 if stddev[j] <= eps else stddev[j]
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
            data[i, j] /= math.sqrt(float_n) * stddev[j]
    for i in range(m - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, m):
            corr[i, j] = 0.0
            for k in range(n):
                corr[i, j] += data[k, i] * data[k, j]
            corr[j, i] = corr[i, j]
    corr[m - 1, m - 1] = 1.0
    return {"corr": corr}
