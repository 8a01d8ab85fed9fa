"""Folded storage (`fold_storage`) where a backend copies a product's operand tiles as whole regions.

The Triton printer applies the fold where it computes every address (backends/triton/emit.py `_pointer`), the
TileLang printers (NVIDIA and the 950) where they index an element, reading and writing a folded tensor's tiles
element by element (`KernelPrinter.element`: a T.copy region could cross the planes' wrap-around), the 910B's lane
by lane (backends/ascend910b/values.py `gm_element`).  The 910B stages a matrix product's operand tiles with
whole-region copies (GM -> L1 for the cube, GM -> UB for the vector cores), so a product that reads a folded tensor
is refused there (`refuse_folded_products`); the 950 gathers such a tile element by element into UB and copies it
on to L1 (backends/ascend950/emit.py `_folded_l1`).

(An output stored in an input, `store_in`, is generated everywhere: Triton takes the input's array through both
parameters, the TileLang printers and the 910B's declare the output as a view of it, backends/tilelang/emit.py
`kernel_arrays`.)
"""

from __future__ import annotations

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T


def refuse_folded_products(program: T.TileProgram) -> T.TileProgram:
    """BackendError for a matrix product (on the cube or the vector cores) that reads a tensor the schedule
    folds: its operand tiles are copied as whole regions, which could cross the planes' wrap-around.  Other
    statements read and write folded tensors element by element."""
    for kernel in program.kernels:
        folded = {t.name for t in kernel.tensors if t.fold}
        for op in T.walk_ops(kernel.body):
            if isinstance(op, T.AccUpdate) and isinstance(op.partial, T.Dot):
                for load in [n for side in (op.partial.lhs, op.partial.rhs) for n in T.nodes_in(side, T.Load)]:
                    if load.tensor in folded:
                        raise BackendError(f"{op.stmt}: a matrix product reads {load.tensor}, whose storage the "
                                           f"schedule folds (fold_storage); the 910B copies operand tiles as whole "
                                           f"regions; leave out fold_storage of {load.tensor}, or generate for "
                                           f"NVIDIA or ascend-950")
    return program
