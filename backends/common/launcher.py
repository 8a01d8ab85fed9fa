"""What every torch launcher of a generated module does around its kernel launches.

Bind run-time sizes from the input shapes, check each input's type, dtype and shape, allocate (or check)
the outputs and the intermediates that live between launches; after the launches, return the outputs.
The launch lines themselves are the backend's.  Every name of the program is printed as the module's
identifier for it (`names`, backends/common/names.py): the launcher's parameters are its tensors' identifiers, and
what it calls (`_check`, `torch`, Python's `ValueError`) is reserved, so no parameter can shadow it.
"""

from __future__ import annotations

from tdsl.compiler.errors import BackendError
from tdsl.compiler.lower import tileir as T
from tdsl.compiler.model.isl_code import dimension_sizes

from tdsl.backends.common.names import ModuleNames


def bind_params(program: T.TileProgram, names: ModuleNames) -> list[str]:
    """Run-time sizes are read off the input shapes (the first input dim equal to the size's name), and refused
    below 1, as every size is (docs/language.md)."""
    lines, read = [], set()
    for p in [n for n, v in program.sizes.items() if v is None]:
        where = next(((t.name, d) for t in program.inputs for d, dim in enumerate(t.shape) if dim == p), None)
        if where is None:
            raise BackendError(f"run-time size {p} is not a dimension of any input, so the launcher cannot read it "
                               f"from their shapes; give it a value (--size {p}=...), declare it `const`, or add an "
                               f"input with a dimension {p}")
        if where[0] not in read:  # its shape is read before _check sees it: a tensor of another rank, said so
            read.add(where[0])
            lines += _check_rank(next(t for t in program.inputs if t.name == where[0]), names)
        lines.append(f"{names.var(p)} = {names.tensor(where[0])}.shape[{where[1]}]")
        # an empty dimension launches no program and would return outputs never written
        lines.append(f"if {names.var(p)} < 1:")
        lines.append(f'    raise ValueError(f"{names.entry}: {p} = {{{names.var(p)}}} (dimension {where[1]} of '
                     f'{where[0]}): a size is at least 1")')
    return lines


def _check_rank(t, names: ModuleNames) -> list[str]:
    x, rank = names.tensor(t.name), len(t.shape)
    dims = ", ".join(str(d) for d in t.shape)
    return [f"if not isinstance({x}, torch.Tensor):",
            f'    raise TypeError(f"{names.entry}: {x} must be a torch.Tensor, got {{type({x}).__name__}}")',
            f"if {x}.dim() != {rank}:",
            f'    raise ValueError(f"{names.entry}: {x} must have {rank} dimension{"s" * (rank != 1)} [{dims}], got '
            f'{{{x}.dim()}} (shape {{tuple({x}.shape)}})")']


INT32_MAX = 2**31 - 1


def check_index_range(program: T.TileProgram, names: ModuleNames) -> list[str]:
    """With run-time sizes, refuse at launch a size that makes a tensor hold more elements than the kernels'
    32-bit index arithmetic reaches (compiler/lower/passes/int32.py bounds the constant sizes at compile time;
    an element's offset is below its tensor's element count, so that count bounds every address)."""
    params = [n for n, v in program.sizes.items() if v is None]
    lines = []
    for t in [*program.inputs, *program.outputs, *program.temps]:
        # a dimension is a number, a run-time size, or an expression of them (`N + 1`: a probe of the 25th
        # session met a KeyError where only plain sizes were expected)
        named = set().union(*(dimension_sizes(d) for d in t.shape if not isinstance(d, int)))
        used = [p for p in params if p in named]
        if not used:
            continue
        count = " * ".join(names.dim(d) for d in t.shape)  # each a name, a number or a parenthesised expression
        given = ", ".join(f"{p} = {{{names.var(p)}}}" for p in used)
        lines.append(f"if {count} > {INT32_MAX}:")
        lines.append(f'    raise ValueError(f"{names.entry}: {given} makes {t.name} hold {{{count}}} elements; the '
                     f'generated kernels index in 32 bits (at most {INT32_MAX})")')
    return lines


def check_size_limit(program: T.TileProgram, names: ModuleNames) -> list[str]:
    """Refuse at launch a run-time size beyond the program's limit: its `where` conditions compare iterators and sizes
    as f32 values, which the model checked as exact up to that size (compiler/model/program.py SIZE_LIMIT)."""
    if program.size_limit is None:
        return []
    lines = []
    for p in [n for n, v in program.sizes.items() if v is None]:
        lines.append(f"if {names.var(p)} > {program.size_limit}:")
        lines.append(f'    raise ValueError(f"{names.entry}: {p} = {{{names.var(p)}}} is beyond {program.size_limit}: '
                     f'the where conditions of {program.name} compare iterators and sizes as f32 values, exact only '
                     f'up to there")')
    return lines


