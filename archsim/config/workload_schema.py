"""Schema of a workload file (`workloads/*.yaml`): model shape, dtypes, scenario, fusion.

The model is a Llama-style decoder unless its file says otherwise: `attention` (latent attention,
sliding windows, query/key norms, biases, soft cap, partial rotary), `norm`, `mlp` (activation,
gated or not, biases), `parallel_block`, `post_norms`, `positions`, `moe` (shared experts, dense
first layers, routing skew), `mtp_layers`, and the recurrent mixers of hybrids:
`linear_attention` (Gated DeltaNet layers), `mamba` (Mamba-2 layers), with `mixer_only_layers`
and `ffn_only_layers` for blocks of one part (archsim/graph/model.py says what each means). Keys
a file leaves out stay out of the resolved configuration, so a file written before they existed
keeps its config hash. Every count has the physical upper bound of `archsim.limits` (layers,
widths, heads, experts, batch, tokens), checked when the file is read, before anything is sized
or simulated.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictInt, ValidationInfo, field_validator, model_serializer, model_validator

from archsim import limits
from archsim.config.fields import Flag, Name, NonNegativeInt, PositiveInt, Strict
from archsim.dtypes import DTYPE_NAMES, DType
from archsim.graph.model import Activation, AttentionKind, DTypes, ModelSpec, Norm, Positions

DTypeName = Literal[DTYPE_NAMES]  # type: ignore[valid-type]
Layers = Annotated[StrictInt, Field(gt=0, le=limits.MAX_LAYERS)]
LayersOrZero = Annotated[StrictInt, Field(ge=0, le=limits.MAX_LAYERS)]
Width = Annotated[StrictInt, Field(gt=0, le=limits.MAX_WIDTH)]
Heads = Annotated[StrictInt, Field(gt=0, le=limits.MAX_HEADS)]
Experts = Annotated[StrictInt, Field(gt=0, le=limits.MAX_EXPERTS)]
Batch = Annotated[StrictInt, Field(gt=0, le=limits.MAX_BATCH)]
Tokens = Annotated[StrictInt, Field(gt=0, le=limits.MAX_TOKENS)]
Skew = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]  # past ~5 the hottest experts take every pick
Load = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]


def _drop_unset(handler, obj) -> dict:
    """The model's fields as a dict without the optional keys left at None."""
    return {k: v for k, v in handler(obj).items() if v is not None or k in type(obj).KEEP_NONE}


class Section(Strict):
    KEEP_NONE: ClassVar[tuple[str, ...]] = ()  # keys dumped even when None (they were, before the others existed)

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler):
        return _drop_unset(handler, self)


class MoeCfg(Section):
    experts: Experts = Field(description="routed experts per MoE layer")
    top_k: Experts = Field(description="experts each token is routed to")
    shared_ffn: Width | None = Field(None, description="width of the shared experts run on every token")
    dense_layers: LayersOrZero | None = Field(None, description="the first layers, dense (first_k_dense_replace)")
    dense_ffn: Width | None = Field(None, description="FFN width of the dense layers (default: ffn)")
    skew: Skew | None = Field(None, description="Zipf exponent of the experts' loads (0: uniform)")
    loads: list[Load] | None = Field(None, description="measured relative load of each expert, in placement order")

    @field_validator("top_k")
    @classmethod
    def _top_k_within(cls, top_k: int, info: ValidationInfo) -> int:
        experts = info.data.get("experts")
        if experts is not None and top_k > experts:
            raise ValueError(f"top_k ({top_k}) must not exceed experts ({experts})")
        return top_k

    @model_validator(mode="after")
    def _loads_fit(self) -> MoeCfg:
        if self.loads is not None:
            if len(self.loads) != self.experts:
                raise ValueError(f"loads: one per expert ({self.experts}) is due (got {len(self.loads)})")
            if sum(1 for x in self.loads if x > 0) < self.top_k:
                raise ValueError(f"loads: at least top_k ({self.top_k}) experts must take tokens")
            if self.skew:
                raise ValueError("give skew or loads, not both")
        return self


