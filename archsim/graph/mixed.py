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
ops with their collectives), so prefill, decode and mixed steps share one path; each op's part
is the `Scaling` its builder gave it, and the pipeline's send (a SEND) is scheduled by the
pipeline, not summed into a part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archsim.graph.builder import Step, build_step
from archsim.graph.model import Phase, Workload
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.graph.parallel import Parallelism, shard_step
from archsim.hashing import copy_with, record_state
from archsim.memo import memo

STEP_SCALINGS = frozenset({Scaling.TOKENS, Scaling.SEQUENCES, Scaling.KV_LENGTH})  # the parts of a step


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


def part(ops: list[Op], scaling: Scaling) -> list[Op]:
    """The ops of a step that grow with `scaling` (the pipeline's send left out); refuses an op
    that belongs to no part of a step, which would otherwise go untimed."""
    for op in ops:
        if op.scaling not in STEP_SCALINGS:
            raise ValueError(
                f"op {op.name or op.kind.value} of a step has scaling {op.scaling.value}, no part of a step"
            )
    return [op for op in ops if op.scaling is scaling and op.kind is not OpKind.SEND]


def pipeline_ops(ops: list[Op]) -> list[Op]:
    """The pipeline's send of a step's ops, scheduled by the pipeline rather than summed into a part."""
    return [op for op in ops if op.kind is OpKind.SEND]


def token_ops(w: Workload, tokens: int, par: Parallelism | None = None) -> list[Op]:
    """Ops whose shapes depend on the step's total tokens only (their collectives included)."""
    return part(step_ops(w, Step(Phase.PREFILL, 1, tokens, 0), par), Scaling.TOKENS)


def head_ops(w: Workload, sequences: int, par: Parallelism | None = None) -> list[Op]:
    """Final norm and LM head on the last token of each of `sequences` sequences."""
    return part(step_ops(w, Step(Phase.DECODE, sequences, 1, 0), par), Scaling.SEQUENCES)


def prefill_attention_ops(
    w: Workload, new_tokens: int, past: int, batch: int = 1, par: Parallelism | None = None
) -> list[Op]:
    """Attention (and, in eager code, the K/V expansion) of a prefill chunk (of `batch` equal ones)."""
    ops = step_ops(w, Step(Phase.PREFILL, batch, new_tokens, past, with_embedding_and_head=False, with_ffn=False), par)
    return part(ops, Scaling.KV_LENGTH)


def decode_attention_ops(w: Workload, batch: int, kv_len: int, par: Parallelism | None = None) -> list[Op]:
    """Attention of `batch` decodes, each over `kv_len` keys (the new one included): the ops the
    step graph gives, from `decode_attention_template` where the model has one (the same ops,
    without building the step's other ops again at every KV length)."""
    template = decode_attention_template(w, batch, par)
    if template is None:
        return built_decode_attention_ops(w, batch, kv_len, par)
    return [copy_with(op, kv_len=kv_len) for op in template]


def built_decode_attention_ops(w: Workload, batch: int, kv_len: int, par: Parallelism | None = None) -> list[Op]:
    """`decode_attention_ops` from the whole step graph."""
    ops = step_ops(w, Step(Phase.DECODE, batch, 1, kv_len - 1, with_embedding_and_head=False, with_ffn=False), par)
    return part(ops, Scaling.KV_LENGTH)


FAR_KV = 1 << 40  # a KV length past any sliding window or top-k selection a model may have


@memo(maxsize=256)
def decode_attention_template(w: Workload, batch: int, par: Parallelism | None) -> tuple[Op, ...] | None:
    """The decode-attention ops of `batch` sequences at every KV length, when they are attention
    ops over all the keys whatever the length: built at two lengths far past any window, every
    op an attention op over exactly those keys, and nothing else different between the two. A
    window (min(KV length, window) keys), a top-k selection or any other op that grows with the
    KV length (an indexer's, MLA's absorbed GEMMs) gives None: such ops are built from the step
    graph at each length."""
    far = built_decode_attention_ops(w, batch, FAR_KV, par)
    further = built_decode_attention_ops(w, batch, FAR_KV + 1, par)
    if len(far) != len(further):
        return None
    for a, b in zip(far, further):
        if a.kind is not OpKind.ATTENTION or a.kv_len != FAR_KV or b.kv_len != FAR_KV + 1:
            return None
        if record_state(copy_with(a, kv_len=FAR_KV + 1)) != record_state(b):
            return None
    return tuple(far)


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
