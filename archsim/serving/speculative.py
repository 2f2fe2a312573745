"""Speculative decoding: a draft proposes k tokens per decoding sequence, the target checks them
in one verify step of k + 1 tokens per sequence and keeps the accepted ones and one of its own.

Each proposed token is accepted with probability a (per request: its `acceptance`, or the
setup's), given that the ones before it were, so a verify emits on average

    E(a, k) = (1 - a^(k+1)) / (1 - a) tokens  (k + 1 at a = 1)

(Leviathan, Kalman and Matias, Fast Inference from Transformers via Speculative Decoding, ICML
2023, eq. 1). The run stays deterministic: each request keeps a running credit, adds E at each
verify and emits its whole part (at least one token), so over many verifies it emits E each.

Drafts: a draft model (any workload, e.g. a 1B model for an 8B target), which keeps its own KV
cache, prefills the step's prompt chunks with the first proposal and decodes k times; or MTP
heads (DeepSeek-V3's multi-token prediction module, EAGLE-style heads): `mtp_layers` decoder
layers of the target's shape that share its embedding and LM head, run k times. A step takes the
draft's proposals and then the target's verify (archsim/runner/steps.py: its ops on k + 1 tokens
per decode, the LM head on each, the attention of each over its own KV). The KV pool holds the
draft's cache beside the target's and gives up the memory of the draft's weights
(archsim/serving/kvpool.py). Where it pays: a bandwidth-bound decode (small batch) checks k + 1
tokens for about the cost of one; at a large batch the step is compute-bound and the verify
costs nearly k + 1 steps, so it hurts (tools/bench_speculative.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archsim.graph.model import ModelSpec, Workload
from archsim.graph.params import total_params
from archsim.runner.steps import Chunks, StepModel


@dataclass(frozen=True)
class Speculation:
    draft: Workload  # the draft model, or the MTP module as a workload of its own
    tokens: int  # k, proposed per verify
    acceptance: float  # per proposed token, when a request states none
    mtp: bool = False  # the draft is MTP heads sharing the target's embedding and LM head

    @property
    def verify_tokens(self) -> int:
        return self.tokens + 1


def mtp_module(target: Workload, layers: int = 1) -> Workload:
    """The MTP heads of `target` as a workload: `layers` decoder layers of its shape (embedding and
    LM head run too: they are the target's own, shared)."""
    m = target.model
    model = replace(m, name=f"{m.name} MTP", layers=layers, tied_embeddings=True)
    return replace(target, model=model, source="")


def draft_memory_bytes(spec: Speculation, chips: int) -> tuple[float, float]:
    """(weights, KV bytes per token) the draft adds on each of `chips` chips: a draft model's all,
    or MTP layers without the embedding and LM head they share."""
    m, w = spec.draft.model, spec.draft
    if spec.mtp:
        bare = replace(m, vocab=0)
        weights = float(total_params(bare) + 2 * m.hidden * m.hidden)  # layers and the 2h -> h input projection
    else:
        weights = float(total_params(m))
    kv = ModelSpec.kv_bytes_per_token(m, w.dtypes.kv_cache)
    return weights * w.dtypes.weights.bytes / chips, kv / chips


def expected_tokens(acceptance: float, proposed: int) -> float:
    """E(a, k): tokens a verify of `proposed` drafted tokens emits on average."""
    if acceptance >= 1.0:
        return proposed + 1.0
    return (1.0 - acceptance ** (proposed + 1)) / (1.0 - acceptance)


def proposal_s(draft: StepModel, decodes: int, total_kv: int, max_kv: int, chunks: Chunks, k: int) -> float:
    """The draft's part of a step: its first forward with the prompt chunks, then k - 1 more
    decode steps of the decoding sequences (KV lengths as the target's)."""
    t = draft.step_s(decodes, total_kv, max_kv, chunks) if decodes or chunks else 0.0
    for j in range(1, k if decodes else 0):
        t += draft.decode_step_s(decodes, total_kv + j * decodes, max_kv + j)
    return t
