"""Run a sweep into a results folder: resolve the points one at a time as they run, skip the ones
already recorded, send the rest out in chunks, write each finished chunk as a Parquet part, keep
`summary.json` current.

Killed at any moment, a sweep loses at most the chunks in flight; the same command resumes it.
Samples that resolve to a point already seen are counted (`duplicates`), never dropped silently.

Fidelity (archsim/choose/fidelity.py): `full` simulates every point at full fidelity (and re-runs
any point the folder holds at screen fidelity); `screen` every point at screen fidelity; `auto`
every point at screen fidelity, then at full fidelity every point that may be on the Pareto front
of the spec's objectives, each ranked its own way (refine.py), each re-run row put in place of the
screened one; the default. Each row records the fidelity that produced it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from archsim.sweep.evaluate import FAILED, INFEASIBLE, OK, Evaluation
from archsim.sweep.metrics import FACT_NAMES
from archsim.sweep.points import PointTask, Resolution, iter_points
from archsim.sweep.refine import refine_mask
from archsim.sweep.spec import SweepSpec
from archsim.sweep.store import PART_GLOB, ResultStore, count_statuses, read_results

FIDELITIES = ("auto", "screen", "full")  # of a sweep; DEFAULT_FIDELITY when none is asked for
DEFAULT_FIDELITY = "full"

# auto chunk size: about this many chunks per worker of the points left, so that chunks shrink
# as the sweep ends; 4 keeps h200_variants' two workers within 10 ms of each other at the end with
# 28-32 chunks, where 8 gave 38 and about 60 ms (its measured point times, dealt in order)
CHUNKS_PER_WORKER = 4
MAX_AUTO_CHUNK = 16  # points; at ~0.2 s a point a kill loses at most a few seconds per worker
MIN_TAPERED_CHUNK = 2  # points: each chunk costs the sweep a round trip to a worker and a part (2-3 ms to write)


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
    samples: int = 0  # samples the strategy draws
    duplicates: int = 0  # samples that resolved to a point already counted
    fidelity: str = DEFAULT_FIDELITY  # asked for: auto, screen or full
    refined: int = 0  # points re-run at full fidelity after screening (auto)

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
            "samples": self.samples,
            "duplicates": self.duplicates,
            "points_total": self.points_total,
            "points_done": self.points_done,
            "points_ok": self.points_ok,
            "points_infeasible": self.points_infeasible,
            "points_failed": self.points_failed,
            "points_remaining": self.points_remaining,
            "complete": self.complete,
            "parts": parts,
            "fidelity": self.fidelity,
            "objectives": spec.goals(),
            "stale_rows": self.stale_rows,
            "last_run": {
                "points": self.points_run,
                "refined": self.refined,
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


def chunked(tasks, size: int | Callable[[int], int]) -> Iterator[list[PointTask]]:
    """Lists of up to `size` tasks, taken from any iterable as they come; `size` may be a
    function of how many tasks were taken before the list."""
    taken = 0
    limit = size(taken) if callable(size) else size
    chunk: list[PointTask] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) == limit:
            yield chunk
            taken += len(chunk)
            limit = size(taken) if callable(size) else size
            chunk = []
    if chunk:
        yield chunk


def tapering(points: int, workers: int) -> Callable[[int], int]:
    """Chunk sizes that shrink with the points left (`auto_chunk_size` of those) down to
    MIN_TAPERED_CHUNK: the last chunks are small, so that no worker is left alone with a large
    one while the others idle, but not so small that writing the parts holds the sweep back."""
    floor = min(MIN_TAPERED_CHUNK, auto_chunk_size(points, workers))
    return lambda taken: max(floor, auto_chunk_size(max(0, points - taken), workers))


ProgressFn = Callable[[int, int, int], None]  # (points done by this run, points to run, failed so far)


def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    executor,
    chunk_size: int | None = None,
    on_resolved: Callable[[int, int], None] | None = None,
    on_progress: ProgressFn | None = None,
    fidelity: str = DEFAULT_FIDELITY,
) -> SweepReport:
    """Evaluate every point of `spec` not yet recorded in `out_dir` (at `fidelity`, one of
    FIDELITIES); the state afterwards."""
    start = time.perf_counter()
    first_pass = "full" if fidelity == "full" else "screen"
    with ResultStore(out_dir, spec.settings(), spec.columns()) as store:
        recorded = store.recorded()
        done = {h: status for h, (status, f) in recorded.items() if first_pass == "screen" or f == "full"}
        samples = spec.sample_count()
        state = Resolution()
        counts = count_statuses(done, [])
        todo_estimate = max(0, samples - len(done))
        if on_resolved:
            on_resolved(samples, todo_estimate)
        size = chunk_size or spec.chunk_size or tapering(todo_estimate, executor.workers)
        lost: list[str] = []
        ran, cpu_s, refined = 0, 0.0, 0

        def pending() -> Iterator[PointTask]:
            for task in iter_points(spec, state):
                if task.config_hash in done:
                    counts[done[task.config_hash]] += 1
                    continue
                yield task

        def report() -> SweepReport:
            unresolved = samples - state.samples  # an interrupted sweep: points not yet reached
            stale = len(set(done) - state.hashes) if unresolved == 0 else 0
            return SweepReport(
                state.points + unresolved,
                counts[OK],
                counts[INFEASIBLE],
                counts[FAILED],
                ran,
                time.perf_counter() - start,
                tuple(lost),
                stale,
                cpu_s,
                samples,
                state.duplicates,
                fidelity,
                refined,
            )

        def write_summary() -> None:
            store.write_summary(
                report().summary(spec, executor.label, executor.workers, len(list(store.dir.glob(PART_GLOB))))
            )

        def run_chunks(chunks: Iterator[list[PointTask]], at: str) -> None:
            nonlocal ran, cpu_s
            first = next(chunks, None)  # nothing left to run: no workers started
            outcomes = executor.run(itertools.chain([first], chunks), Evaluation.of(spec, at)) if first else ()
            for outcome in outcomes:
                if outcome.rows is None:
                    lost.append(outcome.error or "lost")
                    continue
                again = [r for r in outcome.rows if r["config_hash"] in recorded]  # screened before: replaced
                if again:
                    store.replace_rows(again)
                if len(again) < len(outcome.rows):
                    store.write_part([r for r in outcome.rows if r["config_hash"] not in recorded])
                for r in outcome.rows:
                    if r["config_hash"] in done:  # counted already, as screened
                        counts[done[r["config_hash"]]] -= 1
                    done[r["config_hash"]] = r["status"]
                    recorded[r["config_hash"]] = (r["status"], at)
                counts.update(r["status"] for r in outcome.rows)
                ran += len(outcome.rows)
                cpu_s += outcome.cpu_s
                write_summary()
                if on_progress:
                    on_progress(ran, todo_estimate, counts[FAILED])

        write_summary()
        try:
            run_chunks(chunked(pending(), size), first_pass)
            if fidelity == "auto" and not lost and state.samples == samples:
                again = set(refine_hashes(spec, store.dir, recorded))
                todo_estimate += len(again)
                tasks = (t for t in iter_points(spec) if t.config_hash in again)
                run_chunks(
                    chunked(tasks, chunk_size or spec.chunk_size or tapering(len(again), executor.workers)), "full"
                )
                refined = len(again)
        finally:
            write_summary()
        return report()


def refine_hashes(spec: SweepSpec, out_dir: Path, recorded: dict[str, tuple[str, str]]) -> list[str]:
    """The screened points of a folder that may be on the Pareto front of the spec's objectives,
    each ranked its own way, at full fidelity (refine.py): its rows with every objective (ok, or ruled out by a constraint on what the
    run reports, which full fidelity may meet), of which those simulated at screen fidelity."""
    if not recorded or not spec.objectives:
        return []
    names = [o.name for o in spec.objectives]
    rows = [
        r
        for r in read_results(out_dir).select(["config_hash", "fidelity", *names]).to_pylist()
        if all(r[n] is not None for n in names)
    ]
    exact = FACT_NAMES | {p.name for p in spec.parameters} | {d.name for d in spec.derived}
    simulated = [not o.expr.names <= exact for o in spec.objectives]
    values = np.array([[float(r[n]) for n in names] for r in rows]).reshape(len(rows), len(names))
    keep = refine_mask(values, [o.maximize for o in spec.objectives], simulated)
    return [r["config_hash"] for r, k in zip(rows, keep, strict=True) if k and r["fidelity"] == "screen"]
