"""Serve a set of requests on one or more instances, co-located or disaggregated.

Co-located: `instances` identical replicas, requests dealt round-robin in arrival order, each
replica prefilling and decoding its own. Disaggregated (DistServe, Splitwise): prefill instances
compute the prompt and the first token, then the request's KV cache (prompt tokens x KV bytes
per token) crosses a link to a decode instance, which decodes the rest. The transfer takes
link latency + bytes / bandwidth, the bandwidth being all links of a chip in one direction
(the lesser of the two chips'), each chip sending its share of the KV; transfers from one
prefill instance queue on its link. Requests are dealt round-robin on both sides.

An instance is one system: a chip, or several chips running the model tensor-parallel (the
busiest chip's step plus its all-reduces, each chip holding its share of the weights and KV
cache). A request that can never fit an instance's KV pool (prompt + output - 1 tokens, or the
prompt on a prefill instance) is refused before the run and counted as missing its SLOs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism, ParallelismError, check_parallelism
from archsim.hardware import System
from archsim.hardware.collectives import Collective, collective_time, system_fabric
from archsim.runner.generation import check_parallel_system
from archsim.runner.steps import DEFAULT_RESOLUTION, step_model
from archsim.serving.engine import InstanceResult, simulate_instance
from archsim.serving.kvpool import KvPool, size_pool
from archsim.serving.metrics import RequestTimes, ServeMetrics, Slo, request_metrics
from archsim.serving.requests import RequestSet
from archsim.serving.scheduler import Policy, SchedulerConfig


class ServeSetupError(ValueError):
    """A setup the serving simulation cannot model."""


class LinkMissingError(ServeSetupError):
    """Disaggregated serving on a system without an interconnect section."""


@dataclass(frozen=True)
class Disaggregation:
    prefill_system: System
    decode_system: System
    prefill_instances: int = 1
    decode_instances: int = 1


@dataclass(frozen=True)
class ServeSetup:
    workload: Workload
    system: System
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    gpu_memory_utilization: float = 0.9
    kv_blocks: int | None = None  # override the pool size (blocks per instance)
    instances: int = 1
    resolution: int = DEFAULT_RESOLUTION
    disaggregation: Disaggregation | None = None


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
    itl_s: np.ndarray
    itl_weight: np.ndarray
    instances: tuple[InstanceRun, ...]
    kv_transfer_s: np.ndarray | None = None  # disaggregated: (start, end) per served request

    def metrics(self, slo: Slo | None = None) -> ServeMetrics:
        slo = slo if slo is not None else Slo()
        colocated = all(i.role == "colocated" for i in self.instances)
        area = sum(float(i.result.timeline.in_system_s.sum()) for i in self.instances) if colocated else None
        return request_metrics(
            self.times, self.itl_s, self.itl_weight, slo, self.rejected, int(self.preemptions.sum()), area
        )


def pool_for(setup: ServeSetup, w: Workload, system: System) -> KvPool:
    if system.chips > 1:
        try:
            check_parallel_system(system, par := Parallelism(tp=system.chips))
            check_parallelism(w.model, par)
        except ParallelismError as err:
            raise ServeSetupError(
                f"an instance of {system.chips} chips runs {w.model.name} tensor-parallel over all of them: {err}"
            ) from None
    s = setup.scheduler
    return size_pool(
        w, system, s.block_size, setup.gpu_memory_utilization, s.max_batched_tokens, s.max_num_seqs, setup.kv_blocks
    )


def _run_instance(reqs: RequestSet, setup: ServeSetup, system: System, pool: KvPool, **kw) -> InstanceResult:
    timer = step_model(setup.workload, system, setup.resolution, Parallelism(tp=system.chips))
    return simulate_instance(reqs, timer, setup.scheduler, pool.blocks, **kw)


def serve(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    """Simulate serving `reqs`; DoesNotFitError if the model leaves no room for a KV cache."""
    if setup.disaggregation is not None:
        if setup.scheduler.policy is Policy.STATIC:
            raise ValueError("static batching cannot be disaggregated")
        return _serve_disaggregated(reqs, setup)
    pool = pool_for(setup, setup.workload, setup.system)
    need = reqs.prompt_tokens + reqs.output_tokens - 1
    served = _fitting(need <= pool.tokens, need, pool)
    n = len(served)
    fs, ft, fin = (np.full(n, np.nan) for _ in range(3))
    pre = np.zeros(n, dtype=np.int64)
    runs, itl, itl_w = [], [], []
    for i in range(setup.instances):
        mine = np.arange(i, n, setup.instances)
        if len(mine) == 0:
            continue
        r = _run_instance(reqs.subset(served[mine]), setup, setup.system, pool)
        fs[mine], ft[mine], fin[mine], pre[mine] = r.first_scheduled_s, r.first_token_s, r.finish_s, r.preemptions
        runs.append(InstanceRun("colocated", i, setup.system.chip.name, pool, r))
        itl.append(r.itl_s)
        itl_w.append(r.itl_weight)
    times = RequestTimes(reqs.arrival_s[served], fs, ft, fin, reqs.prompt_tokens[served], reqs.output_tokens[served])
    return ServeResult(times, served, len(reqs) - n, pre, _cat(itl), _cat(itl_w, np.int64), tuple(runs))


def kv_transfer_s(w: Workload, sender: System, receiver: System, prompt_tokens: np.ndarray) -> np.ndarray:
    """Time to send each request's KV cache (prompt tokens x KV bytes per token) from a prefill to
    a decode instance: a point-to-point send in the collectives model (archsim.hardware.collectives),
    each chip sending its share, at the pace of the slower side's links."""
    for s in (sender, receiver):
        if s.interconnect is None:
            raise LinkMissingError(
                f"{s.chip.name} has no interconnect section: disaggregated serving needs one to send the KV cache"
            )
    per_chip = prompt_tokens * w.model.kv_bytes_per_token(w.dtypes.kv_cache) / min(sender.chips, receiver.chips)

    fabrics = [system_fabric(s) for s in (sender, receiver)]

    def send_s(nbytes: float) -> float:
        return max(collective_time(f, Collective.SEND, 2, nbytes).time_s for f in fabrics)

    sizes, inverse = np.unique(per_chip, return_inverse=True)
    return np.array([send_s(float(b)) for b in sizes])[inverse]


