"""doitgen: PolyBench/C 4.2.1 linear-algebra/kernels/doitgen/doitgen.c, its init_array and kernel in float64."""

import numpy as np

UPSTREAM = "linear-algebra/kernels/doitgen/doitgen.c"
ILLEGAL_RULE = "parallel-reduction"


def init(sizes: dict) -> dict:
    nr, nq, np_ = sizes["NR"], sizes["NQ"], sizes["NP"]
    A = np.array([[[((i * j + k) % np_) / np_ for k in range(np_)] for j in range(nq)] for i in range(nr)],
                 dtype=np.float64)
    C4 = np.array([[(i * j % np_) / np_ for j in range(np_)] for i in range(np_)], dtype=np.float64)
    return {"A_in": A, "C4": C4}


def reference(inputs: dict, sizes: dict) -> dict:
    nr, nq, np_ = sizes["NR"], sizes["NQ"], sizes["NP"]
    A, C4 = inputs["A_in"].copy(), inputs["C4"]
    total = np.zeros(np_)
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                total[p] = 0.0
                for s in range(np_):
                    total[p] += A[r, q, s] * C4[s, p]
            for p in range(np_):
                A[r, q, p] = total[p]
    return {"A": A}
