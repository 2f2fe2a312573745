"""The plots of a run or a comparison from Python (`plot_*`: PNG files, as `archsim run --plots`
and `archsim compare --plots` draw them; matplotlib is imported only to draw)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archsim.api.more import CompareReport
    from archsim.api.results import RunReport


def _steps(report: RunReport) -> list:
    r = report.result
    return [("prefill", r.prefill)] + ([("first decode step", r.decode)] if r.decode else [])


def plot_roofline(report: RunReport, path: str | Path) -> Path:
    """The run's ops on the chip's roofline (prefill and first decode step)."""
    from archsim.report.roofline import roofline

    w = report.workload.workload
    return roofline(Path(path), _steps(report), report.hardware.system.chip, w.dtypes.activations)


def plot_breakdown(report: RunReport, path: str | Path) -> Path:
    """Where the prefill and first decode step's time goes, by op kind and part."""
    from archsim.report.plots import breakdown

    return breakdown(Path(path), _steps(report))


def plot_decode_kv(reports: RunReport | Sequence[RunReport], path: str | Path) -> Path:
    """Decode step time against KV length, one line per run."""
    from archsim.report.plots import decode_by_kv

    runs = [reports] if not isinstance(reports, Sequence) else list(reports)
    return decode_by_kv(Path(path), [(r.hardware.name, r.result) for r in runs])


def plot_memory(reports: RunReport | Sequence[RunReport], path: str | Path) -> Path:
    """Weights, KV cache and activations against HBM capacity, one bar per run."""
    from archsim.report.plots import memory

    runs = [reports] if not isinstance(reports, Sequence) else list(reports)
    return memory(Path(path), [(r.hardware.name, r.result.footprint) for r in runs])


def plot_compare(report: CompareReport, out_dir: str | Path) -> list[Path]:
    """A comparison's summary and bound plots (compare_summary.png, compare_bounds.png)."""
    from archsim.report.plots import compare_bounds, compare_summary

    ran = [(row.label, row.result) for row in report.rows if row.result is not None]
    sc = report.workload.workload.scenario
    title = f"{report.workload.name}: batch {sc.batch}, prompt {sc.prompt_tokens}, generate {sc.output_tokens}"
    d = Path(out_dir)
    return [compare_summary(d / "compare_summary.png", ran, title), compare_bounds(d / "compare_bounds.png", ran)]
