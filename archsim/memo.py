"""The memos of a simulation, in one registry: every result worked out once per process (a
choice per op and chip, a tile step's cycles, a GEMM's shortlist, a phase's memory figures) is
kept by a function decorated with `memo`, and `clear_all()` forgets every one of them, so a
benchmark or a calibration times simulations from scratch.

`memo(maxsize=N)` is `functools.lru_cache(maxsize=N)` (the function it returns is the cache
itself: `cache_clear` and `cache_info` work as ever, and a call costs what an lru_cache call
does); a memo that is not an lru_cache (a store kept by hand) registers its own clear with
`on_clear`. Utility caches that never change a result (where the op cache lives on disk, the
digest of the sources) are plain lru_caches and are not cleared.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_clears: list[Callable[[], None]] = []


def memo(maxsize: int | None = 128) -> Callable[[F], F]:
    """Decorator: the function memoised by an lru_cache of `maxsize` entries (None: unbounded),
    registered so that `clear_all()` empties it."""

    def wrap(fn: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        _clears.append(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return wrap


def on_clear(clear: Callable[[], None]) -> Callable[[], None]:
    """Register `clear` (a hand-kept memo's reset) with `clear_all`; returns it, so it can decorate."""
    _clears.append(clear)
    return clear


def clear_all() -> None:
    """Forget every registered memo (of the modules imported so far: the others hold nothing)."""
    for clear in _clears:
        clear()