class AttentionCfg(Section):
    kind: Literal["gqa", "mla"] | None = Field(None, description="grouped-query (default) or latent attention")
    q_lora_rank: Width | None = Field(None, description="MLA: compressed query width (default: none)")
    kv_lora_rank: Width | None = Field(None, description="MLA: compressed KV latent width")
    rope_head_dim: Width | None = Field(None, description="MLA: rotary part of a query/key head")
    v_head_dim: Width | None = Field(None, description="value head width (default: head_dim)")
    sliding_window: Tokens | None = Field(None, description="tokens a local layer attends to")
    local_layers: LayersOrZero | None = Field(None, description="layers within the window (default: all)")
    qk_norm: Flag | None = Field(None, description="RMSNorm of each query and key head")
    qkv_bias: Flag | None = Field(None, description="biases on the query, key and value projections")
    o_bias: Flag | None = Field(None, description="bias on the output projection")
    logit_softcap: Flag | None = Field(None, description="tanh soft cap of the attention scores (Gemma 2)")
    rotary_dim: Width | None = Field(None, description="dims of a head rotary rotates (default: all)")
    output_gate: Flag | None = Field(None, description="a sigmoid gate of the output, projected with the queries")
    index_heads: Heads | None = Field(None, description="MLA with sparse attention (DSA): the indexer's heads")
    index_head_dim: Width | None = Field(None, description="DSA: the indexer's head and cached key width")
    index_topk: Tokens | None = Field(None, description="DSA: cached tokens each query attends to")

    @model_validator(mode="after")
    def _consistent(self) -> AttentionCfg:
        mla_keys = [k for k in ("q_lora_rank", "kv_lora_rank", "rope_head_dim") if getattr(self, k) is not None]
        if self.kind == "mla":
            missing = [k for k in ("kv_lora_rank", "rope_head_dim") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"latent attention (kind: mla) needs {' and '.join(missing)}")
        elif mla_keys:
            raise ValueError(f"{', '.join(mla_keys)}: only for latent attention; set kind: mla")
        if self.local_layers is not None and self.sliding_window is None:
            raise ValueError("local_layers: needs a sliding_window")
        dsa = [getattr(self, k) is not None for k in ("index_heads", "index_head_dim", "index_topk")]
        if any(dsa) and (not all(dsa) or self.kind != "mla"):
            raise ValueError("index_heads, index_head_dim and index_topk: sparse attention of kind: mla, all three")
        return self


class LinearAttentionCfg(Section):
    layers: Layers = Field(description="layers whose token mixer is Gated DeltaNet instead of attention")
    k_heads: Heads = Field(description="query/key heads")
    v_heads: Heads = Field(description="value heads (each with its own state)")
    k_head_dim: Width = Field(description="query/key head width")
    v_head_dim: Width = Field(description="value head width")
    conv_kernel: Width = Field(description="taps of the causal convolution")

    @model_validator(mode="after")
    def _grouped(self) -> LinearAttentionCfg:
        if self.v_heads % self.k_heads:
            raise ValueError(f"k_heads ({self.k_heads}) must divide v_heads ({self.v_heads})")
        return self


class MambaCfg(Section):
    layers: Layers = Field(description="layers whose token mixer is Mamba-2 instead of attention")
    heads: Heads = Field(description="SSM heads")
    head_dim: Width = Field(description="SSM head width (inner width = heads x head_dim)")
    state: Width = Field(description="state size per head dim (ssm_state_size)")
    groups: Heads = Field(description="groups sharing B and C (n_groups)")
    conv_kernel: Width = Field(description="taps of the causal convolution")
    chunk: Tokens | None = Field(None, description="tokens per chunk of the SSD scan in prefill (default 256)")

    @model_validator(mode="after")
    def _grouped(self) -> MambaCfg:
        if self.heads % self.groups:
            raise ValueError(f"groups ({self.groups}) must divide heads ({self.heads})")
        return self


