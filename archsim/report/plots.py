"""PNG plots of a run (the roofline is in roofline.py): time breakdown per op kind, decode step time against KV length,
tokens/s against batch, memory footprint. matplotlib (Agg, no display) is imported only here,
and only when a plot is drawn; figures are built without pyplot's global state.

Axes state their units: FLOP/s, FLOP per byte of HBM traffic, ms, tokens/s, GB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np

from archsim.graph.ops import OpKind
from archsim.hardware import Chip
from archsim.runner.generation import RunResult, StepResult
from archsim.runner.memory import Footprint

if TYPE_CHECKING:  # matplotlib is optional and imported only to draw
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, FuncFormatter
    from matplotlib.typing import RcKeyType

P = ParamSpec("P")
R = TypeVar("R")

KIND_COLOURS = {
    OpKind.GEMM: "tab:blue",
    OpKind.ATTENTION: "tab:red",
    OpKind.VECTOR: "tab:green",
    OpKind.EMBEDDING: "tab:purple",
    OpKind.COPY: "tab:brown",
}
PART_COLOURS = {
    "compute": "tab:green",
    "memory stall": "tab:orange",
    "kernel overhead": "tab:purple",
    "other (stores, imbalance)": "tab:gray",
}
DPI = 120


MATPLOTLIB_HINT = "plots need matplotlib: python3 -m pip install matplotlib"


class PlotsUnavailable(RuntimeError):
    """matplotlib is not installed."""


def require_matplotlib() -> None:
    """PlotsUnavailable unless matplotlib can be imported (checked before a long run, not after)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise PlotsUnavailable(MATPLOTLIB_HINT)


