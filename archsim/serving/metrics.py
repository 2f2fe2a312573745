"""Serving metrics as vLLM's benchmark (benchmarks/benchmark_serving.py) defines them.

Per request: TTFT = first token - arrival; TPOT = (end-to-end - TTFT) / (output tokens - 1)
(only requests with more than one output token); end-to-end = last token - arrival; queueing
delay = first scheduled - arrival. ITL: every gap between consecutive tokens of a request (one
per verify under speculative decoding, whose tokens stream together), kept as a histogram
(archsim/serving/histogram.py). Each is summarised by its mean and the 50th, 90th and 99th
percentiles (linear interpolation, numpy's default). Over the run (duration = last finish -
first arrival): requests/s, output tokens/s, and goodput: requests/s meeting every SLO given
(TTFT <= --slo-ttft and TPOT <= --slo-tpot; with none, every completed request counts), and the
share meeting each SLO alone. Requests refused because they can never fit count against SLO
attainment.

From the instances' own books: utilisation (the share of the run the instances spent in steps:
near 1 the queue grows with any more load, and latencies there swing with small changes of
rate), the host's share of the time between tokens (archsim/serving/host.py), the prefix
cache's hit rate (prompt tokens found cached over all prompt tokens served), swaps, and the
tokens a speculative verify emitted on average.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from archsim.serving.histogram import GapHistogram

if TYPE_CHECKING:
    from archsim.serving.instance import InstanceResult

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Stats:
    """Mean and percentiles of one latency, in seconds (NaN when there are no samples)."""

    mean: float
    p50: float
    p90: float
    p99: float

    def as_dict(self) -> dict:
        return asdict(self)


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs: Sequence[float] = PERCENTILES) -> list[float]:
    """np.percentile of `values` each repeated `weights` times, without building the repeats."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    total = int(cum[-1])
    out = []
    for q in qs:
        h = (total - 1) * q / 100.0
        lo, hi = int(np.floor(h)), int(np.ceil(h))
        a = v[np.searchsorted(cum, lo + 1)]
        b = v[np.searchsorted(cum, hi + 1)]
        out.append(float(a + (b - a) * (h - lo)))
    return out


def stats(values: np.ndarray, weights: np.ndarray | None = None) -> Stats:
    values = np.asarray(values, dtype=np.float64)
    if weights is None:
        weights = np.ones(len(values), dtype=np.int64)
    keep = np.isfinite(values) & (weights > 0)
    values, weights = values[keep], weights[keep]
    if len(values) == 0:
        return Stats(*(float("nan"),) * 4)
    mean = float(np.sum(values * weights) / np.sum(weights))
    return Stats(mean, *weighted_percentiles(values, weights))


@dataclass(frozen=True)
class Slo:
    """Latency objectives in seconds; None: not required."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    @property
    def any(self) -> bool:
        return self.ttft_s is not None or self.tpot_s is not None


@dataclass(frozen=True, eq=False)
class RequestTimes:
    """Per-request timestamps (seconds) and lengths of the requests that were served."""

    arrival_s: np.ndarray
    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> np.ndarray:
        return self.finish_s - self.arrival_s

    @property
    def queue_s(self) -> np.ndarray:
        return self.first_scheduled_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(e2e - TTFT) / (output - 1); NaN for single-token outputs."""
        out = self.output_tokens.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(out > 1, (self.finish_s - self.first_token_s) / (out - 1), np.nan)

    def meets(self, slo: Slo) -> np.ndarray:
        ok = np.ones(len(self.arrival_s), dtype=bool)
        if slo.ttft_s is not None:
            ok &= self.ttft_s <= slo.ttft_s
        if slo.tpot_s is not None:
            tpot = self.tpot_s
            ok &= np.isnan(tpot) | (tpot <= slo.tpot_s)
        return ok


@dataclass(frozen=True)
class RunTotals:
    """What the instances' books add up to."""

    host_share: float  # of the time between tokens, the host's exposed part
    prefix_hit_rate: float  # prompt tokens found in the prefix cache (device or host tier) / prompt tokens
    cached_tokens: int
    offload_hit_tokens: int
    swaps: int
    tokens_per_verify: float | None  # None without speculative decoding
    busy_s: float  # summed over instances
    gpu_s: float


