"""Simulate one op on one chip: compile it, play each phase in the event loop, add overheads.

Results are memoised by (op, chip): ops are frozen and compare by kind and shape, so a decode
loop re-simulates only what changes from step to step (attention over a longer cache).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from archsim.compiler.compile import compile_candidates
from archsim.compiler.program import Phase, Program
from archsim.engine.kernels import simulate_phase
from archsim.engine.timing import Bound, OpTiming
from archsim.graph.ops import Op
from archsim.hardware import Chip, FoldMode, System
from archsim.hardware.memory import (
    hbm_bandwidth,
    hbm_efficiency,
    hbm_latency_s,
    l2_bandwidth,
    l2_latency_s,
)


@dataclass(frozen=True, eq=False)
class PhaseTimeline:
    """Per-entry cycles of a played phase (entry order as in the Phase): for traces."""

    load_issue: np.ndarray
    load_done: np.ndarray
    compute_end: np.ndarray
    total_cycles: float


def run_phase(phase: Phase, chip: Chip) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Play one phase: per-sequence (end, busy, stall) in cycles and the phase's total cycles."""
    return _play(phase, chip)[:4]


def trace_phase(phase: Phase, chip: Chip) -> PhaseTimeline:
    """Play one phase and keep when every entry's load was issued and done and its compute ended."""
    _, _, _, total, issue, done, comp_end = _play(phase, chip)
    return PhaseTimeline(issue, done, comp_end, total)


def _play(phase: Phase, chip: Chip):
    if phase.entries == 0:
        z = np.zeros(0)
        return z, z, z, 0.0, z, z, z
    w = phase.core_weight.astype(np.float64)
    seq = np.repeat(np.arange(len(w)), np.diff(phase.core_start))
    stores = float(np.sum(phase.store_bytes * w[seq]))
    loads = float(np.sum(phase.hbm_bytes * w[seq]))
    write_fraction = stores / (stores + loads) if stores + loads > 0 else 0.0
    clock = chip.clock_hz
    hbm = chip.hbm
    chan_bw = hbm.channel_bandwidth_bytes_per_s * hbm_efficiency(hbm, write_fraction) / clock
    try:
        out = simulate_phase(
            phase.core_start,
            phase.core_weight,
            phase.hbm_bytes,
            phase.l2_bytes,
            phase.compute_cycles.astype(np.float64),
            phase.store_bytes,
            phase.store_l2_bytes,
            int(phase.stages),
            min(float(chip.core.max_inflight_bytes), phase.inflight_bytes),
            float(chip.core.max_inflight_bytes),
            hbm_latency_s(chip) * clock,
            l2_latency_s(chip) * clock,
            hbm_bandwidth(chip, write_fraction) / clock,
            l2_bandwidth(chip) / clock,
            chan_bw,
            float(hbm.interleave_bytes),
            float(hbm.channels),
        )
    except SystemError as err:  # Ctrl-C inside a compiled kernel surfaces as SystemError
        if isinstance(err.__cause__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise
    return out[0], out[1], out[2], float(out[3]), out[4], out[5], out[6]


def play_program(program: Program, chip: Chip) -> dict:
    """Play every phase of a program; totals over phases for the critical core and all cores."""
    out = {"cycles": 0, "compute": 0, "stall": 0, "busy": 0.0, "core_cycles": 0.0, "hbm": 0.0, "l2": 0.0, "active": 0}
    for phase in program.phases:
        end, busy, stalls, total = run_phase(phase, chip)
        if len(end) == 0:
            continue
        crit = int(np.argmax(end))
        w = phase.core_weight.astype(np.float64)
        seq = np.repeat(np.arange(len(w)), np.diff(phase.core_start))
        out["cycles"] += int(total)
        out["compute"] += int(busy[crit])
        out["stall"] += int(stalls[crit])
        out["busy"] += float(np.sum(busy * w))
        out["core_cycles"] += chip.cores * total
        out["hbm"] += float(np.sum((phase.hbm_bytes + phase.store_bytes) * w[seq]))
        out["l2"] += float(np.sum((phase.l2_bytes + phase.store_l2_bytes) * w[seq]))
        out["active"] = max(out["active"], phase.active_cores)
    if program.matrix and chip.core.array.fold_mode is FoldMode.SERIAL and out["cycles"] > 0:
        # serial folds follow SCALE-Sim's accounting, which reports the index of the last cycle
        out["cycles"] -= 1
        out["compute"] -= 1
    return out


@lru_cache(maxsize=65536)
def simulate_op(op: Op, chip: Chip, standalone: bool = False) -> OpTiming:
    """Time of one execution of `op` on `chip`; `standalone` adds the cost of a lone launch."""
    if op.kind.is_collective:
        raise ValueError(f"{op.kind.value} runs over the interconnect: time it with simulate_collective")
    played = []
    for program in compile_candidates(op, chip):
        launches = sum(1 for ph in program.phases if ph.new_kernel)
        result = play_program(program, chip)
        total_s = result["cycles"] / chip.clock_hz + chip.overheads.program_s(launches, program.matrix)
        played.append((total_s, launches, program, result))
    _, launches, program, r = min(played, key=lambda p: p[0])
    k = op.kernels
    overhead_s = k * chip.overheads.program_s(launches, program.matrix) + (
        chip.overheads.launch_s if standalone else 0.0
    )
    launches *= k
    overhead = round(overhead_s * chip.clock_hz)
    waiting = r["cycles"] - r["compute"]
    bound = max(
        ((r["compute"], Bound.COMPUTE), (waiting, Bound.MEMORY), (overhead / k, Bound.OVERHEAD)), key=lambda x: x[0]
    )[1]
    total_cycles = k * r["cycles"] + overhead
    return OpTiming(
        cycles=total_cycles,
        time_s=total_cycles / chip.clock_hz,
        compute_cycles=k * r["compute"],
        stall_cycles=k * r["stall"],
        overhead_cycles=overhead,
        busy_core_cycles=k * r["busy"],
        core_cycles=k * r["core_cycles"],
        hbm_bytes=k * r["hbm"],
        l2_bytes=k * r["l2"],
        flops=k * program.flops,
        min_bytes=k * program.min_bytes,
        kernels=launches,
        active_cores=r["active"],
        bound=bound,
    )


@lru_cache(maxsize=4096)
def simulate_collective(op: Op, system: System) -> OpTiming:
    """Time of a collective op on the system's interconnect (archsim.hardware.collectives), as an
    OpTiming: all of it link time (counted as overhead cycles: no core computes or loads), bound
    by communication."""
    from archsim.hardware.collectives import Collective, collective_time, system_fabric

    t = collective_time(system_fabric(system, op.ranks), Collective(op.kind.value), op.ranks, op.bytes, op.chunks)
    cycles = math.ceil(t.time_s * system.chip.clock_hz)
    return OpTiming(
        cycles=cycles,
        time_s=t.time_s,
        compute_cycles=0,
        stall_cycles=0,
        overhead_cycles=cycles,
        busy_core_cycles=0.0,
        core_cycles=0.0,
        hbm_bytes=0.0,
        l2_bytes=0.0,
        flops=0.0,
        min_bytes=0.0,
        kernels=op.chunks,
        active_cores=0,
        bound=Bound.COMMUNICATION,
    )
