"""A GEMM's candidate tilings (archsim.compiler.gemm `candidate_tilings`), kept in the on-disk op
cache (archsim/opcache.py): the size check before a run asks for every GEMM's, and the choice
compiles them, whose ops the cache may already hold. The cache is looked up here, above the
compiler, which is handed the tilings.
"""

from __future__ import annotations

from collections.abc import Sequence

from archsim import opcache
from archsim.compiler.gemm import shortlist, shortlist_size
from archsim.compiler.gemm_phases import GemmMapping, Tiling
from archsim.compiler.l2reuse import Raster
from archsim.graph.ops import Op
from archsim.hardware import Chip


def cached_tilings(op: Op, chip: Chip, count: int | None = None) -> list[Tiling]:
    """The `count` (`shortlist_size`) most promising tilings of the GEMM on the chip, best first
    (`shortlist`, worked out once per op and chip, and read from the op cache where it holds them)."""
    count = shortlist_size(op) if count is None else count
    cache = opcache.cache_for_chip(chip)
    if cache is None:
        return list(shortlist(op, chip, count))
    key = opcache.ops_key((op,), f"shortlist|{count}")
    kept = _from_value(cache.get(key))
    if kept is None:
        kept = shortlist(op, chip, count)
        cache.put(key, _value(kept))
    return list(kept)


def _value(tilings: Sequence[Tiling]) -> list:
    """The tilings as a JSON list (an op cache entry)."""
    return [[t.tm, t.tn, t.tk, t.mapping.value, t.split, t.raster.value, t.group] for t in tilings]


def _from_value(value: object) -> tuple[Tiling, ...] | None:
    """The tilings `_value` wrote, or None for an entry of another shape."""
    if not isinstance(value, list) or not value:
        return None
    try:
        return tuple(
            Tiling(int(tm), int(tn), int(tk), GemmMapping(m), int(split), Raster(r), int(group))
            for tm, tn, tk, m, split, r, group in value
        )
    except (TypeError, ValueError):
        return None
