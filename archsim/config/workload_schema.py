"""Schema of a workload file (`workloads/*.yaml`): model shape, dtypes, scenario, fusion."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from archsim.config.fields import NonNegativeInt, PositiveInt, Strict

DTypeName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]


class MoeCfg(Strict):
    experts: PositiveInt = Field(description="experts per MoE layer")
    top_k: PositiveInt = Field(description="experts each token is routed to")

    @model_validator(mode="after")
    def _top_k_within(self) -> "MoeCfg":
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must not exceed experts ({self.experts})")
        return self


class ModelCfg(Strict):
    layers: PositiveInt
    hidden: PositiveInt = Field(description="model (residual) width")
    heads: PositiveInt = Field(description="query heads")
    kv_heads: PositiveInt = Field(description="key/value heads (grouped-query attention)")
    head_dim: PositiveInt
    ffn: PositiveInt = Field(description="FFN inner width (per expert for MoE)")
    vocab: PositiveInt
    tied_embeddings: bool = False
    moe: MoeCfg | None = None

    @model_validator(mode="after")
    def _heads_grouped(self) -> "ModelCfg":
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        return self


class DTypesCfg(Strict):
    weights: DTypeName = "bf16"
    activations: DTypeName = "bf16"
    kv_cache: DTypeName = "bf16"


class ScenarioCfg(Strict):
    batch: PositiveInt = Field(description="sequences decoded together")
    prompt_tokens: PositiveInt = Field(description="prompt length per sequence")
    output_tokens: PositiveInt = Field(description="tokens generated per sequence")


class WorkloadCfg(Strict):
    name: str
    description: str = ""
    model: ModelCfg
    dtypes: DTypesCfg = DTypesCfg()
    scenario: ScenarioCfg
    fusion: Literal["eager", "fused"] = "fused"


__all__ = ["WorkloadCfg", "ModelCfg", "ScenarioCfg", "DTypesCfg", "MoeCfg", "NonNegativeInt"]
