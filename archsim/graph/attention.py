"""The attention block of one step: the norm, the projections, rotary, the KV-cache write, the
attention kernels and the output projection, each op with the layers that run it.

Grouped-query attention (GQA, MHA, MQA): one QKV GEMM, query/key norms per head if the model
has them, one rotary kernel, K and V written to the cache, a flash attention kernel over the
cached keys. Layers that attend within a sliding window run their own attention op
(`attention_local`), each query over at most the `sliding_window` most recent keys: a decode
over min(KV length, window) keys, a prefill chunk over the keys its first query can see on.
PyTorch eager code masks the full attention, so under EAGER every layer runs it whole.

Multi-head latent attention (MLA, DeepSeek-V2 section 2.1), as serving engines run it (vLLM's
and SGLang's MLA backends): queries through their low-rank projection (W_DQ, a norm, W_UQ), the
latent c_KV and the rotary key through W_DKV, the latent normed and cached (kv_lora_rank +
rope_head_dim per token). Prefill expands the cached latent of every key, new and past, with
W_UKV into per-head keys and values, joins the rotary key to each head's key (a copy) and runs
multi-head attention with (nope + rope)-wide keys and v_head-wide values. Decode absorbs W_UK
into the queries (a GEMM per head: nope -> kv_lora_rank) and W_UV into the output (per head:
kv_lora_rank -> v_head), and attends with all heads as one group over the latent itself:
keys kv_lora_rank + rope wide, the values their first kv_lora_rank columns (read once).
With DeepSeek sparse attention (DeepSeek-V3.2) an indexer scores every cached token and both
phases run the absorbed form over the top-k tokens (`_sparse_mla_ops`).
"""

from __future__ import annotations

from dataclasses import replace

from archsim.dtypes import DType
from archsim.graph.model import INDEX_SCALE_BYTES, Fusion, Phase, Workload
from archsim.graph.ops import Op, OpKind, ParallelRole, Scaling, VectorOp
from archsim.graph.primitives import gemm_op, norm_op, residual_add_op
from archsim.graph.recurrent import gdn_ops, mamba_ops
from archsim.graph.step import Step


def _eager_rope(act: DType, rows: int, width: int, name: str, layers: int) -> list[Op]:
    """Rotate-half rotary embedding written unfused on a slice of the qkv output: x1 * cos and
    x2 * sin and x2 * cos and x1 * sin on the heads' halves (strided views), a subtract and an
    add of the products, then stacking the halves and a copy back (strided)."""
    half, tok = width // 2, Scaling.TOKENS
    return [
        Op(OpKind.VECTOR, act, m=rows, n=half, vop=VectorOp.MUL, strided=True, kernels=4, scaling=tok).named(
            f"{name}_mul", layers
        ),
        Op(OpKind.VECTOR, act, m=rows, n=half, vop=VectorOp.ADD, kernels=2, scaling=tok).named(f"{name}_add", layers),
        Op(OpKind.COPY, act, bytes=int(rows * width * act.bytes), strided=True, kernels=2, scaling=tok).named(
            f"{name}_copy", layers
        ),
    ]


def window_kv_len(q_len: int, kv_len: int, window: int) -> int:
    """Keys a chunk of `q_len` queries (the last of `kv_len` keys) can see under a window: from
    the first query's oldest visible key on, min(kv_len, q_len + window - 1)."""
    return min(kv_len, q_len + window - 1) if window else kv_len


