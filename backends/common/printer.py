"""What every printer does alike: lines at a depth, the kernel's locals, statement text, serial loops.

A printer (`backends/triton/emit.py`, `backends/tilelang/emit.py` -- which the Ascend 950 printer extends --
and `backends/ascend910b/emit.py`) subclasses `PrinterBase` and spells only its dialect:

* `loop_header(op, lo, hi)` -- the line that opens a serial loop (`for ko in tl.range(...)`, `T.Pipelined`);
* `index(expr)` -- an index expression of the tile program as code;
* `loop_var(var)` -- the identifier of a loop variable;
* `EMPTY_BODY` -- the statement of a loop that has nothing else to do;
* `BARRIER` -- the statement that makes every thread of a program wait for the others, its global-memory
  stores visible to them (a `Barrier` op, and the end of each iteration of a loop with `SerialLoop.barrier`:
  values passed through memory within a kernel).

It holds `program`, `locals` (backends/common/names.py), `lines`, `depth`, `counter` and `loops` (the serial loops
being printed, innermost last).
"""

from __future__ import annotations

import math
from typing import Callable

from tdsl.compiler.lower import tileir as T
from tdsl.compiler.errors import InternalError
from tdsl.compiler.model.functions import PRIMITIVES


def float_literal(value, spellings: dict) -> str:
    """A float constant as code in a dialect that spells "inf", "-inf" and "nan" as `spellings` says: `repr`
    would write the bare names `inf` and `nan`, which no module defines (a program's `0.0 / 0.0` folds to NaN,
    compiler/lower/loads.py `fold_constants`)."""
    value = float(value)
    if math.isnan(value):
        return spellings["nan"]
    if math.isinf(value):
        return spellings["inf" if value > 0 else "-inf"]
    if value == 0.0 and math.copysign(1.0, value) < 0.0 and "-0" in spellings:
        return spellings["-0"]  # a dialect that spells -0.0 as a constant of its own (Triton)
    return repr(value)


def call_code(spellings: dict, func: str, args: list, zeros: bool = True) -> str:
    """A primitive function of compiler/model/functions.py in a dialect: its spelling (`spelling_key`) filled with
    the arguments' code.  Every dialect spells every primitive; compositions reach the printers expanded."""
    if func not in spellings or len(args) != PRIMITIVES.get(func):
        raise InternalError(f"function {func}({', '.join(args)}) has no spelling here")
    return spellings[spelling_key(spellings, func, zeros)].format(*args)


def spelling_key(spellings: dict, func: str, zeros: bool = True) -> str:
    """The key of `func`'s spelling: a max / min whose zero no use can tell (`zeros` False: T.Call.zeros) takes the
    dialect's `max_either_zero` / `min_either_zero`, the hardware's, where it has one (else the IEEE form)."""
    either = f"{func}_either_zero"
    return either if not zeros and either in spellings else func


class PrinterBase:
    FRESH = "{stem}_{n}"  # how a fresh local is spelt
    EMPTY_BODY = "pass"
    BARRIER = None  # a dialect that passes values through memory spells it; the others are refused before printing

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def local(self, key: tuple, preferred: str) -> str:
        """The kernel's local for `key` (what it holds), spelt `preferred` unless that is taken."""
        return self.locals.local(key, preferred)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return self.local(("fresh", self.counter), self.FRESH.format(stem=stem, n=self.counter))

    def text(self, stmt: str) -> str:
        """The statement's .tdsl text, for comments."""
        return self.program.statements.get(stmt, stmt)

    @staticmethod
    def tile_note(tile: T.Tile) -> str:
        if not tile.axes:
            return ""
        return " [tile " + " x ".join(f"{a.iter}:{a.size}" for a in tile.axes) + "]"

    def serial(self, op: T.SerialLoop, body: Callable[[list], None]) -> None:
        """A serial loop: its note, its header, `body(op.body)` one level deeper, `loops` kept current."""
        lo, hi = self.index(T.simplify(op.lower)), self.index(T.simplify(op.upper))
        if op.note:
            self.emit(f"# {op.note}")
        self.emit(self.loop_header(op, lo, hi))
        self.depth += 1
        self.loops.append(op)
        body(op.body)
        if op.barrier:
            self.emit("# the next iteration reads elements this one stored: every thread waits")
            self.emit(self.barrier_code(f"loop {op.var}"))
        elif not op.body and self.EMPTY_BODY:
            self.emit(self.EMPTY_BODY)
        self.loops.pop()
        self.depth -= 1

    def barrier(self, op: T.Barrier) -> None:
        """Every thread waits for the stores of this iteration before reading them back (`Barrier`)."""
        if op.tensors:
            self.emit(f"# {', '.join(op.tensors)}: read back from memory below: every thread waits for the stores above")
        if op.overwrites:
            self.emit(f"# {', '.join(op.overwrites)}: overwritten below: every thread waits until all have read it")
        self.emit(self.barrier_code("a barrier"))

    def barrier_code(self, what: str) -> str:
        if self.BARRIER is None:
            raise InternalError(f"{what} needs a barrier, which this printer cannot spell")
        return self.BARRIER

    # the dialect's spellings

    def loop_header(self, op: T.SerialLoop, lo: str, hi: str) -> str:
        raise NotImplementedError

    def index(self, e: T.Expr) -> str:
        raise NotImplementedError

    def loop_var(self, var: str) -> str:
        raise NotImplementedError
