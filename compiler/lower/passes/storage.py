"""Folded storage (`fold_storage`) on the backends whose printers index tensors without it: refused, naming why.

The Triton printer applies the fold where it computes every address (backends/triton/emit.py `_pointer`).  The
TileLang printers also copy whole tiles as slices of a tensor (`T.copy(X[t, i0:i0 + 64], ...)`), and a folded
index inside a slice needs its own care, so these backends refuse a folded tensor for now.
"""

from __future__ import annotations

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T


def refuse_folded_storage(program: T.TileProgram) -> T.TileProgram:
    for k in program.kernels:
        for t in k.tensors:
            if t.fold:
                raise BackendError(f"{k.comment}: the schedule folds the storage of {t.name} (fold_storage), which "
                                   f"only the Triton backend generates so far; generate it with --backend triton, "
                                   f"or leave out fold_storage")
    return program
