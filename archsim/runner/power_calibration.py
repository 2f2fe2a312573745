"""Predict measured board power: each point of a power calibration file (archsim/data/
power_calibration.json) simulated on its chip, and the error per kernel kind.

A point is the board power of a published characterisation of a GPU under one sustained simple
kernel (never an LLM, model or serving system): `id`, `chip` (a hw_configs name), `kind`
(KINDS), `measured_w`, `conditions` and `source`. An `idle` point gives `clock_mhz`, the SM
clock the board idled at (its power is `floor_power_w` there: static and idle power), or null
where the source does not say it (then any power between the chip's floor at its lowest and at
its highest clock matches: `idle_power_w` to `floor_power_w` at its clock). Any other point
gives `case`, the kernel in the calibration set's case schema (archsim/runner/validation.py
`case_ops`), timed back to back as a sustained loop runs it; its prediction is the power its
kernels draw at the clock the power limit holds (archsim/choose/timed.py `kernel_power_w`). A
point may also give `measured_tflops` (a GEMM's rate, which the held clock sets) or
`clock_mhz` (the SM clock the source read during the kernel): both are compared too.

Units: watts, MHz, TFLOP/s; errors are (predicted - measured) / measured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archsim.choose import time_op
from archsim.choose.conditions import Condition
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
    kernel_s = sum(t.timing.time_s - t.timing.overhead_cycles / chip.clock_hz for t in timed)
    watts = sum(t.kernel_power_w * (t.timing.time_s - t.timing.overhead_cycles / chip.clock_hz) for t in timed)
    watts /= kernel_s
    clock_mhz = sum(t.timing.clock_hz * t.timing.time_s for t in timed) / sum(t.timing.time_s for t in timed) / 1e6
    tflops = sum(t.timing.flops for t in timed) / kernel_s / 1e12
    return PowerPoint(
        **base,
        predicted_w=watts,
        predicted_low_w=watts,
        measured_tflops=point.get("measured_tflops"),
        predicted_tflops=tflops if "measured_tflops" in point else None,
        measured_clock_mhz=measured_clock,
        predicted_clock_mhz=clock_mhz,
    )


def kind_errors(points: Sequence[PowerPoint]) -> dict[tuple[str, str], float]:
    """Mean absolute power error per (chip, kind)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for pt in points:
        groups.setdefault((pt.chip, pt.kind), []).append(abs(pt.error))
    return {key: sum(v) / len(v) for key, v in groups.items()}
