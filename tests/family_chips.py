"""Chips of every family as the schema accepts them, for property tests (hypothesis).

A generated chip is a shipped preset of its family with its resources scaled: cores, clock,
matrix units, each memory level's capacity and bandwidth, the DMA's bytes in flight, the main
memory's pins (or, on an SRAM-only chip, its bandwidth) and the power limit. Each is set as
`--set` sets it, through the loader and the schema (archsim/config/loader.py: `build`), so the
chip is one a user could write; the few the schema refuses (a power limit under the floor of the
chip's idle power) are drawn again. `more_of` gives the same chip with one resource raised.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from archsim.config.loader import build, read_config
from archsim.errors import ConfigError
from archsim.hardware import Chip, ChipFamily

ROOT = Path(__file__).resolve().parents[1]

# the presets each family's chips are drawn around; SRAM-only chips (main memory on the die) apart
BASES: dict[ChipFamily, tuple[str, ...]] = {
    ChipFamily.GPU: ("h200", "b200", "mi300x", "a100"),
    ChipFamily.TPU: ("tpu_v5e", "tpu_v6e", "tpu_v7"),
    ChipFamily.TRAINIUM: ("trainium2",),
    ChipFamily.DATAFLOW: ("dataflow_2stack",),
    ChipFamily.SYSTOLIC: ("scalesim_ws_128x128",),
}
SRAM_ONLY: dict[ChipFamily, tuple[str, ...]] = {ChipFamily.DATAFLOW: ("lpu",), ChipFamily.WAFER: ("wafer",)}

# a resource: its key path, the unit `--set` writes it in, and whether it is a whole number
RESOURCES: dict[str, tuple[tuple[str, ...], str]] = {
    "cores": (("cores", "count"), ""),
    "clock": (("clock",), "Hz"),
    "matrix_units": (("cores", "matrix_units", "count"), ""),
    "vector_lanes": (("cores", "vector_unit", "lanes"), ""),
    "sram_capacity": (("cores", "sram", "capacity"), "B"),
    "sram_bandwidth": (("cores", "sram", "bandwidth"), "B"),
    "inflight": (("cores", "dma", "max_inflight"), "B"),
    "l2_capacity": (("l2", "capacity"), "B"),
    "l2_bandwidth": (("l2", "bandwidth"), "B/s"),
    "hbm_data_rate": (("hbm", "data_rate"), "bps"),
    "hbm_stacks": (("hbm", "stacks"), ""),
    "memory_bandwidth": (("memory", "bandwidth"), "B/s"),
    "noc_bandwidth": (("noc", "bandwidth"), "B/s"),
    "die_link_bandwidth": (("die_link", "bandwidth"), "B/s"),
    "power_limit": (("power", "limit"), "W"),
}
# the factors a drawn chip's resources take (of its preset's); the systolic presets' unlimited
# memory is replaced by an HBM of the GPU's kind first (SYSTOLIC_HBM)
FACTORS: dict[str, tuple[float, ...]] = {
    "cores": (0.25, 0.5, 1.0, 1.0, 2.0),
    "clock": (0.6, 0.8, 1.0, 1.0),
    "matrix_units": (0.5, 1.0, 1.0, 2.0),
    "sram_capacity": (0.5, 1.0, 1.0, 2.0),
    "inflight": (0.5, 1.0, 2.0),
    "l2_capacity": (0.25, 1.0, 4.0),
    "hbm_data_rate": (0.5, 0.75, 1.0, 1.5),
    "hbm_stacks": (0.5, 1.0, 2.0),
    "memory_bandwidth": (0.25, 1.0, 2.0),
    "power_limit": (0.75, 1.0, 1.5, 4.0),
}
SYSTOLIC_HBM = {  # one HBM3 stack of 16 channels of 64 bits at 6.4 Gb/s: 819 GB/s, 500 ns away
    ("hbm", "stacks"): 1,
    ("hbm", "channels_per_stack"): 16,
    ("hbm", "channel_width_bits"): 64,
    ("hbm", "data_rate"): "6.4 Gbps",
    ("hbm", "latency"): "500 ns",
    ("hbm", "refresh_time"): "100 ns",
    ("hbm", "refresh_interval"): "3.9 us",
    ("hbm", "turnaround"): "10 ns",
    ("hbm", "rw_batch"): "2 KiB",
    ("l2", "capacity"): "8 MiB",
    ("l2", "bandwidth"): "1.6 TB/s",
    ("l2", "latency"): "200 ns",
    ("cores", "sram", "capacity"): "4 MiB",
    ("cores", "dma", "max_inflight"): "256 KiB",
}

Params = tuple[tuple[tuple[str, ...], Any], ...]


@cache
def _doc(name: str):
    return read_config(str(ROOT / "hw_configs" / f"{name}.yaml"), "hardware")


@cache
def resolved(name: str) -> dict:
    """The preset's resolved configuration (canonical units), the systolic HBM put in."""
    base = tuple(SYSTOLIC_HBM.items()) if name.startswith("scalesim") else ()
    return build("hardware", _doc(name), base)[1]


def _value(config: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return config


def scaled(name: str, factors: dict[str, float]) -> Params:
    """The `--set` parameters of preset `name` with each resource of `factors` scaled, those
    the preset lacks (an SRAM-only chip's HBM, a chip without power) left out."""
    config = resolved(name)
    params = list(SYSTOLIC_HBM.items()) if name.startswith("scalesim") else []
    for resource, factor in factors.items():
        path, unit = RESOURCES[resource]
        value = _value(config, path)
        if value is None or factor == 1.0:
            continue
        new = max(1, round(value * factor)) if not unit else value * factor
        params = [(p, v) for p, v in params if p != path]
        params.append((path, f"{new!r} {unit}" if unit else new))
        if resource == "clock" and config.get("power"):  # the top of the voltage curve moves with it
            params.append((("power", "max_clock"), f"{new!r} Hz"))
    return tuple(params)


@cache
def chip(name: str, params: Params) -> Chip:
    return build("hardware", _doc(name), params)[0].chip


@st.composite
def family_chips(draw, family: ChipFamily, sram_only: bool = False) -> tuple[str, Params]:
    """(preset, parameters) of a chip of `family`: its preset's resources each scaled by a
    drawn factor. Call `chip(*drawn)` for the chip."""
    name = draw(st.sampled_from((SRAM_ONLY if sram_only else BASES)[family]))
    factors = {r: draw(st.sampled_from(f)) for r, f in FACTORS.items()}
    params = scaled(name, factors)
    try:
        chip(name, params)
    except ConfigError:  # a limit under the chip's floor: not a chip
        assume(False)
    return name, params


def more_of(name: str, params: Params, resource: str, factor: float) -> Chip | None:
    """The chip of (`name`, `params`) with `resource` raised by `factor`, or None where the
    chip has no such resource (or the schema refuses the raised one)."""
    path, unit = RESOURCES[resource]
    config = build("hardware", _doc(name), params)[1]
    value = _value(config, path)
    if value is None:
        return None
    new = max(value + 1, round(value * factor)) if not unit else value * factor
    raised = [(p, v) for p, v in params if p not in (path, ("power", "max_clock"))]
    raised.append((path, f"{new!r} {unit}" if unit else new))
    if resource == "clock" and config.get("power"):
        raised.append((("power", "max_clock"), f"{new!r} Hz"))
    elif config.get("power") and ("power", "max_clock") in dict(params):
        raised.append((("power", "max_clock"), dict(params)[("power", "max_clock")]))
    try:
        return chip(name, tuple(raised))
    except ConfigError:
        return None
