"""Predict measured board power: each point of a power calibration file (archsim/data/
power_calibration.json) simulated on its chip, and the error per kernel kind.

A point is the board power of a published characterisation of a GPU under one sustained simple
kernel (never an LLM, model or serving system): `id`, `chip` (a hw_configs name), `kind`
(KINDS), `measured_w`, `conditions` and `source`; `set` (optional) gives hardware values by
dotted path, as `--set` does, where the measured board differs from the chip file by a datasheet
value (an A100 SXM4 40GB's HBM rate on the 80GB file). An `idle` point gives `clock_mhz`, the SM
clock the board idled at (its power is `floor_power_w` there: static and idle power), or null
where the source does not say it (then any power between the chip's floor at its lowest and at
its highest clock matches: `idle_power_w` to `floor_power_w` at its clock). Any other point
gives `case`, the kernel in the calibration set's case schema (archsim/runner/validation.py
`case_ops`), timed back to back as a sustained loop runs it; its prediction is the power its
kernels draw at the clock the power limit holds (archsim/choose/timed.py `kernel_power_w`). A
point may also give `measured_tflops` (a GEMM's rate, which the held clock sets) or
`clock_mhz` (the SM clock the source read during the kernel): both are compared too.

A streaming point may give `measured_tbps`, the HBM traffic its kernel sustained (reads and
writes, TB/s). archsim's nearest op seldom streams at the very rate of a benchmark's own loop,
and the file checks energies, not that rate (the case sets time it), so such a point is
predicted at the rate it ran: its kernels' actions scale with the bytes they move, so at a held
clock f the dynamic part of their power scales with the rate,

    P = P_floor(f) + (P_kernel - P_floor(f)) x R_measured / R_simulated

(P_floor = `floor_power_w`); both rates are reported.

The file's `meta.open` names (chip, kind) pairs known to miss the 10% bar, each with why: they
are reported, and a test holds that they still miss it, so the list is emptied as they are fixed.

Units: watts, MHz, TFLOP/s, TB/s; errors are (predicted - measured) / measured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archsim.choose import time_op
from archsim.choose.conditions import Condition
from archsim.config.loader import build, read_config
from archsim.hardware import Chip
from archsim.hardware.power import floor_power_w, idle_power_w
from archsim.runner.validation import case_ops

KINDS = ("idle", "gemm", "streaming", "copy", "attention")
DATA = Path(__file__).resolve().parents[1] / "data" / "power_calibration.json"
TOLERANCE = 0.10  # the bar: each kernel kind of a calibrated chip within 10% of its data


@dataclass(frozen=True)
class PowerPoint:
    """One measured board power and what the chip file predicts for it."""

    id: str
    chip: str
    kind: str
    measured_w: float
    predicted_w: float
    predicted_low_w: float  # = predicted_w but for an idle point of unknown clock: its band
    measured_tflops: float | None = None
    predicted_tflops: float | None = None
    measured_clock_mhz: float | None = None
    predicted_clock_mhz: float | None = None
    measured_tbps: float | None = None  # HBM traffic the source's kernel sustained
    simulated_tbps: float | None = None  # HBM traffic of archsim's op at its own rate

    @property
    def error(self) -> float:
        """Relative error of the power; 0 where the measurement lies in an idle point's band."""
        if self.predicted_low_w <= self.measured_w <= self.predicted_w:
            return 0.0
        nearest = self.predicted_low_w if self.measured_w < self.predicted_low_w else self.predicted_w
        return (nearest - self.measured_w) / self.measured_w


def load_points(path: Path = DATA) -> list[dict]:
    """The points of a power calibration file (each checked for the fields its kind needs)."""
    points = json.loads(path.read_text())["points"]
    for p in points:
        if p["kind"] not in KINDS:
            raise ValueError(f"{path.name}: {p['id']}: kind {p['kind']!r} is not one of {', '.join(KINDS)}")
        if p["kind"] != "idle" and "case" not in p:
            raise ValueError(f"{path.name}: {p['id']}: a {p['kind']} point needs its kernel as `case`")
    return points


def open_kinds(path: Path = DATA) -> dict[tuple[str, str], str]:
    """(chip, kind) pairs the file lists as known to miss the bar, with why (`meta.open`)."""
    meta = json.loads(path.read_text()).get("meta", {})
    return {(o["chip"], o["kind"]): o["why"] for o in meta.get("open", [])}


def point_chip(point: dict) -> Chip:
    """The point's chip file with its `set` values (hardware paths, as `--set` gives them)."""
    params = [(tuple(path.split(".")), value) for path, value in point.get("set", {}).items()]
    system, _config, _doc = build("hardware", read_config(point["chip"], "hardware"), params, f"{point['id']}: set")
    return system.chip


def predict(point: dict, chip: Chip) -> PowerPoint:
    """What `chip` draws under the point's kernel (see the module docstring)."""
    p = chip.power
    if p is None:
        raise ValueError(f"{point['id']}: {chip.name} has no power section")
    base = {"id": point["id"], "chip": point["chip"], "kind": point["kind"], "measured_w": point["measured_w"]}
    measured_clock = point.get("clock_mhz")
    if point["kind"] == "idle":
        if measured_clock is None:
            high = floor_power_w(p, chip.clock_hz)
            return PowerPoint(**base, predicted_w=high, predicted_low_w=idle_power_w(p))
        watts = floor_power_w(p, measured_clock * 1e6)
        return PowerPoint(**base, predicted_w=watts, predicted_low_w=watts, measured_clock_mhz=measured_clock)
    timed = [time_op(op, chip, Condition.GRAPH) for op in case_ops(point["case"])]
    busy_s = [t.timing.time_s - t.timing.overhead_cycles / chip.clock_hz for t in timed]
    kernel_s = sum(busy_s)
    watts = sum(t.kernel_power_w * s for t, s in zip(timed, busy_s)) / kernel_s
    clock_mhz = sum(t.timing.clock_hz * t.timing.time_s for t in timed) / sum(t.timing.time_s for t in timed) / 1e6
    tflops = sum(t.timing.flops for t in timed) / kernel_s / 1e12
    tbps = sum(t.timing.hbm_bytes for t in timed) / kernel_s / 1e12
    measured_tbps = point.get("measured_tbps")
    if measured_tbps is not None:  # at the rate the source's kernel ran (module docstring)
        floor_w = sum(floor_power_w(p, t.timing.clock_hz or chip.clock_hz) * s for t, s in zip(timed, busy_s))
        floor_w /= kernel_s
        watts = floor_w + (watts - floor_w) * measured_tbps / tbps
    return PowerPoint(
        **base,
        predicted_w=watts,
        predicted_low_w=watts,
        measured_tflops=point.get("measured_tflops"),
        predicted_tflops=tflops if "measured_tflops" in point else None,
        measured_clock_mhz=measured_clock,
        predicted_clock_mhz=clock_mhz,
        measured_tbps=measured_tbps,
        simulated_tbps=tbps if measured_tbps is not None else None,
    )


def kind_errors(points: Sequence[PowerPoint]) -> dict[tuple[str, str], float]:
    """Mean absolute power error per (chip, kind)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for pt in points:
        groups.setdefault((pt.chip, pt.kind), []).append(abs(pt.error))
    return {key: sum(v) / len(v) for key, v in groups.items()}
