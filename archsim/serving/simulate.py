"""Serve a set of requests on one or more instances, co-located or disaggregated.

An instance runs the model on a layout of the system's chips (`parallelism`; by default tensor
parallel over all of them): the busiest chip's step and collectives, each chip holding its share
of the weights and KV cache (archsim/runner/steps.py, archsim/serving/kvpool.py). Under expert
parallelism EP=e an instance is e data-parallel ranks, each scheduling its own share of the
requests with its own KV pool, the routed experts spread over all (the ranks are taken as
balanced and in step). Co-located: `instances` identical replicas, requests dealt round-robin in
arrival order; disaggregated prefill and decode instances: archsim/serving/disaggregated.py.

A request is refused before the run, and counted as missing its SLOs, when it can never fit: it
is longer than `max_model_len` (default: the longest request), or its KV (prompt + output - 1
tokens, or, under a reserving policy, prompt + max_tokens - 1) exceeds an instance's pool.
A request stating no max_tokens may generate what max_model_len leaves after its prompt (or
`max_tokens` when the setup gives one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from archsim.engine_defaults import GPU_MEMORY_UTILIZATION
from archsim.errors import DoesNotFitError
from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism, ParallelismError, check_parallelism
from archsim.hardware import System
from archsim.runner.generation import check_parallel_system
from archsim.runner.steps import DEFAULT_RESOLUTION, step_model
from archsim.serving.engine import simulate_instance
from archsim.serving.histogram import GapHistogram
from archsim.serving.host import NO_HOST, HostProfile
from archsim.serving.instance import Instance, InstanceResult
from archsim.serving.kvpool import KvPool, size_pool
from archsim.serving.metrics import RequestTimes, ServeMetrics, Slo, request_metrics, run_totals
from archsim.serving.requests import RequestSet
from archsim.serving.scheduler import Policy, Preemption, SchedulerConfig
from archsim.serving.speculative import Speculation, draft_memory_bytes

SWAP_SPACE_BYTES = 4 * 2**30  # vLLM's default --swap-space: 4 GiB of host memory per GPU


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
    """How requests are served. `host` defaults to the bare GPU step here (the command line and
    the API default to the `vllm` profile)."""

    workload: Workload
    system: System
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    kv_blocks: int | None = None  # override the pool size (blocks per instance)
    instances: int = 1
    resolution: int = DEFAULT_RESOLUTION
    disaggregation: Disaggregation | None = None
    parallelism: Parallelism | None = None  # None: tensor parallel over all the system's chips
    host: HostProfile = NO_HOST
    max_model_len: int | None = None  # None: the longest request's prompt and output
    max_tokens: int | None = None  # the limit of a request that states none
    swap_space_bytes: float = SWAP_SPACE_BYTES  # per chip, for swap preemption
    kv_offload_bytes: float = 0.0  # per chip: host tier for the prefix cache's evicted blocks
    speculation: Speculation | None = None


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

    def metrics(self, slo: Slo | None = None) -> ServeMetrics:
        slo = slo if slo is not None else Slo()
        colocated = all(i.role == "colocated" for i in self.instances)
        area = sum(float(i.result.timeline.in_system_s.sum()) for i in self.instances) if colocated else None
        totals = run_totals([i.result for i in self.instances], self.prompt_tokens)
        pre = int(self.preemptions.sum())
        return request_metrics(self.times, self.itl, slo, self.rejected, pre, area, totals, len(self.instances))


def layout(setup: ServeSetup, w: Workload, system: System) -> Parallelism:
    """The instance's layout on `system` (by default tensor parallel over all its chips), checked
    against the model and the chips."""
    par = setup.parallelism or Parallelism(tp=system.chips)
    try:
        if par.chips > 1:
            check_parallel_system(system, par)
        check_parallelism(w.model, par)
    except ParallelismError as err:
        if setup.parallelism is None:
            what = f"an instance of {system.chips} chips runs {w.model.name} tensor-parallel over all of them"
            raise ServeSetupError(f"{what}: {err}") from None
        raise ServeSetupError(str(err)) from None
    return par


def pool_for(setup: ServeSetup, w: Workload, system: System) -> KvPool:
    par = layout(setup, w, system)
    s, extra = setup.scheduler, (0.0, 0.0)
    if setup.speculation is not None:
        extra = draft_memory_bytes(setup.speculation, par.tp * par.pp)
    return size_pool(
        w,
        system,
        s.block_size,
        setup.gpu_memory_utilization,
        s.max_batched_tokens,
        s.max_num_seqs,
        setup.kv_blocks,
        None if par.is_single and system.chips == 1 else par,
        *extra,
    )


def instance_for(setup: ServeSetup, system: System, pool: KvPool) -> Instance:
    """What one instance (one rank under expert parallelism) of `setup` on `system` serves with."""
    par, cfg = layout(setup, setup.workload, system), setup.scheduler
    needs_link = (cfg.preemption is Preemption.SWAP and cfg.policy.paged and not cfg.policy.reserves) or (
        setup.kv_offload_bytes > 0
    )
    if needs_link and system.host_link is None:
        raise ServeSetupError(
            f"{system.chip.name} has no host_link section: swap preemption and KV offload move blocks over it"
        )
    spec, draft = setup.speculation, None
    if spec is not None:
        cfg = replace(cfg, verify_tokens=spec.verify_tokens)
        draft_par = Parallelism(tp=par.tp) if par.tp > 1 else None
        try:
            draft = step_model(spec.draft, system, setup.resolution, draft_par)
        except ParallelismError as err:
            raise ServeSetupError(f"the draft {spec.draft.model.name}: {err}") from None
    return Instance(
        timer=step_model(setup.workload, system, setup.resolution, par),
        cfg=cfg,
        pool_blocks=pool.blocks,
        block_bytes=pool.block_bytes,
        host=setup.host,
        host_link=system.host_link,
        swap_blocks=int(setup.swap_space_bytes // pool.block_bytes) if cfg.preemption is Preemption.SWAP else 0,
        offload_blocks=int(setup.kv_offload_bytes // pool.block_bytes),
        spec=spec,
        draft=draft,
    )


def request_limits(reqs: RequestSet, setup: ServeSetup) -> tuple[np.ndarray, np.ndarray]:
    """(the most tokens each request may generate, whether it is within max_model_len). A
    request's limit is the max_tokens it states, else the setup's, else what max_model_len leaves
    after its prompt; max_model_len is the setup's, else the longest a request may reach."""
    stated = reqs.max_tokens
    asked = np.where(stated > 0, stated, setup.max_tokens if setup.max_tokens is not None else 0)
    reach = reqs.prompt_tokens + np.maximum(reqs.output_tokens, asked)
    max_len = setup.max_model_len or (int(reach.max()) if len(reqs) else 1)
    limit = np.where(asked > 0, asked, max_len - reqs.prompt_tokens)
    limit = np.maximum(np.minimum(limit, max_len - reqs.prompt_tokens), 1)
    within = (reqs.prompt_tokens + reqs.output_tokens <= max_len) & (reqs.output_tokens <= limit)
    if len(reqs) and not within.any():
        shortest = int((reqs.prompt_tokens + reqs.output_tokens).min())
        raise DoesNotFitError(
            f"none of the {len(reqs):,} requests is within the context window of {max_len:,} tokens "
            f"(max_model_len) and its max_tokens: the shortest has {shortest:,}"
        )
    return limit, within


