"""PNG of a Pareto front: every successful design in grey, the front in colour, numbered as in
the table, with the parameters of each front design listed beside the axes. Axes are the first
two objectives (a front over more objectives is drawn in their projection). matplotlib (Agg) is
imported only when a plot is drawn, through `archsim.report.plots`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from archsim.sweep.pareto import Front

MAX_LISTED = 24  # front designs listed beside the plot; the table has them all
LABEL_WIDTH = 56  # characters per line of a design's parameters
DPI = 120


def show_value(v: object) -> str:
    """4 significant digits; whole numbers in full (270336, not 2.703e+05)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def design_lines(number: int, row: dict, columns: tuple[str, ...]) -> list[str]:
    """`#  name=value name=value ...` wrapped to LABEL_WIDTH, continuation lines indented."""
    import textwrap

    text = " ".join(f"{c}={show_value(row[c])}" for c in columns)
    return textwrap.wrap(text, LABEL_WIDTH, initial_indent=f"{number:>2}  ", subsequent_indent="    ") or [str(number)]


def plot_front(path: str | Path, front: Front, title: str) -> Path:
    """Draw the front of the first two goals to `path`; PlotsUnavailable without matplotlib."""
    from archsim.report.plots import PlotsUnavailable, save

    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotsUnavailable("plots need matplotlib: python3 -m pip install 'archsim[plot]'") from None
    gx, gy = front.goals[0], front.goals[1]
    best = front.front_rows()
    fig = Figure(figsize=(13.0, 6.0), dpi=DPI, layout="constrained")
    ax, side = fig.subplots(1, 2, width_ratios=[3, 2])
    xs = np.array([r[gx.column] for r in front.rows], dtype=float)
    ys = np.array([r[gy.column] for r in front.rows], dtype=float)
    ax.scatter(xs, ys, s=10, c="lightgrey", label=f"{len(front.rows)} designs")
    fx = np.array([r[gx.column] for r in best], dtype=float)
    fy = np.array([r[gy.column] for r in best], dtype=float)
    order = np.argsort(fx, kind="stable")
    ax.plot(fx[order], fy[order], "-", color="tab:blue", alpha=0.4)
    ax.scatter(fx, fy, s=28, c="tab:blue", zorder=3, label=f"Pareto front ({len(best)})")
    for i, (x, y) in enumerate(zip(fx[:MAX_LISTED], fy[:MAX_LISTED]), start=1):
        ax.annotate(str(i), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel(gx.label)
    ax.set_ylabel(gy.label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    lines = [
        line for i, r in enumerate(best[:MAX_LISTED], start=1) for line in design_lines(i, r, front.design_columns)
    ]
    if len(best) > MAX_LISTED:
        lines.append(f"... and {len(best) - MAX_LISTED} more (see the table)")
    side.axis("off")
    side.set_title("designs on the front", fontsize=10, loc="left")
    side.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=7, transform=side.transAxes)
    return save(fig, Path(path))
