"""PNG of a Pareto front: every successful design in grey, the front in colour and numbered as in
the table, with the front's designs listed under the plot in a table of their parameters. Axes
are the first two objectives (a front over more is drawn in their projection) and every column
is named in words with its unit (`decode_tokens_per_s` -> 'decode tokens/s'). matplotlib (Agg)
is imported only when a plot is drawn, through `archsim.report.plots`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from archsim.report.plots import figure, save, styled
from archsim.sweep.pareto import Front

MAX_LISTED = 12  # front designs listed under the plot; the terminal table has them all
WORDS = {  # lower-case words of column names -> as a reader writes them
    "ttft": "TTFT",
    "tpot": "TPOT",
    "hbm": "HBM",
    "sram": "SRAM",
    "mac": "MAC",
    "macs": "MACs",
    "kv": "KV",
    "l2": "L2",
    "tp": "TP",
    "mmac": "million MACs",
    "bf16": "bf16",
    "j": "J",
    "w": "W",
}
UNITS = {  # a trailing unit word -> the unit in brackets
    "s": "s",
    "ms": "ms",
    "us": "us",
    "ns": "ns",
    "hz": "Hz",
    "ghz": "GHz",
    "mhz": "MHz",
    "kib": "KiB",
    "mib": "MiB",
    "gib": "GiB",
    "kb": "kB",
    "mb": "MB",
    "gb": "GB",
    "tb": "TB",
    "bytes": "bytes",
    "pct": "%",
    "j": "J",
    "w": "W",
    "mm2": "mm²",
}


def human(column: str) -> str:
    """A column name as an axis label: 'ttft_ms' -> 'TTFT (ms)', 'decode_tokens_per_s' -> 'decode
    tokens/s', 'tokens_per_s_per_mmac' -> 'tokens/s per million MACs', 'sram_kib' -> 'SRAM (KiB)',
    'decode_tokens_per_j' -> 'decode tokens/J', 'die_mm2' -> 'die (mm²)'."""
    import re

    text = re.sub(r"_per_s(?=_|$)", "/s", column)
    text = re.sub(r"_per_j(?=_|$)", "/J", text).replace("_per_", " per ").replace(".", " ")
    parts = [p for p in re.split(r"[_ ]", text) if p]
    unit = UNITS.get(parts[-1].lower()) if len(parts) > 1 else None
    words = " ".join(WORDS.get(w.lower(), w) for w in (parts[:-1] if unit else parts))
    return f"{words} ({unit})" if unit else words


def show_value(v: object) -> str:
    """4 significant digits; whole numbers in full (270336, not 2.703e+05)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def design_table(best: list[dict], columns: tuple[str, ...]) -> list[str]:
    """Lines of a fixed-width table: '#', then one column per design parameter."""
    heads = ["#", *(human(c) for c in columns)]
    rows = [[str(i), *(show_value(r[c]) for c in columns)] for i, r in enumerate(best[:MAX_LISTED], start=1)]
    widths = [max(len(h), *(len(row[j]) for row in rows)) for j, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows]
    if len(best) > MAX_LISTED:
        lines.append(f"... and {len(best) - MAX_LISTED} more designs on the front (see the table)")
    return lines


@styled
def plot_front(path: str | Path, front: Front, title: str) -> Path:
    """Draw the front of the first two goals to `path`; PlotsUnavailable without matplotlib."""
    gx, gy = front.goals[0], front.goals[1]
    best = front.front_rows()
    lines = design_table(best, front.design_columns)
    table_in = 0.16 * (len(lines) + 1)
    fig, (ax, below) = figure(9.0, 5.0 + table_in, rows=2, height_ratios=[5.0, table_in])
    xs = np.array([r[gx.column] for r in front.rows], dtype=float)
    ys = np.array([r[gy.column] for r in front.rows], dtype=float)
    ax.scatter(xs, ys, s=10, c="lightgrey", label=f"{len(front.rows)} designs")
    fx = np.array([r[gx.column] for r in best], dtype=float)
    fy = np.array([r[gy.column] for r in best], dtype=float)
    order = np.argsort(fx, kind="stable")
    ax.plot(fx[order], fy[order], "-", color="tab:blue", alpha=0.4, drawstyle="steps-post" if len(best) > 1 else None)
    ax.scatter(fx, fy, s=28, c="tab:blue", zorder=3, label=f"Pareto front ({len(best)})")
    for i, (x, y) in enumerate(zip(fx[:MAX_LISTED], fy[:MAX_LISTED]), start=1):
        ax.annotate(str(i), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    from matplotlib.ticker import FuncFormatter

    from archsim.report.tables import si

    for axis, values in (("x", xs), ("y", ys)):
        positive = values[values > 0]
        if len(positive) == len(values) and positive.max() / positive.min() > 30:
            getattr(ax, f"set_{axis}scale")("log")
        if np.nanmax(np.abs(values)) >= 1e4:  # 270k, 1.08M rather than an offset of 1e6
            getattr(ax, f"{axis}axis").set_major_formatter(FuncFormatter(lambda v, _: si(v)))
    ax.set_xlabel(f"{human(gx.column)}, {'higher' if gx.maximize else 'lower'} is better")
    ax.set_ylabel(f"{human(gy.column)}, {'higher' if gy.maximize else 'lower'} is better")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    below.axis("off")
    below.text(
        0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=7, transform=below.transAxes
    )
    return save(fig, Path(path))
