"""Parameter counts of a model, whole, per token (active) and per layer: what the weights take
in memory and what a forward pass reads. Counts of elements.

Attention (GQA): W_qkv (hidden x (q + 2 kv)) and W_o (heads x v_head x hidden), their biases
if the model has them, a norm weight per query and key head width with qk_norm. Attention
(MLA, DeepSeek-V2 section 2.1): W_DQ (hidden x q_lora) with its norm and W_UQ (q_lora x heads x
head_dim), or W_Q directly; W_DKV (hidden x (kv_lora + rope)) with its norm; W_UKV (kv_lora x
heads x (nope + v_head)); W_O; with sparse attention its indexer. An MLP of width f: 3 hidden f gated, 2 hidden f plain, with
biases (2f or f, and hidden) if it has them. A MoE layer: every expert's MLP, the router
(hidden x experts) and the shared experts' MLP. Norms: hidden weights each (LayerNorm: and a
bias), two per layer (one with a parallel block; four with post-norms). An MTP layer: a layer
of the MoE kind, its two input norms and its hidden x 2 hidden projection (DeepSeek-V3 section
2.2); it shares the embedding and the LM head.

Gated DeltaNet (Qwen3-Next's Qwen3NextGatedDeltaNet): in_proj_qkvz (hidden x (2 k heads x k dim
+ 2 v heads x v dim)), in_proj_ba (hidden x 2 v heads), the conv's taps per channel (no bias),
dt_bias and A_log per v head, the gated norm's v dim weights, out_proj (v heads x v dim x
hidden). Mamba-2 (Nemotron-H's NemotronHMamba2Mixer): in_proj (hidden x (2 inner + 2 groups x
state + heads)), the conv's taps and bias per channel, dt_bias, A_log and D per head, the gated
norm's inner weights, out_proj (inner x hidden). Gated attention doubles W_q (the gate). A
block of one part (Nemotron-H) has one norm.
"""

from __future__ import annotations

from archsim.graph.model import ModelSpec, Norm


def norm_params(m: ModelSpec, width: int) -> int:
    return width * (2 if m.norm is Norm.LAYERNORM else 1)


def attention_params(m: ModelSpec) -> int:
    """One layer's attention projections (with their norms and biases)."""
    if m.is_mla:
        if m.q_lora_rank:
            q = m.hidden * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * m.q_dim
        else:
            q = m.hidden * m.q_dim
        kv = m.hidden * m.latent_dim + m.kv_lora_rank + m.kv_lora_rank * m.heads * (m.nope_head_dim + m.v_dim)
        return q + kv + m.o_dim * m.hidden + indexer_params(m)
    qkv = m.q_dim + 2 * m.kv_dim
    params = m.hidden * qkv + m.o_dim * m.hidden
    params += m.hidden * m.q_dim if m.attn_output_gate else 0
    params += qkv if m.qkv_bias else 0
    params += m.hidden if m.o_bias else 0
    params += 2 * m.head_dim if m.qk_norm else 0
    return params


def indexer_params(m: ModelSpec) -> int:
    """DSA's lightning indexer (DeepSeek-V3.2's Indexer): wq_b (q_lora x heads x dim), wk
    (hidden x dim) with its LayerNorm, weights_proj (hidden x heads)."""
    if not m.index_topk:
        return 0
    d = m.index_head_dim
    return m.q_lora_rank * m.index_heads * d + m.hidden * d + 2 * d + m.hidden * m.index_heads


def gdn_params(m: ModelSpec) -> int:
    """One Gated DeltaNet mixer's weights (module docstring)."""
    v = m.linear_v_heads * m.linear_v_dim
    proj = m.hidden * (m.linear_conv_dim + v + 2 * m.linear_v_heads) + v * m.hidden
    return proj + m.linear_conv_dim * m.conv_kernel + 2 * m.linear_v_heads + m.linear_v_dim


