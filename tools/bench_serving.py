#!/usr/bin/env python3
"""Time `archsim serve` as a user runs it: whole processes, from a fresh op-result cache (cold)
and again once it holds the step shapes (warm), each reporting wall and CPU time and peak
memory.

Usage:

    python3 tools/bench_serving.py [--case trace|generated|both] [--repeat N] [--against TREE]

Cases (the warm targets are the serving loop's budgets, the cold ones a process that simulates
every step shape it meets):

* trace: the Azure conversation trace (19,366 requests over an hour), Llama-3-8B on the H200,
  vllm policy and host profile: warm whole process <= 3 s; cold <= 5 s of CPU.
* generated: 100,000 Poisson requests at 20/s, prompts lognormal:1000:1.5, outputs
  exponential:200, the same setup: warm whole process <= 15 s and <= 400 MB; cold <= 20 s of
  CPU and <= 400 MB.

Exits 1 when a warm run misses its target; the cold run is reported against its own. The warm
targets are wall times on a machine to itself; when the load average before a case is above the
number of CPUs, other jobs stretch the wall time, and the warm run is judged by its CPU time
instead (the process is single-threaded), which the report says.

`--against TREE` measures in turns instead, on a shared machine: cold runs of each case from
TREE (another checkout of archsim, e.g. the code before a change) and from this one, one after
the other `--repeat` times each, and reports each side's range of CPU time and peak memory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {  # flags; warm target (s); cold target (CPU s); peak memory target (bytes), warm and cold
    "trace": (["--requests-from", "azure_llm_2023_conv"], 3.0, 5.0, None),
    "generated": (
        ["--requests", "100000", "--rate", "20", "--prompt", "lognormal:1000:1.5", "--generate", "exponential:200"],
        15.0,
        20.0,
        400e6,
    ),
}


def one_run(args: list[str], cache_dir: str, tree: Path = ROOT) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak bytes, headline lines) of one whole `archsim serve` process of the
    archsim in `tree`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode kept, as installed
    env |= {"ARCHSIM_CACHE_DIR": cache_dir, "COLUMNS": "120", "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "archsim", "serve", *args, "--quiet"], cwd=tree, env=env, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"archsim serve {' '.join(args)} exited {proc.returncode}:\n{err.read()}")
        text = out.read()
    lines = [line for line in text.splitlines() if "throughput" in line or "share" in line]
    heads = "; ".join(" ".join(x.replace("│", " ").split()) for x in lines[:3])
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024.0, heads


def cold_run(flags: list[str], tree: Path) -> tuple[float, float, float, str]:
    """`one_run` from an empty op cache of its own."""
    with tempfile.TemporaryDirectory(prefix="archsim-bench-cache-") as cache:
        return one_run(flags, cache, tree)


def in_turns(name: str, against: Path, repeat: int) -> None:
    """Cold runs of case `name` from `against` and from this tree, one after the other."""
    flags = CASES[name][0]
    runs: dict[str, list[tuple[float, float, float, str]]] = {"against": [], "this": []}
    for _ in range(max(1, repeat)):
        for side, tree in (("against", against), ("this", ROOT)):
            runs[side].append(cold_run(flags, tree))
    for side, tree in (("against", against), ("this", ROOT)):
        cpu, peak = [r[1] for r in runs[side]], [r[2] / 1e6 for r in runs[side]]
        print(f"  {side:7s} {min(cpu):6.2f}-{max(cpu):.2f} s CPU, peak {min(peak):.0f}-{max(peak):.0f} MB  ({tree})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=[*CASES, "both"], default="both")
    p.add_argument("--repeat", type=int, default=2, help="warm runs (the best is reported), or turns; default 2")
    p.add_argument("--against", type=Path, help="another archsim checkout: cold runs of both in turns")
    args = p.parse_args()
    ok = True
    for name in CASES if args.case == "both" else [args.case]:
        flags, target_s, cold_target_s, target_bytes = CASES[name]
        load = os.getloadavg()[0]
        print(f"{name}: archsim serve {' '.join(flags)}  (load average {load:.1f}, {os.cpu_count()} CPUs)")
        if args.against is not None:
            in_turns(name, args.against.resolve(), args.repeat)
            continue
        with tempfile.TemporaryDirectory(prefix="archsim-bench-cache-") as cache:
            cold = one_run(flags, cache)
            warm = min((one_run(flags, cache) for _ in range(max(1, args.repeat))), key=lambda r: r[0])
        for label, (wall, cpu, peak, _) in (("cold", cold), ("warm", warm)):
            print(f"  {label}  {wall:6.2f} s wall, {cpu:6.2f} s CPU, peak {peak / 1e6:5.0f} MB")
        print(f"  {warm[3]}")
        cold_met = cold[1] <= cold_target_s and (target_bytes is None or cold[2] <= target_bytes)
        cold_budget = f"{cold_target_s:g} s of CPU" + (
            "" if target_bytes is None else f" and {target_bytes / 1e6:.0f} MB"
        )
        print(f"  cold run {'within' if cold_met else 'OVER'} {cold_budget}")
        shared = load > (os.cpu_count() or 1)
        seconds = warm[1] if shared else warm[0]
        met = seconds <= target_s and (target_bytes is None or warm[2] <= target_bytes)
        budget = f"{target_s:g} s" + ("" if target_bytes is None else f" and {target_bytes / 1e6:.0f} MB")
        judged = "CPU time (the machine is shared)" if shared else "wall time"
        print(f"  warm run {'within' if met else 'OVER'} {budget}, by its {judged}")
        ok &= met
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
