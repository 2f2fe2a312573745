"""Board power the chip files predict against measured power (archsim/data/power_calibration.json).

    python3 tools/power_check.py                 # one row per point, then the error per kernel kind
    python3 tools/power_check.py --file PATH     # another file of the same schema

Each point is a published characterisation of a GPU at idle or under one sustained simple kernel
(its conditions and source are in the file); archsim/runner/power_calibration.py predicts it, a
streaming point at the HBM rate its kernel sustained (TB/s: measured / archsim's op at its own).
Exits 1 when a chip's mean error over a kernel kind passes 10%; a kind the file lists as open
(`meta.open`) is marked so, with why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim.runner.power_calibration import DATA, TOLERANCE, kind_errors, load_points, open_kinds, point_chip, predict


def _range(low: float, high: float) -> str:
    return f"{high:.1f}" if abs(high - low) < 0.05 else f"{low:.1f}-{high:.1f}"


def _pair(measured: float | None, predicted: float | None, digits: int) -> str:
    """`measured / predicted`, either side `-` where not stated."""
    if measured is None and predicted is None:
        return "-"
    return " / ".join("-" if v is None else f"{v:.{digits}f}" for v in (measured, predicted))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=DATA, help="a power calibration file")
    args = parser.parse_args()
    points = [predict(point, point_chip(point)) for point in load_points(args.file)]
    print(
        "| point | chip | kind | measured W | predicted W | error | TFLOP/s measured / predicted "
        "| TB/s measured / archsim | clock MHz measured / predicted |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p in points:
        print(
            f"| {p.id} | {p.chip} | {p.kind} | {p.measured_w:.1f} | {_range(p.predicted_low_w, p.predicted_w)} "
            f"| {100 * p.error:+.1f}% | {_pair(p.measured_tflops, p.predicted_tflops, 0)} "
            f"| {_pair(p.measured_tbps, p.simulated_tbps, 2)} | {_pair(p.measured_clock_mhz, p.predicted_clock_mhz, 0)} |"
        )
    errors = kind_errors(points)
    known = open_kinds(args.file)
    print()
    for (chip, kind), err in sorted(errors.items()):
        mark = "  OVER" if err > TOLERANCE else ""
        if mark and (chip, kind) in known:
            mark += f" (open: {known[chip, kind]})"
        print(f"{chip:10s} {kind:10s} mean |error| {100 * err:5.1f}%{mark}")
    return 1 if any(err > TOLERANCE for err in errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
