"""What a buffer plan holds: the planned buffers (`PlannedBuffer`), the data moved between memory levels
(`TileAccess`), each kernel's plan (`KernelPlan`) and the capacity violations (`Violation`, `CapacityError`); how
their bytes are counted and how they are written in messages.  The model they describe is in
compiler/analysis/buffer_plan.py; compiler/analysis/buffer_planner.py fills them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.model.dtypes import BYTES
from tdsl.compiler.schedule.tree import Loop, Node

DTYPE_BYTES = BYTES  # compiler/model/dtypes.py


@dataclass
class PlannedBuffer:
    tensor: str
    scope: str
    kind: str  # read | write | temp | tile
    loop: str  # allocated for one iteration of this loop ("" = once per kernel)
    shape: list[int]
    dtype: str
    stages: int
    stmts: list[str]  # the statements that use it
    kernel: int = 0
    first: str = ""  # first and last statement using it in one iteration of `loop`: freed after `last`
    last: str = ""
    live: tuple = (0, 0)  # positions of first and last (statement order within the kernel)
    shares: Optional[str] = None  # label of the buffer whose memory it reuses (in place, or a later slot user)
    source: str = ""  # where its data comes from: "global", a scope, or "" (computed here)
    at: Optional[Loop] = field(default=None, compare=False, repr=False)  # the loop named by `loop` (identity)

    @property
    def bytes_per_copy(self) -> int:
        n = DTYPE_BYTES[self.dtype]
        for d in self.shape:
            n *= d
        return n

    @property
    def bytes(self) -> int:
        return self.bytes_per_copy * self.stages

    @property
    def label(self) -> str:
        return f"{self.tensor}@{self.loop or 'kernel'}" + (f"[{self.kind}]" if self.kind in ("tile", "temp") else "")

    def describe(self) -> str:
        shape = "x".join(map(str, self.shape)) or "1"
        stages = f" x {self.stages} stages" if self.stages > 1 else ""
        return f"{self.label} {shape} {self.dtype}{stages} = {fmt_bytes(self.bytes)}"


@dataclass
class TileAccess:
    """Data moved for one tensor between two memory levels, once per iteration of `loop`."""

    tensor: str
    kind: str  # read | write
    src: str  # "global" or a scope name
    dst: str  # a scope name, "compute" (operands read by the compute units) or "global"
    loop: Optional[Loop]
    stmts: list[str]
    touched: isl.Map  # loop values -> tensor elements (the region one iteration moves)
    dtype: str  # element type of the bytes moved
    buffer: Optional[PlannedBuffer] = None

    @property
    def loop_name(self) -> str:
        return self.loop.name if self.loop is not None else ""


@dataclass
class Violation:
    kernel: str
    scope: str
    need: int
    capacity: int
    buffers: list[PlannedBuffer]

    @property
    def over(self) -> int:
        return self.need - self.capacity

    def text(self) -> str:
        names = ", ".join(b.describe() for b in self.buffers)
        return (f"kernel {self.kernel}: {self.scope} needs {fmt_bytes(self.need)} ({self.need:,} B) per block but "
                f"the target has {fmt_bytes(self.capacity)} ({self.capacity:,} B): {self.over:,} B over; "
                f"live together: {names}")


class CapacityError(TdslError):
    """A schedule whose buffers do not fit a target's on-chip memory (rejected like an illegal schedule)."""

    exit_code = 1
    rule = "capacity"

    def __init__(self, target: str, violations: list[Violation], schedule: Optional[str] = None):
        self.target = target
        self.violations = violations
        what = f"schedule {schedule}" if schedule else "the schedule"
        lines = [f"{what} does not fit {target} [rule capacity]"] + ["  " + v.text() for v in violations]
        super().__init__("\n".join(lines))


@dataclass
class KernelPlan:
    index: int
    name: str
    root: Node
    stmts: list[str]  # in schedule order (the positions of `live`)
    buffers: list[PlannedBuffer]
    accesses: list[TileAccess]
    working_set: dict  # scope -> peak bytes per block
    peak_buffers: dict  # scope -> buffers live at that peak
    warps: int
    grid_loops: list[Loop]
    violations: list[Violation] = field(default_factory=list)
    slots: list = field(default_factory=list)  # the buffers grouped by the memory they share (one list per slot)
    serial: tuple = ()  # the kernel's loops that run serially (serial_loops.py)
    read_back: frozenset = frozenset()  # tensors the kernel produces and reads back from global memory (a reader
    # takes another tile than its producer wrote, or a later iteration's; buffer_planner.py `_memory_temps`)

    @property
    def serial_loops(self) -> frozenset:
        """The names of the serial loops."""
        return frozenset(l.name for l in self.serial)

    def is_tile_level(self, loop: Loop) -> bool:
        """Bound to the grid or run serially: a loop that indexes tiles (a point loop holds lanes of one).  By
        identity: the loops of several statements share names."""
        return bool(loop.bind) or any(l is loop for l in self.serial)


def fmt_bytes(n: int) -> str:
    if n >= 1 << 30 and n % (1 << 20) == 0 and n >= 8 << 30:
        return f"{n / (1 << 30):g} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.4g} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.4g} KiB"
    return f"{n} B"
