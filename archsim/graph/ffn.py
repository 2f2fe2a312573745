"""The FFN half of a layer: its norm, a dense MLP or a mixture of experts, each op with the
layers that run it.

A dense MLP is gate and up in one GEMM, act(gate) * up and the down projection (SiLU or GELU),
or, non-gated (GPT-2, GPT-J, Falcon), up, act(up) and down. A MoE layer (archsim/graph/moe.py
for the routing) runs the router GEMM and its top-k, the shared experts as a dense MLP on every
token, then the routed experts as grouped GEMMs: the experts a step touches, each given the
busiest expert's rows (at least the routed rows spread evenly over them). The expected number
touched is fractional; the layers are split between its floor and its ceiling so that their
mean is that number (to 1/layers), e.g. 3.5 experts over 32 layers: 16 layers of 3 and 16 of 4,
each kind its own ops. The dense layers of a MoE model (DeepSeek's first
three) run their own MLP of width `dense_ffn`. Under expert parallelism the ops are the busiest
rank's: its share of the experts and of the tokens routed from every rank.
"""

from __future__ import annotations

import math

from archsim.dtypes import DType
from archsim.graph.model import Activation, Fusion, Workload
from archsim.graph.moe import ExpertShare, rank_share, routing_probabilities
from archsim.graph.ops import Op, OpKind, ParallelRole, Scaling, VectorOp
from archsim.graph.primitives import gemm_op, norm_op, residual_add_op

EXPERT_GATE_UP = "experts_gate_up"  # names (before the [groups] suffix) of the routed expert GEMMs
EXPERT_DOWN = "experts_down"
_ACT = {Activation.SILU: VectorOp.SILU, Activation.GELU: VectorOp.GELU, Activation.RELU2: VectorOp.RELU2}
_GATED = {Activation.SILU: VectorOp.SILU_MUL, Activation.GELU: VectorOp.GELU_MUL}


def whole(x: float) -> int:
    """The smallest whole number that holds `x`; an expectation within a millionth of a whole
    number is that number (16 rows of 64 tokens over 8 experts at top-2, less the chance of an
    expert left idle, 1e-8)."""
    return max(1, math.ceil(x * (1.0 - 1e-6)))


def activation_ops(
    act: DType, rows: int, width: int, activation: Activation, gated: bool, eager: bool, prefix: str, layers: int
) -> list[Op]:
    """The activation of an MLP's `rows` x `width` output: fused act(gate) * up, or in eager code
    act and multiply as two kernels on the halves (strided views unless there is one row); a
    non-gated MLP's act alone."""
    name, tok = activation.value, Scaling.TOKENS
    if not gated:
        return [Op(OpKind.VECTOR, act, m=rows, n=width, vop=_ACT[activation], scaling=tok).named(prefix + name, layers)]
    if eager:
        strided = rows > 1
        return [
            Op(OpKind.VECTOR, act, m=rows, n=width, vop=_ACT[activation], strided=strided, scaling=tok).named(
                prefix + name, layers
            ),
            Op(OpKind.VECTOR, act, m=rows, n=width, vop=VectorOp.MUL, strided=strided, scaling=tok).named(
                prefix + "mul", layers
            ),
        ]
    gated_op = Op(OpKind.VECTOR, act, m=rows, n=width, vop=_GATED[activation], scaling=tok)
    return [gated_op.named(f"{prefix}{name}_mul", layers)]


def act_ops(w: Workload, rows: int, width: int, prefix: str, layers: int) -> list[Op]:
    """The model's activation (`activation_ops`) on `rows` x `width`."""
    m = w.model
    eager = w.fusion is Fusion.EAGER
    return activation_ops(w.dtypes.activations, rows, width, m.activation, m.gated, eager, prefix, layers)


def mlp_ops(
    w: Workload, rows: int, width: int, prefix: str, layers: int, down: ParallelRole = ParallelRole.PARTIAL_SUM
) -> list[Op]:
    """A dense MLP of inner width `width` on `rows` tokens; `down`: what a parallel layout runs
    after its down projection (an all-reduce of its partial sum, unless reduced with another's)."""
    m = w.model
    if width <= 0 or layers <= 0:
        return []
    up = ("gate_up", 2 * width) if m.gated else ("up", width)
    return [
        gemm_op(w, prefix + up[0], layers, rows, m.hidden, up[1], scaling=Scaling.TOKENS),
        *act_ops(w, rows, width, prefix, layers),
        gemm_op(w, prefix + "down", layers, rows, width, m.hidden, scaling=Scaling.TOKENS, parallel=down),
    ]