def _attention(w: Workload, step: Step, heads: int, kv_heads: int, d: int, **kw) -> list[Op]:
    """The attention op of the step, split into global and sliding-window layers."""
    m, eager = w.model, w.fusion is Fusion.EAGER
    common = {
        "batch": step.batch,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": d,
        "q_len": step.new_tokens,
        "causal": step.phase is Phase.PREFILL,
        "split_kv": not eager,
        "softmax_overlap": not eager,
        "softcap": m.logit_softcap,
        "scaling": Scaling.KV_LENGTH,
        **kw,
    }
    dtype = w.dtypes.attention_compute
    kvd = w.dtypes.kv_cache if w.dtypes.kv_cache is not dtype else None
    local = m.local_layers if (m.sliding_window and not eager) else 0
    ops = []
    if m.attention_layers - local:
        ops.append(
            Op(OpKind.ATTENTION, dtype, kv_dtype=kvd, kv_len=step.kv_len, **common).named(
                "attention", m.attention_layers - local
            )
        )
    if local:
        kv = window_kv_len(step.new_tokens, step.kv_len, m.sliding_window)
        ops.append(
            Op(OpKind.ATTENTION, dtype, kv_dtype=kvd, kv_len=kv, window=m.sliding_window, **common).named(
                "attention_local", local
            )
        )
    return ops


def _gqa_ops(w: Workload, step: Step) -> list[Op]:
    m, act, kvd = w.model, w.dtypes.activations, w.dtypes.kv_cache
    eager = w.fusion is Fusion.EAGER
    T, L, B = step.tokens, m.attention_layers, step.batch
    tok, kv = Scaling.TOKENS, Scaling.KV_LENGTH
    q_out = 2 * m.q_dim if m.attn_output_gate else m.q_dim  # gated attention: the gate with the queries
    ops = [gemm_op(w, "qkv", L, T, m.hidden, q_out + 2 * m.kv_dim, scaling=tok)]
    if m.qk_norm:
        ops.append(
            Op(OpKind.VECTOR, act, m=T * m.heads, n=m.head_dim, vop=VectorOp.RMSNORM, scaling=tok).named("q_norm", L)
        )
        ops.append(
            Op(OpKind.VECTOR, act, m=T * m.kv_heads, n=m.head_dim, vop=VectorOp.RMSNORM, scaling=tok).named("k_norm", L)
        )
    kv_write_bytes = int(T * m.kv_dim * kvd.bytes)
    rot = m.rotary
    if eager:
        if rot:
            ops += _eager_rope(act, T, m.heads * rot, "rope_q", L) + _eager_rope(act, T, m.kv_heads * rot, "rope_k", L)
        ops.append(Op(OpKind.COPY, bytes=kv_write_bytes, kernels=2, strided=True, scaling=tok).named("kv_write", L))
    else:
        if rot:
            ops.append(
                Op(OpKind.VECTOR, act, m=T, n=(m.heads + m.kv_heads) * rot, vop=VectorOp.ROPE, scaling=tok).named(
                    "rope", L
                )
            )
        ops.append(Op(OpKind.COPY, bytes=2 * kv_write_bytes, scaling=tok).named("kv_write", L))
    kv_heads = m.kv_heads
    if eager and step.phase is Phase.PREFILL and m.kv_heads < m.heads:
        expand = int(B * m.heads * step.kv_len * m.head_dim * kvd.bytes)
        ops.append(Op(OpKind.COPY, bytes=expand, kernels=2, strided=True, scaling=kv).named("kv_expand", L))
        kv_heads = m.heads
    ops += _attention(w, step, m.heads, kv_heads, m.head_dim, v_dim=m.v_head_dim if m.v_dim != m.head_dim else 0)
    return ops


