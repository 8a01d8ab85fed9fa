"""Storage decisions on the backends whose printers do not generate them yet: refused, naming why.

Folded storage (`fold_storage`): the Triton printer applies the fold where it computes every address
(backends/triton/emit.py `_pointer`), the TileLang NVIDIA printer where it indexes an element, reading and
writing a folded tensor's tiles element by element (`KernelPrinter.element`: a T.copy region could cross the
planes' wrap-around), the 910B's lane by lane (backends/ascend910b/values.py `gm_element`; its products' operands
are refused over a folded tensor: compiler/lower/passes/ascend910b.py `refuse_folded_products`).  The 950's
printer moves tiles between GM and UB/L1 as regions only, so it refuses a folded tensor for now.

(An output stored in an input, `store_in`, is generated everywhere: Triton takes the input's array through both
parameters, the TileLang printers and the 910B's declare the output as a view of it, backends/tilelang/emit.py
`kernel_arrays`.)
"""

from __future__ import annotations

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T


def refuse_folded_storage(program: T.TileProgram) -> T.TileProgram:
    for k in program.kernels:
        for t in k.tensors:
            if t.fold:
                raise BackendError(f"{k.comment}: the schedule folds the storage of {t.name} (fold_storage), which "
                                   f"the Ascend backends do not generate yet; generate it for NVIDIA (Triton or "
                                   f"TileLang), or leave out fold_storage")
    return program
