"""Benchmark of `archsim sweep`: 1,000 H200-like designs (arrays, SRAM, HBM stacks, clock) for
Llama-3-8B decode (hw_configs/sweeps/h200_halton_1000.yaml), end to end as a user runs it:

    python3 tools/bench_sweep.py                 # 2 workers, the target is <= 120 s
    python3 tools/bench_sweep.py --workers 4 --points 200

It runs `archsim sweep` in a fresh results folder and prints the wall time, points per second,
and the CPU seconds the workers spent per point (from DIR/summary.json), with the load
average, since a busy machine stretches the wall time but not the CPU time. With `--cpus`
(Linux) the sweep is pinned to that many CPUs, so a big machine measures a small one. The sweep
starts from an empty op cache (archsim/opcache.py), so it measures simulation; `--warm-cache`
runs it twice and times the second, which reads every op back. `--fidelity` is the sweep's
(default full, as the target was set; auto and screen: docs/performance.md).

`--breakdown N` instead evaluates the spec's first N points in this process, one after another
from empty result caches (after a first point that loads the kernels), and prints where a
point's time goes: the event loop (archsim/engine/kernels.py) under the candidates' plays at the
chip's clock and under the power search's replays at the clock its power holds, the event loop
on phases of more than 8 distinct core sequences (stream-K GEMMs, causal attention), the
compilation of the candidates, and the rest (building the design's steps, energy, bookkeeping).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "hw_configs" / "sweeps" / "h200_halton_1000.yaml"
TARGET_S = 120.0  # 1,000 points in at most 2 minutes on 2 cores


def spec_with_points(points: int, folder: Path) -> Path:
    """The benchmark spec, drawing `points` samples instead of 1,000."""
    text = SPEC.read_text().replace("points: 1000", f"points: {points}")
    path = folder / "bench_spec.yaml"
    path.write_text(
        text.replace("hardware: h200", f"hardware: {ROOT / 'hw_configs' / 'h200.yaml'}").replace(
            "workload: llama3_8b", f"workload: {ROOT / 'workloads' / 'llama3_8b.yaml'}"
        )
    )
    return path


def breakdown(points: int) -> None:
    """Where a sweep point's time goes, in wall milliseconds a point in this process (see above).
    The parts are timed by wrapping the module globals archsim.choose.pick calls them through."""
    from archsim import jit, opcache
    from archsim.choose import pick
    from archsim.engine import simulate
    from archsim.memo import clear_all
    from archsim.sweep.evaluate import Evaluation, evaluate_point
    from archsim.sweep.points import iter_points
    from archsim.sweep.spec import load_spec

    opcache.set_enabled(False)
    spec = load_spec(SPEC)
    ev = Evaluation.of(spec)
    tasks = list(itertools.islice(iter_points(spec), points + 1))
    jit.load()
    evaluate_point(tasks[0], ev)  # the kernels loaded
    spent: collections.Counter[str] = collections.Counter()
    plays: collections.Counter[str] = collections.Counter()
    held = [False]
    kernel, play_held, compile_candidates = simulate.simulate_phase, pick.play_held, pick.compile_candidates

    def timed_kernel(core_start, *args):
        t0 = time.perf_counter()
        try:
            return kernel(core_start, *args)
        finally:
            where = "power search replays" if held[0] else "candidate plays"
            wide = " (> 8 sequences)" if len(core_start) > 9 else ""
            spent[where + wide] += time.perf_counter() - t0
            plays[where + wide] += 1

    def timed_held(*args):
        held[0] = True
        try:
            return play_held(*args)
        finally:
            held[0] = False

    def timed_compile(*args):
        t0 = time.perf_counter()
        try:
            return compile_candidates(*args)
        finally:
            spent["compiling candidates"] += time.perf_counter() - t0

    simulate.simulate_phase, pick.play_held, pick.compile_candidates = timed_kernel, timed_held, timed_compile
    try:
        clear_all()
        start = time.perf_counter()
        for task in tasks[1:]:
            evaluate_point(task, ev)
        total = time.perf_counter() - start
    finally:
        simulate.simulate_phase, pick.play_held, pick.compile_candidates = kernel, play_held, compile_candidates
    n = len(tasks) - 1
    print(f"{n} points in this process: {1000 * total / n:.1f} ms a point (wall), of which")
    for part in sorted(spent, key=lambda k: -spent[k]):
        count = f" ({plays[part] / n:.1f} phases a point)" if part in plays else ""
        print(f"  {1000 * spent[part] / n:6.1f} ms  {part}{count}")
    print(f"  {1000 * (total - sum(spent.values())) / n:6.1f} ms  the rest")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--points", type=int, default=1000, help="design points (default 1000)")
    ap.add_argument("--cpus", type=int, help="pin the sweep to the first N CPUs (Linux taskset)")
    ap.add_argument("--out", help="results folder to keep (default: a temporary one)")
    ap.add_argument("--warm-cache", action="store_true", help="time a second sweep, its ops all in the op cache")
    ap.add_argument("--breakdown", type=int, metavar="N", help="where the time of the first N points goes, in-process")
    ap.add_argument("--fidelity", choices=("full", "screen", "auto"), default="full", help="the sweep's (default full)")
    args = ap.parse_args()
    if args.breakdown:
        sys.path.insert(0, str(ROOT))
        breakdown(args.breakdown)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "results"
        env = {**os.environ, "ARCHSIM_CACHE_DIR": str(Path(tmp) / "opcache")}
        spec = spec_with_points(args.points, Path(tmp))
        pin = ["taskset", "-c", f"0-{args.cpus - 1}"] if args.cpus else []

        def sweep(folder: Path) -> list[str]:
            return pin + [
                sys.executable,
                "-m",
                "archsim",
                "sweep",
                str(spec),
                "--out",
                str(folder),
                "--workers",
                str(args.workers),
                "--force-workers",  # the benchmark's worker count, whatever this machine has
                "--fidelity",
                args.fidelity,
                "--quiet",
            ]

        # fill Numba's disk cache first, as any earlier archsim run on the machine would have
        subprocess.run(
            pin
            + [sys.executable, "-m", "archsim", "run", "--prompt", "32", "--generate", "2", "--quiet", "--no-cache"],
            check=True,
            capture_output=True,
        )
        if args.warm_cache:
            subprocess.run(sweep(Path(tmp) / "first"), env=env, check=True, capture_output=True)
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.run(sweep(out), capture_output=True, text=True, env=env)
        wall_s = time.perf_counter() - start
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return proc.returncode
        summary = json.loads((out / "summary.json").read_text())
    last = summary["last_run"]
    print(
        f"{summary['points_done']} points ({summary['points_ok']} ok, {summary['points_infeasible']} infeasible, "
        f"{summary['points_failed']} failed) at {args.fidelity} fidelity with {args.workers} workers"
        + (f" on {args.cpus} CPUs" if args.cpus else "")
    )
    print(
        f"wall {wall_s:.1f} s end to end ({last['elapsed_s']:.1f} s in the sweep), "
        f"{summary['points_done'] / wall_s:.1f} points/s"
    )
    print(
        f"worker CPU {last['cpu_s']:.1f} s: {1000 * last['cpu_s'] / max(1, last['points']):.0f} ms a point; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    scaled = TARGET_S * args.points / 1000
    verdict = "within" if wall_s <= scaled else "over"
    print(f"{verdict} the target of {scaled:.0f} s ({TARGET_S:.0f} s per 1,000 points)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
