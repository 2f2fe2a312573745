"""The KV cache as a pool of fixed-size blocks (paged attention), sized from the chip's HBM.

blocks = floor((HBM capacity - weights - peak activations) x utilisation
               / (block_size x KV bytes per token)),
per chip of the system (weights and KV are split over its chips). Peak activations are those of
the largest step the scheduler can form: `max_batched_tokens` tokens over `max_num_seqs`
sequences. (vLLM's --gpu-memory-utilization caps capacity x utilisation instead; the two differ
by a few percent of the KV pool.) A request holding `tokens` tokens of KV holds
ceil(tokens / block_size) blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
from archsim.hardware import System
from archsim.runner.memory import activation_bytes
from archsim.units import format_bytes


@dataclass(frozen=True)
class KvPool:
    """The block pool of one serving instance and the memory it was carved from, in bytes."""

    blocks: int
    block_size: int  # tokens per block
    block_bytes: float
    capacity_bytes: float
    weights_bytes: float
    activations_bytes: float
    utilisation: float

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_size

    @property
    def pool_bytes(self) -> float:
        return self.blocks * self.block_bytes


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold `tokens` tokens: ceil(tokens / block_size)."""
    return -(-tokens // block_size)


def size_pool(
    w: Workload,
    system: System,
    block_size: int,
    utilisation: float,
    max_batched_tokens: int,
    max_num_seqs: int,
    blocks_override: int | None = None,
) -> KvPool:
    """The KV pool of `w` on `system`; DoesNotFitError when not one block fits."""
    chips = system.chips
    capacity = float(system.chip.hbm.capacity_bytes)
    weights = w.model.params() * w.dtypes.weights.bytes / chips
    seqs = max(1, min(max_num_seqs, max_batched_tokens))
    activations = activation_bytes(w, seqs, math.ceil(max_batched_tokens / seqs))
    block_bytes = block_size * w.model.kv_bytes_per_token(w.dtypes.kv_cache) / chips
    free = (capacity - weights - activations) * utilisation
    blocks = blocks_override if blocks_override is not None else int(max(0.0, free) // block_bytes)
    if blocks < 1:
        raise DoesNotFitError(
            f"{w.model.name} leaves no room for a KV cache on {system.chip.name}: capacity "
            f"{format_bytes(capacity)} - weights {format_bytes(weights)} - activations "
            f"{format_bytes(activations)} = {format_bytes(capacity - weights - activations)}; "
            f"use a chip with more memory, more chips, smaller dtypes or a smaller --max-batched-tokens"
        )
    return KvPool(blocks, block_size, block_bytes, capacity, weights, activations, utilisation)
