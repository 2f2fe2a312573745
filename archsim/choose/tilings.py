"""A GEMM's candidate tilings (archsim.compiler.gemm `candidate_tilings`), kept in the on-disk op
cache (archsim/opcache.py): the size check before a run asks for every GEMM's, and the choice
compiles them, whose ops the cache may already hold. The cache is looked up here, above the
compiler, which is handed the tilings. Tilings read from the cache are checked against the op
and the chip as the compiler forms them (`legal_tiling`): any other list is a miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from archsim import opcache
from archsim.compiler.chip_family import EVERY_MOVE, SearchMove
from archsim.compiler.gemm import best_raster, shortlist, shortlist_size, tile_menu
from archsim.compiler.gemm_phases import GemmMapping, Tiling, operand_shares, tiling_layout
from archsim.compiler.l2reuse import Raster, rasters
from archsim.compiler.mappings.split_k import SPLITS
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.units import ceil_div


def cached_tilings(op: Op, chip: Chip, count: int | None = None) -> list[Tiling]:
    """The `count` (`shortlist_size`) most promising tilings of the GEMM on the chip, best first,
    and the leanest (and the best by the estimate without the feed) where not among them
    (`shortlist`, worked out once per op and chip, and read from the op cache where it holds
    them)."""
    count = shortlist_size(op) if count is None else count
    cache = opcache.cache_for_chip(chip)
    if cache is None:
        return list(shortlist(op, chip, count))
    key = opcache.ops_key((op,), f"shortlist|{count}")
    kept = _from_value(cache.get(key), op)
    if kept is None or len(kept) > count + 2 or not all(legal_tiling(op, chip, t) for t in kept):
        kept = shortlist(op, chip, count)
        cache.put(key, _value(kept))
    return list(kept)


def _value(tilings: Sequence[Tiling]) -> list:
    """The tilings as a JSON list (an op cache entry)."""
    return [[t.tm, t.tn, t.tk, t.mapping.value, t.split, t.raster.value, t.group] for t in tilings]


def _from_value(value: object, op: Op) -> tuple[Tiling, ...] | None:
    """The tilings `_value` wrote for the GEMM `op`, or None for an entry of another shape (a
    count that is not a whole number included: 64.5 is no tile edge) or with one tile shape and
    mapping twice (a K step of the whole K apart: compiler/gemm.py `shortlist`)."""
    if not isinstance(value, list) or not value:
        return None
    try:
        kept = tuple(
            Tiling(_whole(tm), _whole(tn), _whole(tk), GemmMapping(m), _whole(split), Raster(r), _whole(group))
            for tm, tn, tk, m, split, r, group in value
        )
    except (TypeError, ValueError):
        return None
    shapes = {(t.tm, t.tn, t.mapping, t.split, t.tk >= op.k) for t in kept}
    return kept if len(shapes) == len(kept) else None


def _whole(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("not a whole number")
    return v


def legal_tiling(op: Op, chip: Chip, t: Tiling) -> bool:
    """Whether the compiler could have put `t` on the GEMM's shortlist on `chip`
    (archsim.compiler.gemm `shortlist`): its tile one of the chip's menu (`tile_menu`: the
    family's, or the kernel library's edges whose stages fit SRAM and accumulators); split-K with
    a slice count it offers, at most one per K step, stream-K only with a partial wave; a raster
    of its tile grid."""
    m, k, n = op.m, op.k, op.n
    tm, tn, tk = tile_menu(op, chip)
    if not ((tm == t.tm) & (tn == t.tn) & (tk == t.tk)).any():
        return False
    tiles = op.groups * ceil_div(m, t.tm) * ceil_div(n, t.tn)
    if t.mapping is GemmMapping.SPLIT_K:
        if t.split not in SPLITS or t.split > ceil_div(k, t.tk):
            return False
    elif t.split != 1 or (t.mapping is GemmMapping.STREAM_K and tiles % (t.grid or chip.cores) == 0):
        return False
    if not 0 <= t.grid < chip.cores:
        return False
    lay = tiling_layout(chip, t)
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    c = lay.multicast
    grid = ceil_div(m, t.tm) // (c if sb < 1 else 1), ceil_div(n, t.tn) // (c if sa < 1 else 1)
    return (t.raster, t.group) in rasters(*grid)


# the moves of a tiling search (compiler/chip_family.py `SearchMove`): each tile edge doubled or
# halved and the tile's aspect doubled one way and halved the other, the K step doubled or halved
# (tm, tn, tk factors); the same tile under another mapping (mapping, K slices)
TILE_MOVES = ((2, 1, 1), (1, 2, 1), (0.5, 1, 1), (1, 0.5, 1), (2, 0.5, 1), (0.5, 2, 1))
K_MOVES = ((1, 1, 2), (1, 1, 0.5))
MAPPING_MOVES = ((GemmMapping.DATA_PARALLEL, 1), (GemmMapping.STREAM_K, 1), (GemmMapping.SPLIT_K, 2))


def neighbours(op: Op, chip: Chip, t: Tiling, moves: frozenset[SearchMove] = EVERY_MOVE) -> list[Tiling]:
    """The legal tilings one of `moves` from `t` (`TILE_MOVES`, `K_MOVES`, `MAPPING_MOVES`, and
    half or twice the cores), each under the raster that reads the least from HBM
    (`best_raster`), in move order. E.g. 256 x 256 x 128 data-parallel tiles of a 4096 x 1024 x
    4096 GEMM: 512 x 256, 256 x 512, 128 x 256, 256 x 128, 512 x 128 and 128 x 512 where the
    menu holds them, 256 x 256 x 256 and x 64, stream-K and two-way split-K 256 x 256 x 128
    where the mapping applies, and the tiles dealt over half the cores. A stream-K tiling moved
    to tiles that fill whole waves is data-parallel (stream-K has no tail to balance there, and
    is not legal): 2048 x 4096 stream-K on 4 cores (2 tiles) halved to 2048 x 2048 (4 tiles)."""
    steps = (TILE_MOVES if SearchMove.TILE in moves else ()) + (K_MOVES if SearchMove.K_STEP in moves else ())
    moved = [replace(t, tm=int(t.tm * a), tn=int(t.tn * b), tk=int(t.tk * c)) for a, b, c in steps]
    if SearchMove.MAPPING in moves:
        moved += [replace(t, mapping=m, split=s) for m, s in MAPPING_MOVES if (m, s) != (t.mapping, t.split)]
    if SearchMove.CORES in moves:  # half the cores, or back to twice as many (every core at most)
        cores = t.grid or chip.cores
        moved += [replace(t, grid=cores // 2)] if cores >= 2 else []
        moved += [replace(t, grid=0 if 2 * t.grid >= chip.cores else 2 * t.grid)] if t.grid else []
    out = []
    for n in moved:
        if min(n.tm, n.tn, n.tk) < 1:
            continue
        n = best_raster(op, chip, n)[0]
        if n.mapping is GemmMapping.STREAM_K and not legal_tiling(op, chip, n):
            # the moved tiles fill whole waves: stream-K has no tail to balance, and is data-parallel
            dp = replace(n, mapping=GemmMapping.DATA_PARALLEL)
            if (dp.tm, dp.tn, dp.tk, dp.grid) != (t.tm, t.tn, t.tk, t.grid):  # not a mapping move's
                n = best_raster(op, chip, dp)[0]
        if legal_tiling(op, chip, n):
            out.append(n)
    return out
