"""A compiled op, the contract the compiler writes and the engine and reports read: per core, an
ordered list of tile steps as plain arrays.

One `Phase` is one kernel: every core works through its entries (load, compute, store) with
`stages` buffers of local SRAM, so loads run ahead of compute as far as buffers allow. A
`Program` is one or more phases run one after another (a split-K GEMM is the GEMM, then the
reduction), plus the op's ideal work for roofline accounting. Entries are built as `ENTRY`
records (bytes in bytes, compute in cycles of the chip's clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np

from archsim.hardware.power import Activity


@dataclass(frozen=True, eq=False)
class Phase:
    """One kernel's work. Entry i of sequence c is at index core_start[c] + i.

    Cores that run identical entry sequences are stored once with a weight (how many cores run
    it): they move in lockstep under fair sharing, so the engine simulates one and counts it
    as `weight` flows. A GEMM's full waves collapse to one or two sequences this way.
    """

    core_start: np.ndarray  # int64 [sequences + 1], CSR offsets into the entry arrays
    core_weight: np.ndarray  # int64 [sequences], physical cores that run each sequence
    hbm_bytes: np.ndarray  # float64 [n], bytes loaded from HBM before entry i computes
    l2_bytes: np.ndarray  # float64 [n], bytes loaded from L2 (hits) before entry i computes
    compute_cycles: np.ndarray  # int64 [n]
    store_bytes: np.ndarray  # float64 [n], bytes written to HBM after entry i computes
    store_l2_bytes: np.ndarray  # float64 [n], bytes written to L2 (re-read soon) after entry i computes
    load_trips: np.ndarray  # float64 [n], loads one after another that entry i stands for (1 but for runs)
    stages: int  # SRAM buffers per core: loads run up to stages - 1 entries ahead
    label: str = ""
    new_kernel: bool = True  # False: continues the previous phase's kernel (no launch)
    inflight_bytes: float = float("inf")  # the kernel's own bytes in flight per core (below the DMA's)
    warps: int = 0  # the kernel's warps resident on a core, whose requests bound its loads (0: bulk copies)
    local_l2_share: float = 0.0  # of its L2 bytes, the share a chiplet's dies serve from their own L2s

    @property
    def entries(self) -> int:
        return int(self.core_start[-1])

    @cached_property
    def active_cores(self) -> int:
        return int(self.core_weight[np.diff(self.core_start) > 0].sum())

    @cached_property
    def entry_weights(self) -> np.ndarray:
        """float64 [n]: the cores that run each entry (its sequence's weight)."""
        return np.repeat(self.core_weight.astype(np.float64), np.diff(self.core_start))

    @cached_property
    def hbm_write_fraction(self) -> float:
        """Share of the bytes all cores move between them and HBM that are written."""
        stores = float(np.sum(self.store_bytes * self.entry_weights))
        loads = float(np.sum(self.hbm_bytes * self.entry_weights))
        return stores / (stores + loads) if stores + loads > 0 else 0.0

    @cached_property
    def hbm_traffic_bytes(self) -> float:
        """Bytes all cores load from and store to HBM."""
        return float(np.sum((self.hbm_bytes + self.store_bytes) * self.entry_weights))

    @cached_property
    def l2_traffic_bytes(self) -> float:
        """Bytes all cores load from and store to L2 (its hits)."""
        return float(np.sum((self.l2_bytes + self.store_l2_bytes) * self.entry_weights))


class Family(str, Enum):
    """Which kind of kernel a program's first phase is: it sets the kernel's fixed prologue."""

    GEMM = "gemm"  # a matrix-unit GEMM (descriptors, pipeline barriers before the first load)
    ATTENTION = "attention"  # a fused attention kernel (its Q/K/V/O descriptors and softmax state)
    STREAM = "stream"  # a streaming vector kernel or copy: no prologue


@dataclass(frozen=True, eq=False)
class Program:
    """Phases run back to back; `flops`, `min_bytes` state the op's ideal work, `activity` the
    actions its kernels perform (the inputs of its energy; bytes are counted when it is played)."""

    phases: tuple[Phase, ...]
    flops: float  # useful floating-point operations (2 per MAC)
    min_bytes: float  # compulsory HBM traffic: every operand read once, every result written once
    matrix: bool  # whether the op runs on the matrix units (sets its compute roof)
    activity: Activity = field(default_factory=Activity)
    family: Family = Family.STREAM

    @cached_property
    def local_l2_share(self) -> float:
        """Of all its phases' L2 traffic, the share a chiplet's dies serve from their own L2s."""
        local = sum(p.local_l2_share * p.l2_traffic_bytes for p in self.phases if p.local_l2_share)
        total = sum(p.l2_traffic_bytes for p in self.phases)
        return local / total if local > 0 else 0.0


# One tile step of a core, by name: bytes loaded from HBM and from L2 (hits) before it computes,
# its compute cycles, bytes written to HBM and to L2 (re-read soon) after it computes, and how
# many loads of equal parts its load stands for (one unless a step plays a run of tile steps:
# each part pays its own access latency and lands on the channels of its own bytes).
ENTRY_COLUMNS = ("hbm_bytes", "l2_bytes", "cycles", "store_bytes", "store_l2_bytes", "trips")
ENTRY = np.dtype([(name, np.float64) for name in ENTRY_COLUMNS])


def entries(count: int, **columns) -> np.ndarray:
    """`count` entries (an ENTRY record array), columns given by name (scalars or arrays), the
    rest zero (`trips` one): `entries(3, hbm_bytes=4096, cycles=100)`."""
    out = np.zeros(count, dtype=ENTRY)
    out["trips"] = 1.0
    for name, value in columns.items():
        out[name] = value
    return out


def entry_rows(steps: np.ndarray) -> np.ndarray:
    """ENTRY records as rows of floats (every field is a float64), a view: rows join without
    the record dtype's per-array promotion."""
    return np.ascontiguousarray(steps).view(np.float64).reshape(-1, len(ENTRY_COLUMNS))
