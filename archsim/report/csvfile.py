"""The per-op table as CSV: one row per op of the prefill and the first decode step.

Times in seconds, rates per second, sizes in bytes, energy in joules, clocks in Hz; `time_s` and
`energy_j` are one execution of the op, `step_time_s` all `repeat` executions in the step.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from archsim.report.export import write_text
from archsim.runner.generation import RunResult, StepResult

COLUMNS = (
    "phase",
    "op",
    "kind",
    "repeat",
    "time_s",
    "step_time_s",
    "share",
    "bound",
    "cycles",
    "compute_cycles",
    "stall_cycles",
    "overhead_cycles",
    "hbm_bytes",
    "l2_bytes",
    "flops",
    "arithmetic_intensity",
    "achieved_flops_per_s",
    "achieved_bytes_per_s",
    "utilisation",
    "active_cores",
    "kernels",
    "clock_hz",
    "energy_j",
)


def step_rows(step: StepResult) -> list[dict[str, Any]]:
    total = step.time_s
    rows = []
    for r in step.ops:
        t = r.timing
        rows.append(
            {
                "phase": step.step.phase.value,
                "op": r.op.name,
                "kind": r.op.kind.value,
                "repeat": r.op.repeat,
                "time_s": t.time_s,
                "step_time_s": r.time_s,
                "share": r.time_s / total if total else 0.0,
                "bound": t.bound.value,
                "cycles": t.cycles,
                "compute_cycles": t.compute_cycles,
                "stall_cycles": t.stall_cycles,
                "overhead_cycles": t.overhead_cycles,
                "hbm_bytes": t.hbm_bytes,
                "l2_bytes": t.l2_bytes,
                "flops": t.flops,
                "arithmetic_intensity": t.arithmetic_intensity,
                "achieved_flops_per_s": t.achieved_flops,
                "achieved_bytes_per_s": t.achieved_bytes_per_s,
                "utilisation": t.utilisation,
                "active_cores": t.active_cores,
                "kernels": t.kernels,
                "clock_hz": t.clock_hz,
                "energy_j": t.energy_j,
            }
        )
    return rows


def op_rows(r: RunResult) -> list[dict[str, Any]]:
    return step_rows(r.prefill) + (step_rows(r.decode) if r.decode else [])


def write_op_csv(path: str | Path, r: RunResult) -> None:
    """Write the per-op table atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(op_rows(r))
    write_text(path, buf.getvalue())
