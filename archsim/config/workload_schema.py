"""Schema of a workload file (`workloads/*.yaml`): model shape, dtypes, scenario, fusion.

Every count has the physical upper bound of `archsim.limits` (layers, widths, heads, experts,
batch, tokens), checked when the file is read, before anything is sized or simulated.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt, ValidationInfo, field_validator

from archsim import limits
from archsim.config.fields import Flag, Name, NonNegativeInt, PositiveInt, Strict

DTypeName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
Layers = Annotated[StrictInt, Field(gt=0, le=limits.MAX_LAYERS)]
Width = Annotated[StrictInt, Field(gt=0, le=limits.MAX_WIDTH)]
Heads = Annotated[StrictInt, Field(gt=0, le=limits.MAX_HEADS)]
Experts = Annotated[StrictInt, Field(gt=0, le=limits.MAX_EXPERTS)]
Batch = Annotated[StrictInt, Field(gt=0, le=limits.MAX_BATCH)]
Tokens = Annotated[StrictInt, Field(gt=0, le=limits.MAX_TOKENS)]


class MoeCfg(Strict):
    experts: Experts = Field(description="experts per MoE layer")
    top_k: Experts = Field(description="experts each token is routed to")

    @field_validator("top_k")
    @classmethod
    def _top_k_within(cls, top_k: int, info: ValidationInfo) -> int:
        experts = info.data.get("experts")
        if experts is not None and top_k > experts:
            raise ValueError(f"top_k ({top_k}) must not exceed experts ({experts})")
        return top_k


class ModelCfg(Strict):
    layers: Layers
    hidden: Width = Field(description="model (residual) width")
    heads: Heads = Field(description="query heads")
    kv_heads: Heads = Field(description="key/value heads (grouped-query attention)")
    head_dim: Width
    ffn: Width = Field(description="FFN inner width (per expert for MoE)")
    vocab: Width
    tied_embeddings: Flag = False
    moe: MoeCfg | None = None

    @field_validator("kv_heads")
    @classmethod
    def _heads_grouped(cls, kv_heads: int, info: ValidationInfo) -> int:
        heads = info.data.get("heads")
        if heads is not None and heads % kv_heads:
            raise ValueError(f"kv_heads ({kv_heads}) must divide heads ({heads})")
        return kv_heads


class DTypesCfg(Strict):
    weights: DTypeName = "bf16"
    activations: DTypeName = "bf16"
    kv_cache: DTypeName = "bf16"


class ScenarioCfg(Strict):
    batch: Batch = Field(description="sequences decoded together")
    prompt_tokens: Tokens = Field(description="prompt length per sequence")
    output_tokens: Tokens = Field(description="tokens generated per sequence")

    @field_validator("output_tokens")
    @classmethod
    def _context_bounded(cls, output_tokens: int, info: ValidationInfo) -> int:
        prompt = info.data.get("prompt_tokens")
        if prompt is not None and prompt + output_tokens > limits.MAX_TOKENS:
            raise ValueError(
                f"prompt_tokens + output_tokens must be at most {limits.MAX_TOKENS:,} (got {prompt + output_tokens:,})"
            )
        return output_tokens


class WorkloadCfg(Strict):
    name: Name
    description: str = ""
    model: ModelCfg
    dtypes: DTypesCfg = DTypesCfg()
    scenario: ScenarioCfg
    fusion: Literal["eager", "fused"] = "fused"


__all__ = ["DTypesCfg", "ModelCfg", "MoeCfg", "NonNegativeInt", "PositiveInt", "ScenarioCfg", "WorkloadCfg"]
