"""adi: PolyBench/C 4.2.1 stencils/adi/adi.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "stencils/adi/adi.c"
ILLEGAL_RULE = "parallel-dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    i = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(n, dtype=np.float64)[None, :]
    return {"u_in": (i + n - j) / n}


def reference(inputs: dict, sizes: dict) -> dict:
    n, tsteps = sizes["N"], sizes["TSTEPS"]
    u = inputs["u_in"].copy()
    v = np.zeros((n, n))
    p = np.zeros((n, n))
    q = np.zeros((n, n))
    dx = 1.0 / n
    dy = 1.0 / n
    dt = 1.0 / tsteps
    b1, b2 = 2.0, 1.0
    mul1 = b1 * dt / (dx * dx)
    mul2 = b2 * dt / (dy * dy)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for _ in range(1, tsteps + 1):
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -c / (a * p[i, j - 1] + b)
                q[i, j] = (-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i] - f * u[j, i + 1]
                           - a * q[i, j - 1]) / (a * p[i, j - 1] + b)
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]
        for i in range(1, n - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, n - 1):
                p[i, j] = -f / (d * p[i, j - 1] + e)
                q[i, j] = (-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j] - c * v[i + 1, j]
                           - d * q[i, j - 1]) / (d * p[i, j - 1] + e)
            u[i, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]
    return {"u": u}
