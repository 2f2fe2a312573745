"""Building the compiler's Programs (archsim/program.py): phases from per-core entry arrays,
entries played a run at a time, and the block scheduler that deals work items to cores.
"""

from __future__ import annotations

import numpy as np

from archsim.jit import F64Array, I64Array, njit_entry
from archsim.program import ENTRY, ENTRY_COLUMNS, Phase, entries, entry_rows
from archsim.stopping import POLL_EVERY, asked

PARTIAL_BYTES = 4  # partial sums (split-K, stream-K, split-KV attention) are kept in fp32


def build_phase(
    sequences: list[np.ndarray] | list[tuple[np.ndarray, ...]],
    stages: int,
    label: str = "",
    new_kernel: bool = True,
    weights: list[int] | None = None,
    inflight_bytes: float = float("inf"),
    warps: int = 0,
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
    return _phase(start, weight, columns, stages, label, new_kernel, inflight_bytes, warps)


def _phase(
    start: np.ndarray,
    weight: np.ndarray,
    columns: dict[str, np.ndarray],
    stages: int,
    label: str,
    new_kernel: bool,
    inflight_bytes: float,
    warps: int,
) -> Phase:
    """The Phase of entries by column (each of ENTRY_COLUMNS), core i's at start[i]:start[i + 1]."""
    return Phase(
        core_start=start,
        core_weight=weight,
        hbm_bytes=columns["hbm_bytes"],
        l2_bytes=columns["l2_bytes"],
        compute_cycles=np.ceil(columns["cycles"]).astype(np.int64),
        store_bytes=columns["store_bytes"],
        stages=max(1, int(stages)),
        label=label,
        store_l2_bytes=columns["store_l2_bytes"],
        load_trips=columns["trips"],
        new_kernel=new_kernel,
        inflight_bytes=inflight_bytes,
        warps=warps,
    )


def columns_phase(
    columns: dict[str, np.ndarray],
    counts: list[int],
    weights: list[int],
    stages: int,
    label: str,
    inflight_bytes: float = float("inf"),
    warps: int = 0,
    new_kernel: bool = True,
) -> Phase:
    """`build_phase` of distinct sequences given as one block of entries by column (each of
    ENTRY_COLUMNS, float64): sequence i is the next `counts[i]` entries and stands for
    `weights[i]` cores. The same numbers as building each sequence's ENTRY array and passing
    them to `build_phase`, without a record array per sequence."""
    kept = [i for i, n in enumerate(counts) if n > 0]
    start = np.zeros(max(len(kept), 1) + 1, dtype=np.int64)
    np.cumsum([counts[i] for i in kept], out=start[1 : len(kept) + 1])
    weight = np.array([weights[i] for i in kept] or [0], dtype=np.int64)
    return _phase(start, weight, columns, stages, label, new_kernel, inflight_bytes, warps)


def coarse_steps(parts: tuple[np.ndarray, ...], run: int) -> np.ndarray:
    """A core's ENTRY steps (given as parts in order) played `run` at a time: each coarse step
    loads, computes and stores what its `run` steps do in all and stands for their loads
    (`trips` summed), so that it pays their access latencies one after another as they would."""
    return coarse_rows(np.concatenate([entry_rows(part) for part in parts]), run).view(ENTRY).ravel()


def coarse_rows(rows: np.ndarray, run: int) -> np.ndarray:
    """`coarse_steps` of steps given as rows of floats (`entry_rows`), as rows."""
    return np.add.reduceat(rows, np.arange(0, len(rows), run), axis=0)


@njit_entry
def deal_cores(item_costs: F64Array, cores: int, stop: I64Array):
    """Assign work items to cores as a hardware block scheduler does: each item goes to the core
    that frees up first, in the order given (ties to the lowest core). Returns the core of each
    item. A heap of (time the core frees up, core), least first: each item is taken by its top,
    which then frees up the item's cost later. Where `stop[0]` is set (archsim/stopping.py, read
    every POLL_EVERY items) it returns at once, with cores not to be used."""
    free_at = np.zeros(cores)  # the heap's entries: when each core frees up, and which core
    core = np.arange(cores)
    out = np.empty(item_costs.shape[0], np.int64)
    for idx in range(item_costs.shape[0]):
        if idx % POLL_EVERY == 0 and asked(stop):
            break
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
