"""Play a compiled Program on a chip: each phase in the event loop, one after another.

The engine only plays: it takes a Program (archsim/program.py, which the compiler writes) and
returns what happened, in cycles and bytes. Which program an op runs as, its fixed costs and its
bound are chosen above it (archsim.choose).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from archsim import jit, stopping
from archsim.engine.kernels import simulate_phase
from archsim.errors import reraise_interrupt
from archsim.hardware import Chip, FoldMode
from archsim.hardware.memory import MemoryParams, memory_params
from archsim.memo import memo
from archsim.program import Phase, Program


@dataclass(frozen=True, eq=False)
class PhaseTimeline:
    """Per-entry cycles of a played phase (entry order as in the Phase): for traces."""

    load_issue: np.ndarray
    load_done: np.ndarray
    compute_end: np.ndarray
    total_cycles: float
    event_cycles: np.ndarray  # each event of the phase, and from it on the HBM bytes per cycle
    hbm_read: np.ndarray  # all cores read
    hbm_write: np.ndarray  # and write


@dataclass(frozen=True, eq=False)
class PhaseResult:
    """One played phase: per sequence (end, busy and stall cycles) and the phase's cycles; and of
    each sequence's stall, the cycles waited on a load's latency, its HBM bytes and its L2 bytes
    (`stall_by_cause`, [3, sequences]: archsim/engine/cores.py `start_compute`)."""

    end_cycles: np.ndarray
    busy_cycles: np.ndarray
    stall_cycles: np.ndarray
    total_cycles: float
    timeline: PhaseTimeline | None = None
    stall_by_cause: np.ndarray = field(default_factory=lambda: np.zeros((3, 0)))


@dataclass(frozen=True, eq=False)
class ProgramResult:
    """A played program: cycles of all phases, the critical core's compute and stall cycles
    (summed over phases), busy and available core-cycles, and bytes per memory level."""

    cycles: int
    compute_cycles: int
    stall_cycles: int
    busy_core_cycles: float
    core_cycles: float
    hbm_bytes: float
    l2_bytes: float
    active_cores: int
    phases: tuple[PhaseResult, ...]
    # of the critical cores' stall cycles (summed over phases): waited on loads' latency, on
    # their HBM bytes and on their L2 bytes flowing; the rest of `stall_cycles` on their issue
    latency_stall_cycles: float = 0.0
    hbm_stall_cycles: float = 0.0
    l2_stall_cycles: float = 0.0


def phase_memory(phase: Phase, chip: Chip) -> MemoryParams:
    """The memory system as `phase` sees it: HBM efficiency for its read/write mix, its kernel's
    bytes in flight and, on a chiplet chip, the share of its L2 bytes its dies serve themselves."""
    return memory_params(chip, phase.hbm_write_fraction, phase.inflight_bytes, phase.local_l2_share, phase.warps)


REMEMBERED_ENTRIES = 1024  # a phase of at most this many entries is played once per chip (`play_phase`)


def play_phase(phase: Phase, chip: Chip, trace: bool = False) -> PhaseResult:
    """Play one phase; with `trace`, keep when every entry's load was issued and done and its
    compute ended. A short phase played again on the same chip (the kernel that combines a
    decode's KV splits, the same at every KV length) gives what its first play gave."""
    if not trace and 0 < phase.entries <= REMEMBERED_ENTRIES:
        return replayed_phase(phase, chip)
    return _play_phase(phase, chip, trace)


@memo(maxsize=256)
def replayed_phase(phase: Phase, chip: Chip) -> PhaseResult:
    """`play_phase` of a short phase, memoised (a Phase is its own key: records compare by identity)."""
    return _play_phase(phase, chip, False)


def _play_phase(phase: Phase, chip: Chip, trace: bool) -> PhaseResult:
    try:
        return play_phase_on(phase, phase_memory(phase, chip), trace)
    except ValueError as err:  # the loop's guard: time stopped advancing
        raise RuntimeError(f"{phase.label} on {chip.name}: {err}") from None


def phase_entries(phase: Phase) -> np.ndarray:
    """The phase's per-entry bytes and trips as the event loop reads them: one row each, in the
    order of archsim.engine.kernels.HBM, L2, STORE, STORE_TO_L2, TRIPS (`np.array` of the rows:
    what `np.stack` gives, without its checks)."""
    return np.array((phase.hbm_bytes, phase.l2_bytes, phase.store_bytes, phase.store_l2_bytes, phase.load_trips))


# a phase of more entries is played by the compiled event loop even before Numba is loaded: as
# Python the loop costs about 0.1 ms an entry (0.35 s for 3,000), loading the compiled module
# milliseconds (archsim/jit.py plays small kernel calls as Python until INTERPRETED_ELEMENTS)
INTERPRETED_ENTRIES = 64


def play_phase_on(phase: Phase, memory: MemoryParams, trace: bool = False) -> PhaseResult:
    """Play one phase on the memory system `memory` (`phase_memory`), unmemoised: every output of
    the event loop (tests/test_engine_recorded.py compares them with recorded ones)."""
    if phase.entries == 0:
        z = np.zeros(0)
        return PhaseResult(z, z, z, 0.0, PhaseTimeline(z, z, z, 0.0, z, z, z) if trace else None)
    if phase.entries > INTERPRETED_ENTRIES:
        jit.ahead_of_time()
    try:
        end, busy, stall, total, issue, done, comp_end, ev_t, ev_read, ev_write, stall_by = simulate_phase(
            phase.core_start,
            phase.core_weight,
            phase_entries(phase),
            phase.compute_cycles,
            int(phase.stages),
            memory,
            trace,
            stopping.FLAG,
        )
    except SystemError as err:  # Ctrl-C inside a compiled kernel surfaces as SystemError
        reraise_interrupt(err)
        raise
    stopping.check()  # a kernel stopped early by a signal (archsim/stopping.py)
    timeline = PhaseTimeline(issue, done, comp_end, float(total), ev_t, ev_read, ev_write) if trace else None
    return PhaseResult(end, busy, stall, float(total), timeline, stall_by)


def play_program(program: Program, chip: Chip, trace: bool = False) -> ProgramResult:
    """Play every phase of a program; totals over phases for the critical core and all cores."""
    cycles = compute = stall = active = 0
    busy = core_cycles = hbm = l2 = 0.0
    latency = hbm_stall = l2_stall = 0.0  # the critical cores' stalls by cause, summed over phases
    results = []
    for phase in program.phases:
        r = play_phase(phase, chip, trace)
        results.append(r)
        if len(r.end_cycles) == 0:
            continue
        crit = int(r.end_cycles.argmax())
        cycles += int(r.total_cycles)
        compute += int(r.busy_cycles[crit])
        stall += int(r.stall_cycles[crit])
        latency += float(r.stall_by_cause[0, crit])
        hbm_stall += float(r.stall_by_cause[1, crit])
        l2_stall += float(r.stall_by_cause[2, crit])
        busy += float((r.busy_cycles * phase.core_weight.astype(np.float64)).sum())
        core_cycles += chip.cores * r.total_cycles
        hbm += phase.hbm_traffic_bytes
        l2 += phase.l2_traffic_bytes
        active = max(active, phase.active_cores)
    if program.matrix and chip.core.array.fold_mode is FoldMode.SERIAL and cycles > 0:
        # serial folds follow SCALE-Sim's accounting, which reports the index of the last cycle
        cycles -= 1
        compute -= 1
    return ProgramResult(
        cycles,
        compute,
        stall,
        busy,
        core_cycles,
        hbm,
        l2,
        active,
        tuple(results),
        latency_stall_cycles=latency,
        hbm_stall_cycles=hbm_stall,
        l2_stall_cycles=l2_stall,
    )
