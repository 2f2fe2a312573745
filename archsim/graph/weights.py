"""Bytes of a model's weights in memory, the routed experts in their own format where it differs
(gpt-oss keeps its experts in MXFP4 and the rest in bf16): whole, and on the busiest chip of a
parallel layout."""

from __future__ import annotations

from archsim.graph import params
from archsim.graph.model import ModelSpec, Workload
from archsim.graph.parallel import Parallelism, chip_params, shard_model


def routed_params(m: ModelSpec, experts: int | None = None) -> int:
    """Parameters of the routed experts of every MoE layer (MTP layers included), `experts` of
    them held per layer (default all)."""
    if not m.is_moe:
        return 0
    held = m.experts if experts is None else experts
    return (m.moe_layers + m.mtp_layers) * held * params.mlp_params(m, m.ffn)


def weight_bytes(w: Workload) -> float:
    """All the weights: the routed experts in `dtypes.experts`, the rest in `dtypes.weights`."""
    routed = routed_params(w.model)
    return (params.total_params(w.model) - routed) * w.dtypes.weights.bytes + routed * w.dtypes.experts.bytes


def chip_weight_bytes(w: Workload, par: Parallelism) -> float:
    """The busiest chip's weights under `par` (as `weight_bytes` when nothing is split)."""
    total = chip_params(w.model, par)
    routed = routed_params(shard_model(w.model, par), w.model.experts // par.ep)
    return (total - routed) * w.dtypes.weights.bytes + routed * w.dtypes.experts.bytes