def run_totals(results: Sequence[InstanceResult], prompt_tokens: int) -> RunTotals:
    """The totals of instance results (archsim.serving.instance.InstanceResult)."""
    busy = sum(r.busy_s for r in results)
    gpu = sum(r.gpu_s for r in results)
    token_s = sum(r.token_s for r in results)
    cached = sum(r.cached_tokens for r in results)
    offload = sum(r.offload_hit_tokens for r in results)
    verifies = sum(r.verifies for r in results)
    return RunTotals(
        host_share=sum(r.host_token_s for r in results) / token_s if token_s > 0 else 0.0,
        prefix_hit_rate=(cached + offload) / prompt_tokens if prompt_tokens else 0.0,
        cached_tokens=cached,
        offload_hit_tokens=offload,
        swaps=sum(r.swaps for r in results),
        tokens_per_verify=sum(r.verify_tokens for r in results) / verifies if verifies else None,
        busy_s=busy,
        gpu_s=gpu,
    )


@dataclass(frozen=True, kw_only=True)
class ServeMetrics:
    requests: int  # served to completion
    rejected: int  # never fit the KV pool
    duration_s: float
    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats
    queue_s: Stats
    requests_per_s: float
    throughput_tokens_per_s: float  # output tokens
    input_tokens_per_s: float
    goodput_requests_per_s: float
    slo_attainment: float  # fraction of all requests (rejected included) meeting the SLOs
    output_tokens: int
    preemptions: int
    mean_in_system: float  # time average of requests in system, from the engine's own state
    littles_law_in_system: float  # arrival rate x mean end-to-end latency
    ttft_attainment: float | None = None  # share of all requests meeting the TTFT SLO (None: none set)
    tpot_attainment: float | None = None
    utilisation: float = float("nan")  # share of the run the instances spent in steps
    gpu_utilisation: float = float("nan")  # share the GPU was busy
    host_share: float = 0.0  # of the time between tokens, the host's
    prefix_hit_rate: float = 0.0
    cached_tokens: int = 0  # prompt tokens found in the device's prefix cache
    offload_hit_tokens: int = 0  # and fetched back from the host tier
    swaps: int = 0
    tokens_per_verify: float | None = None  # None without speculative decoding

    def as_dict(self) -> dict:
        d = asdict(self)
        return d


def request_metrics(
    t: RequestTimes,
    itl: GapHistogram,
    slo: Slo,
    rejected: int,
    preemptions: int,
    in_system_s: float | None,
    totals: RunTotals | None = None,
    instances: int = 1,
) -> ServeMetrics:
    """The metrics of one run from its per-request times, inter-token gaps and the instances'
    totals (over `instances` instances)."""
    n = len(t.arrival_s)
    start = float(np.min(t.arrival_s)) if n else 0.0
    duration = float(np.max(t.finish_s)) - start if n else 0.0
    per_s = 1.0 / duration if duration > 0 else float("nan")
    meets = t.meets(slo)
    e2e = t.e2e_s
    everyone = n + rejected

    def share(ok: np.ndarray | None) -> float | None:
        if ok is None:
            return None
        return float(ok.sum()) / everyone if everyone else float("nan")

    ttft_ok = t.meets(Slo(ttft_s=slo.ttft_s)) if slo.ttft_s is not None else None
    tpot_ok = t.meets(Slo(tpot_s=slo.tpot_s)) if slo.tpot_s is not None else None
    metrics = ServeMetrics(
        requests=n,
        rejected=rejected,
        duration_s=duration,
        ttft_s=stats(t.ttft_s),
        tpot_s=stats(t.tpot_s),
        itl_s=Stats(itl.mean_s, *itl.percentiles(PERCENTILES)) if itl.count else Stats(*(float("nan"),) * 4),
        e2e_s=stats(e2e),
        queue_s=stats(t.queue_s),
        requests_per_s=n * per_s,
        throughput_tokens_per_s=float(t.output_tokens.sum()) * per_s,
        input_tokens_per_s=float(t.prompt_tokens.sum()) * per_s,
        goodput_requests_per_s=float(meets.sum()) * per_s,
        slo_attainment=float(meets.sum()) / (n + rejected) if n + rejected else float("nan"),
        output_tokens=int(t.output_tokens.sum()),
        preemptions=preemptions,
        mean_in_system=in_system_s * per_s if in_system_s is not None else float("nan"),
        littles_law_in_system=n * per_s * float(np.mean(e2e)) if n else float("nan"),
        ttft_attainment=share(ttft_ok),
        tpot_attainment=share(tpot_ok),
    )
    if totals is None:
        return metrics
    span = duration * instances
    # busy time is summed step by step, so it can pass the span by a rounding error
    return replace(
        metrics,
        utilisation=min(1.0, totals.busy_s / span) if span > 0 else float("nan"),
        gpu_utilisation=min(1.0, totals.gpu_s / span) if span > 0 else float("nan"),
        host_share=totals.host_share,
        prefix_hit_rate=totals.prefix_hit_rate,
        cached_tokens=totals.cached_tokens,
        offload_hit_tokens=totals.offload_hit_tokens,
        swaps=totals.swaps,
        tokens_per_verify=totals.tokens_per_verify,
    )
