"""Memory footprint of a workload on a system: weights, KV cache and activations vs capacity."""

from __future__ import annotations

from dataclasses import dataclass

from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
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


def footprint(w: Workload, system: System, batch: int | None = None) -> Footprint:
    """Footprint per chip of the scenario (or of `batch` sequences) at its longest context."""
    s = w.scenario
    batch = s.batch if batch is None else batch
    context = s.prompt_tokens + s.output_tokens
    chips = system.chips
    return Footprint(
        weights_bytes=w.model.params() * w.dtypes.weights.bytes / chips,
        kv_cache_bytes=batch * context * w.model.kv_bytes_per_token(w.dtypes.kv_cache) / chips,
        activations_bytes=activation_bytes(w, batch, s.prompt_tokens),
        capacity_bytes=float(system.chip.hbm.capacity_bytes),
    )


def largest_batch(w: Workload, system: System) -> int:
    """The largest batch whose footprint fits (0 if not even one sequence does)."""
    lo, hi = 0, 1
    while footprint(w, system, hi).fits and hi < 1 << 24:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if footprint(w, system, mid).fits else (lo, mid)
    return lo


def check_fits(w: Workload, system: System) -> Footprint:
    """The footprint, or DoesNotFitError with the numbers and the largest batch that fits."""
    fp = footprint(w, system)
    if fp.fits:
        return fp
    best = largest_batch(w, system)
    hint = (f"the largest batch that fits is {best}" if best > 0 else
            "not even one sequence fits: use a chip with more memory, more chips, or smaller dtypes")
    raise DoesNotFitError(
        f"{w.model.name} with batch {w.scenario.batch} and context "
        f"{w.scenario.prompt_tokens + w.scenario.output_tokens} does not fit on {system.chip.name}: "
        f"weights {format_bytes(fp.weights_bytes)} + KV cache {format_bytes(fp.kv_cache_bytes)} + "
        f"activations {format_bytes(fp.activations_bytes)} = {format_bytes(fp.total_bytes)} > "
        f"capacity {format_bytes(fp.capacity_bytes)}; {hint}"
    )