def layer_split(count: float, layers: int) -> list[tuple[int, int]]:
    """(whole count, layers) pairs whose layer-weighted mean is `count` to 1/layers: its floor
    on some layers, its ceiling on the rest."""
    lo = math.floor(count + 1e-9)
    on_hi = round(layers * (count - lo))
    return [(g, n) for g, n in ((lo, layers - on_hi), (lo + 1, on_hi)) if n > 0 and g > 0]


def expert_share(w: Workload, tokens: int, ep: int = 1) -> ExpertShare:
    """The busiest rank's experts in a step of `tokens` tokens per rank (`ep` ranks)."""
    m = w.model
    p = routing_probabilities(m.experts, m.top_k, m.routing_skew, m.expert_loads)
    return rank_share(p, tokens * ep, ep)


def routed_expert_ops(w: Workload, share: ExpertShare, layers: int, wd: DType) -> list[Op]:
    """The grouped GEMMs of the routed experts and their activation, for each whole number g
    of experts touched (layer_split): g groups of max(the busiest expert's expected rows, the
    routed rows spread over g), the activation on the routed rows."""
    m = w.model
    routed = whole(share.routed)
    n_up = 2 * m.ffn if m.gated else m.ffn
    into, out = ParallelRole.EXPERTS_IN, ParallelRole.EXPERTS_OUT
    ops = []
    for g, n in layer_split(share.touched, layers):
        rows = max(round(share.rows), math.ceil(routed / g))
        gate_up = gemm_op(
            w, f"{EXPERT_GATE_UP}[{g}]", n, rows, m.hidden, n_up, g, wd, scaling=Scaling.TOKENS, parallel=into
        )
        ops.append(gate_up)
        ops += [op.named(f"{op.name}[{g}]", n) for op in act_ops(w, routed, m.ffn, "", n)]
        ops.append(
            gemm_op(w, f"{EXPERT_DOWN}[{g}]", n, rows, m.ffn, m.hidden, g, wd, scaling=Scaling.TOKENS, parallel=out)
        )
    return ops


def moe_ops(w: Workload, tokens: int, layers: int, ep: int = 1) -> list[Op]:
    """One MoE layer kind: router, top-k, shared experts, routed experts."""
    m, act = w.model, w.dtypes.activations
    tok = Scaling.TOKENS
    ops = [
        gemm_op(w, "router", layers, tokens, m.hidden, m.experts, scaling=tok),
        Op(OpKind.VECTOR, act, m=tokens, n=m.experts, vop=VectorOp.TOPK, scaling=tok).named("router_topk", layers),
    ]
    ops += mlp_ops(w, tokens, m.shared_ffn, "shared_", layers, down=ParallelRole.NONE)  # reduced with the experts
    return ops + routed_expert_ops(w, expert_share(w, tokens, ep), layers, w.dtypes.experts)


def ffn_ops(w: Workload, tokens: int, ep: int = 1) -> list[Op]:
    """The FFN half of every layer on a step of `tokens` tokens (the busiest of `ep` expert
    ranks' experts)."""
    m, act = w.model, w.dtypes.activations
    eager = w.fusion is Fusion.EAGER
    L, tok = m.ffn_layers, Scaling.TOKENS
    ops = [] if m.parallel_block else [norm_op(m, act, tokens, m.hidden, "ffn_norm", L, fused=not eager, scaling=tok)]
    if not m.is_moe:
        ops += mlp_ops(w, tokens, m.ffn, "", L)
    else:
        ops += mlp_ops(w, tokens, m.dense_width, "dense_", m.dense_layers)
        ops += moe_ops(w, tokens, m.moe_layers, ep)
    if m.post_norms:
        ops.append(norm_op(m, act, tokens, m.hidden, "post_ffn_norm", L, fused=False, scaling=tok))
    if eager:
        ops.append(residual_add_op(act, tokens, m.hidden, "residual_add2", L, scaling=tok))
    return ops
