"""The highest arrival rate a setup serves within its SLOs, by bisection (as DistServe defines it:
the largest rate at which at least `attainment` of the requests meet every SLO).

Requests at rate r come from `requests_at(r)`: the same arrivals rescaled (a generated stream
with common random numbers, or a trace replayed faster or slower), so attainment falls with the
rate and the search brackets the capacity, then halves the bracket geometrically until it is
within `tolerance` (relative). Each probe records the attainment of every SLO alone too, so the
search says where each breaks: the highest rate probed at which it alone held for `attainment` of
the requests, and the lowest at which it did not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from archsim.serving.metrics import ServeMetrics, Slo
from archsim.serving.requests import RequestSet
from archsim.serving.setup import ServeSetup
from archsim.serving.simulate import serve

MAX_DOUBLINGS = 20
DEFAULT_TOLERANCE = 0.02


@dataclass(frozen=True)
class Probe:
    rate_per_s: float
    attainment: float
    ttft_attainment: float | None = None  # None: no TTFT SLO
    tpot_attainment: float | None = None


@dataclass(frozen=True)
class SloBreak:
    """Where one SLO breaks: the highest rate probed at which it alone held, and the lowest at
    which it did not (None: no probe)."""

    name: str
    holds_to_per_s: float | None
    breaks_at_per_s: float | None


@dataclass(frozen=True)
class Capacity:
    rate_per_s: float  # highest rate found meeting the attainment (0 if none)
    attainment: float  # attained at that rate
    target_attainment: float
    metrics: ServeMetrics | None  # the run at that rate
    probes: tuple[Probe, ...]

    def breaks(self) -> list[SloBreak]:
        """Each SLO's break point among the probes."""
        out = []
        for name, key in (("TTFT", "ttft_attainment"), ("TPOT", "tpot_attainment")):
            seen = [(p.rate_per_s, getattr(p, key)) for p in self.probes if getattr(p, key) is not None]
            if not seen:
                continue
            held = [r for r, a in seen if a >= self.target_attainment]
            failed = [r for r, a in seen if a < self.target_attainment]
            out.append(SloBreak(name, max(held) if held else None, min(failed) if failed else None))
        return out


def find_capacity(
    requests_at: Callable[[float], RequestSet],
    setup: ServeSetup,
    slo: Slo,
    start_rate_per_s: float,
    attainment: float = 0.9,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Callable[[Probe], None] | None = None,
) -> Capacity:
    if not slo.any:
        raise ValueError("a capacity search needs at least one SLO (--slo-ttft or --slo-tpot)")
    probes: list[Probe] = []
    runs: dict[float, ServeMetrics] = {}

    def ok(rate: float) -> bool:
        m = serve(requests_at(rate), setup).metrics(slo)
        runs[rate] = m
        probe = Probe(rate, m.slo_attainment, m.ttft_attainment, m.tpot_attainment)
        probes.append(probe)
        if progress:
            progress(probe)
        return m.slo_attainment >= attainment

    lo = hi = None
    rate = start_rate_per_s
    for _ in range(MAX_DOUBLINGS):
        if ok(rate):
            lo = rate
            if hi is not None:
                break
            rate *= 2.0
        else:
            hi = rate
            if lo is not None:
                break
            rate /= 2.0
    if lo is None:
        return Capacity(0.0, probes[-1].attainment, attainment, None, tuple(probes))
    if hi is None:  # never failed: report the highest rate tried
        return Capacity(lo, runs[lo].slo_attainment, attainment, runs[lo], tuple(probes))
    while hi / lo - 1.0 > tolerance:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return Capacity(lo, runs[lo].slo_attainment, attainment, runs[lo], tuple(probes))
