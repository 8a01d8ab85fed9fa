"""Tile-size sweeps: the cost of a schedule for every combination of factors, and the table of them.

`tdsl cost --sweep` (and `--fit`, a sweep whose one loop takes the largest factor that fits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import fmt_bytes
from tdsl.compiler.analysis.cost.program import analyze
from tdsl.compiler.analysis.cost.report import fmt_mib
from tdsl.compiler.analysis.cost.results import ProgramCost
from tdsl.compiler.analysis.cost.tiling import build_block, fit, with_factors
from tdsl.compiler.targets import get_target


@dataclass
class SweepRow:
    factors: dict  # loop name -> factor used
    cost: Optional[ProgramCost]
    error: Optional[str] = None
    fitted: Optional[str] = None  # the loop whose factor was fitted to capacity


def sweep(prog, schedule: str, target, axes: list, fit_loop: Optional[str] = None, kernel=None,
          regs: Optional[int] = None) -> list[SweepRow]:
    """Cost of the schedule for every combination of factors.

    `axes` is a list of (loop names, values): the loops of one entry take each value together (m = n), the
    entries combine as a product.  With `fit_loop`, that loop's factor is the largest that fits the target."""
    import itertools

    tgt = get_target(target)
    block = prog.block(schedule)
    named = [n for names, _ in axes for n in names] + ([fit_loop] if fit_loop else [])
    with_factors(block, {n: 1 for n in named})  # every loop named must come from a split or tile of the block
    rows = []
    for combo in itertools.product(*[[(names, v) for v in values] for names, values in axes]):
        factors = {name: v for names, v in combo for name in names}
        try:
            if fit_loop is not None:
                best = fit(prog, schedule, tgt, fit_loop, factors, kernel)
                if best is None:
                    rows.append(SweepRow(factors, None, f"no factor of {fit_loop} fits {tgt.name}", fit_loop))
                    continue
                factors = {**factors, fit_loop: best}
            sched = build_block(prog, with_factors(block, factors), kernel)
            rows.append(SweepRow(factors, analyze(sched, tgt, regs), None, fit_loop))
        except TdslError as err:
            rows.append(SweepRow(factors, None, str(err).split("\n")[0], fit_loop))
    return rows


def sweep_table(rows: list[SweepRow], target) -> str:
    """The sweep as a table in the form of the chapter's (5.2.2, 5.3.3)."""
    tgt = get_target(target)
    if not rows:
        return "(no rows)"
    names = list(rows[0].factors)
    scopes = []
    for r in rows:
        if r.cost:
            for k in r.cost.kernels:
                for s in k.working_set:
                    if s not in scopes and tgt.scope(s).hard:
                        scopes.append(s)
    loops = list(names)
    header = [n + (" (fitted)" if n == rows[0].fitted else "") for n in names]
    header += [f"{s} per block" for s in scopes] + ["resident", "global traffic", "intensity"]
    header += [f"{n} iterations" for n in loops]
    table = [header]
    for r in rows:
        cells = [str(r.factors[n]) for n in names]
        if r.cost is None:
            table.append(cells + [f"({r.error})"])
            continue
        c = r.cost
        for s in scopes:
            n = max((k.working_set.get(s, 0) for k in c.kernels), default=0)
            over = any(v.scope == s for v in c.violations)
            cells.append(fmt_bytes(n) + (" OVER" if over else ""))
        res = [k.occupancy.resident_blocks for k in c.kernels if k.occupancy is not None]
        cells.append(str(min(res)) if res else "1")
        cells.append(fmt_mib(c.global_bytes))
        cells.append(f"{c.intensity:.3g} FLOP/B" if c.flops else "-")
        for n in loops:
            cells.append(f"{sum(k.loop_iterations.get(n, 0) for k in c.kernels):,}")
        table.append(cells)
    widths = [max(len(row[i]) if i < len(row) else 0 for row in table) for i in range(len(header))]
    out = []
    for row in table:
        out.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)))
    return "\n".join(out)
