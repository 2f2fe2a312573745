"""Counters for traces: HBM bandwidth and busy units over a played phase.

HBM read and write bandwidth are the rates the engine's fair sharing gave all cores at each
event of the phase (recorded when it plays with a trace), exact for its fluid model. Busy units
count the cores (with their identical copies) computing at each cycle. Rates in GB/s, busy in %
of cores.
"""

from __future__ import annotations

import numpy as np

from archsim.engine.simulate import PhaseTimeline
from archsim.hardware import Chip
from archsim.program import Phase, Program

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


def step_series(
    t: np.ndarray, level: np.ndarray, t_end: float, max_points: int = COUNTER_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """A step function (the value from each breakpoint on) as breakpoints and values, averaged
    over equal bins past `max_points`, and ending at zero at `t_end`."""
    keep = np.r_[t[1:] != t[:-1], True] if len(t) else np.zeros(0, dtype=bool)
    x, v = np.r_[t[keep], t_end], np.r_[level[keep], 0.0]
    return piecewise_rate(x[:-1], x[1:], v[:-1], t_end, max_points)


def phase_counters(
    phase: Phase, tl: PhaseTimeline, chip: Chip, matrix: bool, points: int = COUNTER_POINTS
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """HBM read and write bandwidth (GB/s) as the engine shared it at every event, and busy cores
    (% of the chip's) from the entries' compute spans, over one played phase: name ->
    (breakpoint cycles from the phase start, values)."""
    wt = phase.entry_weights
    total = float(tl.total_cycles)
    gb = chip.clock_hz / 1e9  # bytes per cycle -> GB/s
    out = {
        "HBM read (GB/s)": step_series(tl.event_cycles, tl.hbm_read * gb, total, points),
        "HBM write (GB/s)": step_series(tl.event_cycles, tl.hbm_write * gb, total, points),
    }
    c_end = tl.compute_end.astype(np.float64)
    unit = "matrix units busy (% of cores)" if matrix else "vector units busy (% of cores)"
    out[unit] = piecewise_rate(c_end - phase.compute_cycles, c_end, wt * 100.0 / chip.cores, total, points)
    return out


def moved_bytes(program: Program) -> tuple[float, float]:
    """HBM bytes read and written by one run of a program (all cores)."""
    read = write = 0.0
    for ph in program.phases:
        read += float(np.sum(ph.hbm_bytes * ph.entry_weights))
        write += float(np.sum(ph.store_bytes * ph.entry_weights))
    return read, write


POWER_COUNTER = "chip power (W)"