class MlpCfg(Section):
    activation: Literal["silu", "gelu", "relu2"] | None = Field(None, description="activation (default silu)")
    gated: Flag | None = Field(None, description="act(gate) * up (default), or act(up)")
    bias: Flag | None = Field(None, description="biases on the MLP projections")


class ModelCfg(Section):
    KEEP_NONE: ClassVar[tuple[str, ...]] = ("moe",)
    layers: Layers = Field(description="transformer layers")
    hidden: Width = Field(description="model (residual) width")
    heads: Heads = Field(description="query heads")
    kv_heads: Heads = Field(description="key/value heads (grouped-query attention)")
    head_dim: Width = Field(description="query/key head width (MLA: no-rope and rope parts together)")
    ffn: Width = Field(description="FFN inner width (per routed expert for MoE)")
    vocab: Width = Field(description="vocabulary size (rows of the embedding, columns of the LM head)")
    tied_embeddings: Flag = Field(False, description="the LM head reuses the embedding's weights")
    moe: MoeCfg | None = Field(None, description="mixture of experts in place of the dense FFN")
    attention: AttentionCfg | None = Field(None, description="attention other than grouped-query (default: GQA)")
    norm: Literal["rmsnorm", "layernorm"] | None = Field(None, description="the layers' norm (default rmsnorm)")
    mlp: MlpCfg | None = Field(None, description="MLP other than gated SiLU without bias (default)")
    parallel_block: Flag | None = Field(None, description="attention and MLP read one norm, outputs summed")
    post_norms: Flag | None = Field(None, description="norms after the attention and the MLP as well")
    positions: Literal["rope", "learned", "none"] | None = Field(None, description="position encoding")
    max_positions: Tokens | None = Field(None, description="rows of a learned position table")
    mtp_layers: LayersOrZero | None = Field(None, description="multi-token prediction layers run each step")
    linear_attention: LinearAttentionCfg | None = Field(None, description="Gated DeltaNet layers of a hybrid")
    mamba: MambaCfg | None = Field(None, description="Mamba-2 layers of a hybrid")
    mixer_only_layers: LayersOrZero | None = Field(None, description="blocks of a token mixer and no FFN")
    ffn_only_layers: LayersOrZero | None = Field(None, description="blocks of an FFN and no token mixer")

    @field_validator("kv_heads")
    @classmethod
    def _heads_grouped(cls, kv_heads: int, info: ValidationInfo) -> int:
        heads = info.data.get("heads")
        if heads is not None and heads % kv_heads:
            raise ValueError(f"kv_heads ({kv_heads}) must divide heads ({heads})")
        return kv_heads

    @model_validator(mode="after")
    def _consistent(self) -> ModelCfg:
        a, problems = self.attention or AttentionCfg(), []
        if a.kind == "mla":
            if self.kv_heads != self.heads:
                problems.append(f"latent attention has a key per query head: kv_heads must be heads ({self.heads})")
            if a.rope_head_dim is not None and a.rope_head_dim >= self.head_dim:
                problems.append(f"attention.rope_head_dim must be below head_dim ({self.head_dim})")
        if a.local_layers is not None and a.local_layers > self.layers:
            problems.append(f"attention.local_layers ({a.local_layers}) must not exceed layers ({self.layers})")
        if a.rotary_dim is not None and (a.rotary_dim > self.head_dim or a.rotary_dim % 2):
            problems.append(f"attention.rotary_dim must be even and at most head_dim ({self.head_dim})")
        m = self.moe
        if m is not None and m.dense_layers is not None and m.dense_layers >= self.layers:
            problems.append(f"moe.dense_layers ({m.dense_layers}) must leave MoE layers (layers: {self.layers})")
        if (self.positions == "learned") != (self.max_positions is not None):
            problems.append("learned positions and max_positions go together")
        problems += self._block_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _block_problems(self) -> list[str]:
        """The kinds of blocks must add up: mixers and one-part blocks within `layers`."""
        lin, mamba = self.linear_attention, self.mamba
        recurrent = (lin.layers if lin else 0) + (mamba.layers if mamba else 0)
        ffn_only, mixer_only = self.ffn_only_layers or 0, self.mixer_only_layers or 0
        problems = []
        if recurrent + ffn_only > self.layers:
            problems.append(
                f"linear_attention.layers + mamba.layers + ffn_only_layers ({recurrent + ffn_only}) must not "
                f"exceed layers ({self.layers})"
            )
        if ffn_only + mixer_only > self.layers:
            problems.append(f"ffn_only_layers + mixer_only_layers must not exceed layers ({self.layers})")
        elif mixer_only == self.layers and self.moe is not None:
            problems.append("mixer_only_layers leaves no block for the moe section")
        m = self.moe
        if m is not None and m.dense_layers is not None and m.dense_layers >= self.layers - mixer_only > 0:
            problems.append(f"moe.dense_layers ({m.dense_layers}) must leave MoE blocks")
        if lin and mamba and lin.conv_kernel != mamba.conv_kernel:
            problems.append("linear_attention.conv_kernel and mamba.conv_kernel must agree")
        local = (self.attention.local_layers if self.attention else None) or 0
        if recurrent and local > self.layers - recurrent - ffn_only:
            problems.append("attention.local_layers must not exceed the attention layers")
        if self.mlp is not None and self.mlp.activation == "relu2" and self.mlp.gated is not False:
            problems.append("mlp.activation relu2 is non-gated (Nemotron-H): set mlp.gated: false")
        return problems


