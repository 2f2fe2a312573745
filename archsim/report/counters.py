"""Counters for traces: HBM bandwidth and busy units over a played phase, from its entries.

A load's HBM bytes flow from one access latency after its buffer came free (or from its issue,
if later) to the cycle it is done, as in the engine's fluid model. The engine does not keep
when each store drained, so the write counter is an approximation: stores drain after the
compute that produced them, first come first served, at the achievable HBM bandwidth. Busy units count the
cores (with their identical copies) computing at each cycle. Rates in GB/s, busy in % of cores.
"""

from __future__ import annotations

import numpy as np

from archsim.compiler.program import Phase, Program
from archsim.engine.simulate import PhaseTimeline
from archsim.hardware import Chip
from archsim.hardware.memory import hbm_bandwidth, hbm_latency_s, l2_latency_s

COUNTER_POINTS = 400  # samples per counter and phase before a counter is averaged into bins


def piecewise_rate(
    starts: np.ndarray, ends: np.ndarray, rates: np.ndarray, t_end: float, max_points: int = COUNTER_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of the rates of the intervals [start, end) active at each time, as breakpoints and the
    value from each breakpoint on; past `max_points` breakpoints, averaged over equal bins."""
    rates = np.asarray(rates, dtype=np.float64)
    x = np.concatenate([np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64), [0.0, t_end]])
    d = np.concatenate([rates, -rates, [0.0, 0.0]])
    x = np.round(x, 6)  # ends and starts that meet up to float error meet exactly
    order = np.argsort(x, kind="stable")
    x, level = x[order], np.cumsum(d[order])
    last = np.flatnonzero(np.r_[x[1:] != x[:-1], True])
    x, level = x[last], level[last]
    if len(x) > max_points:
        area = np.r_[0.0, np.cumsum(level[:-1] * np.diff(x))]
        edges = np.linspace(x[0], x[-1], max_points + 1)
        level = np.r_[np.diff(np.interp(edges, x, area)) / np.diff(edges), 0.0]
        x = edges
    scale = np.max(np.abs(level)) if len(level) else 0.0
    level[np.abs(level) <= 1e-9 * scale] = 0.0
    return x, level


def _slot_free(phase: Phase, tl: PhaseTimeline) -> np.ndarray:
    """When each entry's SRAM buffer came free: the compute end of the entry `stages` earlier on
    its core (0 for the first `stages`). A load's data flows one access latency after that, or
    from its issue if later, as in the engine; so the latency of a load hides behind the last."""
    free = np.zeros(len(phase.hbm_bytes))
    st = int(phase.stages)
    for lo, hi in zip(phase.core_start[:-1].tolist(), phase.core_start[1:].tolist()):
        if hi - lo > st:
            free[lo + st : hi] = tl.compute_end[lo : hi - st]
    return free


def _write_rate(phase: Phase, chip: Chip) -> float:
    """Bytes per cycle stores drain at: achievable HBM bandwidth for the phase's mix of reads and
    writes, or what all cores keep in flight (Little's law), whichever is lower."""
    wt = np.repeat(phase.core_weight.astype(np.float64), np.diff(phase.core_start))
    stores, loads = float(np.sum(phase.store_bytes * wt)), float(np.sum(phase.hbm_bytes * wt))
    hbm = hbm_bandwidth(chip, stores / (stores + loads) if stores + loads else 0.0)
    cores = chip.cores * chip.core.max_inflight_bytes / hbm_latency_s(chip)
    return min(hbm, cores) / chip.clock_hz


def store_drain(posted: np.ndarray, nbytes: np.ndarray, rate: float, t_end: float) -> tuple[np.ndarray, np.ndarray]:
    """When stores posted at `posted` drain, first come first served at `rate` bytes per cycle:
    end_i = max(posted_i, end_(i-1)) + bytes_i / rate, cut at the end of the phase."""
    order = np.argsort(posted, kind="stable")
    t, d = posted[order], nbytes[order] / rate
    done = np.cumsum(d)
    end = done + np.maximum.accumulate(t - (done - d))
    start = end - d
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return np.minimum(start[inverse], t_end), np.minimum(end[inverse], t_end)


def phase_counters(
    phase: Phase, tl: PhaseTimeline, chip: Chip, matrix: bool, points: int = COUNTER_POINTS
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """HBM read and write bandwidth (GB/s) and busy cores (% of the chip's) over one played phase,
    from its entries' timelines: name -> (breakpoint cycles from the phase start, values)."""
    w = phase.core_weight.astype(np.float64)
    wt = np.repeat(w, np.diff(phase.core_start))
    total = float(tl.total_cycles)
    nbytes = phase.hbm_bytes + phase.l2_bytes
    hbm_frac = np.divide(phase.hbm_bytes, nbytes, out=np.zeros_like(nbytes), where=nbytes > 0)
    latency = (hbm_frac * hbm_latency_s(chip) + (1 - hbm_frac) * l2_latency_s(chip)) * chip.clock_hz
    flow0 = np.minimum(tl.load_done, np.maximum(np.ceil(_slot_free(phase, tl) + latency), tl.load_issue))
    read = phase.hbm_bytes > 0
    dur = np.maximum(tl.load_done - flow0, 1.0)[read]
    gb = chip.clock_hz / 1e9  # bytes per cycle -> GB/s
    series = {"HBM read (GB/s)": (flow0[read], flow0[read] + dur, wt[read] * phase.hbm_bytes[read] / dur * gb)}
    wr = phase.store_bytes > 0
    rate = _write_rate(phase, chip)
    s0, s1 = store_drain(tl.compute_end[wr], wt[wr] * phase.store_bytes[wr], rate, total)
    series["HBM write (GB/s)"] = (s0, s1, np.full(len(s0), rate * gb))
    c_end = tl.compute_end.astype(np.float64)
    unit = "matrix units busy (% of cores)" if matrix else "vector units busy (% of cores)"
    series[unit] = (c_end - phase.compute_cycles, c_end, wt * 100.0 / chip.cores)
    return {name: piecewise_rate(a, b, r, total, points) for name, (a, b, r) in series.items()}


def moved_bytes(program: Program) -> tuple[float, float]:
    """HBM bytes read and written by one run of a program (all cores)."""
    read = write = 0.0
    for ph in program.phases:
        wt = np.repeat(ph.core_weight.astype(np.float64), np.diff(ph.core_start))
        read += float(np.sum(ph.hbm_bytes * wt))
        write += float(np.sum(ph.store_bytes * wt))
    return read, write
