"""nussinov: PolyBench/C 4.2.1 medley/nussinov/nussinov.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "medley/nussinov/nussinov.c"
ILLEGAL_RULE = "dependence"


def init(sizes: dict) -> dict:
    n = sizes["N"]
    # table starts at 0 in init_array: the port's R starts from 0.0 itself; seq is AGCT as 0..3
    return {"seq": np.array([(i + 1) % 4 for i in range(n)], dtype=np.float64)}


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    seq = inputs["seq"]
    table = np.zeros((n, n))

    def match(b1, b2):
        return 1 if b1 + b2 == 3 else 0

    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < n:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < n:
                if i < j - 1:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + match(seq[i], seq[j]))
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return {"table": table}
