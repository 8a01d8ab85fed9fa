"""The Python entry points: load a .tdsl file, get kernel models and schedules.

    prog = tdsl.load("examples/gemm_silu.tdsl")
    s = prog.schedule("tiled")        # a named schedule block, replayed step by step
    s = prog.schedule()               # a fresh schedule (program order) to build by hand
    model = prog.model(sizes={"M": 8})
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from collections.abc import Mapping
from typing import Optional

from tdsl.frontend import ast
from tdsl.frontend.check import load_file, load_source
from tdsl.frontend.limits import plain_int
from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.model.program import KernelModel, build_model
from tdsl.compiler.schedule.schedule import Schedule, apply_block


class Program:
    def __init__(self, tree: ast.Program, kernels: dict, sizes: Optional[dict] = None):
        self.ast = tree
        self.kernels = kernels
        self.sizes = _sizes_given(sizes)

    @property
    def filename(self) -> str:
        return self.ast.filename

    @property
    def schedule_names(self) -> list[str]:
        return [b.name for b in self.ast.schedules]

    def kernel_name(self, kernel: Optional[str] = None) -> str:
        if not self.kernels:
            raise TdslError(f"{self.filename} defines no kernel: a program needs a 'kernel NAME(...) -> ... {{ ... }}'")
        if kernel is None:
            if len(self.kernels) > 1:
                raise TdslError(f"{self.filename} has several kernels ({', '.join(self.kernels)}); name one (--kernel "
                                f"NAME, or kernel=NAME in the Python API)")
            return next(iter(self.kernels))
        if kernel not in self.kernels:
            raise TdslError(f"{self.filename} has no kernel '{kernel}' (kernels: {', '.join(self.kernels)})")
        return kernel

    def model(self, kernel: Optional[str] = None, sizes: Optional[dict] = None) -> KernelModel:
        info = self.kernels[self.kernel_name(kernel)]
        merged = {**self.sizes, **_sizes_given(sizes)}
        try:
            return build_model(info, merged)
        except TdslError as err:
            if hasattr(err, "located"):
                err.located(self.ast.source, self.ast.filename)
            raise

    def block_kernel(self, block: ast.ScheduleBlock, kernel: Optional[str] = None) -> str:
        """The kernel a schedule block applies to; `kernel`, where given, must be that one."""
        if kernel is not None and block.kernel not in (None, kernel):
            self.kernel_name(kernel)  # an unknown kernel is reported as such
            raise TdslError(f"schedule '{block.name}' is for kernel {block.kernel}, not {kernel}: name one of "
                            f"{kernel}'s schedules ({', '.join(self.schedules_of(kernel)) or 'it has none'}) or "
                            f"--kernel {block.kernel}")
        return block.kernel or self.kernel_name(kernel)

    def schedules_of(self, kernel: str) -> list[str]:
        """The names of the schedule blocks written for `kernel`, in the file's order."""
        return [b.name for b in self.ast.schedules if b.kernel in (None, kernel)]

    def select(self, kernel: Optional[str] = None, schedule: Optional[str] = None) -> tuple[str, Optional[str]]:
        """(kernel, schedule block name or None for program order) that a command works on.  A named block
        fixes the kernel; otherwise the kernel (named, or the program's only one) and its first block, or
        program order for `schedule == "none"` or a kernel without blocks."""
        if schedule not in (None, "none"):
            return self.block_kernel(self.block(schedule), kernel), schedule
        kernel = self.kernel_name(kernel)
        if schedule == "none":
            return kernel, None
        return kernel, next(iter(self.schedules_of(kernel)), None)

    def run_time_sizes(self, kernel: Optional[str] = None) -> list[str]:
        """`kernel`'s run-time sizes (`param`), in the order the program declares them."""
        return [name for name, decl in self.kernels[self.kernel_name(kernel)].sizes.items() if decl.is_param]

    def at_run_time(self, kernel: Optional[str] = None) -> "Program":
        """This program with the values given to `kernel`'s run-time sizes dropped, its `const` overrides kept:
        the program a kernel that reads those sizes off its inputs' shapes is compiled from."""
        params = set(self.run_time_sizes(kernel))
        return Program(self.ast, self.kernels, {name: v for name, v in self.sizes.items() if name not in params})

    def block(self, name: str) -> ast.ScheduleBlock:
        for block in self.ast.schedules:
            if block.name == name:
                return block
        known = ", ".join(self.schedule_names) or "none"
        raise TdslError(f"{self.filename} has no schedule '{name}' (schedules: {known})")

    def schedule(self, name: Optional[str] = None, kernel: Optional[str] = None, sizes: Optional[dict] = None) -> Schedule:
        """A named schedule block replayed on the kernel, or a fresh schedule when `name` is None."""
        if name is None:
            return Schedule(self.model(kernel, sizes), program=self)
        block = self.block(name)
        sched = Schedule(self.model(self.block_kernel(block, kernel), sizes), name, program=self)
        return apply_block(sched, block, self.ast.source, self.ast.filename)


def _sizes_given(sizes) -> dict:
    """`sizes=` of load/loads: names to values (checked against the kernel's sizes when a model is built)."""
    if sizes is None:
        return {}
    if not isinstance(sizes, Mapping):
        raise TdslError(f"sizes must map size names to values, e.g. {{'N': 64}}; got {type(sizes).__name__} {sizes!r}")
    bad = [k for k in sizes if not isinstance(k, str)]
    if bad:
        raise TdslError(f"sizes must map size names (strings) to values; got the key {bad[0]!r}")
    return {k: plain_int(v) for k, v in sizes.items()}  # the model checks each value's range


def load(path, sizes: Optional[dict] = None) -> Program:
    if not isinstance(path, (str, PathLike)):  # pathlib's own TypeError named no argument (probe KK)
        raise TypeError(f"load takes the path of a .tdsl file (a str or a path), got {type(path).__name__}; "
                        f"tdsl.loads takes source text")
    tree, kernels = load_file(Path(path))
    return Program(tree, kernels, sizes)


def loads(text: str, filename: str = "<string>", sizes: Optional[dict] = None) -> Program:
    if not isinstance(text, str):
        raise TypeError(f"loads takes .tdsl source text (a str), got {type(text).__name__}")
    tree, kernels = load_source(text, filename)
    return Program(tree, kernels, sizes)
