"""The recurrent token mixers of hybrid models: Gated DeltaNet (linear attention) and Mamba-2.

Both keep a fixed state per sequence instead of a KV cache, so a decode step's cost does not
grow with the context: it reads and writes the state every token. Each mixer block is the
norm, an input projection, a short causal depthwise convolution (`conv_kernel` taps; its last
kernel - 1 inputs per channel kept per sequence, read and written every step), the recurrence,
a gated RMSNorm (norm(y) x SiLU(z)) and the output projection.

Gated DeltaNet (Yang et al., ICLR 2025; Qwen3-Next), per value head with state S (k dim x v
dim): S = exp(g) S + beta k (v - (exp(g) S)^T k)^T, o = S^T q, queries and keys of the k heads
shared by v / k value heads. Decode runs it token by token (fla's fused_recurrent): a
`DELTA_STATE` vector op over every state element in the state format. Prefill runs fla's
chunked algorithm (chunk_gated_delta_rule, chunks of GDN_CHUNK = C tokens, per chunk and head):

    A = beta K K^T (C x dk x C), T = (I + A)^-1 (solve_tril: its 16-row blocks' products, costed
    as one C x C/2 x C product, C^3 flops), W = T beta K and U = T beta V (C x C x (dk + dv)),
    then in order over the chunks V' = U - W S (C x dk x dv) and S = decay S + K^T V'
    (dk x C x dv), and the output O = Q S (C x dk x dv) + (Q K^T masked) V' (C x dk x C, C x C x dv).

    flops per chunk and head = 2 (3 C^2 dk + 2 C^2 dv + C^3 / 2 + 3 C dk dv)

The products are batched GEMMs on the activations over (sequence, head, chunk); the state
passing is sequential over a sequence's chunks, which the batched GEMM does not hold back (the
chunks of the other heads and sequences fill the cores).

Mamba-2 (Dao and Gu, ICML 2024, the SSD algorithm; Nemotron-H), per head with state h (head
dim P x state N), B and C shared by the heads of a group: decode runs selective_state_update,
an `SSM_STATE` vector op over every state element; prefill runs mamba_ssm's chunked scan
(chunks of Q = `mamba_chunk` tokens): per chunk and group CB^T (Q x N x Q), per chunk and head
the chunk's state x^T B (P x Q x N), the states passed from chunk to chunk (an fp32
elementwise pass over every state of every chunk), and the output (CB^T masked) x (Q x Q x P)
plus C h (Q x N x P):

    flops per chunk = 2 G Q^2 N + H (2 P Q N + 2 Q^2 P + 2 Q N P), and H P N state adds.

The conv's state and the recurrence are per sequence (`Scaling.KV_LENGTH`: the part of a step
timed per request, beside attention), the projections, the conv itself and the norms per token.
"""

from __future__ import annotations

import math

from archsim.graph.model import Fusion, Phase, Workload
from archsim.graph.ops import Op, OpKind, ParallelRole, Scaling, VectorOp
from archsim.graph.primitives import gemm_op, norm_op
from archsim.graph.step import Step

GDN_CHUNK = 64  # fla's chunk_gated_delta_rule: tokens per chunk (BT = 64)
MAMBA_CHUNK = 256  # mamba_ssm's mamba_chunk_scan_combined default chunk_size


def _bmm(w: Workload, name: str, layers: int, groups: int, m: int, k: int, n: int) -> Op:
    """`groups` products of two activations (no weights), per sequence."""
    act = w.dtypes.activations
    return Op(OpKind.GEMM, act, m=m, k=k, n=n, groups=groups, scaling=Scaling.KV_LENGTH).named(name, layers)


def _conv_ops(w: Workload, step: Step, prefix: str, channels: int, layers: int) -> list[Op]:
    """The causal depthwise conv and SiLU on every token, and each sequence's conv state (its
    last kernel - 1 inputs per channel) read and written."""
    act, m = w.dtypes.activations, w.model
    rows = step.batch * max(1, m.conv_kernel - 1)
    conv = Op(OpKind.VECTOR, act, m=step.tokens, n=channels, vop=VectorOp.CONV1D, scaling=Scaling.TOKENS)
    state = Op(OpKind.VECTOR, act, m=rows, n=channels, vop=VectorOp.CONV_STATE, scaling=Scaling.KV_LENGTH)
    return [conv.named(prefix + "conv1d", layers), state.named(prefix + "conv_state", layers)]


def _gated_norm_out(w: Workload, tokens: int, prefix: str, heads: int, width: int, layers: int) -> list[Op]:
    """norm(y) per head (or group) times SiLU(z), then the output projection to the hidden."""
    act, tok = w.dtypes.activations, Scaling.TOKENS
    return [
        Op(OpKind.VECTOR, act, m=tokens * heads, n=width // heads, vop=VectorOp.RMSNORM, scaling=tok).named(
            prefix + "out_norm", layers
        ),
        Op(OpKind.VECTOR, act, m=tokens, n=width, vop=VectorOp.SILU_MUL, scaling=tok).named(prefix + "gate", layers),
        gemm_op(
            w,
            prefix + "out_proj",
            layers,
            tokens,
            width,
            w.model.hidden,
            scaling=tok,
            parallel=ParallelRole.PARTIAL_SUM,
        ),
    ]


