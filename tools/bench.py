"""Simulator speed on this machine: GEMM cycles per CPU-second, a whole generation's wall time and
peak memory (cold and warm Numba cache), and where the time goes.

    python3 tools/bench.py [--profile-lines 15]

(a) an M=K=N=8192 GEMM on scalesim_ws_128x128 (simulated cycles per CPU-second);
(b) `archsim run` of Llama-3-8B on the H200, batch 64, prompt 2048, 1024 generated tokens:
    the whole process with an empty Numba cache (cold) and with a filled one (warm), and the
    simulation alone in a warm process (fresh result caches);
(c) a cProfile of (b)'s simulation.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time

RUN = [
    "-m",
    "archsim",
    "run",
    "--hw",
    "h200",
    "--workload",
    "llama3_8b",
    "--batch",
    "64",
    "--prompt",
    "2048",
    "--generate",
    "1024",
    "--quiet",
]


def bench_gemm() -> None:
    from archsim.choose import simulate_op
    from archsim.config.loader import load_system
    from archsim.graph.ops import Op, OpKind

    chip = load_system("scalesim_ws_128x128")[0].chip
    op = Op(OpKind.GEMM, m=8192, k=8192, n=8192)
    simulate_op(op, chip)  # compile the kernels
    from archsim.choose import clear_caches

    clear_caches()
    t0 = time.process_time()
    cycles = simulate_op(op, chip).cycles
    cpu = time.process_time() - t0
    print(
        f"(a) GEMM 8192^3 on 128x128 WS: {cycles:,} cycles in {cpu * 1e3:.1f} ms CPU "
        f"= {cycles / cpu:.3g} simulated cycles per CPU-second"
    )


def bench_process(label: str, env: dict) -> None:
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, *RUN], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"(b) archsim run, {label}: {wall:.2f} s wall, peak RSS {max(peak, before) / 1024:.0f} MB")


def bench_in_process(profile_lines: int) -> None:
    from archsim.choose import clear_caches
    from archsim.commands.run import load_run_inputs
    from archsim.runner.generation import run_generation

    system, w, _ = load_run_inputs("h200", "llama3_8b", 64, 2048, 1024)
    run_generation(w, system)  # JIT-compiled kernels loaded
    clear_caches()
    t0 = time.perf_counter()
    result = run_generation(w, system)
    sim = time.perf_counter() - t0
    print(
        f"(b) simulation alone, warm process, fresh result caches: {sim:.3f} s "
        f"(TTFT {result.ttft_s * 1e3:.1f} ms, TPOT {result.tpot_s * 1e3:.2f} ms)"
    )
    clear_caches()
    prof = cProfile.Profile()
    prof.enable()
    run_generation(w, system)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(profile_lines)
    print("(c) where the simulation's time goes (cProfile, by own time):")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


def main() -> None:
    ap = argparse.ArgumentParser(description="archsim speed benchmark")
    ap.add_argument("--profile-lines", type=int, default=15)
    args = ap.parse_args()
    bench_gemm()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        bench_process("cold (empty Numba cache)", env)
        bench_process("warm (Numba cache filled)", env)
    bench_in_process(args.profile_lines)


if __name__ == "__main__":
    main()