def prologue(program: T.TileProgram, names: ModuleNames, device: str = '"cuda"') -> list[str]:
    """The launcher's checks and allocations; `device` is the Python expression of the device a kernel without
    inputs allocates its outputs on (one with inputs allocates on its first input's)."""
    lines = bind_params(program, names) + check_index_range(program, names) + check_size_limit(program, names)
    holders = {t.stored_in: t.name for t in program.outputs if t.stored_in}
    for t in program.inputs:
        x = names.tensor(t.name)
        if t.name in holders:  # updated in place: a contiguous copy would take the update instead
            lines.append(f"if isinstance({x}, torch.Tensor) and not {x}.is_contiguous():")
            lines.append(f'    raise ValueError("{names.entry}: input {x} holds output {names.tensor(holders[t.name])} '
                         f'(store_in) and is updated in place, so it must be contiguous")')
        lines.append(f'{x} = _check({x}, "{x}", "{t.dtype}", {names.shape(t.shape)})')
    device = names.tensor(program.inputs[0].name) + ".device" if program.inputs else device
    for t in program.outputs:
        x = names.tensor(t.name)
        if t.stored_in:  # `store_in`: the kernels write the output over the input, which the caller gets back
            y = names.tensor(t.stored_in)
            lines.append(f"if {x} is not None and {x} is not {y}:")
            lines.append(f'    raise ValueError("{names.entry}: output {x} is stored in input {y} (store_in), which '
                         f'the kernel updates in place; pass no {x}")')
            lines.append(f"{x} = {y}")
            continue
        lines.append(f"if {x} is None:")
        lines.append(f"    {x} = torch.empty({names.shape(t.shape)}, dtype=_TORCH_DTYPES[\"{t.dtype}\"], device={device})")
        lines.append(f'elif _check({x}, "{x}", "{t.dtype}", {names.shape(t.shape)}) is not {x}:')  # itself where contiguous
        lines.append(f'    raise ValueError("{names.entry}: output {x} must be contiguous")')
    lines += check_no_overlap(program, names)
    for t in program.temps:
        lines.append(f"{names.tensor(t.name)} = torch.empty({names.shape(t.shape)}, "
                     f"dtype=_TORCH_DTYPES[\"{t.dtype}\"], device={device})  # intermediate between launches")
    return lines


def check_no_overlap(program: T.TileProgram, names: ModuleNames) -> list[str]:
    """Refuse at launch an output whose memory overlaps an input it does not update in place, or another output:
    the kernels write it while other programs still read the input, so the result would depend on their order
    (an in-place gemm called as k(a, a, b) returned garbage; torch.mm(a, b, out=a) refuses the same).  The
    tensors are contiguous by now (the inputs checked, the outputs refused otherwise), so each is one byte range."""
    outputs = [(names.tensor(t.name), t.stored_in) for t in program.outputs]
    pairs = [(x, names.tensor(t.name), "input", "read") for x, own in outputs for t in program.inputs if t.name != own]
    pairs += [(x, y, "output", "written") for n, (x, _) in enumerate(outputs) for y, _ in outputs[n + 1:]]
    lines = []
    for x, y, role, use in pairs:
        lines.append(f"if _overlaps({x}, {y}):")
        lines.append(f'    raise ValueError("{names.entry}: output {x} overlaps {role} {y} in memory, and the kernels '
                     f'write {x} while {y} is {use}: pass tensors that do not share memory")')
    return lines


def host_loops(program: T.TileProgram, names: ModuleNames, lines: list[str]):
    """The kernels in launch order, each with the indentation of its launch line and the launcher's variables of
    its host loops (its arguments after the sizes), after appending to `lines` the `for` lines of the host loops
    it opens (`TileKernel.host`: consecutive kernels of one loop share it, whatever each kernel calls it)."""
    open_loops: list = []  # (key, the launcher's variable) of the host loops the lines are inside, outermost first
    for kernel in program.kernels:
        shared = 0
        while shared < min(len(open_loops), len(kernel.host)) and open_loops[shared][0] == kernel.host[shared].key:
            shared += 1
        del open_loops[shared:]
        for loop in kernel.host[shared:]:
            lo, hi = (names.code(T.simplify(e), _outer(open_loops, kernel)) for e in (loop.lower, loop.upper))
            var = names.var(loop.var)
            lines.append("    " * len(open_loops) + f"for {var} in range({lo}, {hi}):  # host loop")
            open_loops.append((loop.key, var))
        yield "    " * len(open_loops), kernel, [var for _, var in open_loops]


def _outer(open_loops: list, kernel: T.TileKernel) -> dict:
    """The kernel's names of the host loops open now -> the launcher's variables for them."""
    return {h.var: var for h, (_, var) in zip(kernel.host, open_loops)}


def epilogue(program: T.TileProgram, names: ModuleNames) -> list[str]:
    outs = [names.tensor(t.name) for t in program.outputs]
    return [f"return {', '.join(outs)}" if len(outs) > 1 else f"return {outs[0]}"]


def launch_order(program: T.TileProgram, names: ModuleNames) -> list[str]:
    """The body of an Ascend module's `launches()` where the schedule runs loops on the host (`host`): one `yield`
    of (KERNELS key, the host loops' values) per launch, inside the loops; [] when each kernel runs once."""
    if not any(k.host for k in program.kernels):
        return []
    lines = []  # every size is bound on Ascend (compiler/lower/pipeline.py `_passes`): the bounds are numbers
    for pad, kernel, host_vars in host_loops(program, names, lines):
        values = f"({host_vars[0]},)" if len(host_vars) == 1 else f"({', '.join(host_vars)})"
        lines.append(f'{pad}yield "{kernel.name}", {values}')
    return lines
