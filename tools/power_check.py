"""Board power the chip files predict against measured power (archsim/data/power_calibration.json).

    python3 tools/power_check.py                 # one row per point, then the error per kernel kind
    python3 tools/power_check.py --file PATH     # another file of the same schema

Each point is a published characterisation of a GPU at idle or under one sustained simple kernel
(its conditions and source are in the file); archsim/runner/power_calibration.py predicts it.
Exits 1 when a chip's mean error over a kernel kind passes 10%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim.config.loader import load_system
from archsim.runner.power_calibration import DATA, TOLERANCE, kind_errors, load_points, predict


def _range(low: float, high: float) -> str:
    return f"{high:.1f}" if abs(high - low) < 0.05 else f"{low:.1f}-{high:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=DATA, help="a power calibration file")
    args = parser.parse_args()
    chips: dict = {}
    points = []
    for point in load_points(args.file):
        chip = chips.setdefault(point["chip"], load_system(point["chip"])[0].chip)
        points.append(predict(point, chip))
    print("| point | chip | kind | measured W | predicted W | error | TFLOP/s measured / predicted | clock MHz |")
    print("|---|---|---|---|---|---|---|---|")
    for p in points:
        rate = f"{p.measured_tflops:.0f} / {p.predicted_tflops:.0f}" if p.predicted_tflops is not None else "-"
        clock = p.measured_clock_mhz or p.predicted_clock_mhz
        print(
            f"| {p.id} | {p.chip} | {p.kind} | {p.measured_w:.1f} | {_range(p.predicted_low_w, p.predicted_w)} "
            f"| {100 * p.error:+.1f}% | {rate} | {f'{clock:.0f}' if clock else '-'} |"
        )
    errors = kind_errors(points)
    print()
    for (chip, kind), err in sorted(errors.items()):
        print(f"{chip:10s} {kind:10s} mean |error| {100 * err:5.1f}%{'  OVER' if err > TOLERANCE else ''}")
    return 1 if any(err > TOLERANCE for err in errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
