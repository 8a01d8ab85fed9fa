"""durbin: PolyBench/C 4.2.1 linear-algebra/solvers/durbin/durbin.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/solvers/durbin/durbin.c"
ILLEGAL_RULE = "parallel-dependence"
F64_UNREACHABLE = ("no f64 dtype: durbin.tdsl is a complete port whose interpreter output equals a float32 run of the C "
           "code bit for bit (and Triton matches it), but this Levinson recurrence (r[i] = N + 1 - i, beta = -14640 after "
           "its first step) amplifies f32 rounding to 6.6e-3 of max|y| against the float64 reference, above the 1e-3 "
           "tolerance; tdsl's widest dtype is f32 (storage and accumulators)")


def init(sizes: dict) -> dict:
    n = sizes["N"]
    return {"r": np.array([n + 1 - i for i in range(n)], dtype=np.float64)}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    r = inputs["r"]
    y = np.zeros(n)
    z = np.zeros(n)
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1 - alpha * alpha) * beta
        s = 0.0
        for i in range(k):
            s += r[k - i - 1] * y[i]
        alpha = -(r[k] + s) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha
    return {"y": y}
