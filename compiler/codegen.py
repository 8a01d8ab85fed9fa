"""From a program and a schedule to generated source and an importable module.

    text = generate(prog, "fused", target="nvidia", backend="triton")
    module = load_module(text, "out/gemm_silu.py")      # module.gemm_silu(A, W) -> Y

Generated code is always written to a file before it is imported: Triton
and TileLang read a kernel's source through `inspect`, which fails for code
that was only `exec`'d from a string.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Optional

from tdsl.frontend.diagnostics import TdslError
from tdsl.frontend.printer import expr_text

from .tile import lower

TARGETS = {"nvidia": ("triton",)}


def generate(prog, schedule_name: Optional[str], target: str = "nvidia", backend: Optional[str] = None,
             kernel: Optional[str] = None) -> str:
    if target not in TARGETS:
        raise TdslError(f"unknown target '{target}' (targets: {', '.join(TARGETS)})")
    backend = backend or TARGETS[target][0]
    if backend not in TARGETS[target]:
        raise TdslError(f"target {target} has no backend '{backend}' (backends: {', '.join(TARGETS[target])})")
    sched = prog.schedule(schedule_name, kernel=kernel)
    program = lower(sched)
    from tdsl.backends.triton import emit_module

    info = prog.kernels[sched.model.name]
    return emit_module(
        program,
        source=Path(prog.filename).name,
        schedule_name=schedule_name or "",
        statements=[_statement_text(si) for si in info.stmts],
        signature=_signature(info),
    )


def _signature(info) -> str:
    k = info.kernel
    params = ", ".join(f"{p.name}: {p.type.dtype}[{', '.join(expr_text(d) for d in p.type.shape)}]" for p in k.params)
    results = ", ".join(f"{p.name}: {p.type.dtype}[{', '.join(expr_text(d) for d in p.type.shape)}]" for p in k.results)
    return f"kernel {k.name}({params}) -> ({results})"


def _statement_text(si) -> str:
    s = si.stmt
    head = f"{s.target}[{', '.join(n.name for n in s.iters)}]"
    return f"{head}: {si.dtype} = {expr_text(s.value)}"


def load_module(text: str, path) -> object:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    name = f"tdsl_generated_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
