"""Tensor, pipeline and expert parallelism: a step's ops as the busiest chip runs them, the
collectives between them, and the schedules that overlap them (chunking, the pipeline's bubble).

Units: seconds and bytes. TP=t splits attention heads (KV heads too, replicated when fewer than
t), the FFN width and the vocabulary t ways, Megatron-LM's layout: an all-reduce of the hidden
states follows the attention output projection, the FFN down projection and the
vocabulary-parallel embedding; the logits are all-gathered. PP=p gives each stage ceil(L/p)
layers; the batch is cut into micro-batches that flow stage to stage by point-to-point sends.
EP=e (MoE models) spreads the experts over e groups of tp x pp chips, each group serving 1/e of the
batch (data parallel outside the experts); tokens reach their experts' group by an all-to-all
(dispatch) and come back by another (combine). Chips = tp x pp x ep.

The ops are those of one micro-batch on the busiest stage (the most layers), the embedding and
the LM head counted there too although they sit on the first and last stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from archsim.errors import ConfigError
from archsim.graph import params
from archsim.graph.builder import MTP_PREFIX, Step, build_step
from archsim.graph.ffn import expert_share
from archsim.graph.model import ModelSpec, Phase, Workload
from archsim.graph.ops import Op, OpKind, ParallelRole, Scaling
from archsim.memo import memo

MAX_CHUNKS = 64  # most pieces a collective is cut into to overlap the op that produces it
# ops whose output is a partial sum under TP (the builder says which: the vocabulary-parallel
# embedding, the attention output, a dense MLP's down projection, and the routed experts', whose
# all-reduce also sums the shared experts' output, as serving engines reduce them once)
TP_REDUCED = frozenset({ParallelRole.PARTIAL_SUM, ParallelRole.EXPERTS_OUT})


def base_name(name: str) -> str:
    """An op's name without its [groups] suffix and the MTP layers' prefix (to name its collectives)."""
    return name.split("[")[0].removeprefix(MTP_PREFIX)


class ParallelismError(ConfigError, ValueError):
    """A parallel layout the model or the system cannot take."""


@dataclass(frozen=True)
class Parallelism:
    """Tensor, pipeline and expert parallel degrees; `micro_batches` 0 takes min(batch, pp)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    micro_batches: int = 0

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def is_single(self) -> bool:
        return self.chips == 1

    def label(self) -> str:
        return ", ".join(
            f"{name} {n}" for name, n in (("TP", self.tp), ("PP", self.pp), ("EP", self.ep)) if n > 1 or name == "TP"
        )


def check_parallelism(model: ModelSpec, par: Parallelism) -> None:
    """Refuse a layout the model cannot be cut into, naming the numbers."""
    problems = []
    if model.heads % par.tp:
        problems.append(f"TP {par.tp} must divide the {model.heads} attention heads")
    elif model.kv_heads % par.tp and par.tp % model.kv_heads:
        problems.append(f"TP {par.tp} must divide the {model.kv_heads} KV heads or be a multiple of them")
    if par.pp > model.layers:
        problems.append(f"PP {par.pp} is more stages than the {model.layers} layers")
    if par.pp > 1 and model.is_hybrid:
        problems.append(f"PP {par.pp}: pipeline stages of a hybrid of recurrent and attention layers are not modelled")
    for what, n in (
        ("linear-attention key heads", model.linear_k_heads),
        ("linear-attention value heads", model.linear_v_heads),
        ("Mamba heads", model.mamba_heads),
    ):
        if n and n % par.tp:
            problems.append(f"TP {par.tp} must divide the {n} {what}")
    if par.ep > 1 and not model.is_moe:
        problems.append(f"EP {par.ep} needs a mixture-of-experts model ({model.name} is dense)")
    elif par.ep > 1 and model.experts % par.ep:
        problems.append(f"EP {par.ep} must divide the {model.experts} experts")
    if problems:
        raise ParallelismError("; ".join(problems))


def stage_layers(model: ModelSpec, pp: int) -> tuple[int, int, int]:
    """(layers, dense layers, local layers) of the busiest of `pp` pipeline stages of
    ceil(L/pp) layers each: the stage with the most MoE layers (then the most layers); dense
    layers are the first ones, local (sliding-window) layers spread evenly, the stage keeping
    the floor of its share (global layers cost more)."""
    per = math.ceil(model.layers / pp)
    if pp == 1:
        return model.layers, model.dense_layers, model.local_layers
    stages = []
    for start in range(0, model.layers, per):
        n = min(model.layers, start + per) - start
        dense = max(0, min(model.dense_layers, start + n) - start)
        stages.append((n - dense if model.is_moe else 0, n, dense))
    _moe, n, dense = max(stages)
    return n, dense, model.local_layers * n // model.layers