def _mla_ops(w: Workload, step: Step) -> list[Op]:
    m, act, kvd = w.model, w.dtypes.activations, w.dtypes.kv_cache
    T, L, B = step.tokens, m.attention_layers, step.batch
    tok, kv = Scaling.TOKENS, Scaling.KV_LENGTH
    ops: list[Op] = []
    if m.q_lora_rank:  # W_DQ and W_DKV as one GEMM, as serving engines fuse them
        ops.append(gemm_op(w, "qkv_a", L, T, m.hidden, m.q_lora_rank + m.latent_dim, scaling=tok))
        ops.append(Op(OpKind.VECTOR, act, m=T, n=m.q_lora_rank, vop=VectorOp.RMSNORM, scaling=tok).named("q_a_norm", L))
        ops.append(
            Op(OpKind.VECTOR, act, m=T, n=m.kv_lora_rank, vop=VectorOp.RMSNORM, scaling=tok).named("kv_a_norm", L)
        )
        ops.append(gemm_op(w, "q_b", L, T, m.q_lora_rank, m.q_dim, scaling=tok))
    else:
        ops.append(gemm_op(w, "qkv_a", L, T, m.hidden, m.q_dim + m.latent_dim, scaling=tok))
        ops.append(
            Op(OpKind.VECTOR, act, m=T, n=m.kv_lora_rank, vop=VectorOp.RMSNORM, scaling=tok).named("kv_a_norm", L)
        )
    if m.rotary:
        ops.append(
            Op(OpKind.VECTOR, act, m=T, n=(m.heads + 1) * m.rope_head_dim, vop=VectorOp.ROPE, scaling=tok).named(
                "rope", L
            )
        )
    ops.append(Op(OpKind.COPY, bytes=int(T * m.latent_dim * kvd.bytes), scaling=tok).named("kv_write", L))
    if m.index_topk:
        return ops + _sparse_mla_ops(w, step)
    if step.phase is Phase.PREFILL:
        keys = B * step.kv_len
        up = m.heads * (m.nope_head_dim + m.v_dim)
        ops.append(gemm_op(w, "kv_up", L, keys, m.kv_lora_rank, up, scaling=kv))
        k_bytes = int(keys * m.heads * m.head_dim * act.bytes)
        ops.append(Op(OpKind.COPY, act, bytes=k_bytes, scaling=kv).named("k_concat", L))
        expanded = replace(w, dtypes=replace(w.dtypes, kv_cache=act))  # keys and values in the activations' format
        ops += _attention(expanded, step, m.heads, m.heads, m.head_dim, v_dim=m.v_dim)
    else:
        # W_UK and W_UV per head, in the activations' format (vLLM's MLA backends dequantise
        # them once at load for the absorbed path)
        q_absorb = Op(OpKind.GEMM, act, m=T, k=m.nope_head_dim, n=m.kv_lora_rank, groups=m.heads, scaling=kv)
        ops.append(q_absorb.named("q_absorb", L))
        ops += _attention(w, step, m.heads, 1, m.latent_dim, v_dim=m.kv_lora_rank, kv_shared=True)
        out_absorb = Op(OpKind.GEMM, act, m=T, k=m.kv_lora_rank, n=m.v_dim, groups=m.heads, scaling=kv)
        ops.append(out_absorb.named("out_absorb", L))
    return ops


