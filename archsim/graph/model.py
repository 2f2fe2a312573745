"""What is served: the model's shape, its number formats, the scenario, the degree of fusion.

A `ModelSpec` is a decoder-only transformer: Llama-style by default (RMSNorm, rotary positions,
a SiLU-gated FFN, grouped-query attention), with the variants the models of 2024-2026 use:

* attention: multi-head latent attention (MLA, DeepSeek-V2/V3: a compressed KV of
  `kv_lora_rank + rope_head_dim` per token), sliding-window layers (`local_layers` of the
  `layers` attend to the last `sliding_window` tokens), query/key norms, projection biases, a
  tanh soft cap on the attention logits (Gemma 2), partial rotary (`rotary_dim`);
* blocks: LayerNorm, GELU or non-gated MLPs, parallel attention and MLP (GPT-J, Falcon),
  norms after the attention and the MLP as well (Gemma 2/3), learned absolute positions;
* MoE: `experts` routed experts of width `ffn`, `top_k` per token, `shared_ffn` of shared
  experts, `dense_layers` dense layers (width `dense_ffn`) first, and the routing skew (a Zipf
  exponent, or measured relative loads per expert);
* multi-token prediction (MTP, DeepSeek-V3): `mtp_layers` extra transformer layers run on
  every step, as speculative decoding with MTP heads runs them;
* recurrent token mixers in place of attention on some layers (archsim/graph/recurrent.py):
  Gated DeltaNet (`linear_layers`, Qwen3-Next: `linear_k_heads` query/key heads of
  `linear_k_dim`, `linear_v_heads` value heads of `linear_v_dim`, a state of v heads x k dim x v
  dim per sequence) and Mamba-2 (`mamba_layers`, Nemotron-H: `mamba_heads` heads of
  `mamba_head_dim`, `mamba_groups` groups of B and C of `mamba_state` each, a state of heads x
  head dim x state per sequence), each with a short causal convolution of `conv_kernel` taps
  whose last kernel - 1 inputs are kept per sequence; hybrids of one-part blocks (Nemotron-H:
  `mixer_only_layers` blocks of a mixer alone, `ffn_only_layers` of an FFN alone); gated
  attention (`attn_output_gate`: a sigmoid gate of the attention output projected with the
  queries);
* DeepSeek sparse attention (DSA, DeepSeek-V3.2) on latent attention: a lightning indexer
  (`index_heads` heads of `index_head_dim`) scores every cached token against its fp8 keys
  (cached beside the latent), and attention reads the `index_topk` best of them.

Parameter counts live in archsim/graph/params.py (`total_params`, `active_params`), which reads
this module, never the other way. Units: counts of elements; bytes where named.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from archsim.dtypes import DType
from archsim.hashing import cached_hash, record_state

INDEX_SCALE_BYTES = 4  # DSA: the fp32 scale of a token's fp8 indexer key (one per 128-wide key)


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


class AttentionKind(str, Enum):
    GQA = "gqa"  # multi-head, grouped-query or multi-query attention over cached K and V
    MLA = "mla"  # multi-head latent attention over a cached compressed latent (DeepSeek)


class Norm(str, Enum):
    RMSNORM = "rmsnorm"
    LAYERNORM = "layernorm"  # mean and variance, weight and bias


class Activation(str, Enum):
    SILU = "silu"
    GELU = "gelu"  # erf or tanh form: the same instruction count to full precision
    RELU2 = "relu2"  # squared ReLU (Nemotron-H's MLPs and experts, non-gated)


class Positions(str, Enum):
    ROPE = "rope"  # rotary embedding of queries and keys
    LEARNED = "learned"  # a learned table of absolute positions added to the token embedding
    NONE = "none"  # no position encoding (NoPE)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer (see the module docstring for the variants)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int  # query/key head width (MLA: the no-rope and rope parts together)
    ffn: int  # FFN inner width (per routed expert for MoE)
    vocab: int
    tied_embeddings: bool = False
    experts: int = 1
    top_k: int = 1
    # attention
    attention: AttentionKind = AttentionKind.GQA
    q_lora_rank: int = 0  # MLA: width of the compressed query (0: queries projected directly)
    kv_lora_rank: int = 0  # MLA: width of the compressed KV latent
    rope_head_dim: int = 0  # MLA: the rotary part of a query/key head, cached with the latent
    v_head_dim: int = 0  # value head width (0: head_dim)
    sliding_window: int = 0  # tokens a local layer attends to (0: none)
    local_layers: int = 0  # layers that attend within the window
    qk_norm: bool = False  # RMSNorm of every query and key head before rotary (Qwen3, Gemma 3)
    qkv_bias: bool = False
    o_bias: bool = False
    logit_softcap: bool = False  # tanh soft cap on the attention scores (Gemma 2)
    rotary_dim: int = 0  # dims of a head rotated (0: all of them)
    index_heads: int = 0  # DSA: the indexer's query heads
    index_head_dim: int = 0  # DSA: width of an indexer query head and of the cached indexer key
    index_topk: int = 0  # DSA: cached tokens each query attends to (0: dense attention)
    # blocks
    norm: Norm = Norm.RMSNORM
    activation: Activation = Activation.SILU
    gated: bool = True  # act(gate) * up, or act(up) alone
    mlp_bias: bool = False
    parallel_block: bool = False  # attention and MLP read one norm of the same input, outputs summed
    post_norms: bool = False  # a norm after the attention and after the MLP as well (Gemma 2/3)
    positions: Positions = Positions.ROPE
    max_positions: int = 0  # rows of a learned position table
    # mixture of experts
    shared_ffn: int = 0  # width of the shared experts, run on every token (0: none)
    dense_layers: int = 0  # the first layers, dense (DeepSeek's first_k_dense_replace)
    dense_ffn: int = 0  # FFN width of those dense layers (0: ffn)
    routing_skew: float = 0.0  # Zipf exponent of the experts' loads (0: uniform routing)
    expert_loads: tuple[float, ...] = ()  # measured relative load per expert, in placement order
    # multi-token prediction
    mtp_layers: int = 0
    # recurrent token mixers and one-part blocks (see the module docstring)
    linear_layers: int = 0
    linear_k_heads: int = 0
    linear_v_heads: int = 0
    linear_k_dim: int = 0
    linear_v_dim: int = 0
    mamba_layers: int = 0
    mamba_heads: int = 0
    mamba_head_dim: int = 0
    mamba_state: int = 0
    mamba_groups: int = 0
    conv_kernel: int = 0  # taps of the mixers' causal convolution
    mamba_chunk: int = 0  # Mamba-2: tokens per chunk of the SSD scan in prefill (0: mamba_ssm's 256)
    mixer_only_layers: int = 0  # blocks with a token mixer and no FFN (of `layers`)
    ffn_only_layers: int = 0  # blocks with an FFN and no token mixer (of `layers`)
    attn_output_gate: bool = False

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def is_mla(self) -> bool:
        return self.attention is AttentionKind.MLA

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) over the KV heads of grouped-query attention."""
        return self.kv_heads * self.head_dim

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def o_dim(self) -> int:
        """Input width of the output projection: every head's value output."""
        return self.heads * self.v_dim

    @property
    def nope_head_dim(self) -> int:
        """MLA: the part of a query/key head without rotary (qk_nope_head_dim)."""
        return self.head_dim - self.rope_head_dim

    @property
    def latent_dim(self) -> int:
        """MLA: what one token caches per layer, the latent and the shared rotary key."""
        return self.kv_lora_rank + self.rope_head_dim

    @property
    def rotary(self) -> int:
        """Dims of each query and key head that rotary rotates."""
        if self.positions is not Positions.ROPE:
            return 0
        if self.is_mla:
            return self.rope_head_dim
        return self.rotary_dim or self.head_dim

    @property
    def attention_layers(self) -> int:
        """Blocks whose token mixer is attention (every layer of a transformer)."""
        return self.layers - self.ffn_only_layers - self.linear_layers - self.mamba_layers

    @property
    def ffn_layers(self) -> int:
        """Blocks with an FFN (dense or MoE)."""
        return self.layers - self.mixer_only_layers

    @property
    def is_hybrid(self) -> bool:
        """Some blocks mix tokens with a recurrent state, or hold one part only."""
        return self.attention_layers != self.layers or self.ffn_layers != self.layers

    @property
    def linear_conv_dim(self) -> int:
        """Gated DeltaNet: channels of the causal convolution, queries, keys and values."""
        return 2 * self.linear_k_heads * self.linear_k_dim + self.linear_v_heads * self.linear_v_dim

    @property
    def mamba_inner(self) -> int:
        """Mamba-2: the inner width, heads x head dim (x, z, the output)."""
        return self.mamba_heads * self.mamba_head_dim

    @property
    def mamba_conv_dim(self) -> int:
        """Mamba-2: channels of the causal convolution, x and every group's B and C."""
        return self.mamba_inner + 2 * self.mamba_groups * self.mamba_state

    def state_bytes_per_sequence(self, state_dtype: DType, conv_dtype: DType) -> float:
        """Bytes of recurrent state one sequence keeps, whatever its length: per Gated DeltaNet
        layer v heads x k dim x v dim, per Mamba-2 layer heads x head dim x state (in
        `state_dtype`), and per layer of either the convolution's last kernel - 1 inputs of
        each channel (in `conv_dtype`)."""
        if not (self.linear_layers or self.mamba_layers):
            return 0.0
        taps = max(0, self.conv_kernel - 1)
        gdn = self.linear_v_heads * self.linear_k_dim * self.linear_v_dim * state_dtype.bytes
        gdn += taps * self.linear_conv_dim * conv_dtype.bytes
        ssm = self.mamba_heads * self.mamba_head_dim * self.mamba_state * state_dtype.bytes
        ssm += taps * self.mamba_conv_dim * conv_dtype.bytes
        return self.linear_layers * gdn + self.mamba_layers * ssm

    @property
    def moe_layers(self) -> int:
        return self.ffn_layers - self.dense_layers if self.is_moe else 0

    @property
    def dense_width(self) -> int:
        """FFN width of a dense layer (of a dense model, or the dense layers of a MoE one)."""
        return self.dense_ffn or self.ffn

    @property
    def global_layers(self) -> int:
        """Layers that attend to the whole context."""
        return self.attention_layers - self.local_layers

    def kv_bytes_per_layer_token(self, kv_dtype: DType) -> float:
        """Bytes one token caches in one layer: K and V of every KV head, or MLA's latent (and
        with sparse attention the indexer's fp8 key and its fp32 scale, as DeepSeek-V3.2's
        Indexer caches them)."""
        if self.is_mla:
            index = self.index_head_dim * DType.FP8.bytes + INDEX_SCALE_BYTES if self.index_topk else 0
            return self.latent_dim * kv_dtype.bytes + index
        return 2.0 * self.kv_dim * kv_dtype.bytes

    def kv_bytes_per_token(self, kv_dtype: DType) -> float:
        """Bytes of KV cached per token over all layers (MTP layers included), every layer
        holding the token (the most a token costs; see `kv_cache_bytes` for windows)."""
        return (self.attention_layers + self.mtp_layers) * self.kv_bytes_per_layer_token(kv_dtype)

    def kv_cache_bytes(self, tokens: int, kv_dtype: DType) -> float:
        """Bytes of one sequence's KV cache at `tokens` tokens: a local layer keeps only the
        last `sliding_window` of them."""
        per = self.kv_bytes_per_layer_token(kv_dtype)
        kept = min(tokens, self.sliding_window) if self.sliding_window else tokens
        return (self.global_layers + self.mtp_layers) * tokens * per + self.local_layers * kept * per

    def widest_activation(self) -> int:
        """Widest intermediate of one token in a layer (elements): the FFN's gate and up (of
        its routed experts), the QKV output, MLA's expanded keys and values, or the hidden."""
        ffn = max(self.dense_width if (not self.is_moe or self.dense_layers) else 0, self.shared_ffn)
        routed = self.ffn * self.top_k if self.is_moe else 0
        qkv = self.q_dim * (2 if self.attn_output_gate else 1) + 2 * self.kv_dim
        if self.linear_layers:
            qkv = max(qkv, self.linear_conv_dim + self.linear_v_heads * self.linear_v_dim)
        if self.mamba_layers:
            qkv = max(qkv, self.mamba_inner + self.mamba_conv_dim + self.mamba_heads)
        if self.is_mla:
            qkv = self.q_dim + self.heads * (self.nope_head_dim + self.v_dim)
        return max(2 * max(ffn, routed), qkv, self.hidden)


