"""One serving instance: what it serves with (`Instance`), what it records as it runs (`Books`:
per-request clocks, running totals, the timeline) and what it returns (`InstanceResult`).
Seconds and tokens.
"""

from __future__ import annotations

from array import array
from dataclasses import KW_ONLY, dataclass, field

import numpy as np

from archsim.hardware.chip import HostLink
from archsim.runner.steps import StepModel
from archsim.serving.histogram import GapHistogram
from archsim.serving.host import NO_HOST, HostProfile
from archsim.serving.scheduler import SchedulerConfig
from archsim.serving.speculative import Speculation
from archsim.serving.state import InstanceState


@dataclass(frozen=True)
class Instance:
    """An instance's step model, scheduler, KV pool (blocks, bytes of a block on each chip), host
    profile, host link, swap space and host tier (blocks), and speculation with its draft's
    step model."""

    timer: StepModel
    cfg: SchedulerConfig
    pool_blocks: int
    block_bytes: float = 0.0
    host: HostProfile = NO_HOST
    host_link: HostLink | None = None
    swap_blocks: int = 0
    offload_blocks: int = 0
    spec: Speculation | None = None
    draft: StepModel | None = None

    @property
    def reserves(self) -> bool:
        return self.cfg.policy.reserves

    def transfer_s(self, nbytes: float) -> float:
        """Host-link time of `nbytes` bytes on each chip: latency + bytes / bandwidth (0 when
        nothing moves)."""
        if nbytes <= 0 or self.host_link is None:
            return 0.0
        return self.host_link.latency_s + nbytes / self.host_link.bandwidth_bytes_per_s


@dataclass(frozen=True, eq=False)
class Timeline:
    """Samples of the instance over time, one per iteration (a step or a run of decode steps,
    or an idle gap): span, steps, sequences and tokens per step, KV blocks in use after it,
    running and waiting requests, the integral of requests in system over the span (s), and the
    GPU's share of the span (the rest is host time the GPU waits through)."""

    start_s: np.ndarray
    end_s: np.ndarray
    steps: np.ndarray
    batch: np.ndarray
    tokens: np.ndarray
    kv_blocks: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    in_system_s: np.ndarray
    gpu_s: np.ndarray


@dataclass(frozen=True, eq=False, kw_only=True)
class InstanceResult:
    """Per-request times (NaN where not reached here), counters and the timeline of one instance."""

    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    generated: np.ndarray
    preemptions: np.ndarray
    itl: GapHistogram  # gaps between a request's tokens (one per verify under speculation)
    timeline: Timeline
    steps: int
    computed_tokens: int  # tokens whose KV was computed, recomputation included
    recomputed_tokens: int
    cached_tokens: int  # prompt tokens found in the device's prefix cache
    offload_hit_tokens: int  # and in the host tier, fetched back
    pool_blocks: int
    busy_s: float  # time in steps
    gpu_s: float  # of which the GPU's (host-link transfers and the draft's proposals included)
    token_s: float  # over steps, step time x tokens emitted
    host_token_s: float  # of which host time exposed
    swaps: int  # preemptions by swap (each swapped back in)
    verifies: int  # speculative verifies (one sequence's)
    verify_tokens: int  # tokens they emitted
    arrival_s: np.ndarray | None = None  # when each arrived, where the run decided it (sessions' later turns)


@dataclass(eq=False)
class Books:
    """Per-request clocks (float64 arrays, NaN until reached) and the running totals of one
    instance."""

    first_scheduled: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    last_token: np.ndarray
    _: KW_ONLY
    itl: GapHistogram = field(default_factory=GapHistogram)
    rows: array = field(default_factory=lambda: array("d"))  # 10 values an iteration, flat
    steps: int = 0
    computed: int = 0
    busy_s: float = 0.0
    gpu_s: float = 0.0
    token_s: float = 0.0
    host_token_s: float = 0.0
    verifies: int = 0
    verify_tokens: int = 0

    def sample(
        self, start: float, end: float, steps: int, batch: int, tokens: int, s: InstanceState, done: int, gpu_s: float
    ) -> None:
        kv = s.pool_blocks - s.free
        self.rows.extend((start, end, steps, batch, tokens, kv, len(s.running), len(s.waiting), done, gpu_s))

    def stepped(self, wall_s: float, gpu_s: float, emitted: int, steps: int = 1) -> None:
        """Book `steps` steps taking `wall_s` in all, `gpu_s` of it on the GPU, each emitting
        `emitted` tokens."""
        self.busy_s += wall_s
        self.gpu_s += gpu_s
        self.token_s += wall_s * emitted
        self.host_token_s += (wall_s - gpu_s) * emitted
        self.steps += steps

    def timeline(self, arrival_s: np.ndarray) -> Timeline:
        start, end, steps, batch, tokens, kv, running, waiting, done, gpu = np.frombuffer(self.rows).reshape(-1, 10).T
        prefix = np.concatenate([[0.0], np.cumsum(arrival_s)])
        i0, i1 = np.searchsorted(arrival_s, start, "right"), np.searchsorted(arrival_s, end, "right")
        area = (i0 - done) * (end - start) + (i1 - i0) * end - (prefix[i1] - prefix[i0])

        def ints(c: np.ndarray) -> np.ndarray:
            return c.astype(np.int64)

        return Timeline(
            start.copy(), end.copy(), ints(steps), ints(batch), ints(tokens), ints(kv), ints(running), ints(waiting),
            area, gpu.copy(),
        )  # fmt: skip

    def result(self, s: InstanceState, arrival_s: np.ndarray, arrived_s: np.ndarray | None = None) -> InstanceResult:
        return InstanceResult(
            first_scheduled_s=self.first_scheduled,
            first_token_s=self.first_token,
            finish_s=self.finish,
            generated=s.generated,
            preemptions=s.preemptions,
            itl=self.itl,
            timeline=self.timeline(arrival_s),
            steps=self.steps,
            computed_tokens=self.computed,
            recomputed_tokens=s.recomputed_tokens,
            cached_tokens=s.cached_tokens,
            offload_hit_tokens=s.offload_hit_tokens,
            pool_blocks=s.pool_blocks,
            busy_s=self.busy_s,
            gpu_s=self.gpu_s,
            token_s=self.token_s,
            host_token_s=self.host_token_s,
            swaps=s.swaps_out,
            verifies=self.verifies,
            verify_tokens=self.verify_tokens,
            arrival_s=arrived_s,
        )