def _sparse_mla_ops(w: Workload, step: Step) -> list[Op]:
    """DeepSeek sparse attention (DeepSeek-V3.2-Exp's Indexer, vLLM's and SGLang's sparse MLA):
    the indexer's query (W_q from the compressed query), its key and head weights (one GEMM
    from the hidden), the key's LayerNorm, the fp8 key and its scale cached; the indexer scores
    every cached token with every indexer head (fp8 multi-query logits, an attention op over the
    cached indexer keys whose values are the one weighted sum); top-k over the logits (written by
    the indexer and read back, in fp32); then latent attention in its absorbed form, prefill and
    decode alike, each query over its `index_topk` selected tokens (a decode reads
    min(KV length, top-k) latents; a prefill query scores min(its position, top-k) keys, the
    pairs of a sliding window of top-k)."""
    m, act = w.model, w.dtypes.activations
    T, L, B, q = step.tokens, m.attention_layers, step.batch, step.new_tokens
    tok, kv = Scaling.TOKENS, Scaling.KV_LENGTH
    prefill, d, fp8 = step.phase is Phase.PREFILL, m.index_head_dim, DType.FP8
    key_bytes = int(T * (d * fp8.bytes + INDEX_SCALE_BYTES))
    ops = [
        gemm_op(w, "index_q", L, T, m.q_lora_rank or m.hidden, m.index_heads * d, scaling=tok),
        gemm_op(w, "index_k_weights", L, T, m.hidden, d + m.index_heads, scaling=tok),
        Op(OpKind.VECTOR, act, m=T, n=d, vop=VectorOp.LAYERNORM, scaling=tok).named("index_k_norm", L),
        Op(OpKind.COPY, bytes=key_bytes, scaling=tok).named("index_k_write", L),
        Op(
            OpKind.ATTENTION,
            fp8,
            batch=B,
            heads=m.index_heads,
            kv_heads=1,
            head_dim=d,
            v_dim=1,
            kv_shared=True,
            q_len=q,
            kv_len=step.kv_len,
            causal=prefill,
            split_kv=True,
            scaling=kv,
        ).named("indexer", L),
        Op(OpKind.VECTOR, DType.FP32, m=T, n=step.kv_len, vop=VectorOp.TOPK, scaling=kv).named("index_topk", L),
    ]
    q_absorb = Op(OpKind.GEMM, act, m=T, k=m.nope_head_dim, n=m.kv_lora_rank, groups=m.heads, scaling=kv)
    ops.append(q_absorb.named("q_absorb", L))
    kvd = w.dtypes.kv_cache if w.dtypes.kv_cache is not w.dtypes.attention_compute else None
    top = m.index_topk
    ops.append(
        Op(
            OpKind.ATTENTION,
            w.dtypes.attention_compute,
            kv_dtype=kvd,
            batch=B,
            heads=m.heads,
            kv_heads=1,
            head_dim=m.latent_dim,
            v_dim=m.kv_lora_rank,
            kv_shared=True,
            q_len=q,
            kv_len=window_kv_len(q, step.kv_len, top),
            window=top,
            causal=prefill,
            split_kv=True,
            softmax_overlap=True,
            scaling=kv,
        ).named("attention", L)
    )
    out_absorb = Op(OpKind.GEMM, act, m=T, k=m.kv_lora_rank, n=m.v_dim, groups=m.heads, scaling=kv)
    ops.append(out_absorb.named("out_absorb", L))
    return ops


def attention_block_ops(w: Workload, step: Step) -> list[Op]:
    """The layers' token-mixing half: the attention layers' from the input norm to the output
    projection, then the recurrent mixers' (archsim/graph/recurrent.py) of a hybrid."""
    m = w.model
    ops = _attention_layers_ops(w, step) if m.attention_layers else []
    return ops + gdn_ops(w, step) + mamba_ops(w, step)


def _attention_layers_ops(w: Workload, step: Step) -> list[Op]:
    m, act = w.model, w.dtypes.activations
    eager = w.fusion is Fusion.EAGER
    T, L, tok = step.tokens, m.attention_layers, Scaling.TOKENS
    ops = [norm_op(m, act, T, m.hidden, "attn_norm", L, fused=not eager, scaling=tok)]
    ops += _mla_ops(w, step) if m.is_mla else _gqa_ops(w, step)
    if m.attn_output_gate:
        gate = Op(OpKind.VECTOR, act, m=T, n=m.o_dim, vop=VectorOp.GATE_MUL, scaling=tok)
        ops.append(gate.named("attn_gate", L))
    # a partial sum over the heads, reduced with the MLP's in a parallel block
    reduced = ParallelRole.NONE if m.parallel_block else ParallelRole.PARTIAL_SUM
    ops.append(gemm_op(w, "o_proj", L, T, m.o_dim, m.hidden, scaling=tok, parallel=reduced))
    if m.post_norms:
        ops.append(norm_op(m, act, T, m.hidden, "post_attn_norm", L, fused=False, scaling=tok))
    if eager and not m.parallel_block:
        ops.append(residual_add_op(act, T, m.hidden, "residual_add", L, scaling=tok))
    return ops