class DTypesCfg(Section):
    weights: DTypeName = Field("bf16", description="format of the weights in memory")
    activations: DTypeName = Field("bf16", description="format of the activations")
    kv_cache: DTypeName = Field("bf16", description="format of the KV cache in memory")
    attention: DTypeName | None = Field(None, description="format of the attention maths (default: activations)")
    expert_weights: DTypeName | None = Field(None, description="routed experts' weights (default: weights)")
    compute: DTypeName | None = Field(
        None, description="format GEMM inputs are quantised to and multiplied in (W8A8: fp8; default: activations)"
    )
    state: DTypeName | None = Field(
        None, description="recurrent state of linear-attention and Mamba layers (default: fp32)"
    )


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
    name: Name = Field(description="the model's name")
    description: str = Field("", description="one line on what it is")
    model: ModelCfg = Field(description="the model's shape")
    dtypes: DTypesCfg = Field(DTypesCfg(), description="number formats of weights, activations and KV cache")
    scenario: ScenarioCfg = Field(description="what is served: batch, prompt and generated tokens")
    fusion: Literal["eager", "fused"] = Field(
        "fused", description="kernels as a serving engine fuses them, or as PyTorch eager runs them"
    )

    @model_validator(mode="after")
    def _eager_profile_fits(self) -> WorkloadCfg:
        if self.fusion == "eager" and self.model.attention is not None and self.model.attention.kind == "mla":
            raise ValueError("fusion: eager is PyTorch eager's Llama-style profile; latent attention runs fused")
        if self.fusion == "eager" and (self.model.linear_attention or self.model.mamba):
            raise ValueError(
                "fusion: eager is PyTorch eager's Llama-style profile; linear attention and Mamba run fused"
            )
        return self


