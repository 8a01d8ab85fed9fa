"""`tdsl cost --sweep --plot`: global traffic against local memory per block, one point per tile shape.

matplotlib is optional (the `plot` extra); it is imported only when a plot is drawn.
"""

from __future__ import annotations

from typing import Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.analysis.cost.report import KiB, MiB
from tdsl.compiler.analysis.cost.sweeps import SweepRow


def plot_sweep(rows: list[SweepRow], path: str, scope: Optional[str] = None, title: str = "") -> None:
    """Global traffic against local memory per block, one point per tile shape (the chapter's Figure 5-8)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TdslError("--plot needs matplotlib: pip install 'tdsl[plot]' (or pip install matplotlib)") from None
    points = []
    once = capacity = None
    for r in rows:
        if r.cost is None:
            continue
        tgt = r.cost.target
        hard = [s for k in r.cost.kernels for s in k.working_set if tgt.scope(s).hard and scope in (None, s)]
        local = max((sum(k.working_set.get(s, 0) for s in set(hard)) for k in r.cost.kernels), default=0)
        label = "x".join(str(v) for v in r.factors.values())
        points.append((local / KiB, r.cost.global_bytes / MiB, label, not r.cost.violations))
        once = r.cost.compulsory_bytes / MiB
        if len(set(hard)) == 1:
            capacity = tgt.scope(hard[0]).per_block / KiB
    if not points:
        raise TdslError("nothing to plot: no sweep point could be costed")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], "-", color="tab:blue")
    fits = [p for p in points if p[3]]
    over = [p for p in points if not p[3]]
    ax.plot([p[0] for p in fits], [p[1] for p in fits], "o", color="tab:blue", label="fits")
    if over:
        ax.plot([p[0] for p in over], [p[1] for p in over], "x", color="tab:red", markersize=9, label="does not fit")
    for x, y, label, _ in points:
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5))
    if once is not None:
        ax.axhline(once, linestyle="--", color="gray", label=f"each tensor once ({once:,.0f} MiB)")
    if capacity is not None:
        ax.axvline(capacity, linestyle=":", color="tab:red", label=f"per-block capacity ({capacity:,.0f} KiB)")
    ax.legend()
    ax.set_xlabel("local memory per block (KiB)")
    ax.set_ylabel("traffic to the next level (MiB)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