def serve(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    """Simulate serving `reqs`; DoesNotFitError if the model leaves no room for a KV cache."""
    if setup.disaggregation is not None:
        if setup.scheduler.policy is Policy.STATIC:
            raise ServeSetupError("static batching cannot be disaggregated")
        from archsim.serving.disaggregated import serve_disaggregated

        return serve_disaggregated(reqs, setup)
    pool = pool_for(setup, setup.workload, setup.system)
    inst = instance_for(setup, setup.system, pool)
    limit, within = request_limits(reqs, setup)
    need = need_tokens(reqs, limit, setup.scheduler, pool)
    served = fitting(within & (need <= pool.tokens), need, pool)
    n, ranks = len(served), setup.instances * (layout(setup, setup.workload, setup.system).ep)
    fs, ft, fin = (np.full(n, np.nan) for _ in range(3))
    pre = np.zeros(n, dtype=np.int64)
    runs, itl = [], GapHistogram()
    for i in range(ranks):
        mine = np.arange(i, n, ranks)
        if len(mine) == 0:
            continue
        r = simulate_instance(reqs.subset(served[mine]), inst, limit[served[mine]])
        fs[mine], ft[mine], fin[mine], pre[mine] = r.first_scheduled_s, r.first_token_s, r.finish_s, r.preemptions
        runs.append(InstanceRun("colocated", i, setup.system.chip.name, pool, r))
        itl.merge(r.itl)
    times = RequestTimes(reqs.arrival_s[served], fs, ft, fin, reqs.prompt_tokens[served], reqs.output_tokens[served])
    prompts = int(reqs.prompt_tokens[served].sum())
    return ServeResult(times, served, len(reqs) - n, pre, itl, tuple(runs), None, prompts)


def need_tokens(reqs: RequestSet, limit: np.ndarray, cfg: SchedulerConfig, pool: KvPool) -> np.ndarray:
    """KV tokens a request must hold at once: its worst case under a reserving policy; under
    vllm and sarathi its output too, and its prompt with the watermark to spare (else it could
    never be admitted)."""
    if cfg.policy in (Policy.TRTLLM, Policy.ORCA):
        return reqs.prompt_tokens + limit - 1
    need = reqs.prompt_tokens + reqs.output_tokens - 1
    if cfg.policy.reserves:
        return need
    watermark = int(cfg.watermark * pool.blocks)
    admits = -(-reqs.prompt_tokens // cfg.block_size) <= pool.blocks - watermark
    return np.where(admits, need, np.iinfo(np.int64).max)


def fitting(fits: np.ndarray, need: np.ndarray, pool: KvPool) -> np.ndarray:
    """Indices of the requests that fit; DoesNotFitError when none does."""
    if len(fits) and not fits.any():
        smallest = int(need.min())
        needs = (
            f"the smallest needs {smallest:,} tokens"
            if smallest < np.iinfo(np.int64).max
            else ("no prompt fits it with the admission watermark to spare")
        )
        raise DoesNotFitError(
            f"none of the {len(fits):,} requests fits a KV cache of {pool.blocks:,} blocks "
            f"({pool.tokens:,} tokens): {needs}"
        )
    return np.flatnonzero(fits)
