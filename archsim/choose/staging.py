"""The feed limit of a core's SRAM stages: how much of its buffers' free time its loads need at
the least, as the `staging` unit's utilisation (docs/MODEL.md, "The bound"). Cycles and bytes.

A core computes entry j from one of its S (`stages`) SRAM buffers, which holds it from the moment
it is free (entry j - S computed) until entry j has computed: through the load's access latency
(one a trip), its bytes flowing at no more than one load's rate R (Little's law over that latency,
and the HBM channels its bytes land on), then its compute (archsim/engine/cores.py `issue_load`,
`start_compute`). At the unloaded latency L, with nothing else in the way, entry j holds a buffer
for at least

    load_j = trips_j x L_j + bytes_j / R_j   (0 for an entry of no bytes),   then compute_j

cycles, and the S buffers take a sequence's entries in turn, so a phase of t cycles has
S x t >= sum_j (load_j + compute_j). The first S loads (the fill) start at once, a buffer each,
as they would with any number of stages; each later one waits for a buffer. The staging's
utilisation is what those later loads need of the buffer time that neither computes nor fills:

    staging = sum_{j >= S} load_j / (S x t - sum_j compute_j - sum_{j < S} load_j)   <= 1

over the sequence whose buffers need the most; over several phases each sum is over its S and t
is the op's time (fixed costs included, as for every unit). It reaches 1 where every free buffer
waits on a load and the arrays on each: too few stages, or too few bytes in flight, to cover a
load's latency and transfer behind the other buffers' computes (load_j > (S - 1) x compute_j).
Played loads wait longer (queueing, the fair share of HBM and L2), never shorter, so played
phases never break the inequality; the event loop's rounding (EPS a trip and one for the flow)
is taken off each load.
"""

from __future__ import annotations

import numpy as np

from archsim.engine.cores import EPS
from archsim.engine.simulate import phase_memory
from archsim.hardware import Chip
from archsim.hardware.memory import MemoryParams
from archsim.program import Phase, Program


def entry_load_cycles(phase: Phase, p: MemoryParams) -> np.ndarray:
    """Each entry's least `load_j` (module docstring) on the memory system `p`, in cycles: the
    unloaded latency of its bytes' mix (HBM and L2 weighted by their shares) once a trip, and its
    bytes at one load's rate cap at that latency (`hardware/memory.load_rate_cap`: the bytes in
    flight over it, and its HBM bytes on the channels they land on), less the event loop's
    rounding; 0 for an entry of no bytes."""
    hbm, trips = phase.hbm_bytes, phase.load_trips
    nbytes = hbm + phase.l2_bytes
    latency = p.l2_latency + (p.hbm_latency - p.l2_latency) * hbm / np.maximum(nbytes, 1e-300)
    touched = np.minimum(p.channels, np.ceil(hbm / trips / p.interleave_bytes))
    channels_cycles = hbm / (np.maximum(touched, 1.0) * p.channel_bytes_per_cycle)
    flow = np.maximum(nbytes * latency / p.load_inflight_bytes, channels_cycles)
    least = np.maximum(trips * latency + flow - (trips + 1.0) * EPS, 0.0)
    return np.where(nbytes > 0.0, least, 0.0)


def phase_staging_cycles(phase: Phase, p: MemoryParams) -> tuple[float, float, float]:
    """(later loads, fill, computes) of `phase` on the memory system `p`, each in buffer cycles
    over its S stages: of the sequence that needs its buffers the most (sum_j load_j +
    compute_j), its loads after the first S, its first S loads and its computes."""
    if phase.entries == 0:
        return 0.0, 0.0, 0.0
    stages = max(1, phase.stages)
    starts, ends = phase.core_start[:-1], phase.core_start[1:]
    loaded = np.concatenate(([0.0], np.cumsum(entry_load_cycles(phase, p))))
    computed = np.concatenate(([0.0], np.cumsum(phase.compute_cycles)))
    load = loaded[ends] - loaded[starts]
    fill = loaded[np.minimum(starts + stages, ends)] - loaded[starts]
    compute = computed[ends] - computed[starts]
    i = int(np.argmax(load + compute))
    return float(load[i] - fill[i]) / stages, float(fill[i]) / stages, float(compute[i]) / stages


def free_buffer_share(phases: list[tuple[float, float, float]], clock_hz: float, runs: int, time_s: float) -> float:
    """The staging's utilisation (module docstring) of `runs` runs of phases of
    (`phase_staging_cycles`) at `clock_hz`, taking `time_s` in all: their later loads over the
    time their fills and computes leave, all in buffer cycles over their stages."""
    waiting = sum(later for later, _fill, _compute in phases)
    busy = sum(fill + compute for _later, fill, compute in phases)
    free_s = time_s - runs * busy / clock_hz
    if waiting <= 0.0 or free_s <= 0.0:
        return 0.0
    return min(1.0, runs * waiting / clock_hz / free_s)  # at 1 but for the op's cycles rounded to whole ones


def staging_utilisation(program: Program, chip: Chip, runs: int, time_s: float) -> float:
    """The `staging` unit's utilisation of `runs` runs of `program` on `chip` (at the clock it
    ran at) taking `time_s` in all (`free_buffer_share`)."""
    phases = [phase_staging_cycles(phase, phase_memory(phase, chip)) for phase in program.phases]
    return free_buffer_share(phases, chip.clock_hz, runs, time_s)