def _serve_disaggregated(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    d, w = setup.disaggregation, setup.workload
    assert d is not None
    p_pool, d_pool = pool_for(setup, w, d.prefill_system), pool_for(setup, w, d.decode_system)
    need = reqs.prompt_tokens + reqs.output_tokens - 1
    served = _fitting(
        (reqs.prompt_tokens <= p_pool.tokens) & (need <= d_pool.tokens),
        need,
        min(p_pool, d_pool, key=lambda p: p.tokens),
    )
    sub = reqs.subset(served)
    n = len(served)
    fs, ft, fin = (np.full(n, np.nan) for _ in range(3))
    pre = np.zeros(n, dtype=np.int64)
    transfer = np.full((n, 2), np.nan)
    duration = kv_transfer_s(w, d.prefill_system, d.decode_system, sub.prompt_tokens)
    runs, itl, itl_w = [], [], []
    for i in range(d.prefill_instances):
        mine = np.arange(i, n, d.prefill_instances)
        if len(mine) == 0:
            continue
        r = _run_instance(sub.subset(mine), setup, d.prefill_system, p_pool, target=np.ones(len(mine), dtype=np.int64))
        fs[mine], ft[mine], pre[mine] = r.first_scheduled_s, r.first_token_s, r.preemptions
        runs.append(InstanceRun("prefill", i, d.prefill_system.chip.name, p_pool, r))
        link_free = -np.inf
        for j in np.argsort(ft[mine], kind="stable").tolist():  # one link per prefill instance, FIFO
            q = mine[j]
            start = max(ft[q], link_free)
            transfer[q] = (start, start + duration[q])
            link_free = start + duration[q]
    single = sub.output_tokens == 1
    fin[single] = ft[single]
    decoding = np.flatnonzero(~single)
    decoding = decoding[np.argsort(transfer[decoding, 1], kind="stable")]
    for i in range(d.decode_instances):
        mine = decoding[i :: d.decode_instances]
        if len(mine) == 0:
            continue
        arrived = RequestSet(transfer[mine, 1], sub.prompt_tokens[mine], sub.output_tokens[mine], sub.source)
        r = _run_instance(
            arrived,
            setup,
            d.decode_system,
            d_pool,
            computed0=sub.prompt_tokens[mine],
            generated0=np.ones(len(mine), dtype=np.int64),
            last_token0_s=ft[mine],
        )
        fin[mine] = r.finish_s
        pre[mine] += r.preemptions
        runs.append(InstanceRun("decode", i, d.decode_system.chip.name, d_pool, r))
        itl.append(r.itl_s)
        itl_w.append(r.itl_weight)
    times = RequestTimes(sub.arrival_s, fs, ft, fin, sub.prompt_tokens, sub.output_tokens)
    return ServeResult(times, served, len(reqs) - n, pre, _cat(itl), _cat(itl_w, np.int64), tuple(runs), transfer)


def _fitting(fits: np.ndarray, need: np.ndarray, pool: KvPool) -> np.ndarray:
    """Indices of the requests that fit; DoesNotFitError when none does."""
    if len(fits) and not fits.any():
        raise DoesNotFitError(
            f"none of the {len(fits):,} requests fits a KV cache of {pool.blocks:,} blocks "
            f"({pool.tokens:,} tokens): the smallest needs {int(need.min()):,} tokens"
        )
    return np.flatnonzero(fits)


def _cat(parts: list[np.ndarray], dtype=np.float64) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
