"""What every torch launcher of a generated module does around its kernel launches.

Bind run-time sizes from the input shapes, check each input's type, dtype and shape, allocate (or check)
the outputs and the intermediates that live between launches; after the launches, return the outputs.
The launch lines themselves are the backend's.
"""

from __future__ import annotations

from tdsl.compiler import tileir as T


def shape_code(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def bind_params(program: T.TileProgram) -> list[str]:
    """Run-time sizes are read off the input shapes (the first input dim equal to the size's name)."""
    lines = []
    for p in [n for n, v in program.sizes.items() if v is None]:
        where = next(((t.name, d) for t in program.inputs for d, dim in enumerate(t.shape) if dim == p), None)
        if where is None:
            raise ValueError(f"run-time size {p} does not appear as a dimension of any input")
        lines.append(f"{p} = {where[0]}.shape[{where[1]}]")
    return lines


def prologue(program: T.TileProgram) -> list[str]:
    lines = bind_params(program)
    for t in program.inputs:
        lines.append(f'{t.name} = _check({t.name}, "{t.name}", "{t.dtype}", {shape_code(t.shape)})')
    device = program.inputs[0].name + ".device" if program.inputs else '"cuda"'
    for t in program.outputs:
        lines.append(f"if {t.name} is None:")
        lines.append(f"    {t.name} = torch.empty({shape_code(t.shape)}, dtype=_TORCH_DTYPES[\"{t.dtype}\"], device={device})")
        lines.append(f"elif not {t.name}.is_contiguous():")
        lines.append(f'    raise ValueError("{program.name}: output {t.name} must be contiguous")')
        lines.append("else:")
        lines.append(f'    _check({t.name}, "{t.name}", "{t.dtype}", {shape_code(t.shape)})')
    for t in program.temps:
        lines.append(f"{t.name} = torch.empty({shape_code(t.shape)}, dtype=_TORCH_DTYPES[\"{t.dtype}\"], device={device})"
                     f"  # intermediate between launches")
    return lines


def epilogue(program: T.TileProgram) -> list[str]:
    outs = [t.name for t in program.outputs]
    return [f"return {', '.join(outs)}" if len(outs) > 1 else f"return {outs[0]}"]
