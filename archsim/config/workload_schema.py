"""Schema of a workload file (`workloads/*.yaml`): model shape, dtypes, scenario, fusion."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from archsim.config.fields import Flag, Name, NonNegativeInt, PositiveInt, Strict

DTypeName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]


class MoeCfg(Strict):
    experts: PositiveInt = Field(description="experts per MoE layer")
    top_k: PositiveInt = Field(description="experts each token is routed to")

    @field_validator("top_k")
    @classmethod
    def _top_k_within(cls, top_k: int, info: ValidationInfo) -> int:
        experts = info.data.get("experts")
        if experts is not None and top_k > experts:
            raise ValueError(f"top_k ({top_k}) must not exceed experts ({experts})")
        return top_k


class ModelCfg(Strict):
    layers: PositiveInt
    hidden: PositiveInt = Field(description="model (residual) width")
    heads: PositiveInt = Field(description="query heads")
    kv_heads: PositiveInt = Field(description="key/value heads (grouped-query attention)")
    head_dim: PositiveInt
    ffn: PositiveInt = Field(description="FFN inner width (per expert for MoE)")
    vocab: PositiveInt
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
    batch: PositiveInt = Field(description="sequences decoded together")
    prompt_tokens: PositiveInt = Field(description="prompt length per sequence")
    output_tokens: PositiveInt = Field(description="tokens generated per sequence")


class WorkloadCfg(Strict):
    name: Name
    description: str = ""
    model: ModelCfg
    dtypes: DTypesCfg = DTypesCfg()
    scenario: ScenarioCfg
    fusion: Literal["eager", "fused"] = "fused"


__all__ = ["DTypesCfg", "ModelCfg", "MoeCfg", "NonNegativeInt", "ScenarioCfg", "WorkloadCfg"]
