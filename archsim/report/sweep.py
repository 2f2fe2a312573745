"""Tokens/s against batch: runs of a workload at a few batches up to the largest that fits in HBM.

The batches are spread geometrically from 1 to the capacity limit (`largest_batch` at the
scenario's context), so the curve shows where a bigger batch stops paying and where memory
ends it. Each point is a full `run_generation` of the scenario at that batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from archsim.graph.model import Workload
from archsim.hardware import System
from archsim.runner.generation import KV_STRIDE, RunResult, run_generation
from archsim.runner.memory import largest_batch

SWEEP_POINTS = 6  # batches simulated, the capacity limit included


def sweep_batches(limit: int, points: int = SWEEP_POINTS, also: int | None = None) -> list[int]:
    """About `points` batches from 1 to `limit`, spaced geometrically, with `also` if it fits."""
    if limit < 1:
        return []
    spread = np.unique(np.round(np.geomspace(1, limit, max(2, points))).astype(int)).tolist()
    if also is not None and 1 <= also <= limit:
        spread = sorted(set(spread) | {also})
    return spread


def batch_sweep(
    w: Workload,
    system: System,
    kv_stride: int = KV_STRIDE,
    known: RunResult | None = None,
    points: int = SWEEP_POINTS,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[int], list[RunResult], int]:
    """(batches, their runs, the capacity limit); `known` is reused for its own batch."""
    limit = largest_batch(w, system)
    batches = sweep_batches(limit, points, known.batch if known else None)
    runs = []
    for i, b in enumerate(batches):
        if known is not None and b == known.batch:
            runs.append(known)
        else:
            runs.append(run_generation(replace(w, scenario=replace(w.scenario, batch=b)), system, kv_stride))
        if progress:
            progress(i + 1, len(batches))
    return batches, runs, limit
