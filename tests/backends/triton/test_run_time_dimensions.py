"""Dimensions that are expressions of run-time sizes (`[N, N + 1]`, `[N // 2]`, rfactor's `[M, ceil(N / 8)]`)
in a kernel compiled once for every size (probe of the 25th session): the launcher's element count met a
KeyError on `(N + 1)`, `N // 2` reached Python as isl's `floor((N)/2)`, and rfactor's partial sums were shaped
by isl's own printout.  Each is compiled with its sizes unbound and run at several under Triton's interpreter,
against NumPy in float64."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tdsl.compiler.driver.api import loads
from tdsl.compiler.driver.generate import generate, load_module, python_name

PROGRAMS = {
    "expression": ("param N\nkernel pad(X: f32[N, N + 1]) -> (Y: f32[N, N + 1]) {\n  Y[i, j] = X[i, j] * 2.0\n}\n"
                   "schedule s {\n  io, jo, ii, jj = tile(Y.i, Y.j, 8, 8)\n  bind(Y.io, grid.x)\n"
                   "  bind(Y.jo, grid.y)\n}\n",
                   lambda x: x * 2.0, lambda n: [(n, n + 1)]),
    "floor_division": ("param N\nkernel half(X: f32[N]) -> (Y: f32[N // 2]) {\n  Y[i] = X[2 * i] + X[2 * i + 1]\n}\n"
                       "schedule s {\n  io, ii = split(Y.i, 16)\n  bind(Y.io, grid.x)\n}\n",
                       lambda x: x[0:2 * (len(x) // 2):2] + x[1:2 * (len(x) // 2):2], lambda n: [(n,)]),
    "partial_sums": ("param M, N\nkernel rows(X: f32[M, N]) -> (s: f32[M]) {\n"
                     "  s[i] = sum(j) X[i, j] accum f32 combine reassoc\n}\n"
                     "schedule s {\n  jo, jj = split(s.j, 8)\n  rfactor(s.jo)\n  bind(s_rf.i, grid.x)\n"
                     "  bind(s_rf.jo, grid.y)\n  io, ii = split(s.i, 4)\n  ko, kk = split(s.jo, 4)\n}\n",
                     lambda x: x.sum(axis=1), lambda n: [(3, n)]),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_kernel_of_run_time_sizes_computes_every_size(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text, reference, shapes = PROGRAMS[name]
    module = load_module(generate(loads(text, f"{name}.tdsl"), "s", target="nvidia", backend="triton"),
                         tmp_path / f"{name}.py")
    program = loads(text, f"{name}.tdsl")
    kernel = getattr(module, python_name(module, program.kernel_name()))
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 16, 17, 33):
        for shape in shapes(n):
            x = rng.standard_normal(shape).astype(np.float32)
            got = kernel(torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target, backend", [("nvidia", "tilelang"), ("ascend-910b", None), ("ascend-950", None)])
def test_code_generators_of_fixed_sizes_refuse_a_run_time_size_with_what_to_give(target, backend):
    """They failed with a TdslError of memory planning, so `check --target` exited 2 (a usage error) instead of
    1 with "not generated for" (probe of the 25th session)."""
    from tdsl.compiler.errors import BackendError

    text = PROGRAMS["expression"][0]
    with pytest.raises(BackendError, match=r"kernels are compiled for fixed sizes, and N is a run-time size: give it "
                                           r"a value \(--size N=\.\.\., .*only Triton's kernels"):
        generate(loads(text, "pad.tdsl"), "s", target=target, backend=backend)


def test_a_tile_of_no_fixed_size_names_the_loops_there_are():
    """A skewed loop walks j with i: the refusal said "split the loop over j", a loop the schedule no longer has,
    and printed isl's formula (probe of the 25th session)."""
    from tdsl.compiler.errors import BackendError

    text = ("param N\nkernel sweep(X: f32[N, N]) -> (Y: f32[N, N]) {\n"
            "  Y[i, j] = where(i == 0, X[i, j], where(j == 0, X[i, j], where(j == N - 1, X[i, j],\n"
            "    (Y[i - 1, j - 1] + Y[i - 1, j] + Y[i - 1, j + 1] + Y[i, j - 1] + X[i, j] + X[i, j + 1]) / 6.0)))\n}\n"
            "schedule s {\n  w = skew(Y.j, Y.i, 2)\n  reorder(Y, w, i)\n  host(Y.w)\n  io, ii = split(Y.i, 4)\n"
            "  bind(Y.io, grid.x)\n}\n")
    with pytest.raises(BackendError, match=r"the tile of Y along j has no fixed size \(its extent depends on N\): no "
                                           r"loop of Y \(w, io, ii\) walks j alone, so give the sizes values "
                                           r"\(--size N=\.\.\.\)"):
        generate(loads(text, "sweep.tdsl"), "s", target="nvidia", backend="triton")


@pytest.mark.parametrize("text, says", [
    ("param M, N\nkernel sm(X: f32[M, N]) -> (Y: f32[M, N]) {\n  m[i] = max(j) X[i, j]\n"
     "  Y[i, j] = exp(X[i, j] - m[i])\n}\nschedule s {\n  compute_at(m, Y.i)\n  jo, ji = split(Y.j, 16)\n"
     "  bind(Y.i, grid.x)\n}\n", "the tile of m along j has no fixed size (its extent depends on N)"),
    ("param N, Q\nkernel k(A: f32[N], B: f32[Q]) -> (C: f32[N], D: f32[Q]) {\n  C[i] = A[i] * 2.0\n"
     "  D[i] = B[i] + 1.0\n}\n", "the tile of C along i has no fixed size (its extent depends on N)"),
])
def test_a_tile_of_no_fixed_size_names_only_the_sizes_its_extent_depends_on(text, says):
    """The refusal named every size of the statement's domain conditions: 'depends on M, N' for a loop over N,
    'N, Q' where C has no Q (probe KK)."""
    from tdsl.compiler.errors import BackendError

    with pytest.raises(BackendError, match=re.escape(says) + r":"):
        generate(loads(text, "sizes.tdsl"), "s" if "schedule" in text else None, target="nvidia", backend="triton")
