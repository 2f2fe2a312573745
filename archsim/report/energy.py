"""Energy, power and area as plain data and tables: a run's joules by unit and by op kind, its
average and peak watts against the chip's power limit, the clock the limit held per op kind, and
the die's area by block with what it yields per mm2 and per watt.

Units: joules, watts, hertz, seconds, mm2. Energies and powers are one chip's unless named
otherwise (`energy_j`, `tokens_per_j`: every chip of the layout).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from archsim.hardware.area import RETICLE_MM2, Area
from archsim.hardware.power import EnergySplit
from archsim.runner.energy import RunEnergy, StepEnergy
from archsim.runner.generation import RunResult

UNIT_NAMES = {  # ENERGY_PARTS as a table labels them
    "matrix": "matrix units",
    "vector": "vector units",
    "sram": "SRAM",
    "l2": "L2 and NoC",
    "hbm": "HBM",
    "link": "links",
    "static": "static",
    "idle": "idle (clock tree)",
}


AREA_NAMES = {  # Area.parts() as a table labels them
    "matrix": "matrix units",
    "lanes": "vector lanes",
    "core_logic": "core logic",
    "sram": "SRAM",
    "l2": "L2",
    "noc": "NoC",
    "hbm_phy": "HBM PHYs",
    "link_phy": "link PHYs",
    "uncore": "uncore",
}


def split_dict(e: EnergySplit) -> dict[str, float]:
    return {f"{k}_j": v for k, v in e.parts().items()}


def step_energy_dict(s: StepEnergy) -> dict[str, Any]:
    return {
        "energy_j": s.energy_j,
        "time_s": s.time_s,
        "average_power_w": s.average_power_w,
        "peak_power_w": s.peak_power_w,
        "by_unit": split_dict(s.energy),
        "by_kind": {
            k.kind.value: {
                "energy_j": k.energy.total_j,
                "time_s": k.time_s,
                "clock_hz": k.clock_hz,
                "min_clock_hz": k.min_clock_hz,
            }
            for k in s.kinds
        },
    }


def energy_summary(e: RunEnergy | None) -> dict[str, Any]:
    """The headline figures of a run's energy (null without a power model): the sweep's names."""
    if e is None:
        return dict.fromkeys(SUMMARY_NAMES)
    return {
        "energy_j": e.energy_j,
        "power_w": e.average_power_w,
        "peak_power_w": e.peak_power_w,
        "tokens_per_j": e.tokens_per_j,
        "decode_j_per_token": e.decode_j_per_token,
        "decode_tokens_per_j": e.decode_tokens_per_j,
    }


SUMMARY_NAMES = ("energy_j", "power_w", "peak_power_w", "tokens_per_j", "decode_j_per_token", "decode_tokens_per_j")


def energy_dict(e: RunEnergy | None) -> dict[str, Any] | None:
    """Everything a run's JSON says of its energy (None without a power model)."""
    if e is None:
        return None
    return {
        "energy_j": e.energy_j,
        "chip_energy_j": e.chip_energy_j,
        "chips": e.chips,
        "average_power_w": e.average_power_w,
        "peak_power_w": e.peak_power_w,
        "limit_w": e.limit_w,
        "tokens_per_j": e.tokens_per_j,
        "decode_energy_j": e.decode_energy_j,
        "decode_power_w": e.decode_power_w,
        "decode_j_per_token": e.decode_j_per_token,
        "decode_tokens_per_j": e.decode_tokens_per_j,
        "by_unit": split_dict(e.energy),
        "prefill": step_energy_dict(e.prefill),
        "decode": step_energy_dict(e.decode) if e.decode is not None else None,
    }


def area_dict(a: Area | None, result: RunResult | None = None, chips: int = 1, node: str = "") -> dict[str, Any] | None:
    """A die's area by block, the reticle check, and (with a run) decode tokens/s per mm2 of
    silicon (`chips` dies)."""
    if a is None:
        return None
    out = {
        "die_mm2": a.die_mm2,
        "node": node,
        "by_block_mm2": a.parts(),
        "reticle_mm2": RETICLE_MM2,
        "fits_reticle": a.fits_reticle,
        "dies": a.dies,
    }
    if result is not None:
        out["decode_tokens_per_s_per_mm2"] = result.decode_tokens_per_s / (chips * a.die_mm2)
    return out


