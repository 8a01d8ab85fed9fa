"""Checking what the compiler produces against the reference interpreter.

`compare` (compare.py): a kernel's output against the interpreter's, in units of the last place of a dtype.
This package and compare.py import numpy alone: the GPU machine runs them without the rest of tdsl
(benchmarks/gpu put the repository root on sys.path and `from compiler.verify import compare`).

`ascend_sim/`: the Ascend execution model, which runs an emitted Ascend module in NumPy
(`from tdsl.compiler.verify.ascend_sim import simulate, check_schedule`).  It needs the compiler, so it is not
imported here.
"""

from .compare import (TOLERANCE_BITS, ULPS, Comparison, compare, compare_outputs, online_bound,  # relative: see above
                      reordered_terms, reordering_bound, tolerance_dtype, ulp)

__all__ = ["TOLERANCE_BITS", "ULPS", "Comparison", "compare", "compare_outputs", "online_bound", "reordered_terms",
           "reordering_bound", "tolerance_dtype", "ulp"]
