"""What a serving run returns: each instance's run (`InstanceRun`) and the requests' times
(`ServeResult`), judged against SLOs by `ServeResult.metrics`. Seconds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archsim.serving.histogram import GapHistogram
from archsim.serving.instance import InstanceResult
from archsim.serving.kvpool import KvPool
from archsim.serving.metrics import RequestTimes, ServeMetrics, Slo, request_metrics, run_totals
from archsim.serving.session_metrics import SessionMetrics, SessionRecord, session_metrics


@dataclass(frozen=True, eq=False)
class InstanceRun:
    role: str  # "colocated", "prefill" or "decode"
    index: int
    chip_name: str
    pool: KvPool
    result: InstanceResult


@dataclass(frozen=True, eq=False)
class ServeResult:
    times: RequestTimes  # of the served requests, in arrival order
    served: np.ndarray  # their indices in the input
    rejected: int
    preemptions: np.ndarray  # per served request
    itl: GapHistogram
    instances: tuple[InstanceRun, ...]
    kv_transfer_s: np.ndarray | None = None  # disaggregated: (start, end) per served request
    prompt_tokens: int = 0  # of the served requests, for the prefix cache's hit rate
    sessions: SessionRecord | None = None  # the served turns' sessions, when the requests are turns

    def metrics(self, slo: Slo | None = None) -> ServeMetrics:
        slo = slo if slo is not None else Slo()
        colocated = all(i.role == "colocated" for i in self.instances)
        area = sum(float(i.result.timeline.in_system_s.sum()) for i in self.instances) if colocated else None
        totals = run_totals([i.result for i in self.instances], self.prompt_tokens)
        pre = int(self.preemptions.sum())
        return request_metrics(self.times, self.itl, slo, self.rejected, pre, area, totals, len(self.instances))

    def session_metrics(self) -> SessionMetrics | None:
        """TTFT per turn, session durations and context reuse (None unless the requests are
        sessions' turns)."""
        if self.sessions is None:
            return None
        reused = sum(i.result.cached_tokens + i.result.offload_hit_tokens for i in self.instances)
        return session_metrics(self.sessions, self.times, reused)
