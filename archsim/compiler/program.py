"""A compiled op: per core, an ordered list of tile steps as plain arrays, ready for the engine.

One `Phase` is one kernel: every core works through its entries (load, compute, store) with
`stages` buffers of local SRAM, so loads run ahead of compute as far as buffers allow. A
`Program` is one or more phases run one after another (a split-K GEMM is the GEMM, then the
reduction), plus the op's ideal work for roofline accounting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np

from archsim.hardware.power import Activity
from archsim.jit import F64Array, njit_entry

PARTIAL_BYTES = 4  # partial sums (split-K, stream-K, split-KV attention) are kept in fp32


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


def build_phase(
    sequences: list[np.ndarray] | list[tuple[np.ndarray, ...]],
    stages: int,
    label: str = "",
    new_kernel: bool = True,
    weights: list[int] | None = None,
    inflight_bytes: float = float("inf"),
) -> Phase:
    """Phase from one ENTRY array per core. Identical sequences are merged into one with a weight;
    empty ones dropped. With `weights`, the sequences are already distinct and stand for that many
    cores each, and a sequence may be given as its parts in order (a tuple of ENTRY arrays: a
    long phase's sequences are then never all joined in memory at once)."""
    groups: dict = {}
    for idx, seq in enumerate(sequences):
        parts = seq if isinstance(seq, tuple) else (seq,)
        for part in parts:
            if part.dtype is not ENTRY and part.dtype != ENTRY:  # comparing record dtypes is slow
                raise TypeError(f"a core's entries must be an ENTRY record array (got {part.dtype})")
        if sum(len(part) for part in parts) == 0:
            continue
        if weights is not None:
            groups[idx] = [parts, weights[idx]]
            continue
        whole = np.ascontiguousarray(parts[0] if len(parts) == 1 else np.concatenate(parts))
        cycles = whole["cycles"]
        if (cycles % 1.0).any():  # whole cycles, as the engine counts them, before comparing
            whole = whole.copy()
            whole["cycles"] = np.ceil(cycles)
        key = whole.tobytes()
        if key in groups:
            groups[key][1] += 1
        else:
            groups[key] = [(whole,), 1]
    seqs = [g[0] for g in groups.values()] or [(entries(0),)]
    weight = np.array([g[1] for g in groups.values()] or [0], dtype=np.int64)
    counts = np.array([sum(len(part) for part in q) for q in seqs], dtype=np.int64)
    start = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    columns = {name: np.empty(int(start[-1])) for name in ENTRY_COLUMNS}
    for q, at, count in zip(seqs, start[:-1], counts, strict=True):
        rows = [entry_rows(part) for part in q]
        whole = rows[0] if len(rows) == 1 else np.concatenate(rows)
        for i, column in enumerate(columns.values()):
            column[at : at + count] = whole[:, i]
    return Phase(
        core_start=start,
        core_weight=weight,
        hbm_bytes=columns["hbm_bytes"],
        l2_bytes=columns["l2_bytes"],
        compute_cycles=np.ceil(columns.pop("cycles")).astype(np.int64),
        store_bytes=columns["store_bytes"],
        stages=max(1, int(stages)),
        label=label,
        store_l2_bytes=columns["store_l2_bytes"],
        load_trips=columns["trips"],
        new_kernel=new_kernel,
        inflight_bytes=inflight_bytes,
    )


def entry_rows(steps: np.ndarray) -> np.ndarray:
    """ENTRY records as rows of floats (every field is a float64), a view: rows join without
    the record dtype's per-array promotion."""
    return np.ascontiguousarray(steps).view(np.float64).reshape(-1, len(ENTRY_COLUMNS))


def coarse_steps(parts: tuple[np.ndarray, ...], run: int) -> np.ndarray:
    """A core's ENTRY steps (given as parts in order) played `run` at a time: each coarse step
    loads, computes and stores what its `run` steps do in all and stands for their loads
    (`trips` summed), so that it pays their access latencies one after another as they would."""
    return coarse_rows(np.concatenate([entry_rows(part) for part in parts]), run).view(ENTRY).ravel()


def coarse_rows(rows: np.ndarray, run: int) -> np.ndarray:
    """`coarse_steps` of steps given as rows of floats (`entry_rows`), as rows."""
    return np.add.reduceat(rows, np.arange(0, len(rows), run), axis=0)


@njit_entry
def deal_cores(item_costs: F64Array, cores: int):
    """Assign work items to cores as a hardware block scheduler does: each item goes to the core
    that frees up first, in the order given (ties to the lowest core). Returns the core of each
    item. A heap of (time the core frees up, core), least first: each item is taken by its top,
    which then frees up the item's cost later."""
    free_at = np.zeros(cores)  # the heap's entries: when each core frees up, and which core
    core = np.arange(cores)
    out = np.empty(item_costs.shape[0], np.int64)
    for idx in range(item_costs.shape[0]):
        out[idx] = core[0]
        free_at[0] += item_costs[idx]
        i = 0  # sift the top down: (time, core) pairs compared in order
        while True:
            child = 2 * i + 1
            if child >= cores:
                break
            right = child + 1
            if right < cores and (
                free_at[right] < free_at[child] or (free_at[right] == free_at[child] and core[right] < core[child])
            ):
                child = right
            if free_at[child] < free_at[i] or (free_at[child] == free_at[i] and core[child] < core[i]):
                free_at[i], free_at[child] = free_at[child], free_at[i]
                core[i], core[child] = core[child], core[i]
                i = child
            else:
                break
    return out
