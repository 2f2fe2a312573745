#!/usr/bin/env python3
"""Time `archsim serve` on the Azure conversation trace (19,366 requests over an hour) with
Llama-3-8B on the H200, vLLM policy, default step grid.

Usage:

    python3 tools/bench_serving.py [--trace NAME] [--hw NAME] [--workload NAME] [--policy P] [--target S]

The trace is served twice in one process: the first (cold) run also simulates the step shapes
of the grid, the second (warm) run finds them memoised and measures the serving loop itself.
Prints both wall times, the simulated steps per second and headline metrics; exits 1 when the
warm run takes longer than --target seconds (default 10, the issue's budget).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archsim.config.loader import load_system, load_workload
from archsim.serving.metrics import Slo
from archsim.serving.requests import load_trace
from archsim.serving.scheduler import DEFAULT_MAX_BATCHED_TOKENS, Policy, SchedulerConfig
from archsim.serving.simulate import ServeSetup, serve


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default="azure_llm_2023_conv")
    p.add_argument("--hw", default="h200")
    p.add_argument("--workload", default="llama3_8b")
    p.add_argument("--policy", default="vllm", choices=[x.value for x in Policy])
    p.add_argument("--target", type=float, default=10.0, help="warm-run budget in seconds (default 10)")
    args = p.parse_args()
    system, _ = load_system(args.hw)
    w, _ = load_workload(args.workload)
    t0 = time.perf_counter()
    reqs = load_trace(args.trace)
    load_s = time.perf_counter() - t0
    policy = Policy(args.policy)
    setup = ServeSetup(w, system, SchedulerConfig(policy, DEFAULT_MAX_BATCHED_TOKENS[policy]))
    walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        result = serve(reqs, setup)
        walls.append(time.perf_counter() - t0)
    m = result.metrics(Slo())
    steps = sum(i.result.steps for i in result.instances)
    print(f"{args.trace}: {len(reqs):,} requests, {w.model.name} on {system.chip.name}, {policy.value}")
    print(f"  trace load        {load_s:6.2f} s")
    print(f"  cold run          {walls[0]:6.2f} s  (simulates the grid of step shapes)")
    print(f"  warm run          {walls[1]:6.2f} s  ({steps:,} steps, {steps / walls[1]:,.0f} steps/s)")
    print(
        f"  simulated span    {m.duration_s:,.0f} s; TTFT mean {m.ttft_s.mean * 1e3:.1f} ms, p99 "
        f"{m.ttft_s.p99 * 1e3:.1f} ms; TPOT mean {m.tpot_s.mean * 1e3:.2f} ms; "
        f"{m.throughput_tokens_per_s:,.0f} output tokens/s; {m.preemptions} preemptions"
    )
    ok = walls[1] <= args.target
    print(f"  warm run {'within' if ok else 'OVER'} the {args.target:g} s target")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
