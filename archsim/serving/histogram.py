"""Inter-token gaps as a histogram: a serving run has millions of them, and the metrics need only
their mean (kept exactly, as a running sum) and percentiles (from the counts).

Bins are logarithmic, `BINS_PER_DECADE` per factor of ten from `LOW_S` to `HIGH_S`, so a
percentile is within a bin, 0.05% of its value: it is read from the cumulative counts as
np.percentile reads sorted samples (linear between the neighbouring ranks), each bin's samples
spread evenly in log time across the bin, the smallest and largest gap kept exactly.
Gaps outside the range fall in the first or last bin. The serving loop's kernels add to the
same arrays (archsim/serving/kernels.py, `hist_add`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LOW_S = 1e-7
HIGH_S = 1e5
BINS_PER_DECADE = 5000
BINS = round(math.log10(HIGH_S / LOW_S) * BINS_PER_DECADE)
SCALE = BINS_PER_DECADE / math.log(10.0)
LOG_LOW_S = math.log(LOW_S)


class GapHistogram:
    """Counts of gaps (seconds) per log bin; `stats` holds their count, sum, minimum and maximum."""

    def __init__(self):
        self.counts = np.zeros(BINS, dtype=np.int64)
        self.stats = np.array([0.0, 0.0, math.inf, -math.inf])

    @property
    def count(self) -> int:
        return int(self.stats[0])

    @property
    def sum_s(self) -> float:
        return float(self.stats[1])

    @property
    def min_s(self) -> float:
        return float(self.stats[2])

    @property
    def max_s(self) -> float:
        return float(self.stats[3])

    def add(self, gap_s: float, weight: int = 1) -> None:
        """`weight` gaps of `gap_s` seconds."""
        if weight <= 0:
            return
        b = int((math.log(gap_s) - LOG_LOW_S) * SCALE) if gap_s > LOW_S else 0
        self.counts[min(b, BINS - 1)] += weight
        st = self.stats
        st[0] += weight
        st[1] += gap_s * weight
        st[2] = min(st[2], gap_s)
        st[3] = max(st[3], gap_s)

    def add_many(self, gaps_s: np.ndarray, weight: int | np.ndarray = 1) -> None:
        """Each of `gaps_s`, `weight` times (a number, or one per gap)."""
        g = np.asarray(gaps_s, dtype=np.float64)
        w = np.broadcast_to(np.asarray(weight, dtype=np.int64), g.shape)
        keep = w > 0
        if not keep.any():
            return
        g, w = g[keep], w[keep]
        idx = ((np.log(np.maximum(g, LOW_S)) - LOG_LOW_S) * SCALE).astype(np.int64)
        self.counts += np.bincount(np.clip(idx, 0, BINS - 1), weights=w, minlength=BINS).astype(np.int64)
        st = self.stats
        st[0] += int(w.sum())
        st[1] += float(np.sum(g * w))  # (not np.dot: see serving/static.py)
        st[2] = min(st[2], float(g.min()))
        st[3] = max(st[3], float(g.max()))

    def merge(self, other: GapHistogram) -> None:
        self.counts += other.counts
        st, o = self.stats, other.stats
        st[0] += o[0]
        st[1] += o[1]
        st[2] = min(st[2], o[2])
        st[3] = max(st[3], o[3])

    @property
    def mean_s(self) -> float:
        return self.sum_s / self.count if self.count else float("nan")

    def _value(self, rank: int, cum: np.ndarray) -> float:
        """The gap of rank `rank` (0-based) in sorted order, spread within its bin."""
        if rank <= 0:
            return self.min_s
        if rank >= self.count - 1:
            return self.max_s
        b = int(np.searchsorted(cum, rank, "right"))
        before = int(cum[b - 1]) if b else 0
        frac = (rank - before + 0.5) / int(self.counts[b])
        v = math.exp(LOG_LOW_S + (b + frac) / SCALE)
        return min(max(v, self.min_s), self.max_s)

    def percentiles(self, qs: Sequence[float]) -> list[float]:
        if not self.count:
            return [float("nan")] * len(qs)
        cum = np.cumsum(self.counts)
        out = []
        for q in qs:
            h = (self.count - 1) * q / 100.0
            lo, hi = math.floor(h), math.ceil(h)
            a, b = self._value(lo, cum), self._value(hi, cum)
            out.append(a + (b - a) * (h - lo))
        return out

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """(bin centres in seconds, counts) of the bins holding gaps (for CDF plots)."""
        nz = np.flatnonzero(self.counts)
        centres = np.exp(LOG_LOW_S + (nz + 0.5) / SCALE)
        return np.clip(centres, self.min_s, self.max_s), self.counts[nz]
