"""How requests are served (`ServeSetup`), checked against the chips, and what each instance of
it serves with: its layout, its KV pool (archsim/serving/kvpool.py) and its `Instance`. Shared by
co-located (archsim/serving/simulate.py) and disaggregated serving
(archsim/serving/disaggregated.py). Seconds and bytes.

An instance runs the model on a layout of the system's chips (`parallelism`; by default tensor
parallel over all of them): the busiest chip's step and collectives, each chip holding its share
of the weights and KV cache (archsim/runner/steps.py, archsim/serving/kvpool.py).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, replace

from archsim.engine_defaults import GPU_MEMORY_UTILIZATION
from archsim.errors import ConfigError
from archsim.graph.model import Workload
from archsim.graph.parallel import Parallelism, ParallelismError, check_parallelism
from archsim.hardware import System
from archsim.runner.generation import check_parallel_system
from archsim.runner.steps import DEFAULT_RESOLUTION, step_model
from archsim.serving.host import NO_HOST, HostProfile
from archsim.serving.instance import Instance
from archsim.serving.kvpool import KvPool, size_pool
from archsim.serving.scheduler import Preemption, SchedulerConfig
from archsim.serving.speculative import Speculation, draft_memory_bytes

SWAP_SPACE_BYTES = 4 * 2**30  # vLLM's default --swap-space: 4 GiB of host memory per GPU


class ServeSetupError(ConfigError, ValueError):
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
    _: KW_ONLY
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
