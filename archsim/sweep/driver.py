"""Run a sweep into a results folder: resolve every point, skip the ones already recorded, send
the rest out in chunks, write each finished chunk as a Parquet part, keep `summary.json` current.

Killed at any moment, a sweep loses at most the chunks in flight; the same command resumes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from archsim.sweep.evaluate import FAILED, INFEASIBLE, OK, Evaluation
from archsim.sweep.points import PointTask, resolve_points
from archsim.sweep.spec import SweepSpec
from archsim.sweep.store import PART_GLOB, ResultStore, count_statuses

CHUNKS_PER_WORKER = 8  # auto chunk size: about this many chunks per worker, for balance and resumability
MAX_AUTO_CHUNK = 16  # points; at ~0.2 s a point a kill loses at most a few seconds per worker


@dataclass(frozen=True)
class SweepReport:
    """Where a sweep stands after a run: counts over the points of the spec."""

    points_total: int
    points_ok: int
    points_infeasible: int
    points_failed: int
    points_run: int  # evaluated by this invocation
    elapsed_s: float
    lost: tuple[str, ...] = field(default=())  # why chunks came back without rows
    stale_rows: int = 0  # rows in the folder for points that are not in this spec
    cpu_s: float = 0.0  # CPU time the workers spent on the points run

    @property
    def points_done(self) -> int:
        return self.points_ok + self.points_infeasible + self.points_failed

    @property
    def points_remaining(self) -> int:
        return self.points_total - self.points_done

    @property
    def complete(self) -> bool:
        return self.points_remaining == 0

    def summary(self, spec: SweepSpec, executor_label: str, workers: int, parts: int) -> dict:
        return {
            "name": spec.name,
            "spec": spec.source,
            "points_total": self.points_total,
            "points_done": self.points_done,
            "points_ok": self.points_ok,
            "points_infeasible": self.points_infeasible,
            "points_failed": self.points_failed,
            "points_remaining": self.points_remaining,
            "complete": self.complete,
            "parts": parts,
            "stale_rows": self.stale_rows,
            "last_run": {
                "points": self.points_run,
                "elapsed_s": round(self.elapsed_s, 3),
                "points_per_s": round(self.points_run / self.elapsed_s, 3) if self.elapsed_s > 0 else None,
                "cpu_s": round(self.cpu_s, 3),
                "executor": executor_label,
                "workers": workers,
                "lost_chunks": list(self.lost),
            },
        }


def auto_chunk_size(points: int, workers: int) -> int:
    return max(1, min(MAX_AUTO_CHUNK, math.ceil(points / (max(1, workers) * CHUNKS_PER_WORKER))))


def chunked(tasks: list[PointTask], size: int) -> Iterator[list[PointTask]]:
    for i in range(0, len(tasks), size):
        yield tasks[i : i + size]


ProgressFn = Callable[[int, int, int], None]  # (points done by this run, points to run, failed so far)


def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    executor,
    chunk_size: int | None = None,
    on_resolved: Callable[[int, int], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> SweepReport:
    """Evaluate every point of `spec` not yet recorded in `out_dir`; the state afterwards."""
    start = time.perf_counter()
    with ResultStore(out_dir, spec.settings(), spec.columns()) as store:
        tasks = resolve_points(spec)
        done = store.done()
        hashes = [t.config_hash for t in tasks]
        counts = count_statuses(done, hashes)
        todo = [t for t in tasks if t.config_hash not in done]
        stale = len(set(done) - set(hashes))
        if on_resolved:
            on_resolved(len(tasks), len(todo))
        size = chunk_size or spec.chunk_size or auto_chunk_size(len(todo), executor.workers)
        lost: list[str] = []
        ran, cpu_s = 0, 0.0

        def report() -> SweepReport:
            return SweepReport(
                len(tasks),
                counts[OK],
                counts[INFEASIBLE],
                counts[FAILED],
                ran,
                time.perf_counter() - start,
                tuple(lost),
                stale,
                cpu_s,
            )

        def write_summary() -> None:
            store.write_summary(
                report().summary(spec, executor.label, executor.workers, len(list(store.dir.glob(PART_GLOB))))
            )

        write_summary()
        try:
            for outcome in executor.run(chunked(todo, size), Evaluation.of(spec)) if todo else ():
                if outcome.rows is None:
                    lost.append(outcome.error or "lost")
                    continue
                store.write_part(outcome.rows)
                counts.update(r["status"] for r in outcome.rows)
                ran += len(outcome.rows)
                cpu_s += outcome.cpu_s
                write_summary()
                if on_progress:
                    on_progress(ran, len(todo), counts[FAILED])
        finally:
            write_summary()
        return report()
