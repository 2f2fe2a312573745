"""Build the ops of one prefill or decode step of a decoder-only transformer.

One function serves both phases: a step is `batch` sequences each adding `new_tokens` tokens
after `past` cached ones (prefill: past = 0; decode: new_tokens = 1). Per-layer ops carry
`repeat` = the layers that run them. The degree of fusion follows the workload: EAGER
reproduces PyTorch eager (the measured H200 model), FUSED what a tuned serving engine runs.

The attention block is archsim/graph/attention.py's, the FFN (dense, MoE, shared experts)
archsim/graph/ffn.py's; here they are put in order with the embedding, the multi-token
prediction layers and the LM head. Every op is made with its roles: what its shapes grow with
in a step (`Scaling`, required: the part of a mixed step that times it) and what a parallel
layout runs around it (`ParallelRole`); no later stage reads an op's name to tell.
"""

from __future__ import annotations

from dataclasses import replace

from archsim.dtypes import DType
from archsim.graph.attention import attention_block_ops
from archsim.graph.ffn import activation_ops, ffn_ops
from archsim.graph.model import Activation, Positions, Workload
from archsim.graph.moe import expected_active_experts
from archsim.graph.ops import RECURRENT_STATE_VOPS, Op, OpKind, ParallelRole, Scaling, VectorOp
from archsim.graph.primitives import gemm_op, norm_op
from archsim.graph.step import Step
from archsim.hashing import copy_with

__all__ = ["Step", "build_step", "expected_active_experts", "silu_mul_ops"]

MTP_PREFIX = "mtp_"  # names of the multi-token prediction layers' ops


def silu_mul_ops(act: DType, rows: int, ffn: int, eager: bool, layers: int = 1) -> list[Op]:
    """SiLU of the first half of a [rows, 2 ffn] gate_up output times its second half, as a
    Llama's FFN runs it (one fused kernel, or two eager kernels on the halves)."""
    return activation_ops(act, rows, ffn, Activation.SILU, True, eager, "", layers)


def layer_ops(w: Workload, step: Step, ep: int = 1) -> list[Op]:
    """The ops of the model's transformer layers, each with its repeat (the experts those of
    the busiest of `ep` expert-parallel ranks); the attention blocks only without `with_ffn`."""
    ffn = ffn_ops(w, step.tokens, ep) if step.with_ffn else []
    return attention_block_ops(w, step) + ffn


def embedding_ops(w: Workload, tokens: int) -> list[Op]:
    """The token embedding gather and, with learned positions, the position gather and add."""
    m, act, tok, vocab_split = w.model, w.dtypes.activations, Scaling.TOKENS, ParallelRole.PARTIAL_SUM
    ops = [Op(OpKind.EMBEDDING, act, m=tokens, n=m.hidden, scaling=tok, parallel=vocab_split).named("embedding")]
    if m.positions is Positions.LEARNED:
        ops.append(Op(OpKind.EMBEDDING, act, m=tokens, n=m.hidden, scaling=tok).named("pos_embedding"))
        ops.append(Op(OpKind.VECTOR, act, m=tokens, n=m.hidden, vop=VectorOp.ADD, scaling=tok).named("pos_add"))
    return ops


def mtp_ops(w: Workload, step: Step, ep: int = 1) -> list[Op]:
    """Multi-token prediction (DeepSeek-V3 section 2.2), run on every step as speculative
    decoding with MTP runs it: the embedding of the next tokens and the hidden state normed
    and projected together (hidden x 2 hidden), one transformer layer of the MoE kind, and the
    shared head on one token per sequence."""
    m, act, tok = w.model, w.dtypes.activations, Scaling.TOKENS
    L, T = m.mtp_layers, step.tokens
    if not L:
        return []
    # attention layers of the MoE kind, whatever the model's other layers are
    mtp = replace(m, layers=L, dense_layers=0, local_layers=0, mtp_layers=0, linear_layers=0, mamba_layers=0)
    layer = replace(w, model=replace(mtp, mixer_only_layers=0, ffn_only_layers=0))
    ops = [
        Op(OpKind.EMBEDDING, act, m=T, n=m.hidden, scaling=tok, parallel=ParallelRole.PARTIAL_SUM).named(
            "embedding", L
        ),
        Op(OpKind.VECTOR, act, m=T, n=m.hidden, vop=VectorOp.RMSNORM, kernels=2, scaling=tok).named("norms", L),
        gemm_op(w, "eh_proj", L, T, 2 * m.hidden, m.hidden, scaling=tok),
    ]
    ops += layer_ops(layer, step, ep)
    if step.with_embedding_and_head:
        ops += head_ops(w, step.batch, L)
    return [op.named(MTP_PREFIX + op.name, op.repeat) for op in ops]


def head_ops(w: Workload, sequences: int, repeat: int = 1) -> list[Op]:
    """The final norm and the LM head on the last token of each sequence."""
    m, act, seq = w.model, w.dtypes.activations, Scaling.SEQUENCES
    return [
        norm_op(m, act, sequences, m.hidden, "final_norm", repeat, fused=False, scaling=seq),
        gemm_op(w, "lm_head", repeat, sequences, m.hidden, m.vocab, scaling=seq, parallel=ParallelRole.VOCAB_SLICE),
    ]


def build_step(w: Workload, step: Step, ep: int = 1) -> list[Op]:
    """The ops of one step, in execution order (`ep`: the busiest expert-parallel rank's
    experts, the tokens of `ep` ranks routed over all of them)."""
    ops: list[Op] = []
    if step.with_embedding_and_head:
        ops += embedding_ops(w, step.tokens)
    ops += layer_ops(w, step, ep)
    ops += mtp_ops(w, step, ep)
    if step.with_embedding_and_head:
        ops += head_ops(w, step.batch)
    # an elementwise kernel or copy reads what the kernel before it just wrote (a recurrent
    # state was written a step ago)
    return [
        copy_with(op, hot=True)
        if op.kind in (OpKind.VECTOR, OpKind.COPY) and op.vop not in RECURRENT_STATE_VOPS
        else op
        for op in ops
    ]
