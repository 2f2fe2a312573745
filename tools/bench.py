"""Simulator speed on this machine, in CPU seconds (user + system) and peak memory: on a shared
machine the wall time stretches with the load, the CPU time much less.

    python3 tools/bench.py [--profile-lines 15] [--long] [--sweeps]

(a) an M=K=N=8192 GEMM on scalesim_ws_128x128 (simulated cycles per CPU-second);
(b) `archsim run` of Llama-3-8B on the H200, batch 64, prompt 2048, 1024 generated tokens:
    whole process with an empty kernel cache (cold: the kernels are compiled, ahead of time
    where the machine has a C compiler, archsim/aot.py), with a filled one (warm), warm on
    Numba's JIT instead of the module compiled ahead of time (ARCHSIM_AOT=0), and warm with the
    op-result cache (archsim/opcache.py) filled by the run before; then the simulation alone
    in a warm process (fresh result caches);
(c) start-up: `archsim op gemm` on a 64 x 64 x 64 shape, its chip file validated by no process
    before and by one before (archsim/config/memo.py), and `archsim --help`, whole process;
(d) Llama-3-70B on h200x8, tensor parallel 8, batch 64, 2048 + 1024, whole process warm: its
    files validated by no process before and by one before, the latter on Numba's JIT as well,
    then with the op cache filled;
(e) with --long: Llama-3-8B at batch 8, prompt 2048 and 32768 (one generated token), whole
    process; the target is the long prompt at most 3x the short one, peaking under 400 MB;
(f) a cProfile of (b)'s simulation;
(g) a sweep of 48 H200-like designs (h200_halton_1000's first 48, every one simulated) in one
    process, from an empty op cache, at each fidelity (`archsim sweep --fidelity`: full, screen,
    auto), whole process;
(h) the shipped h200_variants sweep (288 designs, 96 of them ruled out before simulating) the
    same way at full and screen fidelity: CPU a point of the spec (the target: 40 ms), whole
    process and the points' own (summary.json), and a simulated point's; then on 2 workers at
    full fidelity, the points a second (the target: 50 on 2 free cores; the wall time, so only
    on a quiet machine), the CPU of the sweep's own process (its workers' server and workers
    not counted) and the points'.

Every whole-process case runs with its own empty op-result cache unless it says otherwise, so
it measures simulation, not the cache.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARCHSIM = [sys.executable, "-m", "archsim"]
RUN_8B = ["run", "--hw", "h200", "--workload", "llama3_8b", "--batch", "64", "--prompt", "2048"]
RUN_8B += ["--generate", "1024", "--quiet"]
RUN_70B = ["run", "--hw", "h200x8", "--workload", "llama3_70b", "--tp", "8", "--batch", "64"]
RUN_70B += ["--prompt", "2048", "--generate", "1024", "--quiet"]
TINY_GEMM = ["op", "gemm", "--M", "64", "--K", "64", "--N", "64"]
# the children keep their modules' bytecode as an installed archsim does (the first process
# writes it), whatever this shell says: else each process compiles every changed module again
INSTALLED = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def process_cost(args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(CPU seconds, wall seconds, peak RSS in MB) of one `archsim` process."""
    t0 = time.perf_counter()
    child = subprocess.Popen([*ARCHSIM, *args], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"archsim {' '.join(args)} exited {child.returncode}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def report(
    label: str, args: list[str], env: dict[str, str], fresh_cache: bool = True, memo: Path | None = None
) -> float:
    """One process's cost. `fresh_cache`: from an empty op cache; `memo`: a folder that keeps
    the validated configurations (archsim/config/memo.py) from one process to the next, copied
    into that empty cache before and back after."""
    with tempfile.TemporaryDirectory() as cache:
        if memo is not None:
            shutil.copytree(memo, cache, dirs_exist_ok=True)
        run_env = {**env, "ARCHSIM_CACHE_DIR": cache} if fresh_cache else env
        cpu, wall, peak = process_cost(args, run_env)
        if memo is not None:
            for folder in Path(cache).glob("*/validated"):
                shutil.copytree(folder, memo / folder.parent.name / folder.name, dirs_exist_ok=True)
    print(f"{label}: {cpu:.2f} s CPU ({wall:.2f} s wall), peak RSS {peak:.0f} MB", flush=True)
    return cpu


