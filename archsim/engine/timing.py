"""Timing records: an op's simulated time and where it went, in cycles, seconds and bytes.

Records are frozen and add up: a step's figures are sums over its ops times their repeat, and an
op's time split by cause (`TimeByCause`) adds up op -> step -> run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum


class Bound(str, Enum):
    """What limits an op: the matrix/vector units, memory, fixed per-kernel overhead, or the
    chip-to-chip links (collectives)."""

    COMPUTE = "compute"
    MEMORY = "memory"
    OVERHEAD = "overhead"
    COMMUNICATION = "communication"


@dataclass(frozen=True)
class TimeByCause:
    """Time in seconds by what it was spent on (docs/MODEL.md, "Time by cause"); the terms add up
    to the time they split. Of the critical core, played at the chip's clock: computing
    (`compute_s`); stalled on a load's data flowing from HBM (`hbm_bandwidth_s`) or from L2
    (`l2_s`), or on its access latency (`memory_latency_s`); stalled before its load was issued,
    the DMA busy with the loads before it (`load_issue_s`); after its last compute, draining its
    stores (`stores_s`). Then what the power-held clock adds (`held_clock_s`: the time at the held
    clock minus that at the chip's), the fixed costs (`fixed_s`: launches, gaps, prologues), the
    collectives on the links (`link_s`), and in a step what its schedule adds to its ops' sum
    (`schedule_s`: negative for collectives hidden under compute, positive for a pipeline's
    bubble)."""

    compute_s: float = 0.0
    hbm_bandwidth_s: float = 0.0
    memory_latency_s: float = 0.0
    l2_s: float = 0.0
    load_issue_s: float = 0.0
    stores_s: float = 0.0
    held_clock_s: float = 0.0
    fixed_s: float = 0.0
    link_s: float = 0.0
    schedule_s: float = 0.0

    def __add__(self, other: TimeByCause) -> TimeByCause:
        return TimeByCause(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def scaled(self, factor: float) -> TimeByCause:
        return TimeByCause(*(getattr(self, f.name) * factor for f in fields(self)))

    @property
    def total_s(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def largest(self) -> str:
        """The name of the largest term (without its `_s`)."""
        return max(fields(self), key=lambda f: getattr(self, f.name)).name.removesuffix("_s")


# each unit's `<unit>_utilisation`
UNITS = ("matrix", "vector", "hbm", "l2", "sram", "latency", "staging", "link", "fixed")
UNIT_BOUND = {
    "matrix": "compute",
    "vector": "compute",
    "hbm": "memory",
    "l2": "memory",
    "sram": "memory",
    "latency": "memory",
    "staging": "memory",
    "link": "communication",
    "fixed": "overhead",
}


def binding_unit(utilisation: dict[str, float]) -> str:
    """The unit with the highest utilisation of its own peak (the first of equals, in UNITS order)."""
    return max(UNITS, key=lambda u: utilisation.get(u, 0.0))


@dataclass(frozen=True)
class OpTiming:
    """One execution of one op on one chip.

    `compute_cycles` and `stall_cycles` are those of the critical core (the one finishing last
    in the longest phase, summed over phases): its cycles split into computing, waiting on
    memory, and the rest (waiting for stores or other cores, fixed overhead). Cycles are counted
    at the chip's clock (its highest), so time_s = cycles / chip clock even for an op that the
    power limit ran at a lower `clock_hz`.
    """

    cycles: int
    time_s: float
    compute_cycles: int
    stall_cycles: int
    overhead_cycles: int
    busy_core_cycles: float  # summed over all cores
    core_cycles: float  # cores x cycles of the phases (utilisation denominator)
    hbm_bytes: float
    l2_bytes: float
    flops: float
    min_bytes: float
    kernels: int
    active_cores: int
    bound: Bound
    clock_hz: float = 0.0  # the clock the op ran at (its power may hold it below the chip's); 0: not stated
    energy_j: float = 0.0  # energy of its kernels (0 where the chip has no power model)
    # its time by cause (TimeByCause's terms, in seconds; they add up to time_s)
    compute_s: float = 0.0
    hbm_bandwidth_s: float = 0.0
    memory_latency_s: float = 0.0
    l2_s: float = 0.0
    load_issue_s: float = 0.0
    stores_s: float = 0.0
    held_clock_s: float = 0.0
    fixed_s: float = 0.0
    link_s: float = 0.0
    # each unit's utilisation of its own peak over the op's time (UNITS; `bound` is the highest's)
    matrix_utilisation: float = 0.0
    vector_utilisation: float = 0.0
    hbm_utilisation: float = 0.0
    l2_utilisation: float = 0.0
    sram_utilisation: float = 0.0
    latency_utilisation: float = 0.0  # the share of its time spent waiting on memory latency
    staging_utilisation: float = 0.0  # the least time its SRAM stages allow, over its time (choose/staging.py)
    link_utilisation: float = 0.0
    fixed_utilisation: float = 0.0

    @property
    def by_cause(self) -> TimeByCause:
        """Its time split by cause (adds up to time_s)."""
        return TimeByCause(**{f.name: getattr(self, f.name) for f in fields(TimeByCause) if f.name != "schedule_s"})

    @property
    def unit_utilisation(self) -> dict[str, float]:
        """Each unit's utilisation of its own peak, by unit (UNITS)."""
        return {u: getattr(self, f"{u}_utilisation") for u in UNITS}

    @property
    def binding_unit(self) -> str:
        return binding_unit(self.unit_utilisation)

    @property
    def utilisation(self) -> float:
        """Busy fraction of the cores' cycles (matrix or vector units, whichever the op uses)."""
        return self.busy_core_cycles / self.core_cycles if self.core_cycles else 0.0

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.time_s if self.time_s else 0.0

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.hbm_bytes / self.time_s if self.time_s else 0.0

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else 0.0
