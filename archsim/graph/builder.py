"""Build the ops of one prefill or decode step of a decoder-only transformer.

One function serves both phases: a step is `batch` sequences each adding `new_tokens` tokens
after `past` cached ones (prefill: past = 0; decode: new_tokens = 1). Per-layer ops carry
`repeat = layers`. The degree of fusion follows the workload: EAGER reproduces PyTorch eager
(the measured H200 model), FUSED what a tuned serving engine runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from archsim.graph.model import Fusion, ModelSpec, Phase, Workload
from archsim.graph.ops import Op, OpKind, VectorOp


@dataclass(frozen=True)
class Step:
    """One forward step: `batch` sequences, `new_tokens` each, after `past` cached tokens."""

    phase: Phase
    batch: int
    new_tokens: int
    past: int
    with_embedding_and_head: bool = True

    @property
    def tokens(self) -> int:
        return self.batch * self.new_tokens

    @property
    def kv_len(self) -> int:
        return self.past + self.new_tokens


def expected_active_experts(experts: int, top_k: int, tokens: int) -> int:
    """Experts that receive at least one of `tokens` tokens under uniform routing:
    E * (1 - (1 - k/E)^T), rounded, at least min(E, k)."""
    expected = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    return max(min(experts, top_k), min(experts, round(expected)))


def _ffn_ops(model: ModelSpec, w: Workload, tokens: int) -> list[Op]:
    act, wd = w.dtypes.activations, w.dtypes.weights
    eager = w.fusion is Fusion.EAGER
    L = model.layers
    ops: list[Op] = []
    if model.is_moe:
        active = expected_active_experts(model.experts, model.top_k, tokens)
        per_expert = math.ceil(tokens * model.top_k / active)
        ops.append(Op(OpKind.GEMM, act, m=tokens, k=model.hidden, n=model.experts, weight_dtype=wd).named("router", L))
        ops.append(Op(OpKind.VECTOR, act, m=tokens, n=model.experts, vop=VectorOp.TOPK).named("router_topk", L))
        routed = tokens * model.top_k
        ops.append(
            Op(OpKind.GEMM, act, m=per_expert, k=model.hidden, n=2 * model.ffn, groups=active, weight_dtype=wd).named(
                f"experts_gate_up[{active}]", L
            )
        )
        ops += silu_mul_ops(act, routed, model.ffn, eager, L)
        ops.append(
            Op(OpKind.GEMM, act, m=per_expert, k=model.ffn, n=model.hidden, groups=active, weight_dtype=wd).named(
                f"experts_down[{active}]", L
            )
        )
    else:
        ops.append(Op(OpKind.GEMM, act, m=tokens, k=model.hidden, n=2 * model.ffn, weight_dtype=wd).named("gate_up", L))
        ops += silu_mul_ops(act, tokens, model.ffn, eager, L)
        ops.append(Op(OpKind.GEMM, act, m=tokens, k=model.ffn, n=model.hidden, weight_dtype=wd).named("down", L))
    return ops


def silu_mul_ops(act, rows: int, ffn: int, eager: bool, layers: int = 1) -> list[Op]:
    """SiLU of the first half of the [rows, 2 ffn] gate_up output times its second half: one fused
    kernel, or in eager code two kernels on the halves (strided views unless there is one row)."""
    if eager:
        strided = rows > 1
        return [
            Op(OpKind.VECTOR, act, m=rows, n=ffn, vop=VectorOp.SILU, strided=strided).named("silu", layers),
            Op(OpKind.VECTOR, act, m=rows, n=ffn, vop=VectorOp.MUL, strided=strided).named("mul", layers),
        ]
    return [Op(OpKind.VECTOR, act, m=rows, n=ffn, vop=VectorOp.SILU_MUL).named("silu_mul", layers)]


def _eager_rope(act, rows: int, width: int, name: str, layers: int) -> list[Op]:
    """Rotate-half rotary embedding written unfused on a slice of the qkv output: x1 * cos and
    x2 * sin and x2 * cos and x1 * sin on the heads' halves (strided views), a subtract and an
    add of the products, then stacking the halves and a copy back (strided)."""
    half = width // 2
    return [
        Op(OpKind.VECTOR, act, m=rows, n=half, vop=VectorOp.MUL, strided=True, kernels=4).named(f"{name}_mul", layers),
        Op(OpKind.VECTOR, act, m=rows, n=half, vop=VectorOp.ADD, kernels=2).named(f"{name}_add", layers),
        Op(OpKind.COPY, act, bytes=rows * width * act.bytes, strided=True, kernels=2).named(f"{name}_copy", layers),
    ]


def build_step(w: Workload, step: Step) -> list[Op]:
    """The ops of one step, in execution order."""
    model, act, wd, kvd = w.model, w.dtypes.activations, w.dtypes.weights, w.dtypes.kv_cache
    eager = w.fusion is Fusion.EAGER
    T, L, B = step.tokens, model.layers, step.batch
    norm = VectorOp.RMSNORM if eager else VectorOp.ADD_RMSNORM
    ops: list[Op] = []
    if step.with_embedding_and_head:
        ops.append(Op(OpKind.EMBEDDING, act, m=T, n=model.hidden).named("embedding"))
    ops.append(Op(OpKind.VECTOR, act, m=T, n=model.hidden, vop=norm).named("attn_norm", L))
    ops.append(
        Op(OpKind.GEMM, act, m=T, k=model.hidden, n=model.q_dim + 2 * model.kv_dim, weight_dtype=wd).named("qkv", L)
    )
    kv_write_bytes = int(T * model.kv_dim * kvd.bytes)
    if eager:
        ops += _eager_rope(act, T, model.q_dim, "rope_q", L) + _eager_rope(act, T, model.kv_dim, "rope_k", L)
        ops.append(Op(OpKind.COPY, bytes=kv_write_bytes, kernels=2, strided=True).named("kv_write", L))
    else:
        ops.append(Op(OpKind.VECTOR, act, m=T, n=model.q_dim + model.kv_dim, vop=VectorOp.ROPE).named("rope", L))
        ops.append(Op(OpKind.COPY, bytes=2 * kv_write_bytes).named("kv_write", L))
    kv_heads = model.kv_heads
    if eager and step.phase is Phase.PREFILL and model.kv_heads < model.heads:
        expand = int(B * model.heads * step.kv_len * model.head_dim * kvd.bytes)
        ops.append(Op(OpKind.COPY, bytes=expand, kernels=2, strided=True).named("kv_expand", L))
        kv_heads = model.heads
    ops.append(
        Op(
            OpKind.ATTENTION,
            kvd,
            batch=B,
            heads=model.heads,
            kv_heads=kv_heads,
            head_dim=model.head_dim,
            q_len=step.new_tokens,
            kv_len=step.kv_len,
            causal=step.phase is Phase.PREFILL,
            split_kv=not eager,
            softmax_overlap=not eager,
        ).named("attention", L)
    )
    ops.append(Op(OpKind.GEMM, act, m=T, k=model.q_dim, n=model.hidden, weight_dtype=wd).named("o_proj", L))
    if eager:
        ops.append(Op(OpKind.VECTOR, act, m=T, n=model.hidden, vop=VectorOp.ADD).named("residual_add", L))
    ops.append(Op(OpKind.VECTOR, act, m=T, n=model.hidden, vop=norm).named("ffn_norm", L))
    ops += _ffn_ops(model, w, T)
    if eager:
        ops.append(Op(OpKind.VECTOR, act, m=T, n=model.hidden, vop=VectorOp.ADD).named("residual_add2", L))
    if step.with_embedding_and_head:
        ops.append(Op(OpKind.VECTOR, act, m=B, n=model.hidden, vop=VectorOp.RMSNORM).named("final_norm"))
        ops.append(Op(OpKind.GEMM, act, m=B, k=model.hidden, n=model.vocab, weight_dtype=wd).named("lm_head"))
    # an elementwise kernel or copy reads what the kernel before it just wrote
    return [replace(op, hot=True) if op.kind in (OpKind.VECTOR, OpKind.COPY) else op for op in ops]
