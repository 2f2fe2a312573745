"""The memos of a simulation, in one registry: every result worked out once per process (a
choice per op and chip, a tile step's cycles, a GEMM's shortlist, a phase's memory figures) is
kept by a function decorated with `memo`, and `clear_all()` forgets every one of them, so a
benchmark or a calibration times simulations from scratch.

`memo(maxsize=N)` is `functools.lru_cache(maxsize=N)` (the function it returns is the cache
itself: `cache_clear` and `cache_info` work as ever, and a call costs what an lru_cache call
does); a memo that is not an lru_cache (a store kept by hand) registers its own clear with
`on_clear`. `memo_bytes(max_bytes, size)` bounds a memo by what its results hold rather than by
their count (a choice per op holds its program's arrays, megabytes for a long prompt's attention).
Utility caches that never change a result (where the op cache lives on disk, the
digest of the sources) are plain lru_caches and are not cleared.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

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


class MemoInfo(NamedTuple):
    """A memo's counts, as `functools.lru_cache`'s `cache_info()` gives them."""

    hits: int
    misses: int
    maxsize: int | None
    currsize: int


class _BytesMemo:
    """`fn` memoised by its positional arguments, least recently used first out once the results
    kept hold more than `max_bytes` (as `size` counts each); the latest result is always kept."""

    def __init__(self, fn: Callable[..., Any], max_bytes: int, size: Callable[[Any], int]):
        functools.update_wrapper(self, fn)
        self.fn, self.max_bytes, self.size = fn, max_bytes, size
        self.kept: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self.held_bytes = self.hits = self.misses = 0
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        with self.lock:
            found = self.kept.get(args)
            if found is not None:
                self.kept.move_to_end(args)
                self.hits += 1
                return found[0]
        value = self.fn(*args)
        nbytes = self.size(value)
        with self.lock:
            self.misses += 1
            if args not in self.kept:
                self.kept[args] = (value, nbytes)
                self.held_bytes += nbytes
            while self.held_bytes > self.max_bytes and len(self.kept) > 1:
                _, (_, gone) = self.kept.popitem(last=False)
                self.held_bytes -= gone
        return value

    def cache_clear(self) -> None:
        with self.lock:
            self.kept.clear()
            self.held_bytes = self.hits = self.misses = 0

    def cache_info(self) -> MemoInfo:
        return MemoInfo(self.hits, self.misses, None, len(self.kept))


def memo_bytes(max_bytes: int, size: Callable[[Any], int]) -> Callable[[F], F]:
    """Decorator: the function memoised by its positional arguments, its results kept while they
    hold at most `max_bytes` in all (`size(result)` each; least recently used out first),
    registered so that `clear_all()` empties it. `cache_clear` and `cache_info` as `memo`'s."""

    def wrap(fn: F) -> F:
        cached = _BytesMemo(fn, max_bytes, size)
        _clears.append(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return wrap
