"""Which of a GEMM's operand loads hit L2: the one model of L2 reuse, used both to compile a
tiling and to rank tilings (archsim/compiler/gemm.py), and the raster orders a kernel launches
its tiles in.

A GEMM's work items (output tiles, or K slices of them) are launched in a raster order and run
in waves of one item per core. An item streams its A row panel (rows x K slice) and its B column
panel (columns x K slice) a K step at a time. Within a wave, the items sharing a panel stream it
together: the first touch comes from HBM, the others hit in L2. Across waves the L2 is a
capacity managed least-recently-used at the granularity of panels and waves: a panel touched
again in wave w, last touched in wave l, is still resident if the panels touched in waves l..w
(its LRU stack distance, itself and this wave's included) fit in the L2's reuse capacity. An L2
of P partitions each caching what its own cores read (A100/H100: two, NVIDIA A100 whitepaper
2020) holds a panel that cores on every side read once per partition, so the reuse capacity is
the capacity over the partitions.

Rasters (the tile launch order; CUTLASS's threadblock swizzle, Triton's GROUP_SIZE_M):
  ROW      tile (i, j) in order i x tiles_n + j
  COLUMN   j x tiles_m + i
  GROUPED  groups of `group` row blocks, column by column inside a group
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from archsim import stopping
from archsim.jit import F64Array, I64Array, njit, njit_entry
from archsim.stopping import asked


class Raster(str, Enum):
    ROW = "row"
    COLUMN = "column"
    GROUPED = "grouped"


GROUPS = (2, 4, 8, 16)  # row blocks per group of a GROUPED raster a library offers


def tiled(x: np.ndarray, n: int) -> np.ndarray:
    """`np.tile(x, n)` of a 1-D array, in a quarter of its time (its checks cost more than the
    copy on the few hundred numbers of a tile grid's orders)."""
    return x[None, :].repeat(n, 0).reshape(-1)


def raster_order(tiles_m: int, tiles_n: int, raster: Raster, group: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Row and column block of each tile in launch order: tile t of a ROW raster is (t // tiles_n,
    t % tiles_n), of a COLUMN raster (t % tiles_m, t // tiles_m), and of a GROUPED one, in the
    group of row blocks from f = g x (t // (g x tiles_n)), holding r = min(g, tiles_m - f) of
    them (the last may hold fewer), (f + u % r, u // r) with u = t % (g x tiles_n). Built by
    repeating and tiling the row and column numbers rather than dividing every tile's number (the
    same numbers in under half the time on a grid of 49,152 tiles: 0.40 -> 0.17 ms a row raster)."""
    rows_m, cols_n = np.arange(tiles_m), np.arange(tiles_n)
    if raster is Raster.ROW:
        return np.repeat(rows_m, tiles_n), tiled(cols_n, tiles_m)
    if raster is Raster.COLUMN:
        return tiled(rows_m, tiles_n), np.repeat(cols_n, tiles_m)
    full, last = divmod(tiles_m, group)  # whole groups, and the row blocks of the last one
    rows = [(np.arange(full)[:, None] * group + tiled(np.arange(group), tiles_n)).ravel()]
    cols = [tiled(np.repeat(cols_n, group), full)]
    if last:
        rows.append(full * group + tiled(np.arange(last), tiles_n))
        cols.append(np.repeat(cols_n, last))
    return np.concatenate(rows), np.concatenate(cols)


def cluster_order(
    tiles_m: int, tiles_n: int, raster: Raster, group: int, cm: int, cn: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row and column block of each tile in launch order when tiles launch in clusters of
    cm x cn tiles (dividing the grid): the raster orders the clusters, and a cluster's tiles
    launch together, row by row."""
    rows, cols = raster_order(tiles_m // cm, tiles_n // cn, raster, group)
    if cm == cn == 1:  # clusters of one tile: the raster's own order
        return rows, cols
    k = cm * cn
    di, dj = np.divmod(np.arange(k), cn)  # (repeated and tiled: a broadcast over k columns is twice as slow)
    return np.repeat(rows * cm, k) + tiled(di, len(rows)), np.repeat(cols * cn, k) + tiled(dj, len(cols))


def rasters(tiles_m: int, tiles_n: int) -> list[tuple[Raster, int]]:
    """The distinct rasters of a tile grid: row, column, and groups that split the rows."""
    out = [(Raster.ROW, 1)]
    if tiles_m > 1 and tiles_n > 1:
        out.append((Raster.COLUMN, 1))
        out += [(Raster.GROUPED, g) for g in GROUPS if g < tiles_m]
    return out


def wave_hbm_fractions(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    capacity_bytes: float,
    shares: tuple[float, float] = (1.0, 1.0),
) -> np.ndarray:
    """Share of each wave's operand bytes that comes from HBM, for items run in waves `wave`
    (wave index per item, non-decreasing) with `capacity_bytes` of L2 to reuse panels in; each
    core moves `shares` of its A and B blocks (less than 1 where a cluster multicasts them)."""
    return _wave_walk(items, wave, a_bytes, b_bytes, capacity_bytes, shares)[1]


def _wave_walk(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    capacity_bytes: float,
    shares: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray]:
    """Each wave's operand bytes and the share of them from HBM (`wave_hbm_fractions`). Items
    (group g, row block i, column block j, K slice s) read the A panel (g, i, s) and the B panel
    (g, j, s), numbered in one key space, A's first."""
    count = len(items["kl"])
    waves = int(wave[-1]) + 1 if count else 0
    slices = int(items["s"].max()) + 1 if count else 1
    groups = int(items["g"].max()) + 1 if count else 1
    rows = int(items["i"].max()) + 1 if count else 1
    cols = int(items["j"].max()) + 1 if count else 1
    if groups == slices == 1:  # g = s = 0: the same keys without the arithmetic (most GEMMs)
        a_key, b_key = np.array(items["i"], dtype=np.int64), items["j"] + rows  # a copy: the kernel's own
    else:
        a_key = (items["g"] * rows + items["i"]) * slices + items["s"]
        b_key = groups * rows * slices + (items["g"] * cols + items["j"]) * slices + items["s"]
    em, en, kl = (np.ascontiguousarray(items[c], dtype=np.int64) for c in ("em", "en", "kl"))
    keys = groups * (rows + cols) * slices
    operands = np.array([a_bytes, b_bytes, *shares, capacity_bytes], dtype=np.float64)
    moved, missed = _walk_waves(a_key, b_key, em, en, kl, wave, waves, keys, operands, stopping.FLAG)
    stopping.check()  # a walk stopped early by a signal (archsim/stopping.py)
    return moved, np.minimum(1.0, np.divide(missed, moved, out=np.zeros(waves), where=moved > 0))


@njit_entry
def _walk_waves(
    a_key: I64Array,
    b_key: I64Array,
    em: I64Array,
    en: I64Array,
    kl: I64Array,
    wave: I64Array,
    waves: int,
    keys: int,
    operands: F64Array,
    stop: I64Array,
):
    """Each wave's operand bytes (each item's `em` x a_bytes x a_share + `en` x b_bytes x
    b_share per unit of K length `kl`, added in item order; `operands` = [a_bytes, b_bytes,
    a_share, b_share, capacity_bytes], the element bytes of A and B, the share of its blocks a
    core moves and the L2's reuse capacity) and the bytes it reads from HBM
    (`_missed_bytes` of the distinct panels it touches, in increasing order, each panel's bytes
    its rows or columns x K length x element bytes). A wave's items are consecutive (`wave` is
    non-decreasing): its panels are gathered once each (the wave that last took a panel is
    kept) and only those are sorted. Where `stop[0]` is set (archsim/stopping.py, read once a
    wave) it returns at once, with sums not to be used."""
    a_bytes, b_bytes, a_share, b_share, capacity_bytes = operands[0], operands[1], operands[2], operands[3], operands[4]
    count = wave.shape[0]
    size = np.zeros(keys)
    moved = np.zeros(waves)
    panels = np.empty(2 * count, np.int64)
    bounds = np.zeros(waves + 1, np.int64)
    taken_in = np.full(keys, -1, np.int64)
    n = 0
    lo = 0
    for w in range(waves):
        if asked(stop):
            return moved, moved
        hi = lo
        while hi < count and wave[hi] == w:
            hi += 1
        first = n
        for t in range(lo, hi):
            moved[w] += (em[t] * a_bytes * a_share + en[t] * b_bytes * b_share) * kl[t]
            size[a_key[t]] = em[t] * kl[t] * a_bytes
            size[b_key[t]] = en[t] * kl[t] * b_bytes
            for key in (a_key[t], b_key[t]):
                if taken_in[key] != w:
                    taken_in[key] = w
                    panels[n] = key
                    n += 1
        panels[first:n].sort()
        bounds[w + 1] = n
        lo = hi
    return moved, _missed_bytes(panels[:n], bounds, size, capacity_bytes, stop)


# a walk stops adding stack distances once they pass the capacity by this share, and skips them
# where every panel ever touched fits under it by this share: far beyond the rounding of the
# sums (a few ulps per added wave), so each panel's hit or miss is the full walk's to the bit
MARGIN = 1e-6


@njit
def _missed_bytes(panels, bounds, size, capacity_bytes, stop):
    """Bytes each wave reads from HBM: the panels it touches (`panels[bounds[w]:bounds[w + 1]]`)
    that were never touched, or whose LRU stack distance exceeds `capacity_bytes`.

    The distances are summed back from the wave only until they pass the capacity (an older
    panel is further still: a miss), and not at all while every panel touched so far fits (each
    one touched again hits), so the walk costs the panels it touches plus, per wave, the waves
    the L2 holds, not the square of the waves. Where `stop[0]` is set (read once a wave) it
    returns at once, with sums not to be used."""
    waves = bounds.shape[0] - 1
    missed = np.zeros(waves)
    last = np.full(size.shape[0], -1, np.int64)  # wave each panel was last touched in
    resident = np.zeros(waves)  # bytes of the panels whose last touch is each wave
    distance = np.zeros(waves)
    gathered = np.zeros(panels.shape[0])
    before = np.zeros(panels.shape[0], np.int64)
    touched = 0.0  # bytes of every panel touched so far: no stack distance is longer
    fits = capacity_bytes * (1.0 - MARGIN)
    beyond = capacity_bytes * (1.0 + MARGIN)
    for w in range(waves):
        if asked(stop):
            break
        lo, n = bounds[w], bounds[w + 1] - bounds[w]
        for t in range(n):
            p = panels[lo + t]
            before[t] = last[p]
            if before[t] >= 0:
                resident[before[t]] -= size[p]
            else:
                touched += size[p]
            gathered[t] = size[p]
            last[p] = w
        resident[w] += _pairwise_sum(gathered, 0, n)
        # stack distance of a panel last touched in wave l: the panels touched in waves l..w
        all_fit = touched <= fits
        oldest = 0  # the oldest wave whose distance is summed; older ones are past the capacity
        if not all_fit:
            acc = 0.0
            for v in range(w, -1, -1):
                acc += resident[v]
                distance[v] = acc
                if acc > beyond:
                    oldest = v
                    break
        k = 0
        for t in range(n):
            b = before[t]
            if b < 0 or (not all_fit and (b < oldest or distance[b] > capacity_bytes)):
                gathered[k] = size[panels[lo + t]]
                k += 1
        missed[w] = _pairwise_sum(gathered, 0, k)
    return missed


@njit
def _block_sum(a, lo, n):
    """numpy's sum of a block of at most 128 elements: eight accumulators, then the rest."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r = a[lo : lo + 8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += a[lo + i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit
def _pairwise_sum(a, lo, n):
    """The sum of a[lo:lo + n] as numpy's `sum` adds a contiguous float64 array, so that results
    are numpy's to the last bit: blocks of up to 128 elements (`_block_sum`), a longer range
    halved (rounded to eight) and its halves' sums added. Walked with a stack of its own (a
    recursive kernel does not load from Numba's cache); the addition commutes exactly, so the
    order the halves are summed in does not matter."""
    if n <= 128:
        return _block_sum(a, lo, n)
    todo_lo = np.empty(128, np.int64)  # ranges to sum; n <= 128 * 2**64 needs far fewer
    todo_n = np.empty(128, np.int64)
    sums = np.empty(128)  # partial sums and the depth of the split they belong to
    depth = np.empty(128, np.int64)
    at = np.empty(128, np.int64)
    todo_lo[0], todo_n[0], at[0] = lo, n, 0
    pending, done = 1, 0
    while pending:
        pending -= 1
        s, m, d = todo_lo[pending], todo_n[pending], at[pending]
        if m > 128:
            half = m // 2
            half -= half % 8
            todo_lo[pending], todo_n[pending], at[pending] = s, half, d + 1
            todo_lo[pending + 1], todo_n[pending + 1], at[pending + 1] = s + half, m - half, d + 1
            pending += 2
            continue
        value, level = _block_sum(a, s, m), d
        # two finished halves of one split (the same depth, adjacent on the stack) add up
        while done and depth[done - 1] == level:
            done -= 1
            value = sums[done] + value
            level -= 1
        sums[done], depth[done] = value, level
        done += 1
    return sums[0]


def operand_hbm_bytes(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    capacity_bytes: float,
    shares: tuple[float, float] = (1.0, 1.0),
) -> float:
    """Operand bytes read from HBM by all items (wave_hbm_fractions summed over the waves)."""
    moved, fractions = _wave_walk(items, wave, a_bytes, b_bytes, capacity_bytes, shares)
    return float(np.sum(moved * fractions))
