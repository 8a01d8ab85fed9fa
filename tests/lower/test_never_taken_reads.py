"""A read in a `where` branch that no instance takes at the program's sizes is lowered as a constant: its value is
never used, so the kernel loads nothing for it, stores no temporary for it and waits at no barrier for it.  The
buffer plan ignores such reads alike (compiler/analysis/buffer_planner.py `_memory_temps`).  CPU fuzz seed 5462:
jacobi_2d at N = 1 with Bn inlined, whose neighbour reads of Ap are all outside the 1 x 1 grid."""

from __future__ import annotations

import pytest

from tdsl.compiler.driver.api import load
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.pipeline import lower_for

from catalog import ROOT

JACOBI_2D = ROOT / "benchmarks" / "polybench" / "stencils" / "jacobi_2d.tdsl"


def first_kernel(n: int, backend: str) -> T.TileKernel:
    sched = load(JACOBI_2D, sizes={"TSTEPS": 2, "N": n}).schedule(None)
    sched.compute_inline("Bn")
    return lower_for(sched, backend).kernels[0]


def loads_of(kernel: T.TileKernel, tensor: str) -> int:
    return sum(1 for op in T.walk_ops(kernel.body) for e in T.values_read(op) for node in T.nodes_in(e, T.Load)
               if node.tensor == tensor)


def barriers(kernel: T.TileKernel) -> int:
    return sum(1 for op in T.walk_ops(kernel.body) if isinstance(op, T.Barrier))


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
def test_reads_no_instance_takes_load_nothing(backend):
    kernel = first_kernel(1, backend)
    assert loads_of(kernel, "Ap") == 0 and barriers(kernel) == 0


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
def test_the_same_reads_taken_at_a_larger_size_load_from_memory(backend):
    kernel = first_kernel(4, backend)
    assert loads_of(kernel, "Ap") > 0 and barriers(kernel) > 0
