"""Figures of a serving run, in the style of `archsim.report.plots` (matplotlib, Agg, imported
only when plotting): latency CDFs with the SLOs marked, KV-cache use and sequences per step over
time.

A latency CDF spans decades when a queue builds, so its time axis is logarithmic once the
samples spread over more than `LOG_SPAN`. Series over time have one sample per engine
iteration, tens of thousands of them that alternate step to step; drawn raw they fill a solid
band, so they are drawn as their time-weighted mean over `WINDOWS` windows of the run, with
the peak of each window as a thin line above it.
"""

from __future__ import annotations

import numpy as np

from archsim.report.plots import figure, styled
from archsim.serving.metrics import Slo
from archsim.serving.result import ServeResult

LOG_SPAN = 20.0  # largest / smallest sample above which a latency axis is logarithmic
WINDOWS = 300  # windows a series over time is averaged in


def _cdf(ax, values_s: np.ndarray, weights: np.ndarray | None, label: str, unit_label: str, slo_s: float | None):
    from archsim.units import format_seconds

    values = np.asarray(values_s, dtype=float)
    weights = np.ones(len(values)) if weights is None else np.asarray(weights, dtype=float)
    keep = np.isfinite(values) & (values > 0)
    values, weights = values[keep], weights[keep]
    ax.set_title(label)
    if len(values) == 0:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
        return
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    ms = values[order] * 1e3
    ax.step(ms, cum / cum[-1], where="post", color="tab:blue", lw=1.5)
    if ms[-1] / ms[0] > LOG_SPAN:
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if slo_s is not None:
        within = float(weights[values <= slo_s].sum() / weights.sum())
        ax.axvline(
            slo_s * 1e3,
            color="tab:red",
            ls="--",
            lw=1.2,
            label=f"SLO {format_seconds(slo_s)}: {100 * within:.1f}% within",
        )
        ax.legend(loc="lower right")
    ax.set_xlabel(f"{label} (ms)")
    ax.set_ylabel(f"fraction of {unit_label}")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)


@styled
def latency_cdfs(result: ServeResult, title: str, slo: Slo | None = None):
    """TTFT, TPOT, inter-token latency and end-to-end latency CDFs, SLOs as dashed lines."""
    slo = slo if slo is not None else Slo()
    fig, axes = figure(11.0, 7.5, rows=2, cols=2)
    t = result.times
    _cdf(axes[0, 0], t.ttft_s, None, "time to first token", "requests", slo.ttft_s)
    _cdf(axes[0, 1], t.tpot_s, None, "time per output token", "requests", slo.tpot_s)
    _cdf(axes[1, 0], *result.itl.samples(), "inter-token latency", "tokens", None)
    _cdf(axes[1, 1], t.e2e_s, None, "end-to-end latency", "requests", None)
    fig.suptitle(title, fontsize=11)
    return fig


def windowed(start_s: np.ndarray, end_s: np.ndarray, value: np.ndarray, windows: int = WINDOWS):
    """(window centres, time-weighted mean, peak) of a series that holds `value[i]` from
    `start_s[i]` until the next sample starts (the last until `end_s[-1]`)."""
    start = np.asarray(start_s, dtype=float)
    value = np.asarray(value, dtype=float)
    stop = np.append(start[1:], end_s[-1])
    edges = np.linspace(start[0], stop[-1], windows + 1)
    area = np.concatenate([[0.0], np.cumsum(value * (stop - start))])
    at_edges = np.interp(edges, np.append(start, stop[-1]), area)
    width = np.diff(edges)
    mean = np.divide(np.diff(at_edges), width, out=np.zeros(windows), where=width > 0)
    which = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, windows - 1)
    peak = np.full(windows, np.nan)
    np.fmax.at(peak, which, value)
    peak = np.where(np.isnan(peak), mean, np.maximum(peak, mean))  # a window inside one sample
    return (edges[:-1] + edges[1:]) / 2, mean, peak


@styled
def over_time(result: ServeResult, title: str, what: str):
    """`what`: 'kv' (share of the KV pool in use, %) or 'batch' (sequences per step), per instance."""
    fig, ax = figure(11.0, 4.2)
    top = 0.0
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for i, run in enumerate(result.instances):
        tl = run.result.timeline
        if len(tl.start_s) == 0:
            continue
        y = 100.0 * tl.kv_blocks / run.pool.blocks if what == "kv" else tl.batch
        x, mean, peak = windowed(tl.start_s, tl.end_s, y)
        top = max(top, float(np.nanmax(peak)))
        colour = colours[i % len(colours)]
        name = run.role if run.role != "colocated" else "instance"
        label = f"{name} {run.index}" if len(result.instances) > 1 else "mean"
        ax.plot(x, mean, color=colour, lw=1.5, label=label + (" (mean)" if len(result.instances) > 1 else ""))
        ax.plot(x, peak, color=colour, lw=0.6, alpha=0.5, label="peak" if len(result.instances) == 1 else None)
    span = max(
        (float(r.result.timeline.end_s[-1]) for r in result.instances if len(r.result.timeline.end_s)), default=0
    )
    ax.set_xlabel(f"time (s); mean and peak over windows of {span / WINDOWS:.3g} s")
    ax.set_ylabel("KV cache in use (% of the pool)" if what == "kv" else "sequences per step")
    ax.set_ylim(0, min(105.0, max(5.0, 1.15 * top)) if what == "kv" else max(1.0, 1.15 * top))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title, fontsize=10)
    return fig
