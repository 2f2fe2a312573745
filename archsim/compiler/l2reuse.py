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


class Raster(str, Enum):
    ROW = "row"
    COLUMN = "column"
    GROUPED = "grouped"


GROUPS = (2, 4, 8, 16)  # row blocks per group of a GROUPED raster a library offers


def raster_order(tiles_m: int, tiles_n: int, raster: Raster, group: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Row and column block of each tile in launch order."""
    t = np.arange(tiles_m * tiles_n)
    if raster is Raster.ROW:
        return t // tiles_n, t % tiles_n
    if raster is Raster.COLUMN:
        return t % tiles_m, t // tiles_m
    per_group = group * tiles_n
    first = (t // per_group) * group
    rows = np.minimum(group, tiles_m - first)  # the last group may hold fewer row blocks
    inside = t % per_group
    return first + inside % rows, inside // rows


def cluster_order(
    tiles_m: int, tiles_n: int, raster: Raster, group: int, cm: int, cn: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row and column block of each tile in launch order when tiles launch in clusters of
    cm x cn tiles (dividing the grid): the raster orders the clusters, and a cluster's tiles
    launch together, row by row."""
    rows, cols = raster_order(tiles_m // cm, tiles_n // cn, raster, group)
    di, dj = np.divmod(np.arange(cm * cn), cn)
    return (rows[:, None] * cm + di).ravel(), (cols[:, None] * cn + dj).ravel()


def rasters(tiles_m: int, tiles_n: int) -> list[tuple[Raster, int]]:
    """The distinct rasters of a tile grid: row, column, and groups that split the rows."""
    out = [(Raster.ROW, 1)]
    if tiles_m > 1 and tiles_n > 1:
        out.append((Raster.COLUMN, 1))
        out += [(Raster.GROUPED, g) for g in GROUPS if g < tiles_m]
    return out


def _panels(items: dict[str, np.ndarray], a_bytes: float, b_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """Each item's A and B panel as keys into one key space, and each key's bytes."""
    count = len(items["kl"])
    slices = int(items["s"].max()) + 1 if count else 1
    groups = int(items["g"].max()) + 1 if count else 1
    rows = int(items["i"].max()) + 1 if count else 1
    cols = int(items["j"].max()) + 1 if count else 1
    a_key = (items["g"] * rows + items["i"]) * slices + items["s"]
    b_key = groups * rows * slices + (items["g"] * cols + items["j"]) * slices + items["s"]
    size = np.zeros(groups * (rows + cols) * slices)
    size[a_key] = items["em"] * items["kl"] * a_bytes
    size[b_key] = items["en"] * items["kl"] * b_bytes
    return np.stack([a_key, b_key]), size


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
    count = len(items["kl"])
    waves = int(wave[-1]) + 1 if count else 0
    keys, size = _panels(items, a_bytes, b_bytes)
    moved = (items["em"] * a_bytes * shares[0] + items["en"] * b_bytes * shares[1]) * items["kl"]
    total = np.bincount(wave, moved, minlength=waves)
    missed = np.zeros(waves)
    last = np.full(len(size), -1, dtype=np.int64)  # wave each panel was last touched in
    resident = np.zeros(waves)  # bytes of the panels whose last touch is each wave
    bounds = np.searchsorted(wave, np.arange(waves + 1))
    for w in range(waves):
        touched = np.unique(keys[:, bounds[w] : bounds[w + 1]])
        before = last[touched]
        seen = before >= 0
        np.subtract.at(resident, before[seen], size[touched[seen]])
        resident[w] += size[touched].sum()
        last[touched] = w
        # stack distance of a panel last touched in wave l: the panels touched in waves l..w
        distance = np.cumsum(resident[w::-1])[::-1]  # distance[l] for l = 0..w
        hit = seen.copy()
        hit[seen] = distance[before[seen]] <= capacity_bytes
        missed[w] = size[touched[~hit]].sum()
    return np.minimum(1.0, np.divide(missed, total, out=np.zeros(waves), where=total > 0))


def operand_hbm_bytes(
    items: dict[str, np.ndarray],
    wave: np.ndarray,
    a_bytes: float,
    b_bytes: float,
    capacity_bytes: float,
    shares: tuple[float, float] = (1.0, 1.0),
) -> float:
    """Operand bytes read from HBM by all items (wave_hbm_fractions summed over the waves)."""
    moved = (items["em"] * a_bytes * shares[0] + items["en"] * b_bytes * shares[1]) * items["kl"]
    total = np.bincount(wave, moved)
    return float(np.sum(total * wave_hbm_fractions(items, wave, a_bytes, b_bytes, capacity_bytes, shares)))
