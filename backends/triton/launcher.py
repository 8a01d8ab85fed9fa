"""The torch launcher of a Triton module: checks and allocations (backends/common/launcher.py), the host loops,
each kernel's grid (grouped, or `min(tiles, multiprocessors)` programs for a persistent kernel) and its TMA
descriptors, made per call from the tensors it passes (compiler/lower/passes/tma.py decides which)."""

from __future__ import annotations

from tdsl.backends.common.launcher import epilogue, host_loops, prologue
from tdsl.backends.common.names import ModuleNames, free_name
from tdsl.backends.triton.index import Frame, index_code, strides
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.lower.passes.tma import descriptors
from tdsl.compiler.lower.tileir import simplify

GRID_AXES = {"x": 0, "y": 1, "z": 2}


def _descriptor_code(program: T.TileProgram, kernel: T.TileKernel, tensor: str, box: tuple,
                     names: ModuleNames) -> str:
    """A TMA descriptor of a kernel tensor, made by the launcher: the whole (contiguous) array, its row-major
    strides (its sizes are constants: compiler/lower/passes/tma.py), the box.  An input at an address TMA
    cannot take (not 16-byte aligned) is copied first."""
    arg = next(t for t in kernel.tensors if t.name == tensor)
    x = names.tensor(tensor)
    dims = [d if isinstance(d, int) else program.sizes[d] for d in arg.shape]
    base = x if arg.role == "output" else f"{x} if {x}.data_ptr() % 16 == 0 else {x}.clone()"
    return (f"triton.tools.tensor_descriptor.TensorDescriptor({base}, [{', '.join(map(str, dims))}], "
            f"[{', '.join(strides(dims))}], [{', '.join(map(str, box))}])")


def launcher(program: T.TileProgram, names: ModuleNames) -> list[str]:
    lines = prologue(program, names, '"cpu" if _INTERPRET else "cuda"')  # the interpreter runs on the CPU
    # A TMA store needs a 16-byte aligned address (an output the launcher allocates always has one): a caller's
    # output that has none is written through an aligned copy of it (what no kernel writes stays as it was),
    # copied back after the launches.
    given = {}
    for t in dict.fromkeys(t for k in program.kernels for t, _ in descriptors(k)
                           if next(a for a in k.tensors if a.name == t).role == "output"):
        x = names.tensor(t)
        given[x] = free_name(f"{x}_given", names.taken)
        names.taken.add(given[x])
        lines.append(f"{given[x]} = None")
        lines.append(f"if {x}.data_ptr() % 16 != 0:  # stored through a TMA descriptor: an aligned copy")
        lines.append(f"    {given[x]}, {x} = {x}, {x}.clone()")
    sizes = Frame([], {}, {}, names.variables)  # the launcher's run-time sizes (loop variables never occur)
    for pad, kernel, host_vars in host_loops(program, names, lines):
        grid = [1, 1, 1]
        used = 0
        for axis in kernel.grid:
            extent = " * ".join(f"({index_code(simplify(e), sizes, python=True)})" for e in axis.extents)
            grid[GRID_AXES[axis.axis]] = extent
            used = max(used, GRID_AXES[axis.axis] + 1)
        if kernel.grid_group > 1:  # x * y programs on axis 0, in the grouped order the kernel decodes
            grid[0], grid[1] = f"{grid[0]} * {grid[1]}", 1
        grid_code = "(" + ", ".join(str(g) for g in grid[: max(used, 1)]) + ",)"
        if kernel.persistent:  # one program per multiprocessor (at most one per tile), each walking the tiles
            total = " * ".join(f"({g})" for g in grid if g != 1) or "1"
            grid_code = f"(min({total}, _programs({names.tensor(kernel.tensors[0].name)})),)"
        args = [names.tensor(t.name) for t in kernel.tensors] + [names.var(s) for s in kernel.sizes] + host_vars
        # no fma contraction: `a * b + c` rounds twice in the program (docs/legality.md#rounding); `fma` is tl.fma
        options = (f"INTERPRET=_INTERPRET, num_warps={kernel.num_warps}, num_stages={kernel.num_stages}, "
                   f"enable_fp_fusion=False)")
        made = [_descriptor_code(program, kernel, t, box, names) for t, box in descriptors(kernel)]
        if made:  # one argument a line: the descriptors are long
            lines.append(f"{pad}{names.kernel(kernel.name)}[{grid_code}](")
            lines += [f"{pad}    {arg}," for arg in [", ".join(args)] + made] + [f"{pad}    {options}"]
            continue
        lines.append(f"{pad}{names.kernel(kernel.name)}[{grid_code}]({', '.join(args)}{', ' if args else ''}{options}")
    for x, copy in given.items():
        lines.append(f"if {copy} is not None:")
        lines.append(f"    {x} = {copy}.copy_({x})")
    return lines + epilogue(program, names)
