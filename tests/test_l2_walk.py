"""The L2 reuse walk (archsim/compiler/l2reuse.py) sums stack distances only back to the L2's
capacity, and not at all while everything touched fits: each wave's HBM bytes equal, to the
bit, those of the full walk, which summed every older wave's distance at every wave (kept here
as the reference)."""

import numpy as np
import pytest

from archsim import stopping
from archsim.compiler.l2reuse import Raster, _missed_bytes, raster_order, wave_hbm_fractions


def _full_walk(panels, bounds, size, capacity_bytes):
    """The walk as it was: every older wave's stack distance summed at every wave."""
    waves = bounds.shape[0] - 1
    missed = np.zeros(waves)
    last = np.full(size.shape[0], -1, np.int64)
    resident = np.zeros(waves)
    distance = np.zeros(waves)
    for w in range(waves):
        touched = panels[bounds[w] : bounds[w + 1]]
        before = last[touched].copy()
        for p, b in zip(touched, before, strict=True):
            if b >= 0:
                resident[b] -= size[p]
            last[p] = w
        resident[w] += np.sum(size[touched])
        acc = 0.0
        for v in range(w, -1, -1):
            acc += resident[v]
            distance[v] = acc
        miss = [size[p] for p, b in zip(touched, before, strict=True) if b < 0 or distance[b] > capacity_bytes]
        missed[w] = np.sum(np.array(miss, dtype=np.float64))
    return missed


def _grid_items(tiles_m, tiles_n, raster, group, ksteps=1, em=10, en=10, kl=10):
    rows, cols = raster_order(tiles_m, tiles_n, raster, group)
    count = len(rows)
    one = np.ones(count, np.int64)
    return {"g": 0 * one, "i": rows, "j": cols, "s": 0 * one, "em": em * one, "en": en * one, "kl": kl * one}


@pytest.mark.parametrize(
    "capacity, fractions",
    [
        # 2 x 2 tiles, one core, row raster: waves (0,0) (0,1) (1,0) (1,1), every panel 10 x 10 x
        # 1 B = 100 B, each wave moves 200 B. Wave 1 reads A0 again (distance: A0 and B1 of wave 1
        # plus B0 of wave 0 = 300 B); wave 2 reads B0 (A1, A0 + B1, B0 = 400 B); wave 3 reads A1
        # (B1 + B0 moved on: 300 B) and B1 (400 B)
        (1000.0, [1.0, 0.5, 0.5, 0.0]),  # everything fits: only first touches miss
        (400.0, [1.0, 0.5, 0.5, 0.0]),  # 400 B fits exactly (not under the margin: distances summed)
        (300.0, [1.0, 0.5, 1.0, 0.5]),  # B0 (400 B) misses in wave 2, B1 (400 B) in wave 3
        (250.0, [1.0, 1.0, 1.0, 1.0]),  # the summing stops at 300 B: B1, older, misses unsummed
    ],
)
def test_a_two_by_two_row_raster_by_hand(capacity, fractions):
    items = _grid_items(2, 2, Raster.ROW, 1)
    wave = np.arange(4, dtype=np.int64)
    got = wave_hbm_fractions(items, wave, 1.0, 1.0, capacity)
    assert got.tolist() == fractions


def _panels(items, wave):
    """The walk's panels per wave, as `_walk_waves` gathers them (sorted per wave)."""
    a_key = items["i"]
    b_key = int(items["i"].max()) + 1 + items["j"]
    size = np.zeros(int(b_key.max()) + 1)
    size[a_key] = items["em"] * items["kl"] * 1.0
    size[b_key] = items["en"] * items["kl"] * 2.0
    waves = int(wave[-1]) + 1
    panels, bounds = [], [0]
    for w in range(waves):
        at = wave == w
        panels += sorted(set(a_key[at].tolist()) | set(b_key[at].tolist()))
        bounds.append(len(panels))
    return np.array(panels, np.int64), np.array(bounds, np.int64), size


