"""Prefix caching: KV blocks keyed by the tokens before them, shared by the requests whose
prompts begin alike, kept after their requests finish until the pool needs the room (least
recently freed first), as vLLM's automatic prefix caching and SGLang's radix cache keep them.

A request states what it shares with others by a prefix group and a length (a shared prompt
template, or a conversation whose next turn starts with the last one's prompt and answer). The
requests of a group continue one token stream: the first `prefix_tokens` tokens of each are the
stream's, and what a request computes beyond them extends it. Block i (tokens i*B to (i+1)*B,
block size B) of a request in group g is therefore keyed (g, i); a request finds the blocks of
its prefix, (g, 0), (g, 1), ... up to the first one missing, and computes only the rest (at
least its last prompt token, whose logits give the first output token). A block is keyed once
it is full and computed; blocks with the same key computed by two requests at once keep the
first, the second request's copy stays its own. A key has a reference count: a block nobody
references stays cached and counts as free, and is evicted when the pool needs an empty block.

A host tier (KV offload to host memory over the chip's host link, as LMCache or vLLM's CPU
offload keep it) takes the blocks evicted from the device, least recently used out first when
it is full; a request finding the next blocks of its prefix there fetches them back instead of
computing them.
"""

from __future__ import annotations

from collections import OrderedDict

Key = tuple[int, int]  # (prefix group, block index)


class HostTier:
    """Evicted blocks kept in host memory, at most `capacity_blocks`, least recently used out."""

    def __init__(self, capacity_blocks: int):
        self.capacity_blocks = capacity_blocks
        self.keys: OrderedDict[Key, None] = OrderedDict()

    def put(self, key: Key) -> None:
        if key in self.keys:
            self.keys.move_to_end(key)
            return
        self.keys[key] = None
        if len(self.keys) > self.capacity_blocks:
            self.keys.popitem(last=False)

    def touch(self, key: Key) -> bool:
        """Whether the tier holds `key` (marking it recently used)."""
        if key not in self.keys:
            return False
        self.keys.move_to_end(key)
        return True


class BlockCache:
    """Keyed blocks in the device pool: reference counts, and the unreferenced ones in the order
    they were freed (the eviction order)."""

    def __init__(self, host: HostTier | None = None):
        self.ref: dict[Key, int] = {}
        self.free_keys: OrderedDict[Key, None] = OrderedDict()
        self.host = host

    @property
    def evictable(self) -> int:
        """Cached blocks no request references (they count as free in the pool)."""
        return len(self.free_keys)

    def lookup(self, group: int, max_blocks: int) -> tuple[int, int, int]:
        """Of the blocks (group, 0), (group, 1), ... (at most `max_blocks`): how many lead in the
        device pool, how many of those nobody references, and how many follow in the host tier."""
        ref, n, unreferenced = self.ref, 0, 0
        while n < max_blocks:
            c = ref.get((group, n))
            if c is None:
                break
            unreferenced += c == 0
            n += 1
        host = 0
        if self.host is not None:
            while n + host < max_blocks and self.host.touch((group, n + host)):
                host += 1
        return n, unreferenced, host

    def acquire(self, key: Key) -> bool:
        """Reference a cached block; True if nobody did (it leaves the free blocks)."""
        c = self.ref[key]
        if c == 0:
            del self.free_keys[key]
        self.ref[key] = c + 1
        return c == 0

    def insert(self, key: Key) -> bool:
        """Key a newly computed block (referenced by its request); False if the key is cached."""
        if key in self.ref:
            return False
        self.ref[key] = 1
        return True

    def release(self, key: Key) -> bool:
        """Drop a reference; True if the block is now free (cached, evictable)."""
        c = self.ref[key] - 1
        self.ref[key] = c
        if c == 0:
            self.free_keys[key] = None
        return c == 0

    def evict(self, n: int) -> None:
        """Evict the `n` least recently freed blocks (to the host tier when there is one)."""
        for _ in range(n):
            key, _ = self.free_keys.popitem(last=False)
            del self.ref[key]
            if self.host is not None:
                self.host.put(key)