def shard_model(model: ModelSpec, par: Parallelism) -> ModelSpec:
    """The slice of the model the busiest chip computes: heads, KV heads (at least one), FFN
    widths (dense, expert, shared), the recurrent mixers' heads (Mamba's groups, at least one)
    and vocabulary split tp ways, the busiest stage's layers. MLA's low-rank projections are
    replicated, as serving engines run them. Experts stay whole here
    (see `shard_step`)."""
    layers, dense, local = stage_layers(model, par.pp)
    return replace(
        model,
        layers=layers,
        dense_layers=dense,
        local_layers=local,
        heads=model.heads // par.tp,
        kv_heads=max(1, model.kv_heads // par.tp),
        ffn=math.ceil(model.ffn / par.tp),
        dense_ffn=math.ceil(model.dense_ffn / par.tp),
        shared_ffn=math.ceil(model.shared_ffn / par.tp),
        vocab=math.ceil(model.vocab / par.tp),
        linear_k_heads=model.linear_k_heads // par.tp,
        linear_v_heads=model.linear_v_heads // par.tp,
        mamba_heads=model.mamba_heads // par.tp,
        mamba_groups=max(1, model.mamba_groups // par.tp) if model.mamba_groups else 0,
    )


def chip_params(model: ModelSpec, par: Parallelism) -> int:
    """Parameters on the busiest chip (as `params.total_params` when nothing is split): its layers
    with 1/ep of the routed experts split tp ways (the router, shared experts and norms whole),
    the MTP layers, and the embedding and LM head of the first and last stage (both on one chip
    without PP)."""
    m = shard_model(model, par)
    held = model.experts // par.ep
    layers = params.layers_params(m, held) + params.mtp_params(m, held)
    embed = params.embedding_params(m)
    final_norm = params.norm_params(m, m.hidden)
    if par.pp == 1:
        return layers + embed + (0 if model.tied_embeddings else m.vocab * m.hidden) + final_norm
    return layers + embed + final_norm  # the first stage's embedding or the last's head


def local_batch(batch: int, par: Parallelism) -> tuple[int, int]:
    """(micro-batches, sequences per micro-batch) of one expert-parallel group's share of `batch`."""
    group = math.ceil(batch / par.ep)
    micro = min(group, par.micro_batches or par.pp)
    return micro, math.ceil(group / micro)


@dataclass(frozen=True)
class ParallelStep:
    """The ops of one micro-batch on the busiest chip, and how the micro-batches are scheduled."""

    ops: tuple[Op, ...]
    stages: int
    micro_batches: int


@memo(maxsize=256)
def sharded_workload(w: Workload, par: Parallelism) -> Workload:
    """The workload with the busiest chip's slice of the model (`shard_model`), once the layout
    is checked (a decode step at every KV length asks)."""
    check_parallelism(w.model, par)
    return replace(w, model=shard_model(w.model, par))


def shard_step(w: Workload, step: Step, par: Parallelism) -> ParallelStep:
    """The busiest chip's ops of `step` under `par`, with the collectives in place."""
    local = sharded_workload(w, par)
    micro, seqs = local_batch(step.batch, par)
    sub = Step(step.phase, seqs, step.new_tokens, step.past, step.with_embedding_and_head, step.with_ffn)
    tokens, act = sub.tokens, w.dtypes.activations
    hidden_bytes = int(tokens * w.model.hidden * act.bytes)
    out: list[Op] = []
    for op in build_step(local, sub, par.ep):
        if par.ep > 1 and op.parallel is ParallelRole.EXPERTS_IN:
            out.append(_all_to_all(local, tokens, par.ep, "ep_dispatch", op.repeat))
        out.append(op)
        if par.ep > 1 and op.parallel is ParallelRole.EXPERTS_OUT:
            out.append(_all_to_all(local, tokens, par.ep, "ep_combine", op.repeat))
        comm = tp_collective(op, w, tokens, par.tp)
        if comm is not None:
            out.append(comm)
    if par.pp > 1:
        out.append(Op(OpKind.SEND, act, m=tokens, bytes=hidden_bytes, ranks=2, scaling=Scaling.TOKENS).named("pp_send"))
    return ParallelStep(tuple(out), par.pp, micro)


def tp_collective(op: Op, w: Workload, tokens: int, tp: int) -> Op | None:
    """The collective a tensor-parallel group of `tp` chips runs after `op` (one of the busiest
    chip's ops of a `tokens`-token step), or None: an all-reduce of the hidden states after the
    ops whose output is a partial sum, an all-gather of the logits after the LM head (as the
    builder gave the op's `parallel` role); named after the op."""
    if tp <= 1:
        return None
    base, act = base_name(op.name), w.dtypes.activations
    prefix = MTP_PREFIX if op.name.startswith(MTP_PREFIX) else ""
    if op.parallel in TP_REDUCED:
        hidden = int(tokens * w.model.hidden * act.bytes)
        return Op(OpKind.ALL_REDUCE, act, m=tokens, bytes=hidden, ranks=tp, scaling=op.scaling).named(
            f"{prefix}{base}_allreduce", op.repeat
        )
    if op.parallel is ParallelRole.VOCAB_SLICE:
        logits = int(op.m * w.model.vocab * op.c_dtype.bytes)
        return Op(OpKind.ALL_GATHER, act, m=op.m, bytes=logits, ranks=tp, scaling=op.scaling).named(
            f"{prefix}{base}_allgather", op.repeat
        )
    return None


def _all_to_all(w: Workload, tokens: int, ranks: int, name: str, layers: int) -> Op:
    """Each rank sends its tokens' hidden states to the ranks of their top-k experts; the busiest
    rank (archsim/graph/moe.py) receives the most rows, and its rows set the time."""
    routed = expert_share(w, tokens, ranks).routed
    nbytes = int(round(routed) * w.model.hidden * w.dtypes.activations.bytes)
    return Op(
        OpKind.ALL_TO_ALL, w.dtypes.activations, m=tokens, bytes=nbytes, ranks=ranks, scaling=Scaling.TOKENS
    ).named(name, layers)


# --- schedules ------------------------------------------------------------------------------------


def overlapped_s(compute_s: float, piece_s: float, chunks: int) -> float:
    """An op cut into `chunks` pieces, each piece's collective sent once it is computed: a
    two-stage pipeline, C/c + X_c + (c-1) max(C/c, X_c) (X_c one piece's collective)."""
    c = compute_s / chunks
    return c + piece_s + (chunks - 1) * max(c, piece_s)


def best_chunks(compute_s: float, comm_s: Callable[[int], float], max_chunks: int) -> tuple[int, float]:
    """The number of pieces (a power of two up to `max_chunks`) that ends producer and collective
    soonest, and the collective time hidden under the compute: C + comm(c) - overlapped."""
    best = (compute_s + comm_s(1), 1, 0.0)
    c = 2
    while c <= max_chunks:
        total = comm_s(c)
        end = overlapped_s(compute_s, total / c, c)
        if end < best[0]:
            best = (end, c, compute_s + total - end)
        c *= 2
    return best[1], best[2]


def max_chunks(op: Op, chunk_bytes: int) -> int:
    """Pieces a collective may be cut into: none below `chunk_bytes`, none thinner than a row."""
    if chunk_bytes <= 0:
        return 1
    return max(1, min(MAX_CHUNKS, op.m, op.bytes // chunk_bytes))


@dataclass(frozen=True)
class PipelineSchedule:
    """Micro-batches through pipeline stages: one micro-batch's time on the busiest stage, its
    send to the next, and the step they add up to."""

    stages: int
    micro_batches: int
    stage_s: float
    send_s: float
    step_s: float

    @property
    def bubble_s(self) -> float:
        """Time in the step the busiest stage waits: the step less its micro-batches' work."""
        return self.step_s - self.micro_batches * self.stage_s


def pipeline_step_s(stage_s, send_s: float, stages: int, micro_batches: int, phase: Phase):
    """A step's time (float or array) over `stages` stages.

    Prefill (GPipe's fill and drain): (m + p - 1) stage + (p - 1) send.
    Decode, micro-batches in flight from step to step: each stage serves m micro-batches a step,
    and each micro-batch's next token waits for its last: max(m stage, p (stage + send)), the
    sampled token's way back to the first stage being the p-th send.
    """
    p, m = stages, micro_batches
    if p == 1:
        return stage_s
    if phase is Phase.PREFILL:
        return (m + p - 1) * stage_s + (p - 1) * send_s
    return np.maximum(m * stage_s, p * (stage_s + send_s))
