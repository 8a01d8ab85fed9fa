"""Compiled schedules as Python callables and torch custom ops.

    kernel = tdsl.compile("examples/rmsnorm.tdsl", "row_per_program", sizes={"M": 8})
    Y = kernel(X, g)        # torch.ops.tdsl.<kernel>_<key>: a custom op with a fake (meta) implementation,
                            # so a torch.compile'd model calls it without a graph break
    kernel.text             # the generated module; kernel.module, kernel.op

    s = prog.schedule(); s.split("C.i", 32); kernel = s.compile(target="nvidia")

Generated modules are cached on disk, keyed by everything the text depends on: the program's source, the
kernel, the sizes, the schedule's steps, target, backend and tdsl's version (`TDSL_CACHE_DIR`, default
`~/.cache/tdsl`).  A cached module is loaded without compiling again.  Run-time (`param`) sizes are read
off the input shapes by the module's launcher, so one kernel serves every size.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

from tdsl.backends.common.dtypes import TORCH_NAMES
from tdsl.frontend.diagnostics import TdslError

_OPS: dict[str, Callable] = {}  # op name -> the registered op (a name can be registered once per process)
_LIBRARIES: list = []  # the torch.library fragments holding kernels registered beside custom_op's own


@dataclass(frozen=True)
class Kernel:
    """A schedule compiled for one target: the module text, the loaded module and its torch custom op."""

    name: str  # the .tdsl kernel
    text: str
    module: ModuleType
    op: Callable  # the custom op (also torch.ops.tdsl.<name>_<key>): the kernel's inputs in order -> its outputs
    # output position -> position of the input it is stored in (`store_in`): the op updates that input in place and
    # returns only the other outputs; the call gives back the updated input in the output's place
    in_place: tuple = ()
    outputs: int = 1  # how many outputs the kernel has
    inputs: tuple = ()  # the kernel's input names, in order (a call may pass them by name)

    def __repr__(self) -> str:  # the module text is in .text: printing it whole drowns a session
        lines = self.text.count("\n") + 1
        return f"<tdsl Kernel {self.name}({', '.join(self.inputs)}): {self.outputs} output(s), module of {lines} lines>"

    def __call__(self, /, *args, **named):  # `self` positional only: an input may be called `self`
        inputs = self._arguments(args, named)
        got = self.op(*inputs)
        if not self.in_place:
            return got
        held = dict(self.in_place)
        rest = iter(got if isinstance(got, (tuple, list)) else (() if got is None else (got,)))
        outs = [inputs[held[n]] if n in held else next(rest) for n in range(self.outputs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _arguments(self, args: tuple, named: dict) -> tuple:
        """The inputs in order, from positions and names (the op itself knows them only as a0, a1, ...)."""
        takes = f"{self.name} takes {len(self.inputs)} input{'s' * (len(self.inputs) != 1)} ({', '.join(self.inputs)})"
        unknown = [k for k in named if k not in self.inputs]
        if unknown:
            raise TypeError(f"{takes}; no input is named {', '.join(unknown)}")
        if len(args) > len(self.inputs):
            raise TypeError(f"{takes}, got {len(args)}")
        twice = [k for k in self.inputs[:len(args)] if k in named]
        if twice:
            raise TypeError(f"{takes}; {', '.join(twice)} given by position and by name")
        values = list(args) + [named.get(k) for k in self.inputs[len(args):]]
        missing = [k for k, v in zip(self.inputs, values) if v is None]
        if missing:
            raise TypeError(f"{takes}; missing {', '.join(missing)}")
        import torch

        for k, v in zip(self.inputs, values):  # torch's dispatcher would name it a0 and print the whole value
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"{self.name}: {k} must be a torch.Tensor, got {type(v).__name__}")
        return tuple(values)


def cache_dir() -> Path:
    base = os.environ.get("TDSL_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tdsl"
    return Path(base)


@functools.lru_cache(maxsize=None)
def code_digest() -> str:
    """A digest of tdsl's own code (its Python files and templates): a cached module is reused only by the code
    that generated it, also in a checkout whose version number does not change."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(p for d in ("frontend", "compiler", "backends") for p in (root / d).rglob("*")
                       if p.suffix in (".py", ".j2", ".lark")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _write_whole(path: Path, text: str) -> None:
    """Write `path` so that no reader sees it in part: a killed run or two processes compiling the same kernel
    once left a truncated module that every later compile loaded (a SyntaxError until the cache was deleted)."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=path.name, suffix=".tmp", delete=False) as f:
        f.write(text)
    os.replace(f.name, path)


def compile_schedule(prog, sched, target: str = "nvidia", backend: Optional[str] = None,
                     schedule_name: str = "") -> Kernel:
    """The `Kernel` of a schedule of one of `prog`'s kernels (a block replayed, or built through the API)."""
    from tdsl import __version__
    from tdsl.compiler.driver.generate import generate_schedule, load_module, resolve_target

    kind, _, _ = resolve_target(target, backend)
    if kind != "nvidia":  # an Ascend module is a TileLang-Ascend program, run by that runtime on the device
        raise TdslError(f"tdsl.compile makes torch ops of NVIDIA kernels only; the {target} module runs through "
                        f"TileLang-Ascend's runtime on an Ascend device: write it with tdsl compile --target {target} "
                        f"-o OUT.py (or tdsl.compiler.driver.generate.generate), and check it here with tdsl run "
                        f"--target {target} (the NumPy model of the device)")
    model = sched.model
    key = hashlib.sha256(json.dumps({
        "version": __version__, "code": code_digest(), "source": prog.ast.source, "kernel": model.name,
        "sizes": {k: v for k, v in model.sizes.items()}, "steps": str(sched.trace),
        "target": target, "backend": backend,
    }, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = cache_dir() / key / f"{model.name}.py"
    if path.exists():
        text = path.read_text()
    else:
        text = generate_schedule(prog, sched, target, backend, schedule_name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_whole(path, text)
        except OSError as err:
            raise TdslError(f"cannot write the kernel cache at {cache_dir()}: {err.strerror or err}; set "
                            f"TDSL_CACHE_DIR to a folder this process can write") from None
    module = load_module(text, path)
    inputs = [t.name for t in model.inputs()]
    in_place = tuple((n, inputs.index(t.stored_in)) for n, t in enumerate(model.outputs()) if t.stored_in)
    return Kernel(model.name, text, module, _custom_op(model, module, key), in_place, len(model.outputs()),
                  tuple(inputs))


def _custom_op(model, module, key: str) -> Callable:
    """The module's launcher as `torch.ops.tdsl.<kernel>_<key>`, with a fake implementation from the shapes."""
    import torch

    from tdsl.compiler.driver.generate import python_name

    name = f"tdsl::{model.name.lower()}_{key}"  # kernel names are ASCII identifiers (the grammar's)
    if name in _OPS:
        return _OPS[name]
    inputs = model.inputs()
    outputs = [t for t in model.outputs() if not t.stored_in]  # one stored in an input updates it (`store_in`)
    kept = [not t.stored_in for t in model.outputs()]
    mutated = {t.stored_in for t in model.outputs() if t.stored_in}
    launch = getattr(module, python_name(module, model.name))
    # positional argument names: the program's tensor names may be anything the language allows
    args = ", ".join(f"Tensor{'(a!)' if t.name in mutated else ''} a{n}" for n, t in enumerate(inputs))
    results = "Tensor" if len(outputs) == 1 else "(" + ", ".join("Tensor" for _ in outputs) + ")"

    def run(*xs):
        got = launch(*xs)
        if len(kept) == len(outputs):
            return got
        got = [x for x, k in zip(got if isinstance(got, tuple) else (got,), kept) if k]
        return got[0] if len(got) == 1 else (tuple(got) if got else None)

    op = torch.library.custom_op(name, run, schema=f"({args}) -> {results}",
                                 mutates_args=tuple(f"a{n}" for n, t in enumerate(inputs) if t.name in mutated))
    where = _param_positions(model)

    def fake(*xs):
        devices = sorted({str(x.device) for x in xs})
        if len(devices) > 1:  # torch sends a call with one meta input here: no kernel takes inputs on two devices
            raise ValueError(f"{model.name}: the inputs are on several devices ({', '.join(devices)}); put them on one")
        sizes = {p: xs[n].shape[d] for p, (n, d) in where.items()}
        for p, (n, d) in where.items():  # as the launcher refuses it: torch.compile may drop an empty output's call
            torch._check_value(sizes[p] >= 1, lambda p=p, n=n, d=d: f"{model.name}: {p} = {sizes[p]} (dimension {d} "
                               f"of {inputs[n].name}): a size is at least 1")
        # a kernel without inputs allocates where its launcher does: the CPU under Triton's interpreter, else the GPU
        device = xs[0].device if xs else "cpu" if getattr(module, "_INTERPRET", False) else "cuda"
        made = [torch.empty([_dimension(d, sizes) for d in t.shape], dtype=getattr(torch, TORCH_NAMES[t.dtype]),
                            device=device) for t in outputs]
        return made[0] if len(made) == 1 else (tuple(made) if made else None)

    op.register_fake(fake)
    if not mutated:  # torch.compile traces a call with inputs that require grad through the op's autograd formula
        op.register_autograd(functools.partial(_no_backward, model.name))
    else:
        _refuse_grad_in_place(name, model.name, sorted(mutated))
    _OPS[name] = op
    return op


def _refuse_grad_in_place(name: str, kernel: str, updated: list) -> None:
    """A kernel that updates an input in place (`store_in`) is a mutating op, which torch allows no autograd
    formula; without one torch ran it on tensors that require grad and the gradients were silently wrong (the
    updated input's grad 1, the other inputs' none: probe KK).  Its autograd kernel refuses such a call where
    grad mode is on, and otherwise passes the call on to the op's kernels below autograd."""
    import torch

    namespace, op_name = name.split("::")
    library = torch.library.Library(namespace, "FRAGMENT")
    overload = getattr(getattr(torch.ops, namespace), op_name).default

    def autograd(keyset, *xs):
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in xs):
            raise RuntimeError(f"{kernel}: a tdsl kernel that updates {', '.join(updated)} in place has no backward; "
                               f"call it under torch.no_grad() or on tensors that do not require grad")
        return overload.redispatch(keyset & torch._C._after_autograd_keyset, *xs)

    library.impl(op_name, autograd, "Autograd", with_keyset=True)
    _LIBRARIES.append(library)  # an op's kernels are registered while its Library object lives


def _no_backward(kernel: str, ctx, *grads):
    """The op's autograd formula: the forward runs (also under torch.compile with parameters that require grad,
    which failed without a formula: probe of the 24th session), a backward pass is refused."""
    raise RuntimeError(f"{kernel}: a tdsl kernel has no backward; call it under torch.no_grad(), on tensors that "
                       f"do not require grad, or write the gradient as its own kernel")


def _dimension(d, sizes: dict):
    """A declared dimension at the sizes a fake call reads off its inputs (symbolic under torch.compile): a
    number, a run-time size, or an affine expression of sizes as the model writes it (`(N + 1)`, an output of
    one more element than its input: it was passed to torch.empty as text, probe of the 24th session)."""
    from tdsl.backends.common.python_expr import dimension_python

    if isinstance(d, int):
        return d
    # the model's affine text as Python: sizes, numbers, + - * // %, min, max
    return eval(dimension_python(d), {"__builtins__": {"min": min, "max": max}}, dict(sizes))  # noqa: S307


def _param_positions(model) -> dict:
    """Each run-time size -> (input position, dimension) it is read from, as the launcher reads it."""
    where = {}
    for p in model.params:
        where[p] = next((n, d) for n, t in enumerate(model.inputs()) for d, dim in enumerate(t.shape) if dim == p)
    return where