@dataclass(frozen=True)
class DTypes:
    """Storage formats of weights, activations and the KV cache; the format GEMM inputs are
    quantised to (`compute`: W8A8's fp8; default the activations', the GEMM then multiplying in
    the wider of its two operands); the format of the attention maths (`attention`, default the
    activations'); the routed experts' weights where they differ from the others' (gpt-oss keeps
    them in MXFP4)."""

    weights: DType = DType.BF16
    activations: DType = DType.BF16
    kv_cache: DType = DType.BF16
    attention: DType | None = None
    expert_weights: DType | None = None
    compute: DType | None = None
    state: DType | None = None  # recurrent state of linear-attention and Mamba layers (default fp32)

    @property
    def gemm_input(self) -> DType:
        return self.compute or self.activations

    @property
    def attention_compute(self) -> DType:
        return self.attention or self.activations

    @property
    def experts(self) -> DType:
        return self.expert_weights or self.weights

    @property
    def recurrent_state(self) -> DType:
        """Format of the recurrent state: fp32 unless given (the recurrence accumulates in fp32;
        vLLM's mamba_ssm_cache_dtype, which Nemotron-H's config sets to float32)."""
        return self.state or DType.FP32


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

    def __hash__(self) -> int:  # keys the memo of every decode step's ops: worked out once
        return cached_hash(self)

    def __getstate__(self) -> dict:
        return record_state(self)


def scenario_too_long(workload: Workload, bound: tuple[int, str] | None) -> str | None:
    """Why the workload's scenario (prompt and output) is longer than its model takes (`bound`:
    the longest sequence and where that bound is from); None where it is not."""
    s = workload.scenario
    if bound is None or s.prompt_tokens + s.output_tokens <= bound[0]:
        return None
    return (
        f"scenario: prompt_tokens + output_tokens is {s.prompt_tokens + s.output_tokens:,} "
        f"tokens, more than the model's maximum of {bound[0]:,} ({bound[1]})"
    )
