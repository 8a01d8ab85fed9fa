"""covariance: PolyBench/C 4.2.1 datamining/covariance/covariance.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "datamining/covariance/covariance.c"
ILLEGAL_RULE = "parallel-reduction"


def init(sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    data = np.empty((n, m), dtype=np.float64)
    for i in range(n):
        for j in range(m):
            data[i, j] = float(i * j) / m
    return {"data": data}


def reference(inputs: dict, sizes: dict) -> dict:
    m, n = sizes["M"], sizes["N"]
    float_n = float(n)
    data = inputs["data"].copy()
    mean = np.zeros(m)
    cov = np.zeros((m, m))
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = 0.0
            for k in range(n):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= (float_n - 1.0)
            cov[j, i] = cov[i, j]
    return {"cov": cov}
