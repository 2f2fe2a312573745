"""What is served: the model's shape, its number formats, the scenario, the degree of fusion."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from archsim.dtypes import DType


class Phase(str, Enum):
    PREFILL = "prefill"
    DECODE = "decode"


class Fusion(str, Enum):
    """How many kernels a step runs.

    EAGER is the measured PyTorch eager model: rotary embedding as ~8 elementwise kernels each
    for q and k, SiLU and multiply apart, K/V expanded by copies before prefill attention.
    FUSED is what a tuned serving engine runs: one rotary kernel, SiLU*mul in one kernel, the KV
    write fused with rotary, residual add fused into the norm.
    """

    EAGER = "eager"
    FUSED = "fused"


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer (Llama family; MoE when experts > 1)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool = False
    experts: int = 1
    top_k: int = 1

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def params(self) -> int:
        """Parameter count: attention, FFN (all experts), norms, embeddings and LM head."""
        attn = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        ffn = self.experts * 3 * self.hidden * self.ffn
        router = self.hidden * self.experts if self.is_moe else 0
        norms = 2 * self.hidden
        per_layer = attn + ffn + router + norms
        embed = self.vocab * self.hidden
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.layers * per_layer + embed + head + self.hidden

    def kv_bytes_per_token(self, kv_dtype: DType) -> float:
        """Bytes of K and V cached per token over all layers."""
        return 2.0 * self.layers * self.kv_dim * kv_dtype.bytes


@dataclass(frozen=True)
class DTypes:
    weights: DType = DType.BF16
    activations: DType = DType.BF16
    kv_cache: DType = DType.BF16


@dataclass(frozen=True)
class Scenario:
    batch: int
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Workload:
    model: ModelSpec
    dtypes: DTypes
    scenario: Scenario
    fusion: Fusion = Fusion.FUSED
    source: str = ""
