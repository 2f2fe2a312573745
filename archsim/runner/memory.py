"""Memory per chip, as a serving engine plans it: weights, the activation peak of one step, and
the KV cache in what is left of the share of device memory the engine may take. Bytes.

The rule is vLLM's (vllm/v1/worker/gpu_worker.py, determine_available_memory): the engine takes
`gpu_memory_utilization` of the device memory (the capacity the device reports, which the chip
file's `hbm.capacity` states), loads the weights, profiles one forward step of
`max_num_batched_tokens` tokens over `max_num_seqs` sequences for its activation peak, and gives
the rest to the KV cache:

    KV budget = capacity x utilisation - weights - activations(max_num_batched_tokens).

Serving sizes its KV pool by it (archsim/serving/kvpool.py) and `archsim run` fits its batch in
it: a scenario fits when its KV cache at the longest context is within the budget of an engine
configured for it (max_num_seqs = its batch, max_model_len = its context), whose profile step has
min(max_num_batched_tokens, batch x context) tokens (a run prefills in chunks of the step budget,
as the engine does; its prefill step is still timed whole). A chip of a few hundred MB of SRAM
thus holds a batch-1 scenario its 8192-token profile step alone would not fit. A hybrid model's
linear-attention and Mamba layers keep a fixed recurrent state per sequence (its conv inputs
and its state matrix, `ModelSpec.state_bytes_per_sequence`) instead of KV: a sequence's cache is
its paged KV and one state slot, and serving reserves a slot for each of `max_num_seqs`
sequences beside the KV blocks (archsim/serving/kvpool.py). Under a parallel layout the numbers
are the busiest chip's: its share of the weights, of the KV heads and layers, and the
activations of its rank's step with the widest tensors split tp ways.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from archsim.engine_defaults import GPU_MEMORY_UTILIZATION, MAX_BATCHED_TOKENS, MAX_NUM_SEQS
from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism, ParallelismError, check_parallelism, shard_model
from archsim.graph.weights import chip_weight_bytes, weight_bytes
from archsim.hardware import System
from archsim.limits import MAX_BATCH
from archsim.units import format_bytes


@dataclass(frozen=True)
class Footprint:
    weights_bytes: float
    kv_cache_bytes: float
    activations_bytes: float
    capacity_bytes: float
    utilization: float = 1.0  # share of the capacity the engine takes

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activations_bytes

    @property
    def usable_bytes(self) -> float:
        return self.capacity_bytes * self.utilization

    @property
    def kv_room_bytes(self) -> float:
        """What the KV cache may take: usable memory less weights and activations."""
        return self.usable_bytes - self.weights_bytes - self.activations_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.usable_bytes


@dataclass(frozen=True)
class MemoryBudget:
    """One chip's memory plan: capacity, the share taken, weights, the activation peak of one
    step and the KV bytes of one token on this chip."""

    capacity_bytes: float
    utilization: float
    weights_bytes: float
    activations_bytes: float
    kv_bytes_per_token: float
    sequences_per_chip: float  # of a batch, the share whose KV this chip holds (1/ep, or 1)
    state_bytes_per_sequence: float = 0.0  # the recurrent state slot of one sequence on this chip

    @property
    def kv_budget_bytes(self) -> float:
        return self.capacity_bytes * self.utilization - self.weights_bytes - self.activations_bytes


def step_activation_bytes(w: Workload, tokens: int, sequences: int) -> float:
    """Peak live activations of one step of `tokens` tokens over `sequences` sequences: per token
    the widest intermediate plus the residual stream (activation dtype), per sequence its logits
    (fp32)."""
    m = w.model
    widest = m.widest_activation()
    return tokens * (widest + 2 * m.hidden) * w.dtypes.activations.bytes + sequences * m.vocab * 4.0


def memory_budget(
    w: Workload,
    system: System,
    parallelism: Parallelism | None = None,
    utilization: float = GPU_MEMORY_UTILIZATION,
    max_batched_tokens: int = MAX_BATCHED_TOKENS,
    max_num_seqs: int = MAX_NUM_SEQS,
) -> MemoryBudget:
    """The memory plan of one chip: without a layout, weights and KV split evenly over the
    system's chips; under `parallelism`, the busiest chip's (`chip_params`, its KV heads and
    layers, its rank's activations)."""
    sequences = max(1, min(max_num_seqs, max_batched_tokens))
    if parallelism is None:
        chips = system.chips
        weights = weight_bytes(w) / chips
        kv = w.model.kv_bytes_per_token(w.dtypes.kv_cache) / chips
        state = sequence_state_bytes(w, system, None)
        local, share = w, 1.0
    else:
        local = replace(w, model=shard_model(w.model, parallelism))
        weights = chip_weight_bytes(w, parallelism)
        kv = local.model.kv_bytes_per_token(w.dtypes.kv_cache)
        state = sequence_state_bytes(w, system, parallelism)
        share = 1.0 / parallelism.ep
    return MemoryBudget(
        capacity_bytes=float(system.chip.hbm.capacity_bytes),
        utilization=utilization,
        weights_bytes=weights,
        activations_bytes=step_activation_bytes(local, max_batched_tokens, sequences),
        kv_bytes_per_token=kv,
        sequences_per_chip=share,
        state_bytes_per_sequence=state,
    )


def sequence_state_bytes(w: Workload, system: System, parallelism: Parallelism | None) -> float:
    """One sequence's recurrent state slot on a chip (0 without linear-attention or Mamba
    layers): split over the system's chips, or the busiest chip's heads under a layout."""
    d = w.dtypes
    if parallelism is None:
        return w.model.state_bytes_per_sequence(d.recurrent_state, d.activations) / system.chips
    return shard_model(w.model, parallelism).state_bytes_per_sequence(d.recurrent_state, d.activations)


def sequence_kv_bytes(w: Workload, system: System, parallelism: Parallelism | None, tokens: int) -> float:
    """One sequence's KV cache on a chip at `tokens` tokens (a local layer keeps only its window)
    and its recurrent state slot, if the model has one: split over the system's chips, or the
    busiest chip's layers and KV heads under a layout."""
    if parallelism is None:
        kv = w.model.kv_cache_bytes(tokens, w.dtypes.kv_cache) / system.chips
    else:
        kv = shard_model(w.model, parallelism).kv_cache_bytes(tokens, w.dtypes.kv_cache)
    if w.model.linear_layers or w.model.mamba_layers:
        kv += sequence_state_bytes(w, system, parallelism)
    return kv


def footprint(
    w: Workload, system: System, batch: int | None = None, parallelism: Parallelism | None = None
) -> Footprint:
    """Footprint per chip of the scenario (or of `batch` sequences) at its longest context, with
    the activations of the profile step of an engine configured for that batch and context."""
    s = w.scenario
    batch = s.batch if batch is None else batch
    context = s.prompt_tokens + s.output_tokens
    b = memory_budget(
        w,
        system,
        parallelism,
        max_batched_tokens=min(MAX_BATCHED_TOKENS, batch * context),
        max_num_seqs=min(MAX_NUM_SEQS, batch),
    )
    group = math.ceil(batch * b.sequences_per_chip)
    return Footprint(
        weights_bytes=b.weights_bytes,
        kv_cache_bytes=group * sequence_kv_bytes(w, system, parallelism, context),
        activations_bytes=b.activations_bytes,
        capacity_bytes=b.capacity_bytes,
        utilization=b.utilization,
    )


def largest_batch(w: Workload, system: System, parallelism: Parallelism | None = None) -> int:
    """The largest batch that fits (`footprint`) at the scenario's longest context (0 if none).
    A batch's profile step grows with it, so fitting is monotone in the batch: bisected."""

    def fits(batch: int) -> bool:
        return footprint(w, system, batch, parallelism).fits

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= MAX_BATCH and fits(hi):
        lo, hi = hi, 2 * hi
    hi = min(hi, MAX_BATCH + 1)
    while hi - lo > 1:  # fits(lo), not fits(hi) (or hi past the largest batch archsim takes)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
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
        f"{100 * fp.utilization:.0f}% of capacity {format_bytes(fp.capacity_bytes)} "
        f"({format_bytes(fp.usable_bytes)}); {hint}"
    )
