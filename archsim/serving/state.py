"""The mutable state of one serving instance: per-request token counters, the queues, and the
KV blocks each request holds, with the prefix cache, swap space and host tier behind the pool.

A request holds `prompt + generated` known tokens, of which `computed` have KV in the cache; a
step computes some more, and once all are computed it emits a token. `free` counts the blocks of
the pool nobody references: empty ones and cached ones (archsim/serving/prefix.py), which are
evicted when an empty block is wanted. Counters are int64 arrays indexed by request, which the
serving kernels update a step at a time (archsim/serving/kernels.py). Bytes moved over the host
link (swap, offloaded blocks fetched back) are counted per step, per chip, for the step's time.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from archsim.serving.kvpool import blocks_for
from archsim.serving.prefix import BlockCache, Key


class InstanceState:
    def __init__(
        self,
        prompt: np.ndarray,
        target: np.ndarray,
        limit: np.ndarray,
        computed: np.ndarray,
        generated: np.ndarray,
        groups: np.ndarray,
        prefixes: np.ndarray,
        *,
        pool_blocks: int,
        block_size: int,
        block_bytes: float = 0.0,
        cache: BlockCache | None = None,
        swap_blocks: int = 0,
    ):
        n = len(prompt)

        def ints(a: np.ndarray) -> np.ndarray:
            return np.array(a, dtype=np.int64)

        self.prompt, self.target, self.limit = ints(prompt), ints(target), ints(limit)
        self.computed, self.generated = ints(computed), ints(generated)
        self.group, self.prefix = ints(groups), ints(prefixes)
        self.grouped = cache is not None and bool((self.group >= 0).any())  # any request the cache keys
        self.blocks = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.pool_blocks, self.free, self.bs = pool_blocks, pool_blocks, block_size
        self.block_bytes = block_bytes
        self.cache = cache
        self.held: dict[int, list[Key]] = {}  # prefix-cache keys each request references, in block order
        self.scanned = np.zeros(n, dtype=np.int64)  # leading full blocks of each request offered to the cache
        self.swap_free = swap_blocks
        self.swapped_blocks: dict[int, int] = {}
        self.running: list[int] = []
        self._running_as: tuple[list[int], np.ndarray] = ([], np.zeros(0, dtype=np.int64))  # `running_ids`
        self.waiting: deque[int] = deque()
        self.swapped: deque[int] = deque()
        self.recomputed_tokens = 0
        self.cached_tokens = 0  # prompt tokens found in the device's prefix cache
        self.offload_hit_tokens = 0  # and in the host tier, fetched back
        self.swaps_out = self.swaps_in = 0
        self.step_transfer_bytes = 0.0  # host-link bytes per chip of the step being formed

    def running_ids(self) -> np.ndarray:
        """The running requests as an int64 array (not to be written), made again only when
        the list differs from the one it was last made of (a step mostly keeps the same)."""
        was, ids = self._running_as
        if self.running != was:
            was = list(self.running)
            ids = np.array(was, dtype=np.int64)
            self._running_as = (was, ids)
        return ids

    def need(self, r: int) -> int:
        return int(self.prompt[r] + self.generated[r] - self.computed[r])

    def grow(self, r: int, tokens: int) -> int:
        """Blocks request r lacks to hold `tokens` tokens of KV."""
        return max(0, blocks_for(tokens, self.bs) - int(self.blocks[r]))

    def reserve_tokens(self, r: int) -> int:
        """KV a reserving policy sets aside: the prompt and every token the request may generate
        but the last (its max_tokens limit, not its true output)."""
        return int(self.prompt[r] + self.limit[r] - 1)

    def _allocate(self, n: int) -> None:
        """Take n blocks off the free ones, evicting the oldest cached blocks when the empty ones
        run out."""
        if n > self.free:
            raise AssertionError("KV blocks in use exceed the pool")
        if self.cache is not None:
            short = n - (self.free - self.cache.evictable)
            if short > 0:
                self.cache.evict(short)
        self.free -= n

    def take(self, r: int, blocks: int) -> None:
        if blocks > 0:
            self._allocate(blocks)
            self.blocks[r] += blocks

    def take_grown(self, blocks: int) -> None:
        """Account for `blocks` new blocks the kernels already gave to requests."""
        if blocks > 0:
            self._allocate(blocks)

    def release(self, r: int) -> None:
        """Free r's blocks: its own go back empty, its cached ones when nobody else holds them."""
        keys = self.held.pop(r, ())
        freed = int(self.blocks[r]) - len(keys)
        if keys:
            assert self.cache is not None
            for key in reversed(keys):  # the tail first: it is evicted first
                freed += self.cache.release(key)
        self.free += freed
        self.blocks[r] = 0
        self.scanned[r] = 0

    # --- prefix cache ---
    def lookup(self, r: int) -> tuple[int, int, int]:
        """(device blocks, of which unreferenced, host blocks) of r's prefix that are cached, when
        r has nothing computed; at least its last known token is left to compute."""
        if self.cache is None or self.group[r] < 0 or self.computed[r]:
            return 0, 0, 0
        known = int(self.prompt[r] + self.generated[r])
        return self.cache.lookup(int(self.group[r]), min(int(self.prefix[r]), known - 1) // self.bs)

    def claim(self, r: int, device: int, host: int) -> None:
        """Reference r's `device` cached blocks, fetch the `host` ones back into new blocks, and
        count them computed."""
        if not device and not host:
            return
        assert self.cache is not None
        g, keys = int(self.group[r]), []
        for i in range(device):
            key = (g, i)
            self.free -= self.cache.acquire(key)
            keys.append(key)
        if host:
            self._allocate(host)
            for i in range(device, device + host):
                if self.cache.insert((g, i)):
                    keys.append((g, i))
            self.step_transfer_bytes += host * self.block_bytes
        self.held[r] = keys
        self.blocks[r] = device + host
        self.scanned[r] = device + host
        self.computed[r] = (device + host) * self.bs
        self.cached_tokens += device * self.bs
        self.offload_hit_tokens += host * self.bs

    def register(self, r: int) -> None:
        """Key r's newly full, computed blocks in the cache."""
        if self.cache is None or self.group[r] < 0:
            return
        full = int(min(self.computed[r] // self.bs, self.blocks[r]))
        start = int(self.scanned[r])
        if full <= start:
            return
        g, keys = int(self.group[r]), self.held.setdefault(r, [])
        for i in range(start, full):
            if self.cache.insert((g, i)):
                keys.append((g, i))
        self.scanned[r] = full

    # --- preemption ---
    def preempt_newest(self, swap: bool) -> int:
        """Preempt the newest running request: its KV swapped out to host memory (if `swap` and
        the swap space holds it), else freed and recomputed later from the front of the queue."""
        r = self.running.pop()
        self.preemptions[r] += 1
        n = int(self.blocks[r])
        if swap and n <= self.swap_free:
            self.swap_free -= n
            self.swapped_blocks[r] = n
            self.step_transfer_bytes += n * self.block_bytes
            self.swaps_out += 1
            self.release(r)
            self.swapped.append(r)
            return r
        self.release(r)
        self.recomputed_tokens += int(self.computed[r])
        self.computed[r] = 0
        self.waiting.appendleft(r)
        return r

    def swap_in(self, r: int) -> None:
        """Bring a swapped request's KV back into new blocks; it runs again."""
        n = self.swapped_blocks.pop(r)
        self._allocate(n)
        self.blocks[r] = n
        self.swap_free += n
        self.step_transfer_bytes += n * self.block_bytes
        self.swaps_in += 1
        self.running.append(r)
