"""Timing records: an op's simulated time and where it went, in cycles, seconds and bytes.

Records are frozen and add up: a step's figures are sums over its ops times their repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Bound(str, Enum):
    """What limits an op: the matrix/vector units, memory, fixed per-kernel overhead, or the
    chip-to-chip links (collectives)."""

    COMPUTE = "compute"
    MEMORY = "memory"
    OVERHEAD = "overhead"
    COMMUNICATION = "communication"


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