def bench_sweep_fidelity(env: dict[str, str], points: int = 48) -> None:
    """(g): CPU seconds a point of a sweep in one process (--workers 1), from an empty op cache,
    at each fidelity."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "hw_configs" / "sweeps" / "h200_halton_1000.yaml").read_text()
    text = text.replace("points: 1000", f"points: {points}").replace(
        "hardware: h200", f"hardware: {root}/hw_configs/h200.yaml"
    )
    text = text.replace("workload: llama3_8b", f"workload: {root}/workloads/llama3_8b.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "spec.yaml"
        small.write_text(text)
        for fidelity in ("full", "screen", "auto"):
            args = ["sweep", str(small), "--out", str(Path(tmp) / fidelity), "--workers", "1", "--quiet"]
            cpu = report(f"(g) sweep of {points} designs, {fidelity} fidelity", [*args, "--fidelity", fidelity], env)
            print(f"(g)   {1000 * cpu / points:.0f} ms CPU a point, whole process", flush=True)


def bench_variants_sweep(env: dict[str, str]) -> None:
    """(h): CPU seconds a point of the shipped h200_variants sweep, in one process (--workers 1)
    from an empty op cache, at full and screen fidelity; then the points a second 2 workers reach."""
    import json

    root = Path(__file__).resolve().parents[1]
    spec = root / "hw_configs" / "sweeps" / "h200_variants.yaml"
    for fidelity in ("full", "screen"):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            args = ["sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet", "--fidelity", fidelity]
            cpu = report(f"(h) the h200_variants sweep, {fidelity} fidelity", args, env)
            summary = json.loads((out / "summary.json").read_text())
        n, ok, points_cpu = summary["points_done"], summary["points_ok"], summary["last_run"]["cpu_s"]
        print(
            f"(h)   {1000 * cpu / n:.0f} ms CPU a point whole process, {1000 * points_cpu / n:.0f} ms the points' "
            f"own ({n} points); {1000 * points_cpu / ok:.0f} ms a simulated point ({ok})",
            flush=True,
        )
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as cache:
        out = Path(tmp) / "out"
        args = ["sweep", str(spec), "--out", str(out), "--workers", "2", "--quiet"]
        parent_cpu, wall, _ = process_cost(args, {**env, "ARCHSIM_CACHE_DIR": cache})
        summary = json.loads((out / "summary.json").read_text())
    n, points_cpu = summary["points_done"], summary["last_run"]["cpu_s"]
    print(
        f"(h) the same on 2 workers, full fidelity: {n / wall:.1f} points/s ({n} in {wall:.2f} s wall, the "
        f"target 50/s on 2 free cores); the sweep's own process {parent_cpu:.2f} s CPU, the points' "
        f"{points_cpu:.2f} s ({points_cpu / wall:.2f} workers busy on average)",
        flush=True,
    )


def bench_gemm() -> None:
    from archsim import jit
    from archsim.choose import simulate_op
    from archsim.config.loader import load_system
    from archsim.graph.ops import Op, OpKind, Scaling
    from archsim.memo import clear_all

    chip = load_system("scalesim_ws_128x128")[0].chip
    op = Op(OpKind.GEMM, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
    jit.load()  # its kernels are few elements, which a process would otherwise run as Python
    simulate_op(op, chip)  # compile the kernels
    clear_all()
    t0 = time.process_time()
    cycles = simulate_op(op, chip).cycles
    cpu = time.process_time() - t0
    print(
        f"(a) GEMM 8192^3 on 128x128 WS: {cycles:,} cycles in {cpu * 1e3:.1f} ms CPU "
        f"= {cycles / cpu:.3g} simulated cycles per CPU-second"
    )


def bench_in_process(profile_lines: int) -> None:
    from archsim import opcache
    from archsim.commands.run import load_run_inputs
    from archsim.memo import clear_all
    from archsim.runner.generation import run_generation

    opcache.set_enabled(False)  # fresh result caches: the disk's too
    system, w, _ = load_run_inputs("h200", "llama3_8b", 64, 2048, 1024)
    run_generation(w, system)  # JIT-compiled kernels loaded
    clear_all()
    t0 = time.process_time()
    result = run_generation(w, system)
    sim = time.process_time() - t0
    print(
        f"(b) simulation alone, warm process, fresh result caches: {sim:.3f} s CPU "
        f"(TTFT {result.ttft_s * 1e3:.1f} ms, TPOT {result.tpot_s * 1e3:.2f} ms)"
    )
    clear_all()
    prof = cProfile.Profile()
    prof.enable()
    run_generation(w, system)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(profile_lines)
    print("(f) where the simulation's time goes (cProfile, by own time):")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


def main() -> None:
    ap = argparse.ArgumentParser(description="archsim speed benchmark")
    ap.add_argument("--profile-lines", type=int, default=15)
    ap.add_argument("--long", action="store_true", help="also the 32,768-token prompt (about a minute)")
    ap.add_argument("--sweeps", action="store_true", help="only the sweeps, (g) and (h)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    if args.sweeps:
        with tempfile.TemporaryDirectory() as numba_cache:
            env = {**INSTALLED, "NUMBA_CACHE_DIR": numba_cache}
            process_cost(["run", "--prompt", "32", "--generate", "2", "--quiet", "--no-cache"], env)  # kernels cached
            bench_sweep_fidelity(env)
            bench_variants_sweep(env)
        return
    # whole processes first, while this one is small: a child's peak RSS counts what it was forked from
    with tempfile.TemporaryDirectory() as numba_cache, tempfile.TemporaryDirectory() as op_cache:
        env = {**INSTALLED, "NUMBA_CACHE_DIR": numba_cache}
        jit_only = {**env, "ARCHSIM_AOT": "0"}
        report("(b) archsim run 8B b64, cold kernel cache", RUN_8B, env)
        report("(b) archsim run 8B b64, warm kernel cache", RUN_8B, env)
        report("(b) archsim run 8B b64, warm kernel cache, screen fidelity", [*RUN_8B, "--fidelity", "screen"], env)
        report("(b) archsim run 8B b64, warm, on Numba's JIT (ARCHSIM_AOT=0)", RUN_8B, jit_only)
        filled = {**env, "ARCHSIM_CACHE_DIR": op_cache}
        process_cost(RUN_8B, filled)
        report("(b) archsim run 8B b64, warm kernel cache, op cache filled", RUN_8B, filled, fresh_cache=False)
        memo = Path(op_cache) / "memo"  # validated configurations alone, kept between processes
        memo.mkdir()
        report("(c) archsim op gemm 64^3, warm, its chip never validated before", TINY_GEMM, env, memo=memo)
        report("(c) archsim op gemm 64^3, warm, its chip validated before", TINY_GEMM, env, memo=memo)
        report("(c) archsim --help", ["--help"], env)
        report("(d) archsim run 70B h200x8 TP 8 b64, warm, inputs never validated before", RUN_70B, env, memo=memo)
        report("(d) archsim run 70B h200x8 TP 8 b64, warm, inputs validated before", RUN_70B, env, memo=memo)
        report("(d) the same on Numba's JIT (ARCHSIM_AOT=0)", RUN_70B, jit_only, memo=memo)
        process_cost(RUN_70B, filled)
        report("(d) the same, op cache filled", RUN_70B, filled, fresh_cache=False)
        report("(d) the same, op cache empty, screen fidelity", [*RUN_70B, "--fidelity", "screen"], env, memo=memo)
        bench_sweep_fidelity(env)
        bench_variants_sweep(env)
        if args.long:
            short = ["run", "--batch", "8", "--prompt", "2048", "--generate", "1", "--quiet"]
            long = ["run", "--batch", "8", "--prompt", "32768", "--generate", "1", "--quiet"]
            a = report("(e) archsim run 8B b8, prompt 2048, warm", short, env)
            b = report("(e) archsim run 8B b8, prompt 32768, warm", long, env)
            print(f"(e) long / short prompt: {b / a:.1f}x (target <= 3x)")
    bench_gemm()
    bench_in_process(args.profile_lines)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
