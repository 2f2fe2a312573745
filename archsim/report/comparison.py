"""One workload on several chips: headline numbers and where the time goes, side by side.

Time by bound: every op's time counts toward its bound (compute, memory or overhead). For the
decode phase, ops other than attention take the same time every step; attention's total is
the rest of the decode time (the runner interpolates it over KV lengths) and counts toward
the bound of the first decode step's attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from archsim.engine.timing import Bound
from archsim.graph.ops import OpKind
from archsim.hardware.area import Area
from archsim.runner.energy import RunEnergy
from archsim.runner.generation import RunResult, StepResult
from archsim.units import format_seconds


@dataclass(frozen=True)
class ChipRun:
    """One chip of a comparison: its run, or why it has none."""

    hw: str  # the file or shipped name as given
    chip_name: str
    config_hash: str
    result: RunResult | None
    error: str = ""
    energy: RunEnergy | None = None  # None: no run, or no power section in the chip file
    area: Area | None = None  # None: no area section
    node: str = ""
    layout: str = ""  # how the model is spread over its chips ("TP 2"; "" on one chip)
    given: str = ""  # the name given, where a multi-chip system of that chip ran for the layout

    @property
    def label(self) -> str:
        """The name the chip was given by (a file's stem) and its layout, as short as a table
        needs: "h200x8 TP 8", "h200 as h200x8 TP 2"."""
        name = Path(self.hw).stem
        if self.given and Path(self.given).stem != name:
            name = f"{Path(self.given).stem} as {name}"
        return f"{name} {self.layout}" if self.layout else name


def step_seconds_by_bound(step: StepResult) -> dict[Bound, float]:
    out = dict.fromkeys(Bound, 0.0)
    for r in step.ops:
        out[r.timing.bound] += r.time_s
    return out


def decode_seconds_by_bound(r: RunResult) -> dict[Bound, float]:
    """Seconds of all decode steps per bound (see the module docstring)."""
    out = dict.fromkeys(Bound, 0.0)
    steps = len(r.decode_step_s)
    if r.decode is None or steps == 0:
        return out
    attention = [o for o in r.decode.ops if o.op.kind is OpKind.ATTENTION]
    fixed = 0.0
    for o in r.decode.ops:
        if o.op.kind is not OpKind.ATTENTION:
            out[o.timing.bound] += o.time_s * steps
            fixed += o.time_s
    first = sum(o.time_s for o in attention)
    rest = max(0.0, r.decode_time_s - fixed * steps)
    for o in attention:
        out[o.timing.bound] += rest * o.time_s / first if first else 0.0
    return out


def run_seconds_by_bound(r: RunResult) -> dict[Bound, float]:
    pre, dec = step_seconds_by_bound(r.prefill), decode_seconds_by_bound(r)
    return {b: pre[b] + dec[b] for b in Bound}


def dominant(by_bound: dict[Bound, float]) -> Bound:
    return max(by_bound, key=lambda b: by_bound[b])


def shares(by_bound: dict[Bound, float]) -> dict[Bound, float]:
    total = sum(by_bound.values())
    return {b: (v / total if total else 0.0) for b, v in by_bound.items()}


def compare_table(rows: list[ChipRun], title: str) -> Table:
    """One row per chip: TTFT, time per output token (TPOT), tokens/s (decode and end to end), the bound
    of most of the run's time, and the split of decode time by bound in %."""
    t = Table(title=title, title_justify="left")
    t.add_column("chip", no_wrap=True)
    for col in ("TTFT", "TPOT", "tok/s\ndecode", "tok/s\ne2e", "bound", "decode %\nmem/cmp/ovh"):
        t.add_column(col, justify="left" if col == "bound" else "right", no_wrap=True)
    for row in rows:
        r = row.result
        if r is None:
            t.add_row(row.label, *["-"] * 5, f"[red]{row.error}[/red]")
            continue
        dec = shares(decode_seconds_by_bound(r))
        t.add_row(
            row.label,
            format_seconds(r.ttft_s),
            format_seconds(r.tpot_s),
            f"{r.decode_tokens_per_s:,.0f}",
            f"{r.throughput_tokens_per_s:,.0f}",
            dominant(run_seconds_by_bound(r)).value,
            "/".join(f"{100 * dec[b]:.0f}" for b in (Bound.MEMORY, Bound.COMPUTE, Bound.OVERHEAD)),
        )
    return t


def energy_area_table(rows: list[ChipRun], title: str) -> Table:
    """One row per chip: average and peak power against its limit, tokens per joule (end to end)
    and joules per decode token, the die's area, and decode tokens/s per mm2 and per W."""
    from archsim.report.energy import format_joules

    t = Table(title=title, title_justify="left")
    t.add_column("chip", no_wrap=True)
    for col in ("avg W", "peak W", "limit W", "tok/J", "J/tok\ndecode", "die mm2", "tok/s\nper mm2", "tok/s\nper W"):
        t.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        e, a, r = row.energy, row.area, row.result
        power = (
            [f"{e.average_power_w:,.0f}", f"{e.peak_power_w:,.0f}", f"{e.limit_w:,.0f}", f"{e.tokens_per_j:,.3g}"]
            if e is not None
            else ["-"] * 4
        )
        chips = e.chips if e is not None else 1
        per_mm2 = f"{r.decode_tokens_per_s / (chips * a.die_mm2):,.3g}" if a is not None and r is not None else "-"
        t.add_row(
            row.label,
            *power,
            format_joules(e.decode_j_per_token) if e is not None else "-",
            f"{a.die_mm2:,.0f}" + ("" if a.fits_reticle else f" ({a.dies} dies)") if a is not None else "-",
            per_mm2,
            f"{e.decode_tokens_per_j:,.3g}" if e is not None else "-",
        )
    t.caption = "per W: decode tokens/s per watt of the decode steps, that is decode tokens per joule"
    return t


def compare_dict(rows: list[ChipRun], workload_cfg: dict[str, Any]) -> dict[str, Any]:
    from archsim.report.energy import area_dict, energy_dict, energy_summary

    chips = []
    for row in rows:
        entry: dict[str, Any] = {"hw": row.hw, "chip": row.chip_name, "config_hash": row.config_hash}
        if row.layout or row.given:
            entry["label"] = row.label
        r = row.result
        if r is None:
            entry["error"] = row.error
        else:
            by_bound = run_seconds_by_bound(r)
            entry.update(
                {
                    "ttft_s": r.ttft_s,
                    "tpot_s": r.tpot_s,
                    "decode_tokens_per_s": r.decode_tokens_per_s,
                    "throughput_tokens_per_s": r.throughput_tokens_per_s,
                    "total_time_s": r.total_time_s,
                    "bound": dominant(by_bound).value,
                    "time_by_bound_s": {b.value: v for b, v in by_bound.items()},
                    "decode_time_by_bound_s": {b.value: v for b, v in decode_seconds_by_bound(r).items()},
                    "memory": {
                        "weights_bytes": r.footprint.weights_bytes,
                        "kv_cache_bytes": r.footprint.kv_cache_bytes,
                        "activations_bytes": r.footprint.activations_bytes,
                        "capacity_bytes": r.footprint.capacity_bytes,
                    },
                    **energy_summary(row.energy),
                    "energy": energy_dict(row.energy),
                    "area_mm2": row.area.die_mm2 if row.area is not None else None,
                    "area": area_dict(row.area, r, row.energy.chips if row.energy else 1, row.node),
                }
            )
        chips.append(entry)
    return {"workload": workload_cfg, "chips": chips}
