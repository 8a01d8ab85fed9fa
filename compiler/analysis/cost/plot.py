"""`tdsl cost --plot`: the roofline of a schedule, one numbered point per kernel or per candidate of a sweep.

x = arithmetic intensity (FLOP/byte), y = FLOP/s at the report's time (FLOPs / roofline bound), both on log
scales, under the target's roofs: the DRAM bandwidth slope up to the matrix peak of each operand dtype and up
to the vector peak.  A sweep adds a second panel, global traffic against local memory per block (the chapter's
Figure 5-8), with the same numbers.  Points carry short numbers and the legend, outside the axes, says what
each number is, so labels do not pile up where points do.

The points are data (`kernel_points`, `sweep_points`, `roofs`) computed without matplotlib; matplotlib is
optional (the `plot` extra) and imported only to draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.cost.report import KiB, MiB
from tdsl.compiler.analysis.cost.results import ProgramCost
from tdsl.compiler.analysis.cost.sweeps import SweepRow
from tdsl.compiler.targets import Target


@dataclass
class Point:
    label: str  # a kernel ("gemm_0 (C)") or a candidate ("io=64 jo=64")
    intensity: float  # FLOP/byte, the report's
    flops_per_s: float  # FLOPs / the report's time (the roofline bound)
    fits: bool = True
    local: Optional[int] = None  # sweep: bytes per block in the hard scopes (Figure 5-8's x)
    traffic: Optional[int] = None  # sweep: global bytes (Figure 5-8's y)

    @property
    def drawable(self) -> bool:
        """A point has a place on log axes only with FLOPs, bytes and a time."""
        return all(math.isfinite(v) and v > 0 for v in (self.intensity, self.flops_per_s))


@dataclass
class Roof:
    label: str
    peak: float  # FLOP/s of the flat part; the slope is the DRAM bandwidth


def kernel_points(cost: ProgramCost) -> list[Point]:
    """One point per kernel of the schedule."""
    return [Point(f"{k.name} ({', '.join(k.stmts)})", k.intensity, _rate(k.flops, k.t_bound)) for k in cost.kernels]


def sweep_points(rows: list[SweepRow]) -> list[Point]:
    """One point per costed candidate of a sweep: the whole program (all its kernels)."""
    points = []
    for r in rows:
        if r.cost is None:
            continue
        c = r.cost
        label = " ".join(f"{n}={v}" for n, v in r.factors.items())
        points.append(Point(label, c.intensity, _rate(c.flops, c.t_bound), r.fits, _local_bytes(c), c.global_bytes))
    return points


def _rate(flops: int, seconds: float) -> float:
    return flops / seconds if seconds else 0.0


def _local_bytes(c: ProgramCost) -> int:
    """The largest total per block of the hard scopes (shared memory, L1, UB ...) over the kernels."""
    tgt = c.target
    return max((sum(n for s, n in k.working_set.items() if tgt.scope(s).hard) for k in c.kernels), default=0)


def roofs(target: Target, dtypes: list) -> list[Roof]:
    """The flat roofs: the matrix peak of every operand dtype given (bf16 when none), then the vector peak."""
    found = [Roof(f"{d} matrix peak {target.peak(d) / 1e12:,.0f} TFLOP/s", target.peak(d))
             for d in dict.fromkeys(dtypes or ["bf16"])]
    return found + [Roof(f"vector peak {target.vector_flops / 1e12:,.1f} TFLOP/s", target.vector_flops)]


def plot_kernels(cost: ProgramCost, path: str, title: str = "") -> None:
    """The roofline of one schedule, a point per kernel."""
    dtypes = [k.matrix_dtype for k in cost.kernels if k.matrix_dtype]
    _draw(kernel_points(cost), cost.target, dtypes, path, title, figure_5_8=None)


def plot_sweep(rows: list[SweepRow], path: str, title: str = "") -> None:
    """The roofline of a sweep, a point per candidate, next to its traffic against local memory."""
    costed = [r.cost for r in rows if r.cost is not None]
    if not costed:
        raise TdslError("nothing to plot: no sweep point could be costed")
    dtypes = [k.matrix_dtype for c in costed for k in c.kernels if k.matrix_dtype]
    _draw(sweep_points(rows), costed[0].target, dtypes, path, title, figure_5_8=costed)


# ---------------------------------------------------------------- drawing


def _draw(points: list[Point], target: Target, dtypes: list, path: str, title: str, figure_5_8) -> None:
    plt = _pyplot()
    if not any(p.drawable for p in points):
        raise TdslError("nothing to plot: no kernel has both FLOPs and global memory traffic")
    panels = 2 if figure_5_8 else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 5), squeeze=False)
    roofline, handles = axes[0][0], _roofline_panel(axes[0][0], points, target, dtypes)
    if figure_5_8:
        _traffic_panel(axes[0][1], points, figure_5_8)
    left_out = [p.label for p in points if not p.drawable]
    if left_out:
        fig.text(0.01, 0.01, _plain(f"not drawn (no FLOPs or no global traffic): {', '.join(left_out)}"), fontsize=8)
    if title:
        fig.suptitle(_plain(title))
    fig.tight_layout()  # before the numbers: they are placed in screen coordinates
    _numbers(roofline, [(n, p.intensity, p.flops_per_s) for n, p in enumerate(points, 1) if p.drawable])
    if figure_5_8:
        _numbers(axes[0][1], [(n, p.local / KiB, p.traffic / MiB) for n, p in enumerate(points, 1)
                              if p.local is not None])
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8, frameon=False)
    try:
        fig.savefig(path, format=plot_format(path), dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as err:
        raise TdslError(f"cannot write the plot {path}: {getattr(err, 'strerror', None) or err}") from None
    finally:
        plt.close(fig)


def plot_format(path: str) -> str:
    """The picture format `path`'s suffix names (png, svg, pdf, ...); a TdslError for a path without one, or
    with one matplotlib cannot write (it would add '.png' to the name, or refuse, after the work is done)."""
    _pyplot()  # says how to install matplotlib when it is missing
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        named = f"ends in '.{suffix}'" if suffix else "has no suffix"
        raise TdslError(f"--plot {path} {named}: give a file name ending in .png, .svg or .pdf (the suffix picks "
                        f"the format; also {', '.join(f for f in formats if f not in ('png', 'svg', 'pdf'))})")
    return suffix


def _plain(text: str) -> str:
    """Text shown as written: a `$` (in a file name) would start matplotlib's math mode."""
    return text.replace("$", r"\$")


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never a window, works without a display
        import matplotlib.pyplot as plt
    except ImportError:
        raise TdslError("--plot needs matplotlib: pip install 'tdsl[plot]' (or pip install matplotlib)") from None
    return plt