def model_spec(cfg: ModelCfg, name: str) -> ModelSpec:
    """The frozen model of a validated `model:` section."""
    a, mlp, moe = cfg.attention or AttentionCfg(), cfg.mlp or MlpCfg(), cfg.moe
    lin, mamba = cfg.linear_attention, cfg.mamba
    window = a.sliding_window or 0
    attending = cfg.layers - (lin.layers if lin else 0) - (mamba.layers if mamba else 0) - (cfg.ffn_only_layers or 0)
    return ModelSpec(
        name=name,
        layers=cfg.layers,
        hidden=cfg.hidden,
        heads=cfg.heads,
        kv_heads=cfg.kv_heads,
        head_dim=cfg.head_dim,
        ffn=cfg.ffn,
        vocab=cfg.vocab,
        tied_embeddings=cfg.tied_embeddings,
        experts=moe.experts if moe else 1,
        top_k=moe.top_k if moe else 1,
        attention=AttentionKind(a.kind or "gqa"),
        q_lora_rank=a.q_lora_rank or 0,
        kv_lora_rank=a.kv_lora_rank or 0,
        rope_head_dim=a.rope_head_dim or 0,
        v_head_dim=a.v_head_dim or 0,
        sliding_window=window,
        local_layers=(attending if a.local_layers is None else a.local_layers) if window else 0,
        qk_norm=bool(a.qk_norm),
        qkv_bias=bool(a.qkv_bias),
        o_bias=bool(a.o_bias),
        logit_softcap=bool(a.logit_softcap),
        rotary_dim=a.rotary_dim or 0,
        index_heads=a.index_heads or 0,
        index_head_dim=a.index_head_dim or 0,
        index_topk=a.index_topk or 0,
        norm=Norm(cfg.norm or "rmsnorm"),
        activation=Activation(mlp.activation or "silu"),
        gated=mlp.gated is not False,
        mlp_bias=bool(mlp.bias),
        parallel_block=bool(cfg.parallel_block),
        post_norms=bool(cfg.post_norms),
        positions=Positions(cfg.positions or "rope"),
        max_positions=cfg.max_positions or 0,
        shared_ffn=(moe.shared_ffn or 0) if moe else 0,
        dense_layers=(moe.dense_layers or 0) if moe else 0,
        dense_ffn=(moe.dense_ffn or 0) if moe else 0,
        routing_skew=(moe.skew or 0.0) if moe else 0.0,
        expert_loads=tuple(moe.loads) if moe and moe.loads else (),
        mtp_layers=cfg.mtp_layers or 0,
        linear_layers=lin.layers if lin else 0,
        linear_k_heads=lin.k_heads if lin else 0,
        linear_v_heads=lin.v_heads if lin else 0,
        linear_k_dim=lin.k_head_dim if lin else 0,
        linear_v_dim=lin.v_head_dim if lin else 0,
        mamba_layers=mamba.layers if mamba else 0,
        mamba_heads=mamba.heads if mamba else 0,
        mamba_head_dim=mamba.head_dim if mamba else 0,
        mamba_state=mamba.state if mamba else 0,
        mamba_groups=mamba.groups if mamba else 0,
        mamba_chunk=(mamba.chunk or 0) if mamba else 0,
        conv_kernel=lin.conv_kernel if lin else (mamba.conv_kernel if mamba else 0),
        mixer_only_layers=cfg.mixer_only_layers or 0,
        ffn_only_layers=cfg.ffn_only_layers or 0,
        attn_output_gate=bool(a.output_gate),
    )


def dtypes_of(cfg: DTypesCfg) -> DTypes:
    return DTypes(
        DType(cfg.weights),
        DType(cfg.activations),
        DType(cfg.kv_cache),
        DType(cfg.attention) if cfg.attention else None,
        DType(cfg.expert_weights) if cfg.expert_weights else None,
        DType(cfg.compute) if cfg.compute else None,
        DType(cfg.state) if cfg.state else None,
    )


__all__ = [
    "AttentionCfg",
    "DTypesCfg",
    "LinearAttentionCfg",
    "MambaCfg",
    "MlpCfg",
    "ModelCfg",
    "MoeCfg",
    "NonNegativeInt",
    "PositiveInt",
    "ScenarioCfg",
    "WorkloadCfg",
    "dtypes_of",
    "model_spec",
]
