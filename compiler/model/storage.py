"""Where a tensor's elements are stored: its own array, one folded along some dimensions (`fold_storage`), or
the array of a kernel input (`store_in`).

A folded tensor keeps `planes` values along a dimension: element [.., d, ..] lives at [.., d mod planes, ..],
so a later element overwrites an earlier one (two time planes instead of T).  An output stored in an input
(`stored_in`) has its element [a] at the input's [a]: the caller's array is updated in place, each value of the
input replaced by the output's.  Everything that reasons about memory goes through the storage map: the
dependences (compiler/model/dependences.py: anti and output dependences between the accesses that share a
location), the reference interpreter (it runs the folded and shared arrays, so an overwrite too early shows in
the result) and the backends (the array's shape and its indices; the launcher passes the input as the output).
"""

from __future__ import annotations

import islpy as isl

from tdsl.compiler.model.program import Tensor


def location(tensor: Tensor, coords: list[str], mod: str) -> list[str]:
    """An element's index (one text per dimension) as the index of its location, with `mod` the remainder operator
    of the text ("mod" for isl, "%" for Python): `[t, i]` -> `[(t) mod 2, i]`."""
    planes = dict(tensor.fold)
    return [f"({c}) {mod} {planes[k]}" if k in planes else c for k, c in enumerate(coords)]


def storage_array(tensor: Tensor) -> str:
    """The name of the array that holds the tensor's elements: its own, or the input it is stored in."""
    return tensor.stored_in or tensor.name


def storage_map(tensor: Tensor) -> isl.Map:
    """Element -> location, on the tensor's box: { X[a0, a1] -> X[a0 mod p, a1] }, { X[a0, a1] -> Y[a0, a1] } for
    X stored in Y (identity when neither)."""
    dims = [f"__a{k}" for k in range(len(tensor.shape))]  # '__' names are the compiler's: no size is called so
    where = location(tensor, dims, "mod")
    params = [tensor.box.get_dim_name(isl.dim_type.param, i) for i in range(tensor.box.dim(isl.dim_type.param))]
    prefix = f"[{', '.join(params)}] -> " if params else ""
    text = f"{prefix}{{ {tensor.name}[{', '.join(dims)}] -> {storage_array(tensor)}[{', '.join(where)}] }}"
    return isl.Map.read_from_str(tensor.box.get_ctx(), text).intersect_domain(tensor.box)


def overwritable(tensors) -> set[str]:
    """The arrays a kernel may store over after reading them: the inputs outputs are stored in (`store_in`, a
    signature's `in`) and the folded tensors (fold_storage: a plane holds one step, then the next).  `tensors`:
    the model's Tensors or a tile kernel's TensorArgs (both have `name`, `stored_in`, `fold`)."""
    return {t.stored_in for t in tensors if t.stored_in} | {t.name for t in tensors if t.fold}


def stored_shape(tensor: Tensor) -> list:
    """The shape of the array that holds the tensor: `planes` along each folded dimension."""
    planes = dict(tensor.fold)
    return [planes.get(k, extent) for k, extent in enumerate(tensor.shape)]


def located(tensor: Tensor, relation: isl.Map) -> isl.Map:
    """An access relation (instance -> element) as instance -> location."""
    return relation.apply_range(storage_map(tensor)) if tensor.fold or tensor.stored_in else relation
