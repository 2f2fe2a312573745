"""The roofline plot of a run: every op placed by its FLOP per HBM byte and achieved FLOP/s
under the chip's matrix, vector and HBM roofs, labels clustered and kept apart, and the ops that
cannot be placed named under the plot with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from archsim.hardware import Chip, DType
from archsim.report.plots import KIND_COLOURS, eng_ticks, figure, plain_ticks, save, styled, vector_flops
from archsim.runner.generation import OpRecord, StepResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

CLUSTER_DECADES = (0.12, 0.3)  # ops closer than this (log10 x, log10 y) share one label


def where_ops_go(step: StepResult) -> tuple[list[tuple[OpRecord, float, float]], list[str], list[str]]:
    """The ops of a step as a roofline takes them: (record, FLOP per HBM byte, achieved FLOP/s)
    of those it can place; the names of those without FLOPs; those that moved no HBM bytes."""
    placed: list[tuple[OpRecord, float, float]] = []
    no_flops: list[str] = []
    in_l2: list[str] = []
    for r in step.ops:
        t = r.timing
        if t.flops <= 0 or t.time_s <= 0:
            no_flops.append(r.op.name)
        elif t.hbm_bytes <= 0:
            in_l2.append(r.op.name)
        else:
            placed.append((r, t.arithmetic_intensity, t.achieved_flops))
    return placed, no_flops, in_l2


MARKERS = ("o", "^", "s", "D")  # one per step drawn


@styled
def roofline(path: Path, steps: list[tuple[str, StepResult]], chip: Chip, dtype: DType) -> Path:
    """Every op placed by FLOP per HBM byte and achieved FLOP/s under the chip's matrix, vector
    and HBM roofs (log-log). Ops that cannot be placed are named under the plot: those without
    FLOPs (copies, gathers) and those that moved no HBM bytes (inputs already in L2, so their
    arithmetic intensity against HBM is unbounded)."""
    fig, ax = figure(9.0, 6.5)
    points, no_flops, in_l2 = _scatter_ops(ax, steps)
    labels = [
        ax.annotate(
            ", ".join(names),
            (x, y),
            textcoords="offset points",
            xytext=(6, 3),
            fontsize=7,
            arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5", "shrinkA": 0, "shrinkB": 3},
        )
        for x, y, names in label_clusters(points)
    ]
    _roofs(ax, chip, dtype, [x for x, _, _ in points])
    placed = {r.op.kind for _, step in steps for r, _, _ in where_ops_go(step)[0]}
    for kind, colour in KIND_COLOURS.items():  # the kinds drawn; the others are named under the plot
        if kind in placed:
            ax.scatter([], [], color=colour, label=kind.value)
    for (label, _), marker in zip(steps, MARKERS):
        ax.scatter([], [], marker=marker, color="white", edgecolors="black", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(plain_ticks())
    ax.yaxis.set_major_formatter(eng_ticks("FLOP/s"))
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"Roofline on {chip.name}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right")
    _name_unplaced(fig, no_flops, in_l2)
    declutter(fig, labels)
    return save(fig, path)


def _scatter_ops(
    ax: Axes, steps: list[tuple[str, StepResult]]
) -> tuple[list[tuple[float, float, str]], list[str], list[str]]:
    """A marker per placed op of each step (its kind's colour, the step's shape): the points as
    (FLOP per HBM byte, FLOP/s, op name), and the names without FLOPs and without HBM bytes,
    each once."""
    points: list[tuple[float, float, str]] = []
    no_flops: list[str] = []
    in_l2: list[str] = []
    for (_, step), marker in zip(steps, MARKERS):
        placed, none, l2 = where_ops_go(step)
        no_flops += [n for n in none if n not in no_flops]
        in_l2 += [n for n in l2 if n not in in_l2]
        for r, x, y in placed:
            points.append((x, y, r.op.name))
            ax.scatter(
                [x],
                [y],
                marker=marker,
                color=KIND_COLOURS[r.op.kind],
                s=36,
                zorder=3,
                edgecolors="black",
                linewidths=0.4,
            )
    return points, no_flops, in_l2


def _roofs(ax: Axes, chip: Chip, dtype: DType, xs: list[float]) -> None:
    """The matrix and vector roofs under the HBM slope, from a third of the lowest intensity
    placed (0.1 at most) to three times the highest (ten times the ridge point at least)."""
    peak, hbm_bw, vec = chip.peak_flops(dtype), chip.hbm.peak_bandwidth_bytes_per_s, vector_flops(chip)
    lo = min(xs + [0.1]) / 3
    hi = max(xs + [10 * peak / hbm_bw]) * 3
    intensity = np.geomspace(lo, hi, 200)
    ax.plot(
        intensity,
        np.minimum(peak, intensity * hbm_bw),
        color="black",
        lw=1.5,
        label=f"{dtype.value} matrix roof {peak / 1e12:.0f} TFLOP/s, HBM {hbm_bw / 1e12:.2f} TB/s",
    )
    ax.plot(
        intensity,
        np.minimum(vec, intensity * hbm_bw),
        color="gray",
        lw=1,
        ls="--",
        label=f"vector roof {vec / 1e12:.1f} TFLOP/s",
    )
    ridge = peak / hbm_bw
    ax.axvline(ridge, color="black", lw=0.8, ls=":", label=f"ridge point {ridge:,.0f} FLOP/B")


def _name_unplaced(fig: Figure, no_flops: list[str], in_l2: list[str]) -> None:
    """The ops not shown, named in a line each under the plot, the axes moved up to make room."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    notes = []
    if no_flops:
        notes.append(f"not shown, no FLOPs: {', '.join(no_flops)}")
    if in_l2:
        notes.append(f"not shown, no HBM traffic (inputs in L2): {', '.join(in_l2)}")
    if not notes:
        return
    fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, color="0.3", va="bottom", ha="left")
    layout = fig.get_layout_engine()
    assert isinstance(layout, ConstrainedLayoutEngine), "figure() lays every figure out with 'constrained'"
    layout.set(rect=(0, 0.035 * len(notes), 1, 1 - 0.035 * len(notes)))


def label_clusters(points: list[tuple[float, float, str]]) -> list[tuple[float, float, list[str]]]:
    """Points closer than CLUSTER_DECADES on both log axes share one label, anchored at the
    highest of them: (x, y, names without repeats), highest clusters first."""
    clusters: list[tuple[float, float, list[str]]] = []
    for x, y, name in sorted(points, key=lambda p: -p[1]):
        near = next(
            (
                c
                for c in clusters
                if abs(np.log10(c[0] / x)) < CLUSTER_DECADES[0] and abs(np.log10(c[1] / y)) < CLUSTER_DECADES[1]
            ),
            None,
        )
        if near is None:
            clusters.append((x, y, [name]))
        elif name not in near[2]:
            near[2].append(name)
    return clusters


def declutter(fig: Figure, labels: list[Annotation]) -> None:
    """Move annotations down, top first, until no two overlap (their leader lines keep them
    attached to their points). Needs a drawn figure, so it draws once with Agg."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    placed: list[Bbox] = []
    for ann in sorted(labels, key=lambda a: (-a.xy[1], a.xy[0])):
        start = ann.xyann
        for attempt in range(1, 9):
            box = ann.get_window_extent(renderer)
            if not any(box.overlaps(p) for p in placed):
                break
            step = (attempt + 1) // 2 * (1 if attempt % 2 else -1) * 9.0  # points: up 9, down 9, up 18, ...
            ann.xyann = (start[0], start[1] + step)
        placed.append(ann.get_window_extent(renderer))
