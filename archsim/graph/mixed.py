"""The ops of a mixed serving step: prefill chunks and decodes in one batch.

A continuous-batching engine runs, in one forward step, a chunk of new prompt tokens for some
requests and one token for each decoding request. Ops on tokens (embedding, norms, QKV, rotary,
KV write, O projection, FFN) run once on the step's total tokens T = decodes + chunk tokens;
the final norm and LM head on one row per sequence; attention runs per request at its own KV
length: a prefill chunk of `new_tokens` queries over `past + new_tokens` keys (causal), and the
decodes as one batched kernel over their KV caches.

A batched decode kernel deals (sequence, KV head) items to the cores, so its time is set by the
total KV it streams when the items outnumber the cores, and by the longest sequence when they do
not. Its ops are therefore given twice: all decodes as one op at their mean KV length (the same
total KV, rounded up) and the longest decode alone; the step takes the longer of the two.
Every op is built by `build_step` (by `shard_step` under a parallel layout, the busiest chip's
ops with their collectives), so prefill, decode and mixed steps share one path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.graph.builder import MTP_PREFIX, Step, build_step
from archsim.graph.model import Phase, Workload
from archsim.graph.ops import Op
from archsim.graph.parallel import Parallelism, shard_step

# ops whose shapes are set by one sequence's KV length: the attention kernels and, in eager code,
# the K/V expansion; MLA's up-projection of a prefill chunk's cached latent and its key copy, and
# the decode's absorbed query and output GEMMs (run by the decodes alone); the MTP layers' too
_PER_SEQUENCE = ("attention", "attention_local", "kv_expand", "kv_up", "k_concat", "q_absorb", "out_absorb")
PER_SEQUENCE_OPS = frozenset(_PER_SEQUENCE + tuple(MTP_PREFIX + name for name in _PER_SEQUENCE))
_HEAD = ("final_norm", "lm_head", "lm_head_allgather")  # one row per sequence in the step
HEAD_OPS = frozenset(_HEAD + tuple(MTP_PREFIX + name for name in _HEAD))
PIPELINE_OPS = frozenset({"pp_send"})  # scheduled by the pipeline, not summed into a part


@dataclass(frozen=True)
class PrefillChunk:
    """`new_tokens` prompt tokens of one request, after `past` tokens already in its KV cache."""

    new_tokens: int
    past: int

    @property
    def kv_len(self) -> int:
        return self.past + self.new_tokens


@dataclass(frozen=True)
class MixedBatch:
    """One step's work: the KV length (new token included) of each decode, and the prefill chunks."""

    decode_kv_lens: tuple[int, ...] = ()
    prefill_chunks: tuple[PrefillChunk, ...] = ()

    @property
    def tokens(self) -> int:
        return len(self.decode_kv_lens) + sum(c.new_tokens for c in self.prefill_chunks)

    @property
    def sequences(self) -> int:
        return len(self.decode_kv_lens) + len(self.prefill_chunks)


@dataclass(frozen=True)
class MixedStepOps:
    """The ops of a mixed step, grouped by what their shapes depend on.

    Step time = sum(tokens) + sum(head) + sum over chunks of sum(chunk ops)
    + max(sum(decode_attention), sum(longest_decode)), each op times its `repeat`.
    """

    tokens: tuple[Op, ...]
    head: tuple[Op, ...]
    prefill_attention: tuple[tuple[Op, ...], ...]
    decode_attention: tuple[Op, ...]
    longest_decode: tuple[Op, ...]


def step_ops(w: Workload, step: Step, par: Parallelism | None = None) -> list[Op]:
    """The ops of `step`: all of them on one chip, or the busiest chip's under `par` (one
    micro-batch's, with its collectives in place; archsim.graph.parallel)."""
    if par is None or par.is_single:
        return build_step(w, step)
    return list(shard_step(w, step, par).ops)


def token_ops(w: Workload, tokens: int, par: Parallelism | None = None) -> list[Op]:
    """Ops whose shapes depend on the step's total tokens only (their collectives included)."""
    ops = step_ops(w, Step(Phase.PREFILL, 1, tokens, 0), par)
    return [op for op in ops if op.name not in PER_SEQUENCE_OPS | HEAD_OPS | PIPELINE_OPS]


def head_ops(w: Workload, sequences: int, par: Parallelism | None = None) -> list[Op]:
    """Final norm and LM head on the last token of each of `sequences` sequences."""
    return [op for op in step_ops(w, Step(Phase.DECODE, sequences, 1, 0), par) if op.name in HEAD_OPS]


def prefill_attention_ops(
    w: Workload, new_tokens: int, past: int, batch: int = 1, par: Parallelism | None = None
) -> list[Op]:
    """Attention (and, in eager code, the K/V expansion) of a prefill chunk (of `batch` equal ones)."""
    ops = step_ops(w, Step(Phase.PREFILL, batch, new_tokens, past, with_embedding_and_head=False, with_ffn=False), par)
    return [op for op in ops if op.name in PER_SEQUENCE_OPS]


def decode_attention_ops(w: Workload, batch: int, kv_len: int, par: Parallelism | None = None) -> list[Op]:
    """Attention of `batch` decodes, each over `kv_len` keys (the new one included)."""
    ops = step_ops(w, Step(Phase.DECODE, batch, 1, kv_len - 1, with_embedding_and_head=False, with_ffn=False), par)
    return [op for op in ops if op.name in PER_SEQUENCE_OPS]


def mean_kv_len(kv_lens: tuple[int, ...] | list[int]) -> int:
    """The KV length that gives a batch of equal sequences at least the same total KV."""
    return math.ceil(sum(kv_lens) / len(kv_lens))


def build_mixed_step(w: Workload, batch: MixedBatch) -> MixedStepOps:
    """The ops of one mixed step (see MixedStepOps for how their times combine)."""
    if batch.sequences == 0:
        raise ValueError("a step needs at least one sequence")
    decodes = batch.decode_kv_lens
    return MixedStepOps(
        tokens=tuple(token_ops(w, batch.tokens)),
        head=tuple(head_ops(w, batch.sequences)),
        prefill_attention=tuple(tuple(prefill_attention_ops(w, c.new_tokens, c.past)) for c in batch.prefill_chunks),
        decode_attention=tuple(decode_attention_ops(w, len(decodes), mean_kv_len(decodes))) if decodes else (),
        longest_decode=tuple(decode_attention_ops(w, 1, max(decodes))) if decodes else (),
    )
