"""Screen fidelity against full (archsim/choose/fidelity.py), as docs/performance.md states it:
the simulated time of every case of the shipped `archsim validate` sets, per case kind, and every
objective of every point of the shipped sweeps, per objective, with the sweep's Pareto front at
each fidelity (as the spec ranks its objectives, and every other way of ranking them), and the CPU
seconds each fidelity took in this process (op caches empty, the disk's off).

    python3 tools/screen_check.py                        # every shipped set and sweep
    python3 tools/screen_check.py --sets none --sweeps h200_variants --points 96
    python3 tools/screen_check.py --sets h200_calibration --kind gemm --sweeps none

It exits 1 where a difference passes the bound (2%, archsim/sweep/refine.py SCREEN_TOLERANCE) or a
front differs, so that it can stand as a check.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ("h200_variants", "h200_energy", "h200_halton_1000")


def _diff(screen: float, full: float) -> float:
    """|screen / full - 1|, 0 where both are 0."""
    return abs(screen / full - 1) if full else (0.0 if screen == 0 else float("inf"))


def check_sets(names: list[str], kinds: list[str] | None) -> bool:
    """Per set and case kind: cases, max and mean difference, the worst case; and CPU seconds."""
    from archsim.choose.fidelity import at_fidelity
    from archsim.commands.validate import SHIPPED, load_case_file
    from archsim.config.loader import load_system
    from archsim.memo import clear_all
    from archsim.runner.validation import validate_cases
    from archsim.sweep.refine import SCREEN_TOLERANCE

    good = True
    for name in names:
        cases, meta, _ = load_case_file(name)
        cases = [c for c in cases if kinds is None or c.get("kind") in kinds]
        shipped = SHIPPED[name]
        system = load_system(shipped.chip)[0]
        collectives = load_system(shipped.collectives)[0] if shipped.collectives else None
        results, cpu = {}, {}
        for at in ("full", "screen"):
            clear_all()
            t0 = time.process_time()
            with at_fidelity(at):
                results[at], _ = validate_cases(cases, system, meta, collectives)
            cpu[at] = time.process_time() - t0
        by_kind: dict[str, list[tuple[float, str]]] = defaultdict(list)
        for f, s in zip(results["full"], results["screen"], strict=True):
            by_kind[f.kind].append((_diff(s.simulated_ms, f.simulated_ms), f.id))
        print(f"{name}: {len(cases)} cases, CPU {cpu['full']:.1f} s full, {cpu['screen']:.1f} s screen")
        for kind, diffs in sorted(by_kind.items()):
            worst = max(diffs)
            mean = sum(d for d, _ in diffs) / len(diffs)
            print(f"  {kind:18s} {len(diffs):4d}  max {100 * worst[0]:.3f}% ({worst[1]})  mean {100 * mean:.3f}%")
            good &= worst[0] <= SCREEN_TOLERANCE
    return good


def _front(rows: list[dict], names: list[str], maximize: list[bool]) -> frozenset[str]:
    import numpy as np

    from archsim.sweep.pareto import pareto_mask

    values = np.array([[r[n] for n in names] for r in rows], dtype=float).reshape(len(rows), len(names))
    return frozenset(r["config_hash"] for r, on in zip(rows, pareto_mask(values, maximize), strict=True) if on)


def warm_up(spec) -> None:
    """The modules a point imports, loaded, and their first-call costs paid, at both fidelities,
    so that neither fidelity's CPU seconds carry them: the spec's first simulated point, twice."""
    from archsim.memo import clear_all
    from archsim.sweep.evaluate import Evaluation, evaluate_point
    from archsim.sweep.points import iter_points

    task = next((t for t in iter_points(spec) if t.design is not None), None)
    for at in ("full", "screen"):
        if task is not None:
            evaluate_point(task, Evaluation.of(spec, at))
    clear_all()


def check_sweep(name: str, points: int | None) -> bool:
    """Per objective: max and mean difference over the points that ran at both; the fronts; CPU."""
    from archsim import opcache
    from archsim.memo import clear_all
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.executors import SerialExecutor
    from archsim.sweep.refine import SCREEN_TOLERANCE
    from archsim.sweep.spec import load_spec
    from archsim.sweep.store import read_results

    opcache.set_enabled(False)
    path = ROOT / "hw_configs" / "sweeps" / f"{name}.yaml"
    rows, cpu = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = path
        if points is not None:  # the spec's first points: a grid's, or a sequence's
            text = path.read_text()
            if "points:" in text:
                text = "\n".join(
                    f"  points: {points}" if line.strip().startswith("points:") else line for line in text.splitlines()
                )
            spec_path = Path(tmp) / f"{name}.yaml"
            spec_path.write_text(text)
        spec = load_spec(spec_path)
        warm_up(spec)
        for at in ("full", "screen"):
            clear_all()
            t0 = time.process_time()
            run_sweep(spec, Path(tmp) / at, SerialExecutor(), fidelity=at)
            cpu[at] = time.process_time() - t0
            rows[at] = {r["config_hash"]: r for r in read_results(Path(tmp) / at).to_pylist()}
    names = [o.name for o in spec.objectives]
    full, screen = rows["full"], rows["screen"]
    ok = sorted(h for h, r in full.items() if r["status"] == "ok" and screen[h]["status"] == "ok")
    statuses = sum(full[h]["status"] != screen[h]["status"] for h in full)
    n = len(full)
    print(
        f"{name}: {n} points ({len(ok)} ok at both, {statuses} of another status), CPU "
        f"{1000 * cpu['full'] / n:.1f} ms a point full, {1000 * cpu['screen'] / n:.1f} ms screen"
    )
    good = statuses == 0
    for o in names:
        diffs = [_diff(screen[h][o], full[h][o]) for h in ok]
        worst = max(diffs, default=0.0)
        print(f"  {o:24s} max {100 * worst:.3f}%  mean {100 * sum(diffs) / max(1, len(diffs)):.3f}%")
        good &= worst <= SCREEN_TOLERANCE
    ranked = [o.maximize for o in spec.objectives]
    spec_front = _front([full[h] for h in ok], names, ranked)
    same = _front([screen[h] for h in ok], names, ranked) == spec_front
    every = [list(m) for m in itertools.product([True, False], repeat=len(names))]
    alike = sum(_front([full[h] for h in ok], names, m) == _front([screen[h] for h in ok], names, m) for m in every)
    print(f"  front as the spec ranks: {len(spec_front)} designs, {'the same' if same else 'DIFFERENT'}")
    print(f"  fronts the same under {alike} of {len(every)} rankings")
    return good and same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="h200_calibration,h200_holdout,a100_calibration", help="validate sets, or none")
    ap.add_argument("--kind", action="append", help="only cases of this kind (repeatable)")
    ap.add_argument("--sweeps", default=",".join(SWEEPS[:2]), help="shipped sweeps, or none")
    ap.add_argument("--points", type=int, help="a sampled sweep's first N points (default: the spec's)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from archsim import jit, opcache

    jit.load()
    opcache.set_enabled(False)
    good = True
    if args.sets != "none":
        good &= check_sets(args.sets.split(","), args.kind)
    if args.sweeps != "none":
        for name in args.sweeps.split(","):
            good &= check_sweep(name, args.points)
    print("within the bound, fronts the same" if good else "OUT OF BOUND or a front differs")
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
