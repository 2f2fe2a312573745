"""Memory footprint of a workload on a system: weights, KV cache and activations vs capacity."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism, ParallelismError, check_parallelism, chip_params, shard_model
from archsim.hardware import System
from archsim.units import format_bytes


@dataclass(frozen=True)
class Footprint:
    weights_bytes: float
    kv_cache_bytes: float
    activations_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activations_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


def activation_bytes(w: Workload, batch: int, tokens_per_seq: int) -> float:
    """Peak live activations of one step: the widest intermediate plus the residual stream and
    the logits of the last tokens (fp32)."""
    m = w.model
    widest = max(2 * m.ffn * (m.top_k if m.is_moe else 1), m.q_dim + 2 * m.kv_dim, m.hidden)
    tokens = batch * tokens_per_seq
    return tokens * (widest + 2 * m.hidden) * w.dtypes.activations.bytes + batch * m.vocab * 4.0


def footprint(
    w: Workload, system: System, batch: int | None = None, parallelism: Parallelism | None = None
) -> Footprint:
    """Footprint per chip of the scenario (or of `batch` sequences) at its longest context: split
    evenly over the system's chips, or on the busiest chip of `parallelism`."""
    s = w.scenario
    batch = s.batch if batch is None else batch
    context = s.prompt_tokens + s.output_tokens
    if parallelism is not None:
        return sharded_footprint(w, system, batch, parallelism)
    chips = system.chips
    return Footprint(
        weights_bytes=w.model.params() * w.dtypes.weights.bytes / chips,
        kv_cache_bytes=batch * context * w.model.kv_bytes_per_token(w.dtypes.kv_cache) / chips,
        activations_bytes=activation_bytes(w, batch, s.prompt_tokens),
        capacity_bytes=float(system.chip.hbm.capacity_bytes),
    )


def sharded_footprint(w: Workload, system: System, batch: int, par: Parallelism) -> Footprint:
    """The busiest chip's footprint under `par`: its share of the weights (`chip_params`), the KV
    cache of its expert-parallel group's sequences over its layers and KV heads, and the peak
    activations of that group's prefill with the widest tensors split tp ways. Nothing is split
    when `par` is single (the numbers are then those of one chip)."""
    s = w.scenario
    context = s.prompt_tokens + s.output_tokens
    local = shard_model(w.model, par)
    group = math.ceil(batch / par.ep)
    kv_per_token = 2.0 * local.layers * local.kv_dim * w.dtypes.kv_cache.bytes
    return Footprint(
        weights_bytes=chip_params(w.model, par) * w.dtypes.weights.bytes,
        kv_cache_bytes=group * context * kv_per_token,
        activations_bytes=activation_bytes(replace(w, model=local), group, s.prompt_tokens),
        capacity_bytes=float(system.chip.hbm.capacity_bytes),
    )


def largest_batch(w: Workload, system: System, parallelism: Parallelism | None = None) -> int:
    """The largest batch whose footprint fits (0 if not even one sequence does)."""
    lo, hi = 0, 1
    while footprint(w, system, hi, parallelism).fits and hi < 1 << 24:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if footprint(w, system, mid, parallelism).fits else (lo, mid)
    return lo


def fewest_chips(w: Workload, system: System, par: Parallelism, limit: int = 1 << 12) -> Parallelism | None:
    """The layout with the fewest chips (tensor parallel first, then pipeline stages, the expert
    degree kept) under which the scenario fits; None if none up to `limit` chips does."""
    layouts = []
    for tp in (t for t in range(1, w.model.heads + 1) if w.model.heads % t == 0):
        for pp in range(1, w.model.layers + 1):
            cand = Parallelism(tp, pp, par.ep, par.micro_batches)
            if cand.chips <= limit:
                layouts.append(cand)
    for cand in sorted(layouts, key=lambda c: (c.chips, c.pp)):
        try:
            check_parallelism(w.model, cand)
        except ParallelismError:
            continue
        if footprint(w, system, None, cand).fits:
            return cand
    return None


def check_fits(w: Workload, system: System, parallelism: Parallelism | None = None) -> Footprint:
    """The footprint, or DoesNotFitError with the numbers, the largest batch that fits and, under
    a `parallelism`, the fewest chips that would fit the scenario."""
    fp = footprint(w, system, None, parallelism)
    if fp.fits:
        return fp
    best = largest_batch(w, system, parallelism)
    hint = (
        f"the largest batch that fits is {best}"
        if best > 0
        else "not even one sequence fits: use a chip with more memory, more chips, or smaller dtypes"
    )
    where = system.chip.name
    if parallelism is not None:
        where += "" if parallelism.is_single else f" at {parallelism.label()}"
        fewest = fewest_chips(w, system, parallelism)
        if fewest is None:
            hint += "; no layout of tensor and pipeline parallelism fits it"
        else:
            flags = " ".join(
                f"--{k} {v}" for k, v in (("tp", fewest.tp), ("pp", fewest.pp), ("ep", fewest.ep)) if v > 1 or k == "tp"
            )
            more = f", more than the {system.chips} of this system" if fewest.chips > system.chips else ""
            hint += f"; the fewest chips that fit batch {w.scenario.batch} is {fewest.chips} ({flags}{more})"
    raise DoesNotFitError(
        f"{w.model.name} with batch {w.scenario.batch} and context "
        f"{w.scenario.prompt_tokens + w.scenario.output_tokens} does not fit on {where}: "
        f"weights {format_bytes(fp.weights_bytes)} + KV cache {format_bytes(fp.kv_cache_bytes)} + "
        f"activations {format_bytes(fp.activations_bytes)} = {format_bytes(fp.total_bytes)} > "
        f"capacity {format_bytes(fp.capacity_bytes)}; {hint}"
    )