STYLE: dict[RcKeyType, Any] = {  # one look for every archsim figure (run, compare, serve, pareto)
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def styled(func: Callable[P, R]) -> Callable[P, R]:
    """Build the figure of `func` under STYLE (fonts are fixed when an artist is made)."""
    import functools

    @functools.wraps(func)
    def in_style(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            import matplotlib
        except ImportError:
            raise PlotsUnavailable(MATPLOTLIB_HINT) from None
        with matplotlib.rc_context(STYLE):
            return func(*args, **kwargs)

    return in_style


def figure(
    width_in: float = 8.0, height_in: float = 5.0, cols: int = 1, rows: int = 1, **subplots: Any
) -> tuple[Figure, Any]:
    """A new figure and its axes (Agg) in archsim's style, or PlotsUnavailable when matplotlib
    is missing. The axes are what `Figure.subplots` gives: one Axes, or an array of them for
    several panels (typed Any, as matplotlib types that array)."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotsUnavailable(MATPLOTLIB_HINT) from None
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
        axes = fig.subplots(rows, cols, **subplots)
    fig.draw = _readable_draw(fig.draw)  # type: ignore[method-assign]
    return fig, axes


def _readable_draw(draw: Callable[..., None]) -> Callable[..., None]:
    """`draw` of a figure, first with each text drawn as it is written (a `$` in a chip or op
    name escaped, so it is not read as math) and each log axis ticked in plain numbers (0.1,
    1, 10, 1k: no powers of ten in mathtext, no 1e+03). Every figure built by `figure`, however
    it is saved, is drawn through it."""
    import functools

    @functools.wraps(draw)
    def readable(renderer: Any) -> None:
        from matplotlib.text import Text

        fig = draw.__self__  # type: ignore[attr-defined]
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                _readable_log_ticks(axis)
                _literal_tick_names(axis)
        for text in fig.findobj(Text):
            text.set_text(literal(text.get_text()))
        draw(renderer)

    return readable


def literal(text: str) -> str:
    """`text` with every `$` escaped, so matplotlib draws it as written."""
    import re

    return re.sub(r"(?<!\\)\$", r"\\$", text)


def readable_number(x: float) -> str:
    """A tick value in plain digits: 0.001 to 9,999 as written (0.5, 20, 2000), beyond with a
    metric prefix (10k, 1M, 100u), never in powers of ten."""
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:g}"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("m", 1e-3), ("u", 1e-6)):
        if abs(x) >= scale * 0.9995:
            return f"{x / scale:g}{prefix}"
    return f"{x / 1e-9:g}n"


def _literal_tick_names(axis: Any) -> None:
    """Tick labels that are names (bars by chip, ticks given as text) escaped like every text."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.ticker import FixedFormatter

    class LiteralNames(StrCategoryFormatter):
        @staticmethod
        def _text(value: Any) -> str:
            return literal(StrCategoryFormatter._text(value))

    f = axis.get_major_formatter()
    if type(f) is StrCategoryFormatter:
        axis.set_major_formatter(LiteralNames(f._units))
    elif isinstance(f, FixedFormatter):
        f.seq = [literal(str(t)) for t in f.seq]


def _readable_log_ticks(axis: Any) -> None:
    """matplotlib's own log formatters of `axis` (which label in mathtext) replaced by ones that
    label the same ticks in plain numbers; formatters set by the plot are kept."""
    from matplotlib.ticker import LogFormatter

    class PlainLog(LogFormatter):
        def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
            return readable_number(x)

    for get, set_ in (
        (axis.get_major_formatter, axis.set_major_formatter),
        (axis.get_minor_formatter, axis.set_minor_formatter),
    ):
        f = get()
        if isinstance(f, LogFormatter) and type(f).__name__ != "PlainLog":
            set_(
                PlainLog(
                    base=getattr(f, "_base", 10.0),
                    labelOnlyBase=f.labelOnlyBase,
                    minor_thresholds=f.minor_thresholds,
                    linthresh=getattr(f, "_linthresh", None),
                )
            )


def stacked_bars(
    ax: Axes, names: list[str], segments: list[tuple[str, str, np.ndarray]], xlabel: str, title: str
) -> None:
    """Horizontal bars, one per name, each the sum of `segments` (label, colour, one value per
    name) stacked left to right, with their legend."""
    left = np.zeros(len(names))
    for label, colour, values in segments:
        ax.barh(names, values, left=left, color=colour, label=label)
        left += values
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def eng_ticks(unit: str) -> EngFormatter:
    from matplotlib.ticker import EngFormatter

    return EngFormatter(unit=unit)


def vector_flops(chip: Chip) -> float:
    """Elementwise operations per second of all vector units: lanes x cores x clock."""
    return float(chip.core.vector.lanes) * chip.cores * chip.clock_hz


def thousands_ticks() -> FuncFormatter:
    """Linear-axis ticks with thousands separators (32,768)."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def plain_ticks() -> FuncFormatter:
    """Log-axis ticks as plain numbers (0.1, 1, 10, 100) rather than powers of ten."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:g}")


def bar_number(x: float) -> str:
    """A bar's value to 3 significant figures in plain digits with thousands separators: 1,060
    rather than 1.06e+03, 4.56, 0.0123."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def time_parts(step: StepResult) -> dict[OpKind, dict[str, float]]:
    """Step time per op kind (seconds, all repeats) split into compute, memory stall, kernel
    overhead and the rest, from the cycles of each op's critical core."""
    out: dict[OpKind, dict[str, float]] = {}
    for r in step.ops:
        t = r.timing
        per_cycle = r.time_s / t.cycles if t.cycles else 0.0
        other = max(0, t.cycles - t.compute_cycles - t.stall_cycles - t.overhead_cycles)
        parts = out.setdefault(r.op.kind, dict.fromkeys(PART_COLOURS, 0.0))
        for name, cycles in zip(PART_COLOURS, (t.compute_cycles, t.stall_cycles, t.overhead_cycles, other)):
            parts[name] += cycles * per_cycle
    return out


@styled
def breakdown(path: Path, steps: list[tuple[str, StepResult]]) -> Path:
    """Per op kind, where each step's time goes (horizontal stacked bars, one panel per step)."""
    from archsim.units import format_seconds

    fig, axes = figure(5.0 * len(steps), 4.0, cols=len(steps))
    for ax, (label, step) in zip(np.atleast_1d(axes), steps):
        parts = time_parts(step)
        kinds = sorted(parts, key=lambda k: sum(parts[k].values()))
        segments = [
            (name, colour, np.array([parts[k][name] * 1e3 for k in kinds])) for name, colour in PART_COLOURS.items()
        ]
        stacked_bars(
            ax, [k.value for k in kinds], segments, "time in the step (ms)", f"{label}: {format_seconds(step.time_s)}"
        )
    return save(fig, path)


@styled
def decode_by_kv(
    path: Path,
    runs: list[tuple[str, RunResult]],
    curves: Sequence[tuple[str, Sequence[int], Sequence[float]]] | None = None,
) -> Path:
    """Decode step time against the KV length it reads: each run's own decode steps (a thick
    line over the scenario's KV range) and, where given, `curves` of (label, KV lengths, step
    seconds) over a wider range, so the slope shows even when a run spans few tokens."""
    curves = curves or ()
    fig, ax = figure(8.0, 4.5)
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for i, (label, r) in enumerate(runs):
        if len(r.decode_step_s):
            ax.plot(
                r.decode_kv_lens,
                r.decode_step_s * 1e3,
                color=colours[i % len(colours)],
                lw=3,
                label=f"{label}: this run (batch {r.batch}, KV {r.decode_kv_lens[0]}-{r.decode_kv_lens[-1]})",
            )
    for i, (label, kv, step_s) in enumerate(curves):
        colour = colours[i % len(colours)] if len(curves) > 1 else "0.45"  # one curve per run, in its colour
        ax.plot(kv, np.asarray(step_s) * 1e3, "o-", ms=3, lw=1, color=colour, label=label)
    ax.xaxis.set_major_formatter(thousands_ticks())
    if curves:
        ax.set_xlim(left=0)
    ax.set_xlabel("KV cache length (tokens per sequence)")
    ax.set_ylabel("decode step time (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("Decode step time against KV length")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return save(fig, path)


def compute_bound_from(batches: list[int], runs: list[RunResult]) -> int | None:
    """The smallest batch from which on decode spends more of its time compute-bound than
    bound by anything else (archsim/report/comparison.py's bound shares), or None: where the
    weights' and KV reads stop being amortised further by batching."""
    from archsim.engine.timing import Bound
    from archsim.report.comparison import decode_seconds_by_bound, dominant

    flip = None
    for b, r in zip(batches, runs):
        compute = r.decode is not None and dominant(decode_seconds_by_bound(r)) is Bound.COMPUTE
        flip = (flip or b) if compute else None
    return flip


@styled
def throughput_by_batch(path: Path, batches: list[int], runs: list[RunResult], limit: int, title: str) -> Path:
    """Decode and end-to-end tokens/s against batch, with the batch from which decode is
    compute-bound (where batching stops amortising memory reads) and the largest batch that fits
    in HBM."""
    fig, ax = figure(8.0, 4.5)
    ax.plot(batches, [r.decode_tokens_per_s for r in runs], "o-", label="decode tokens/s (batch / step time)")
    ax.plot(batches, [r.throughput_tokens_per_s for r in runs], "s--", label="end to end tokens/s (with prefill)")
    flip = compute_bound_from(batches, runs)
    if flip is None:
        ax.plot([], [], " ", label="decode memory- or overhead-bound at every batch shown")
    else:
        ax.axvline(flip, color="gray", ls="--", label=f"decode compute-bound from batch {flip}")
    ax.axvline(limit, color="red", ls=":", label=f"HBM capacity limit (batch {limit})")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.minorticks_off()
    ax.set_xlabel("batch (sequences)")
    ax.set_ylabel("tokens/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


@styled
def memory(path: Path, footprints: list[tuple[str, Footprint]]) -> Path:
    """Weights, KV cache and activations against HBM capacity, one bar per chip or run."""
    fig, ax = figure(8.0, 1.6 + 0.6 * len(footprints))
    labels = [label for label, _ in footprints]
    left = np.zeros(len(footprints))
    for name, colour in (("weights", "tab:blue"), ("KV cache", "tab:orange"), ("activations", "tab:green")):
        attr = {"weights": "weights_bytes", "KV cache": "kv_cache_bytes", "activations": "activations_bytes"}[name]
        gb = np.array([getattr(fp, attr) / 1e9 for _, fp in footprints])
        ax.barh(labels, gb, left=left, color=colour, label=name)
        left += gb
    for i, (_, fp) in enumerate(footprints):
        ax.plot(
            [fp.capacity_bytes / 1e9] * 2,
            [i - 0.4, i + 0.4],
            color="red",
            lw=2,
            label="HBM capacity" if i == 0 else None,
        )
    for i, (_, fp) in enumerate(footprints):
        ax.annotate(
            f"{fp.total_bytes / 1e9:.3g} of {fp.capacity_bytes / 1e9:.3g} GB "
            f"({100 * fp.total_bytes / fp.capacity_bytes:.0f}%)",
            (fp.total_bytes / 1e9, i),
            textcoords="offset points",
            xytext=(4, 0),
            va="center",
            fontsize=8,
        )
    ax.set_xlim(0, 1.25 * max(max(fp.total_bytes, fp.capacity_bytes) for _, fp in footprints) / 1e9)
    ax.invert_yaxis()
    ax.set_xlabel("memory per chip (GB)")
    ax.set_title("Memory footprint at the longest context")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25 - 0.1 / len(footprints)), ncol=4)
    return save(fig, path)


@styled
def compare_summary(path: Path, runs: list[tuple[str, RunResult]], title: str) -> Path:
    """TTFT, time per output token and decode tokens/s of each chip, as bars."""
    fig, axes = figure(12.0, 4.0, cols=3)
    names = [name for name, _ in runs]
    panels = (
        ("time to first token (ms)", [r.ttft_s * 1e3 for _, r in runs]),
        ("time per output token (ms)", [r.tpot_s * 1e3 for _, r in runs]),
        ("decode throughput (tokens/s)", [r.decode_tokens_per_s for _, r in runs]),
    )
    for ax, (label, values) in zip(axes, panels):
        bars = ax.barh(names, values, color="tab:blue")
        ax.bar_label(bars, labels=[bar_number(v) for v in values], fontsize=8, padding=2)
        ax.set_xlabel(label)
        ax.set_xlim(0, 1.25 * max(values + [1e-12]))
        ax.invert_yaxis()  # the first chip on top
    for ax in axes[1:]:
        ax.set_yticklabels([])
    fig.suptitle(title)
    return save(fig, path)


@styled
def compare_bounds(path: Path, runs: list[tuple[str, RunResult]]) -> Path:
    """Share of prefill and of decode time that each chip spends memory-, compute- or
    overhead-bound (stacked bars)."""
    from archsim.engine.timing import Bound
    from archsim.report.comparison import decode_seconds_by_bound, shares, step_seconds_by_bound

    colours = {
        Bound.MEMORY: "tab:orange",
        Bound.COMPUTE: "tab:green",
        Bound.OVERHEAD: "tab:purple",
        Bound.COMMUNICATION: "tab:blue",
    }
    splits: tuple[tuple[str, Callable[[RunResult], dict[Bound, float]]], ...] = (
        ("prefill", lambda r: step_seconds_by_bound(r.prefill)),
        ("decode (all steps)", decode_seconds_by_bound),
    )
    fig, axes = figure(11.0, 1.8 + 0.5 * len(runs), cols=2)
    names = [name for name, _ in runs]
    for ax, (label, split) in zip(axes, splits):
        part = [shares(split(r)) for _, r in runs]
        left = np.zeros(len(runs))
        for bound, colour in colours.items():
            pct = np.array([100 * p[bound] for p in part])
            ax.barh(names, pct, left=left, color=colour, label=f"{bound.value}-bound")
            left += pct
        ax.set_xlim(0, 100)
        ax.invert_yaxis()
        ax.set_xlabel(f"share of {label} time (%)")
    axes[1].set_yticklabels([])
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, path)