@pytest.mark.parametrize("raster, group", [(Raster.ROW, 1), (Raster.COLUMN, 1), (Raster.GROUPED, 4)])
@pytest.mark.parametrize("cores", [1, 3, 8])
def test_the_bounded_walk_equals_the_full_walk_to_the_bit(raster, group, cores):
    rng = np.random.default_rng(cores)
    items = _grid_items(13, 9, raster, group, em=7, en=11, kl=96)
    wave = np.arange(len(items["i"]), dtype=np.int64) // cores
    panels, bounds, size = _panels(items, wave)
    touched = float(np.sum(size))
    # capacities around every distance that occurs: a few panels, exactly all of them, beyond
    for capacity in [*rng.uniform(0, touched, 12), *np.unique(size) * 3, touched, touched * (1 + 1e-7), 2 * touched]:
        got = _missed_bytes(panels, bounds, size, float(capacity), stopping.FLAG)
        want = _full_walk(panels, bounds, size, float(capacity))
        assert got.tobytes() == want.tobytes(), capacity


@pytest.mark.parametrize("tiles_m", [1, 2, 3, 7, 16, 17, 100])
@pytest.mark.parametrize("tiles_n", [1, 2, 5, 16, 31])
@pytest.mark.parametrize(
    ("raster", "group"), [(Raster.ROW, 1), (Raster.COLUMN, 1), *((Raster.GROUPED, g) for g in (1, 2, 4, 8, 16))]
)
def test_a_raster_launches_each_tile_where_its_formula_says(tiles_m, tiles_n, raster, group):
    """Tile t of a ROW raster is (t // tiles_n, t % tiles_n), of a COLUMN raster (t % tiles_m,
    t // tiles_m), of a GROUPED one (f + u % r, u // r), with f = g (t // (g tiles_n)) the first
    row block of its group, r = min(g, tiles_m - f) the group's row blocks and u = t % (g tiles_n):
    the order built by repeating and tiling is that one, number for number."""
    t = np.arange(tiles_m * tiles_n)
    if raster is Raster.ROW:
        want = t // tiles_n, t % tiles_n
    elif raster is Raster.COLUMN:
        want = t % tiles_m, t // tiles_m
    else:
        f = group * (t // (group * tiles_n))
        r, u = np.minimum(group, tiles_m - f), t % (group * tiles_n)
        want = f + u % r, u // r
    rows, cols = raster_order(tiles_m, tiles_n, raster, group)
    assert rows.dtype == cols.dtype == np.int64
    assert rows.tolist() == want[0].tolist() and cols.tolist() == want[1].tolist()


@pytest.mark.parametrize(("cm", "cn"), [(2, 1), (1, 2), (2, 2), (4, 1)])
def test_a_cluster_launches_its_tiles_together_row_by_row(cm, cn):
    """Clusters of cm x cn tiles in the raster's order, each cluster's tiles row by row: on a 4 x
    4 grid in clusters of 2 x 1 under a ROW raster, (0, 0), (1, 0), (0, 1), (1, 1), ..."""
    from archsim.compiler.l2reuse import cluster_order

    rows, cols = cluster_order(4, 4, Raster.ROW, 1, cm, cn)
    want = [
        (ci * cm + di, cj * cn + dj)
        for ci in range(4 // cm)
        for cj in range(4 // cn)
        for di in range(cm)
        for dj in range(cn)
    ]
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == want
    if (cm, cn) == (2, 1):
        assert want[:4] == [(0, 0), (1, 0), (0, 1), (1, 1)]


@pytest.mark.parametrize(("length", "n"), [(0, 3), (1, 0), (1, 5), (7, 1), (24, 40)])
def test_tiled_is_np_tile(length, n):
    """`tiled` (the orders' fast `np.tile`) gives np.tile's array, dtype and all, an empty one too."""
    from archsim.compiler.l2reuse import tiled

    x = np.arange(length, dtype=np.int64) * 3 - 5
    out = tiled(x, n)
    assert out.dtype == np.tile(x, n).dtype and np.array_equal(out, np.tile(x, n))