def mamba_params(m: ModelSpec) -> int:
    """One Mamba-2 mixer's weights (module docstring)."""
    proj = m.hidden * (m.mamba_inner + m.mamba_conv_dim + m.mamba_heads) + m.mamba_inner * m.hidden
    return proj + m.mamba_conv_dim * (m.conv_kernel + 1) + 3 * m.mamba_heads + m.mamba_inner


def mlp_params(m: ModelSpec, width: int) -> int:
    """An MLP (or one expert) of inner width `width`."""
    if width <= 0:
        return 0
    mats = (3 if m.gated else 2) * m.hidden * width
    bias = ((2 if m.gated else 1) * width + m.hidden) if m.mlp_bias else 0
    return mats + bias


def layer_norms(m: ModelSpec) -> int:
    count = 1 if m.parallel_block else 2
    return (count + (2 if m.post_norms else 0)) * norm_params(m, m.hidden)


def moe_params(m: ModelSpec, experts: int | None = None) -> int:
    """One MoE layer's FFN: `experts` routed experts (default all), the router over all of them
    and the shared experts."""
    held = m.experts if experts is None else experts
    return held * mlp_params(m, m.ffn) + m.hidden * m.experts + mlp_params(m, m.shared_ffn)


def layers_params(m: ModelSpec, experts: int | None = None) -> int:
    """The transformer layers (MTP layers not included), `experts` routed experts held per layer."""
    if m.is_hybrid:
        mixers = m.attention_layers * attention_params(m) + m.linear_layers * gdn_params(m)
        mixers += m.mamba_layers * mamba_params(m)
        norms = m.layers * layer_norms(m) - (m.mixer_only_layers + m.ffn_only_layers) * norm_params(m, m.hidden)
        dense = m.ffn_layers if not m.is_moe else m.dense_layers
        return mixers + norms + dense * mlp_params(m, m.dense_width) + m.moe_layers * moe_params(m, experts)
    per_layer = attention_params(m) + layer_norms(m)
    if not m.is_moe:
        return m.layers * (per_layer + mlp_params(m, m.ffn))
    ffn = m.dense_layers * mlp_params(m, m.dense_width) + m.moe_layers * moe_params(m, experts)
    return m.layers * per_layer + ffn


def mtp_params(m: ModelSpec, experts: int | None = None) -> int:
    """The multi-token prediction layers: a layer each (MoE if the model is), two norms and the
    projection of the embedding and the hidden state together."""
    if not m.mtp_layers:
        return 0
    ffn = moe_params(m, experts) if m.is_moe else mlp_params(m, m.ffn)
    per = attention_params(m) + layer_norms(m) + ffn + 2 * norm_params(m, m.hidden) + 2 * m.hidden * m.hidden
    return m.mtp_layers * per


def embedding_params(m: ModelSpec) -> int:
    """The token embedding and a learned position table."""
    return m.vocab * m.hidden + m.max_positions * m.hidden


def head_params(m: ModelSpec) -> int:
    """The LM head (none if tied to the embedding) and the final norm."""
    return (0 if m.tied_embeddings else m.vocab * m.hidden) + norm_params(m, m.hidden)


def total_params(m: ModelSpec) -> int:
    """Parameters: attention, FFN (all experts), norms, embeddings, LM head, MTP layers."""
    return layers_params(m) + mtp_params(m) + embedding_params(m) + head_params(m)


def active_params(m: ModelSpec) -> int:
    """Parameters a token is computed with, counted as model cards count "activated" ones:
    every layer with its `top_k` routed experts of each MoE layer (the router and the shared
    experts included), the embedding tables, the LM head and the final norm (DeepSeek-V3's
    37B of 671B, Qwen3-30B-A3B's 3.3B, Mixtral's 12.9B)."""
    return layers_params(m, experts=m.top_k) + mtp_params(m, experts=m.top_k) + embedding_params(m) + head_params(m)
