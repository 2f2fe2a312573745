"""A serving run's energy as plain data, a table and a plot of power over the trace (matplotlib
imported only to plot). Joules, watts, seconds."""

from __future__ import annotations

import numpy as np

from archsim.report.plots import figure, styled
from archsim.serving.energy import ServeEnergy

OVER_TIME_POINTS = 1000  # power samples per instance kept in the JSON


def serve_energy_dict(e: ServeEnergy | None) -> dict | None:
    if e is None:
        return None
    instances = []
    for i in e.instances:
        keep = np.unique(np.linspace(0, len(i.start_s) - 1, min(len(i.start_s), OVER_TIME_POINTS)).astype(int))
        instances.append(
            {
                "role": i.role,
                "index": i.index,
                "chips": i.chips,
                "energy_j": i.energy_j,
                "over_time": {"t_s": i.start_s[keep].tolist(), "power_w": i.power_w[keep].tolist()},
            }
        )
    return {
        "energy_j": e.energy_j,
        "j_per_request": e.j_per_request,
        "j_per_output_token": e.j_per_output_token,
        "average_power_w": e.average_power_w,
        "average_power_per_chip_w": e.average_power_per_chip_w,
        "peak_power_per_chip_w": e.peak_power_per_chip_w,
        "limit_w": e.limit_w,
        "chips": e.chips,
        "duration_s": e.duration_s,
        "instances": instances,
    }


def serve_energy_table(e: ServeEnergy):
    from rich.table import Table

    from archsim.report.energy import format_joules

    t = Table(title="energy", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(justify="right")
    chips = f" on {e.chips} chips" if e.chips > 1 else ""
    t.add_row("energy", f"{format_joules(e.energy_j)}{chips} over {e.duration_s:,.1f} s")
    t.add_row("energy per request (mean)", format_joules(e.j_per_request))
    t.add_row("energy per output token", format_joules(e.j_per_output_token))
    t.add_row(
        "power per chip: average / peak",
        f"{e.average_power_per_chip_w:,.0f} W / {e.peak_power_per_chip_w:,.0f} W of the {e.limit_w:,.0f} W limit",
    )
    return t


@styled
def power_over_time(e: ServeEnergy, title: str):
    """Power of each instance over the trace (its mean and peak over short windows), with the
    power limit of its chips."""
    from archsim.serving.plots import WINDOWS, windowed

    fig, ax = figure(11.0, 4.2)
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    many = len(e.instances) > 1
    for k, inst in enumerate(e.instances):
        if len(inst.start_s) == 0:
            continue
        x, mean, peak = windowed(inst.start_s, inst.end_s, inst.power_w)
        colour = colours[k % len(colours)]
        name = inst.role if inst.role != "colocated" else "instance"
        ax.plot(x, mean, color=colour, lw=1.5, label=f"{name} {inst.index} (mean)" if many else "mean")
        ax.plot(x, peak, color=colour, lw=0.6, alpha=0.5, label=None if many else "peak")
    limit = e.limit_w * max(i.chips for i in e.instances) if e.instances else e.limit_w
    ax.axhline(limit, color="tab:red", ls="--", lw=1.0, label=f"power limit ({limit:,.0f} W)")
    ax.set_xlabel(f"time (s); mean and peak over windows of {e.duration_s / WINDOWS:.3g} s")
    ax.set_ylabel("power (W)" + (" of all the instance's chips" if limit > e.limit_w else ""))
    ax.set_ylim(0, 1.1 * limit)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"{title}: {e.average_power_w:,.0f} W on average", fontsize=10)
    return fig
