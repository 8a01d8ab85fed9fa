"""Tile-size sweeps: the cost of a schedule for every combination of factors, and the table of them.

`tdsl cost --sweep` (and `--fit`, a sweep whose one loop takes the largest factor that fits).  Each row says
whether the candidate fits: the target's capacities (the plan), and with a backend, that backend's tile rules
(compiler/analysis/cost/backend_rules.py).  Factors that make the same schedule (a factor past the extent of its
loop is the whole loop) are one row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.buffer_plan import fmt_bytes
from tdsl.compiler.analysis.cost.backend_rules import refusal
from tdsl.compiler.analysis.cost.program import analyze
from tdsl.compiler.analysis.cost.report import fmt_mib
from tdsl.compiler.analysis.cost.results import ProgramCost
from tdsl.compiler.analysis.cost.tiling import build_block, effective_factors, fit, with_factors
from tdsl.compiler.targets import get_target


@dataclass
class SweepRow:
    factors: dict  # loop name -> the factor the schedule runs with (a factor past its loop's extent: the extent)
    cost: Optional[ProgramCost]
    error: Optional[str] = None
    fitted: Optional[str] = None  # the loop whose factor was fitted to capacity
    refusal: Optional[str] = None  # why the backend cannot use the tiles (None: it can, or no backend was given)
    asked: list = field(default_factory=list)  # the factor sets asked for that made this schedule

    @property
    def fits(self) -> bool:
        return self.cost is not None and not self.cost.violations and self.refusal is None

    @property
    def reason(self) -> Optional[str]:
        """Why the candidate does not fit, in one line (None when it fits)."""
        if self.cost is None:
            return self.error
        if self.cost.violations:
            v = self.cost.violations[0]
            return (f"kernel {v.kernel}: {v.scope} needs {fmt_bytes(v.need)} per block but "
                    f"{self.cost.target.name} has {fmt_bytes(v.capacity)}")
        return self.refusal


def sweep(prog, schedule: str, target, axes: list, fit_loop: Optional[str] = None, kernel=None,
          regs: Optional[int] = None, backend: Optional[str] = None) -> list[SweepRow]:
    """Cost of the schedule for every combination of factors, one row per distinct schedule.

    `axes` is a list of (loop names, values): the loops of one entry take each value together (m = n), the
    entries combine as a product.  With `fit_loop`, that loop's factor is the largest that fits the target.
    With `backend` (a key of compiler/lower/pipeline.BACKENDS), a candidate that backend cannot use does not fit
    (its `refusal`), and `fit_loop` never takes such a factor."""
    import itertools

    tgt = get_target(target)
    block = prog.block(schedule)
    named = [n for names, _ in axes for n in names] + ([fit_loop] if fit_loop else [])
    if fit_loop is not None and named.count(fit_loop) > 1:
        raise TdslError(f"{fit_loop} is both swept and fitted: leave it out of --sweep, --fit chooses its factor")
    with_factors(block, {n: 1 for n in named})  # every loop named must come from a split or tile of the block
    rows: list[SweepRow] = []
    seen: dict[tuple, SweepRow] = {}
    for combo in itertools.product(*[[(names, v) for v in values] for names, values in axes]):
        asked = {name: v for names, v in combo for name in names}
        row = _candidate(prog, block, tgt, asked, fit_loop, kernel, regs, backend)
        key = (tuple(row.factors.items()), row.error if row.cost is None else None)
        if key in seen:
            seen[key].asked.append(asked)
            continue
        seen[key] = row
        rows.append(row)
    return rows


def _candidate(prog, block, tgt, asked: dict, fit_loop, kernel, regs, backend) -> SweepRow:
    """The row of one factor set: fitted, built, costed and judged by the backend's rules."""
    factors = dict(asked)
    try:
        if fit_loop is not None:
            best = fit(prog, block.name, tgt, fit_loop, factors, kernel, backend=backend)
            if best is None:
                rules = f" with the tile rules of {backend}" if backend else ""
                return SweepRow(factors, None, f"no factor of {fit_loop} fits {tgt.name}{rules}", fit_loop,
                                asked=[asked])
            factors = {**factors, fit_loop: best}
        written = with_factors(block, factors)
        sched = build_block(prog, written, kernel)
        factors = effective_factors(written, sched, factors)
        cost = analyze(sched, tgt, regs, backend=backend or "none")  # no backend: the plan's buffers alone
        why = refusal(sched, tgt, backend) if backend is not None and not cost.violations else None
        return SweepRow(factors, cost, None, fit_loop, why, [asked])
    except TdslError as err:
        return SweepRow(factors, None, str(err).split("\n")[0], fit_loop, asked=[asked])


def sweep_table(rows: list[SweepRow], target) -> str:
    """The sweep as a table in the form of the chapter's (5.2.2, 5.3.3), a `fits` column, and below it the
    reason of every `no [n]` and the factor sets that made the same schedule."""
    tgt = get_target(target)
    if not rows:
        return "(no rows)"
    names = list(dict.fromkeys(n for r in rows for n in r.factors))  # a row whose fit failed has no fitted factor
    scopes = _hard_scopes(rows, tgt)
    header = [n + (" (fitted)" if n == rows[0].fitted else "") for n in names]
    header += [f"{s} per block" for s in scopes] + ["resident", "global traffic", "intensity"]
    header += [f"{n} iterations" for n in names] + ["fits"]
    table = [header]
    reasons: list[str] = []
    for r in rows:
        cells = [str(r.factors.get(n, "-")) for n in names] + _cost_cells(r.cost, scopes, names)
        if r.fits:
            cells.append("yes")
        else:
            if r.reason not in reasons:
                reasons.append(r.reason)
            cells.append(f"no [{reasons.index(r.reason) + 1}]")
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)) for row in table]
    lines += [f"[{n}] {reason}" for n, reason in enumerate(reasons, 1)]
    lines += [_merged_note(r) for r in rows if r.asked and (len(r.asked) > 1 or r.asked[0] != _asked_part(r))]
    return "\n".join(lines)


def _hard_scopes(rows: list[SweepRow], tgt) -> list[str]:
    scopes = []
    for r in rows:
        for k in (r.cost.kernels if r.cost else []):
            for s in k.working_set:
                if s not in scopes and tgt.scope(s).hard:
                    scopes.append(s)
    return scopes


def _cost_cells(c: Optional[ProgramCost], scopes: list[str], loops: list[str]) -> list[str]:
    """The figures of one row: working set per hard scope, resident blocks, traffic, intensity, iterations."""
    if c is None:
        return ["-"] * (len(scopes) + 3 + len(loops))
    cells = []
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
    return cells


def _asked_part(row: SweepRow) -> dict:
    """The row's factors of the loops that were asked for (the fitted one was not)."""
    return {n: v for n, v in row.factors.items() if n != row.fitted}


def _merged_note(row: SweepRow) -> str:
    shown = _factors_text(_asked_part(row))
    asked = ", ".join(_factors_text(a) for a in row.asked)
    past = any(a != _asked_part(row) for a in row.asked)
    return f"{shown}: asked as {asked}; one row" + (" (a factor past its loop's extent is the whole loop)" if past else "")


def _factors_text(factors: dict) -> str:
    return " ".join(f"{n}={v}" for n, v in factors.items())
