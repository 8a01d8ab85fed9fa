"""Semantic checks and name resolution of a parsed program.

`check_program(program)` verifies everything the grammar cannot (names,
ranks, dtypes, affine indices, definition order, where reductions and
comparisons may appear) and resolves, per kernel, the tensors with their
shapes and, per statement, the storage dtype and the extent of every
iterator.  The first problem found is raised as a located `SourceError`.

This module holds the entry points and the checks of the program as a whole (sizes, kernel names, the kernel
each schedule block applies to); the rest is split by what it decides:

* frontend/check_kernel.py -- one kernel: declarations, statements in order, reductions, conditions, values;
* frontend/check_index.py -- affine indices, conditions and dimensions, compile-time values, iterator extents;
* frontend/check_common.py -- the resolved records, the functions and reductions, the message helpers;
* frontend/source.py -- reading a .tdsl file (located errors for bytes that are not UTF-8).

Every name of `__all__` is importable from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

from tdsl.frontend import ast
from tdsl.frontend.check_common import (
    FUNCTION_ARITY,
    REDUCTIONS,
    KernelInfo,
    StmtInfo,
    TensorInfo,
    _did_you_mean,
    _fail,
    _word_span,
)
from tdsl.frontend.check_kernel import _KernelChecker
from tdsl.frontend.diagnostics import SourceError
from tdsl.frontend.limits import MAX_INT
from tdsl.frontend.parser import COMBINE_POLICIES, format_expr, parse
from tdsl.frontend.source import read_source

__all__ = [
    "TensorInfo",
    "StmtInfo",
    "KernelInfo",
    "check_program",
    "load_source",
    "load_file",
    "format_expr",
    "FUNCTION_ARITY",
    "REDUCTIONS",
    "COMBINE_POLICIES",
]


# ---------------------------------------------------------------- entry points


def check_program(program: ast.Program) -> dict[str, KernelInfo]:
    """Check a parsed program; return the resolved kernels by name."""
    try:
        sizes = _collect_sizes(program.sizes)
        kernels = _check_kernels(program.kernels, sizes)
        _attach_schedules(program.schedules, kernels)
        return kernels
    except SourceError as err:
        raise err.located(program.source, program.filename)
    except RecursionError:
        raise SourceError("the program is nested too deeply", None).located(program.source, program.filename) from None


def load_source(text: str, filename: str = "<string>") -> tuple[ast.Program, dict[str, KernelInfo]]:
    """Parse and check program text."""
    for what, value in (("program text", text), ("file name", filename)):
        if not isinstance(value, str):  # bytes from a file opened in binary mode, a None file name
            raise TypeError(f"the {what} must be a str, got {type(value).__name__}")
    program = parse(text, filename)
    return program, check_program(program)


def load_file(path: Union[str, Path]) -> tuple[ast.Program, dict[str, KernelInfo]]:
    """Parse and check a .tdsl file; an unreadable file is a `TdslError`."""
    return load_source(read_source(path), str(path))


# ---------------------------------------------------------------- helpers


def _header(block: ast.ScheduleBlock) -> ast.Span:
    # Blocks span many lines; point at their `schedule` keyword.
    return _word_span(block.span, "schedule")


# ---------------------------------------------------------------- sizes, kernels, schedules


def _collect_sizes(decls: list[ast.SizeDecl]) -> dict[str, ast.SizeDecl]:
    sizes: dict[str, ast.SizeDecl] = {}
    for decl in decls:
        if decl.name in sizes:
            first = sizes[decl.name].span.line
            _fail(f"duplicate definition of size '{decl.name}' (first defined at line {first})", decl.span)
        _check_size_value(decl)
        sizes[decl.name] = decl
    return sizes


def _check_size_value(decl: ast.SizeDecl) -> None:
    """An int `const` is a size: an extent of loops and tensors, a 32-bit integer in generated kernels."""
    value = decl.value
    if isinstance(value, int) and not decl.is_param and not 1 <= value <= MAX_INT:
        _fail(f"size '{decl.name}' is {value}, but a size must be between 1 and {MAX_INT} (2^31 - 1)", decl.span)


def _check_kernels(kernels: list[ast.Kernel], sizes: dict[str, ast.SizeDecl]) -> dict[str, KernelInfo]:
    infos: dict[str, KernelInfo] = {}
    for kernel in kernels:
        if kernel.name in infos:
            first = infos[kernel.name].kernel.span.line
            message = f"duplicate definition of kernel '{kernel.name}' (first defined at line {first})"
            _fail(message, _word_span(kernel.span, "kernel"))
        infos[kernel.name] = _KernelChecker(kernel, sizes).run()
    return infos


def _attach_schedules(blocks: list[ast.ScheduleBlock], kernels: dict[str, KernelInfo]) -> None:
    """Resolve which kernel each schedule block applies to (steps are the scheduler's business)."""
    seen: dict[str, ast.ScheduleBlock] = {}
    for block in blocks:
        if block.name == "none":  # `--schedule none` on the command line means program order
            _fail("a schedule cannot be called 'none': `--schedule none` means program order; rename the block",
                  block.name_span)
        if block.name in seen:
            first = seen[block.name].span.line
            _fail(f"duplicate definition of schedule '{block.name}' (first defined at line {first})", _header(block))
        seen[block.name] = block
        if block.kernel is not None:
            if block.kernel not in kernels:
                hint = _did_you_mean(block.kernel, kernels)
                _fail(f"unknown kernel '{block.kernel}' in schedule '{block.name}'{hint}", block.kernel_span)
            kernels[block.kernel].schedules.append(block)
        elif not kernels:
            _fail(f"schedule '{block.name}' has no kernel to apply to: the program defines no kernel", _header(block))
        elif len(kernels) > 1:
            _fail(
                f"schedule '{block.name}' must name its kernel ('schedule {block.name} for KERNEL'): "
                f"the program defines several ({', '.join(kernels)})",
                _header(block),
            )
        else:
            next(iter(kernels.values())).schedules.append(block)
