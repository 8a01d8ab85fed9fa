"""From a program and a schedule to generated source and an importable module.

    text = generate(prog, "fused", target="nvidia", backend="triton")
    module = load_module(text, "out/gemm_silu.py")      # module.gemm_silu(A, W) -> Y

Generated code is always written to a file before it is imported: Triton
and TileLang read a kernel's source through `inspect`, which fails for code
that was only `exec`'d from a string.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from tdsl.backends import emit_module
from tdsl.backends.common.dtypes import TORCH_NAMES
from tdsl.backends.common.text import comment_text
from tdsl.frontend.diagnostics import TdslError
from tdsl.frontend.printer import expr_text

from tdsl.compiler.errors import BackendError, StepError
from tdsl.compiler.analysis.buffer_plan import CapacityError
from tdsl.compiler.lower.pipeline import BACKENDS, lower_for

# code generator family (compiler/targets FAMILY) -> its code generators, the default first
TARGETS = {
    "nvidia": ("triton", "tilelang"),
    "ascend-950": ("tilelang",),  # mainline TileLang's Ascend dialect (tilelang.ascend.language)
    "ascend-910b": ("tilelang-ascend",),  # the tilelang-ascend API of the chapter's 5.4.5
}


def generate(prog, schedule_name: Optional[str], target: str = "nvidia", backend: Optional[str] = None,
             kernel: Optional[str] = None) -> str:
    """The module text of one schedule block (None: program order) for a target; a backend's refusal points at
    the schedule block (or, for program order, at the kernel) it refuses."""
    resolve_target(target, backend)
    sched = prog.schedule(schedule_name, kernel=kernel)
    try:
        return generate_schedule(prog, sched, target, backend, schedule_name)
    except (BackendError, CapacityError) as err:
        locate(err, prog, schedule_name, kernel)
        raise


def resolve_target(target: str, backend: Optional[str]) -> tuple[str, str, str]:
    """(code generator family, backend, device) of a target name (a device, or `nvidia`: compiler/targets)."""
    from tdsl.compiler.targets import device_name, family

    device = device_name(target)  # TdslError for an unknown name
    kind = family(device)
    backend = backend or TARGETS[kind][0]
    if backend not in TARGETS[kind]:
        raise TdslError(f"target {target} has no backend '{backend}' (backends: {', '.join(TARGETS[kind])})")
    return kind, backend, device


def code_generator(target: str, backend: Optional[str] = None) -> tuple[str, str]:
    """(the code generator `backend` or the target's default, its key in compiler/lower/pipeline.BACKENDS)."""
    kind, backend, _ = resolve_target(target, backend)
    return backend, BACKENDS[kind, backend]


def locate(err: TdslError, prog, schedule_name: Optional[str], kernel: Optional[str]) -> None:
    """Give the error's message the file:line:col of the schedule block (the error keeps its type)."""
    if schedule_name is not None:
        span = prog.block(schedule_name).span
    else:
        span = prog.kernels[prog.kernel_name(kernel)].kernel.span
    err.args = (StepError(err, span, prog.ast.source, prog.ast.filename).args[0],)


def generate_schedule(prog, sched, target: str = "nvidia", backend: Optional[str] = None,
                      schedule_name: str = "") -> str:
    """The module text of a `Schedule` built on one of `prog`'s kernels (by a block or through the Python API)."""
    kind, backend, device = resolve_target(target, backend)
    program = lower_for(sched, BACKENDS[kind, backend], device)
    info = prog.kernels[sched.model.name]
    # The one place where text from the user (file name, schedule name, names in statements) is handed to the
    # templates and printers of every backend: all of it passes comment_text, so none of it can become code.
    program = _comments_quoted(program)
    common = dict(
        source=comment_text(Path(prog.filename).name),
        schedule_name=comment_text(schedule_name or ""),
        statements=[comment_text(_statement_text(si)) for si in info.stmts],
        signature=comment_text(_signature(info)),
    )
    return emit_module(BACKENDS[kind, backend], program, **common)


def _comments_quoted(program):
    """The tile program with the text its comments show (schedule steps, statements, kernel comments) quoted."""
    schedule = "\n".join(comment_text(line) for line in program.schedule.split("\n"))  # other breaks escaped
    statements = {name: comment_text(text) for name, text in program.statements.items()}
    kernels = [replace(k, comment=comment_text(k.comment)) for k in program.kernels]
    return replace(program, schedule=schedule, statements=statements, kernels=kernels)


def _signature(info) -> str:
    k = info.kernel

    def decl(p) -> str:
        stored = f" in {p.stored_in}" if p.stored_in else ""
        return f"{p.name}: {p.type.dtype}[{', '.join(expr_text(d) for d in p.type.shape)}]{stored}"

    return f"kernel {k.name}({', '.join(map(decl, k.params))}) -> ({', '.join(map(decl, k.results))})"


def _statement_text(si) -> str:
    s = si.stmt
    head = f"{s.target}[{', '.join(n.name for n in s.iters)}]"
    return f"{head}: {si.dtype} = {expr_text(s.value)}"


def load_module(text: str, path) -> object:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")  # Python reads source as UTF-8, whatever the locale
    # A module name is a dotted path: a stem such as "a.b" (or one with spaces or newlines) would name a
    # submodule of a package that does not exist, and lookups through __module__ (pickle, Triton) would fail.
    stem = re.sub(r"\W", "_", path.stem, flags=re.ASCII)
    name = f"tdsl_generated_{stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- running a generated module



def to_torch(array, dtype: str, device: str):
    """A numpy array in a tdsl storage dtype -> a torch tensor of the same dtype (exact)."""
    import numpy as np
    import torch

    as_f32 = torch.from_numpy(np.ascontiguousarray(array).astype(np.float32))
    return as_f32.to(getattr(torch, TORCH_NAMES[dtype])).to(device)


def python_name(module, name: str) -> str:
    """The identifier a generated module uses for a program name (kernel, tensor, size): the same name, unless
    it would collide with Python or the module's own names (then the module's RENAMED says which)."""
    return getattr(module, "RENAMED", {}).get(name, name)


def kernel_device() -> str:
    """Where a generated Triton module runs here: "cuda", or "cpu" under the Triton interpreter (switched on
    before the module is loaded: @triton.jit reads TRITON_INTERPRET when it decorates a kernel)."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    os.environ["TRITON_INTERPRET"] = "1"
    return "cpu"


def run_generated(module, model, inputs: dict, device: str = "cpu", guard: int = 0) -> dict:
    """Call the generated launcher on `inputs`; outputs come back as float32 numpy arrays.

    With `guard` > 0 each output is the middle of a NaN-filled buffer with `guard`
    elements on both sides, and a kernel that writes outside its output is reported.
    """
    import numpy as np
    import torch

    args = [to_torch(inputs[t.name], t.dtype, device) for t in model.inputs()]
    kwargs, buffers = {}, {}
    in_place = getattr(module, "IN_PLACE", {})  # outputs the launcher writes over an input (`store_in`)
    for t in model.outputs():
        if t.name in in_place:
            continue
        numel = int(np.prod(t.shape))
        buf = torch.full((numel + 2 * guard,), float("nan"), dtype=torch.float32, device=device)
        buf = buf.to(getattr(torch, TORCH_NAMES[t.dtype]))
        buffers[t.name] = buf
        kwargs[python_name(module, t.name)] = buf[guard: guard + numel].view(*t.shape)
    launch = getattr(module, python_name(module, model.name))
    if device == "cpu":  # the Triton interpreter: loads and stores are bounds-checked (else they corrupt memory)
        from tdsl.backends.triton.interpreter_bounds import checked_memory

        # lanes outside the domain may hold NaN that no store writes (the padding rows of a tile masked once,
        # compiler/lower/passes/masked_scores.py); the interpreter's NumPy would warn about each
        with checked_memory(), np.errstate(invalid="ignore"):
            out = launch(*args, **kwargs)
    else:
        out = launch(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    results = {}
    for t, o in zip(model.outputs(), outs):
        if guard and t.name in buffers:
            buf = buffers[t.name].float().cpu()
            spoiled = (~torch.isnan(buf[:guard])).sum().item() + (~torch.isnan(buf[-guard:])).sum().item()
            if spoiled:
                raise AssertionError(f"the kernel wrote {spoiled} elements outside output {t.name}")
        results[t.name] = o.float().cpu().numpy()
    return results