def _marker(p: Point) -> tuple[str, str]:
    return ("o", "tab:blue") if p.fits else ("x", "tab:red")


def _roofline_panel(ax, points: list[Point], target: Target, dtypes: list) -> list:
    """Roofs and points; returns the legend handles (roofs, then one per point, by number)."""
    from matplotlib.lines import Line2D

    tops = roofs(target, dtypes)
    bw = target.dram_bandwidth
    ridges = [r.peak / bw for r in tops]
    xs = [p.intensity for p in points if p.drawable] + ridges
    lo, hi = min(xs) / 4, max(xs) * 4
    handles = []
    for roof, style in zip(tops, ["-", "--", "-.", ":"] * 2):
        ridge = roof.peak / bw
        line, = ax.plot([lo, ridge, hi], [lo * bw, roof.peak, roof.peak], style, color="gray", linewidth=1.2,
                        label=f"{roof.label} (ridge {ridge:,.0f} FLOP/B)")
        handles.append(line)
    handles.append(Line2D([], [], color="none", label=f"slope: DRAM {bw / 1e12:.2f} TB/s"))
    for n, p in enumerate(points, 1):
        marker, color = _marker(p)
        text = _plain(f"{n}  {p.label}: {p.intensity:.3g} FLOP/B, {p.flops_per_s / 1e12:.3g} TFLOP/s")
        handles.append(Line2D([], [], marker=marker, color=color, linestyle="none",
                              label=text + ("" if p.fits else " (does not fit)")))
        if p.drawable:
            ax.plot([p.intensity], [p.flops_per_s], marker, color=color, markersize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte of global memory traffic)")
    ax.set_ylabel("FLOP/s at the roofline bound")
    ax.set_title(f"roofline, {target.name}", fontsize=10)
    ax.grid(True, which="major", linewidth=0.3)
    return handles


def _traffic_panel(ax, points: list[Point], costs: list[ProgramCost]) -> None:
    """Global traffic against local memory per block (Figure 5-8): the same numbers, no lines between them."""
    tgt = costs[0].target
    hard = {s for c in costs for k in c.kernels for s in k.working_set if tgt.scope(s).hard}
    for p in points:
        if p.local is not None:
            marker, color = _marker(p)
            ax.plot([p.local / KiB], [p.traffic / MiB], marker, color=color, markersize=7)
    once = costs[0].compulsory_bytes / MiB
    ax.axhline(once, linestyle="--", color="gray", linewidth=1, label=f"each tensor once ({once:,.0f} MiB)")
    if len(hard) == 1:
        scope = next(iter(hard))
        capacity = tgt.scope(scope).per_block / KiB
        ax.axvline(capacity, linestyle=":", color="tab:red", linewidth=1, label=f"{scope} per block ({capacity:,.0f} KiB)")
    ax.set_xlabel("local memory per block (KiB)")
    ax.set_ylabel("global memory traffic (MiB)")
    ax.set_title("traffic against local memory (Figure 5-8)", fontsize=10)
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=8)


# Where a number may go, in points from its marker: right, left, above, below, then the corners.
OFFSETS = [(6, -3), (-6, -3), (-3, 6), (-3, -12), (6, 6), (-6, 6), (6, -12), (-6, -12)]
FONT = 8  # points


def _numbers(ax, numbered: list) -> None:
    """Each point's number beside it, on the first side where it covers no marker and no other number
    (greedy, in screen coordinates); points at one place get one label, "1,2,3"."""
    places: dict = {}
    for n, x, y in numbered:
        px, py = ax.transData.transform((x, y))
        places.setdefault((round(px), round(py)), (x, y, px, py, []))[4].append(str(n))
    scale = ax.figure.dpi / 72  # points -> pixels
    taken = [(px - 4 * scale, py - 4 * scale, px + 4 * scale, py + 4 * scale) for _, _, px, py, _ in places.values()]
    for x, y, px, py, names in places.values():
        text = ",".join(names)
        width, height = 0.62 * FONT * len(text) * scale, FONT * scale
        for dx, dy in OFFSETS:
            left = px + dx * scale - (width if dx < 0 else 0)
            box = (left, py + dy * scale, left + width, py + dy * scale + height)
            if not any(_overlap(box, other) for other in taken):
                break
        taken.append(box)
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=FONT,
                    ha="right" if dx < 0 else "left")


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