def gdn_chunk_flops(c: int, dk: int, dv: int) -> float:
    """FLOPs of one chunk of one head of chunked Gated DeltaNet (module docstring)."""
    return 2.0 * (3 * c * c * dk + 2 * c * c * dv + c**3 / 2 + 3 * c * dk * dv)


def gdn_ops(w: Workload, step: Step) -> list[Op]:
    """The Gated DeltaNet blocks of a step (`linear_layers` of them)."""
    m, L = w.model, w.model.linear_layers
    if not L:
        return []
    T, tok, eager = step.tokens, Scaling.TOKENS, w.fusion is Fusion.EAGER
    H, dk, dv = m.linear_v_heads, m.linear_k_dim, m.linear_v_dim
    v_width = H * dv
    ops = [norm_op(m, w.dtypes.activations, T, m.hidden, "lin_norm", L, fused=not eager, scaling=tok)]
    # q, k, v and z (in_proj_qkvz), beta and the decay's input (in_proj_ba) as one GEMM
    ops.append(gemm_op(w, "lin_in_proj", L, T, m.hidden, m.linear_conv_dim + v_width + 2 * H, scaling=tok))
    ops += _conv_ops(w, step, "lin_", m.linear_conv_dim, L)
    if step.phase is Phase.DECODE:
        state = w.dtypes.recurrent_state
        rows = step.batch * H * dk
        ops.append(
            Op(OpKind.VECTOR, state, m=rows, n=dv, vop=VectorOp.DELTA_STATE, scaling=Scaling.KV_LENGTH).named(
                "lin_recurrent", L
            )
        )
    else:
        C = GDN_CHUNK
        g = step.batch * H * math.ceil(step.new_tokens / C)
        ops += [
            _bmm(w, "lin_chunk_kkt_qkt", L, 2 * g, C, dk, C),
            _bmm(w, "lin_chunk_solve", L, g, C, C // 2, C),
            _bmm(w, "lin_chunk_wu", L, g, C, C, dk + dv),
            _bmm(w, "lin_chunk_ws_qs", L, 2 * g, C, dk, dv),
            _bmm(w, "lin_chunk_state", L, g, dk, C, dv),
            _bmm(w, "lin_chunk_pv", L, g, C, C, dv),
        ]
    return ops + _gated_norm_out(w, T, "lin_", H, v_width, L)


def mamba_chunk_flops(q: int, heads: int, head_dim: int, state: int, groups: int) -> float:
    """FLOPs of the products of one chunk of Mamba-2's SSD scan (module docstring)."""
    return 2.0 * groups * q * q * state + heads * (
        2.0 * head_dim * q * state + 2.0 * q * q * head_dim + 2.0 * q * state * head_dim
    )


def mamba_ops(w: Workload, step: Step) -> list[Op]:
    """The Mamba-2 blocks of a step (`mamba_layers` of them)."""
    m, L = w.model, w.model.mamba_layers
    if not L:
        return []
    T, tok, eager = step.tokens, Scaling.TOKENS, w.fusion is Fusion.EAGER
    H, P, N, G = m.mamba_heads, m.mamba_head_dim, m.mamba_state, m.mamba_groups
    state = w.dtypes.recurrent_state
    ops = [norm_op(m, w.dtypes.activations, T, m.hidden, "ssm_norm", L, fused=not eager, scaling=tok)]
    # z, x, B, C and dt (in_proj)
    ops.append(gemm_op(w, "ssm_in_proj", L, T, m.hidden, m.mamba_inner + m.mamba_conv_dim + H, scaling=tok))
    ops += _conv_ops(w, step, "ssm_", m.mamba_conv_dim, L)
    if step.phase is Phase.DECODE:
        ops.append(
            Op(
                OpKind.VECTOR, state, m=step.batch * H * P, n=N, vop=VectorOp.SSM_STATE, scaling=Scaling.KV_LENGTH
            ).named("ssm_recurrent", L)
        )
    else:
        Q = m.mamba_chunk or MAMBA_CHUNK
        chunks = step.batch * math.ceil(step.new_tokens / Q)
        ops += [
            _bmm(w, "ssm_chunk_cb", L, chunks * G, Q, N, Q),
            _bmm(w, "ssm_chunk_state", L, chunks * H, P, Q, N),
            Op(OpKind.VECTOR, state, m=chunks * H * P, n=N, vop=VectorOp.ADD, scaling=Scaling.KV_LENGTH).named(
                "ssm_state_pass", L
            ),
            _bmm(w, "ssm_chunk_scan", L, chunks * H, Q, Q, P),
            _bmm(w, "ssm_chunk_out_state", L, chunks * H, Q, N, P),
        ]
    return ops + _gated_norm_out(w, T, "ssm_", G, m.mamba_inner, L)
