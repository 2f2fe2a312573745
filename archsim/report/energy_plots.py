"""PNG plots of energy and power, in the style of `archsim.report.plots` (matplotlib, Agg,
imported only to draw): a step's energy per op kind split by unit, its power and clock per op
kind, and power and joules per token against batch. Joules, watts, GHz."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from archsim.hardware.power import ENERGY_PARTS
from archsim.report.plots import figure, save, stacked_bars, styled
from archsim.runner.energy import StepEnergy

UNIT_COLOURS = {
    "matrix": "tab:blue",
    "vector": "tab:green",
    "sram": "tab:cyan",
    "l2": "tab:olive",
    "hbm": "tab:orange",
    "link": "tab:pink",
    "static": "tab:gray",
    "idle": "silver",
}


@styled
def energy_by_kind(path: Path, steps: list[tuple[str, StepEnergy]]) -> Path:
    """Per op kind, where each step's energy goes by unit (horizontal stacked bars, one panel per
    step), with the step's average power in the title."""
    from archsim.report.energy import UNIT_NAMES, format_joules

    fig, axes = figure(5.5 * len(steps), 4.0, cols=len(steps))
    for ax, (label, step) in zip(np.atleast_1d(axes), steps):
        kinds = sorted(step.kinds, key=lambda k: k.energy.total_j)
        mj = {part: np.array([k.energy.parts()[part] * 1e3 for k in kinds]) for part in ENERGY_PARTS}
        segments = [
            (UNIT_NAMES[p], UNIT_COLOURS[p], v) for p, v in mj.items() if v.any()
        ]  # units that spent nothing: no bar
        title = f"{label}: {format_joules(step.energy_j)}, {step.average_power_w:,.0f} W"
        stacked_bars(ax, [k.kind.value for k in kinds], segments, "energy in the step (mJ)", title)
    return save(fig, path)


@styled
def power_by_batch(
    path: Path, curves: list[tuple[str, list[int], list[float], list[float], float]], title: str
) -> Path:
    """Decode power (left) and joules per token (right, log) against batch: `curves` of (label,
    batches, average watts of the decode steps, joules per decode token, power limit)."""
    fig, (left, right) = figure(10.0, 4.0, cols=2)
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    for i, (label, batches, watts, joules, limit) in enumerate(curves):
        c = colours[i % len(colours)]
        left.plot(batches, watts, "o-", color=c, label=label)
        left.axhline(limit, color=c, ls="--", lw=0.8, label=f"{label} limit ({limit:,.0f} W)")
        right.plot(batches, joules, "o-", color=c, label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (sequences decoded together)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    from archsim.report.plots import plain_ticks

    left.xaxis.set_major_formatter(plain_ticks())
    right.xaxis.set_major_formatter(plain_ticks())
    left.set_ylabel("average power of the decode steps (W)")
    left.set_ylim(0, None)
    right.set_yscale("log")
    right.set_ylabel("energy per decode token (J)")
    fig.suptitle(title, fontsize=10)
    return save(fig, path)


@styled
def power_by_kind(path: Path, steps: list[tuple[str, StepEnergy]], limit_w: float, clock_hz: float) -> Path:
    """Per op kind of each step (one column per step): its average power, its ops' energy over
    their time, against the chip's power limit (top), and the clock its power held it at, the
    mean over its time with its lowest op's marked, against the chip's clock (bottom)."""
    fig, axes = figure(5.5 * len(steps), 6.0, cols=len(steps), rows=2, squeeze=False)
    for col, (label, step) in enumerate(steps):
        top, bottom = axes[0][col], axes[1][col]
        kinds = sorted(step.kinds, key=lambda k: k.time_s)
        names = [k.kind.value for k in kinds]
        watts = [k.energy.total_j / k.time_s if k.time_s > 0 else 0.0 for k in kinds]
        top.barh(names, watts, color="tab:orange")
        top.axvline(limit_w, color="tab:red", ls="--", lw=1.0, label=f"power limit ({limit_w:,.0f} W)")
        top.set_xlim(0, 1.35 * max([limit_w, *watts]))  # room right of the limit for the legend
        top.set_xlabel("average power of its ops (W)")
        top.set_title(f"{label}: {step.average_power_w:,.0f} W average, {step.peak_power_w:,.0f} W peak")
        top.legend(fontsize=7, loc="lower right")
        bottom.barh(names, [k.clock_hz / 1e9 for k in kinds], color="tab:blue", label="mean over its time")
        bottom.plot([k.min_clock_hz / 1e9 for k in kinds], names, "k|", ms=12, label="its lowest op")
        bottom.axvline(
            clock_hz / 1e9, color="tab:gray", ls="--", lw=1.0, label=f"chip clock ({clock_hz / 1e9:.2f} GHz)"
        )
        bottom.set_xlim(0, 1.45 * clock_hz / 1e9)
        bottom.set_xlabel("clock its power held (GHz)")
        bottom.legend(fontsize=7, loc="lower right")
    return save(fig, path)