def energy_table(e: RunEnergy, title: str) -> Table:
    """Energy and power of the prefill step, the first decode step and the whole run, one chip,
    with the split by unit in % (units that take nothing in the whole run left out)."""
    t = Table(title=title, title_justify="left")
    t.add_column("", no_wrap=True)
    used = [k for k, v in e.energy.parts().items() if v > 0]
    for col in ("energy", "avg W", "peak W", *(UNIT_NAMES[k] for k in used)):
        t.add_column(col, justify="right", no_wrap=True)
    rows: list[tuple[str, EnergySplit, float, float]] = [
        ("prefill step", e.prefill.energy, e.prefill.average_power_w, e.prefill.peak_power_w)
    ]
    if e.decode is not None:
        rows.append(("first decode step", e.decode.energy, e.decode.average_power_w, e.decode.peak_power_w))
    rows.append(("whole run", e.energy, e.average_power_w, e.peak_power_w))
    for name, split, avg, peak in rows:
        total, parts = split.total_j, split.parts()
        shares = [f"{100 * parts[k] / total:.0f}%" if total else "-" for k in used]
        t.add_row(name, format_joules(total), f"{avg:,.0f}", f"{peak:,.0f}", *shares)
    if "sram" not in used:
        t.caption = "SRAM: in the MAC's energy (the chip file states no SRAM energy)"
    return t


def power_table(e: RunEnergy, chip_name: str) -> Table:
    """Per op kind of the prefill and first decode step: its share of the step's energy and the
    clock the power limit held it at (mean over its time, and its lowest)."""
    t = Table(
        title=f"power: {e.average_power_w:,.0f} W average, {e.peak_power_w:,.0f} W peak "
        f"against the {e.limit_w:,.0f} W limit of the {chip_name}",
        title_justify="left",
    )
    for col in ("op kind", "prefill J", "share", "clock", "decode J", "share", "clock"):
        t.add_column(col, justify="left" if col == "op kind" else "right", no_wrap=True)
    steps = [e.prefill] + ([e.decode] if e.decode is not None else [])
    kinds = list(dict.fromkeys(k.kind for s in steps for k in s.kinds))
    for kind in kinds:
        cells = [kind.value]
        for s in (e.prefill, e.decode):
            k = next((k for k in s.kinds if k.kind is kind), None) if s is not None else None
            if s is None or k is None:
                cells += ["-", "-", "-"]
                continue
            cells += [
                format_joules(k.energy.total_j),
                f"{100 * k.energy.total_j / s.energy_j:.1f}%" if s.energy_j else "-",
                format_clock(k.clock_hz, k.min_clock_hz),
            ]
        t.add_row(*cells)
    t.caption = "clock: mean over the kind's time (lowest of its ops where lower)"
    return t


def area_table(a: Area, chip_name: str, node: str, result: RunResult | None = None, chips: int = 1) -> Table:
    """The die's area by block, its reticle check and what the run gets per mm2."""
    t = Table(title=f"die area of the {chip_name} ({node})", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column(justify="right")
    total = a.die_mm2
    t.add_row(
        "die",
        f"{total:,.0f} mm2 "
        + (
            f"(within the {RETICLE_MM2:.0f} mm2 reticle)"
            if a.fits_reticle
            else f"[red](over the {RETICLE_MM2:.0f} mm2 reticle: needs {a.dies} chiplets)[/red]"
        ),
    )
    for name, mm2 in a.parts().items():
        if mm2 > 0:
            t.add_row(f"  {AREA_NAMES[name]}", f"{mm2:,.1f} mm2 ({100 * mm2 / total:.0f}%)")
    if result is not None:
        t.add_row("decode tokens/s per mm2", f"{result.decode_tokens_per_s / (chips * total):,.3g}")
    return t


def format_joules(j: float) -> str:
    """'1.23 J', '456 mJ', '12.3 kJ' (3 significant figures)."""
    from archsim.units import sig3

    for unit, scale in (("MJ", 1e6), ("kJ", 1e3), ("J", 1.0), ("mJ", 1e-3), ("uJ", 1e-6)):
        if abs(j) >= scale * 0.9995:
            return f"{sig3(j / scale)} {unit}"
    return f"{sig3(j * 1e9)} nJ" if j else "0 J"


def format_clock(mean_hz: float, low_hz: float) -> str:
    text = f"{mean_hz / 1e9:.2f} GHz"
    return text if low_hz >= mean_hz * 0.9995 else f"{text} ({low_hz / 1e9:.2f})"
