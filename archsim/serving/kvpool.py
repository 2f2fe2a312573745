"""The KV cache as a pool of fixed-size blocks (paged attention), sized as vLLM sizes it.

    blocks = floor((capacity x gpu_memory_utilization - weights - activations)
                   / (block_size x KV bytes per token)),

per chip (archsim/runner/memory.py: the capacity the device reports, the chip's share of the
weights, the activation peak of one step of `max_batched_tokens` tokens over `max_num_seqs`
sequences). A speculative decoding draft (another model, or MTP heads) adds its weights and its
KV bytes per token, as the engine keeps both caches in the same blocks. A request holding
`tokens` tokens of KV holds ceil(tokens / block_size) blocks. A hybrid model (linear attention,
Mamba) keeps a fixed recurrent state per sequence beside its paged KV, as SGLang's and vLLM's
hybrid caches do: a slot for each of `max_num_seqs` sequences is set aside first,

    blocks = floor((budget - max_num_seqs x state bytes per sequence) / (block_size x KV bytes per token)),

so that every sequence the scheduler may run holds its slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism
from archsim.hardware import System
from archsim.runner.memory import memory_budget
from archsim.units import format_bytes


@dataclass(frozen=True)
class KvPool:
    """The block pool of one serving instance (one chip's share) and the memory it was carved
    from, in bytes."""

    blocks: int
    block_size: int  # tokens per block
    block_bytes: float  # on each chip
    capacity_bytes: float
    weights_bytes: float
    activations_bytes: float
    utilisation: float
    state_slots: int = 0  # recurrent state slots (one per sequence that may run), beside the blocks
    state_slot_bytes: float = 0.0  # one slot's bytes on each chip

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
    parallelism: Parallelism | None = None,
    extra_weights_bytes: float = 0.0,
    extra_kv_bytes_per_token: float = 0.0,
) -> KvPool:
    """The KV pool of `w` on `system` (per chip of `parallelism`); DoesNotFitError when not one
    block fits. `extra_*`: a speculative draft's weights and KV bytes per token on each chip."""
    b = memory_budget(w, system, parallelism, utilisation, max_batched_tokens, max_num_seqs)
    weights = b.weights_bytes + extra_weights_bytes
    block_bytes = block_size * (b.kv_bytes_per_token + extra_kv_bytes_per_token)
    free = b.kv_budget_bytes - extra_weights_bytes
    slots = max_num_seqs if b.state_bytes_per_sequence else 0
    if slots:
        free -= slots * b.state_bytes_per_sequence
    blocks = blocks_override if blocks_override is not None else int(max(0.0, free) // block_bytes)
    if blocks < 1:
        raise DoesNotFitError(
            f"{w.model.name} leaves no room for a KV cache on {system.chip.name}: "
            f"{100 * utilisation:.0f}% of capacity {format_bytes(b.capacity_bytes)} - weights "
            f"{format_bytes(weights)} - activations {format_bytes(b.activations_bytes)} = "
            f"{format_bytes(b.capacity_bytes * utilisation - weights - b.activations_bytes)}"
            f"{state_note(slots, b.state_bytes_per_sequence)}; use a chip with "
            f"more memory, more chips, smaller dtypes, a higher --gpu-memory-utilization or a smaller "
            f"--max-batched-tokens"
        )
    return KvPool(
        blocks,
        block_size,
        block_bytes,
        b.capacity_bytes,
        weights,
        b.activations_bytes,
        utilisation,
        slots,
        b.state_bytes_per_sequence,
    )


def state_note(slots: int, slot_bytes: float) -> str:
    """What the recurrent state slots take, for a message (empty without them)."""
    return f", less {slots} recurrent state slots of {format_bytes(slot_bytes)}" if slots else ""
