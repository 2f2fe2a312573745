"""The simulations of the Python API: `run` (a generation), `serve` (a request stream), `sweep`
(a design-space sweep into a folder) and `load_sweep`. Each is a thin layer over the runner,
the serving simulator and the sweep driver, and keys its result by the hash of the resolved
configuration exactly as the command line does (the CLI calls these)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from archsim.api.inputs import Hardware, Workload, as_hardware, as_workload
from archsim.api.results import RunReport, ServeReport, SweepResults
from archsim.config.resolved import ResolvedConfig, run_options
from archsim.engine_defaults import BLOCK_SIZE, GPU_MEMORY_UTILIZATION, MAX_NUM_SEQS

KV_STRIDE = 1  # as archsim.runner.generation.KV_STRIDE; `archsim run --kv-stride`


def run_config(
    hardware: Hardware, workload: Workload, kv_stride: int = KV_STRIDE, tp: int = 1, pp: int = 1, ep: int = 1
) -> ResolvedConfig:
    """The resolved configuration of a run (its hash names the run's JSON), as `archsim run` keys it."""
    return ResolvedConfig(hardware.config, workload.config, run_options(kv_stride, tp, pp, ep))


def run(
    hardware: Hardware | str,
    workload: Workload | str,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    kv_stride: int = KV_STRIDE,
    progress: Callable[[int, int], None] | None = None,
) -> RunReport:
    """Prefill the scenario's prompt, then decode its output tokens with a growing KV cache.

    `tp`, `pp`, `ep`: how the model is spread over a multi-chip system. Raises
    DoesNotFitError when it does not fit in HBM, ParallelismError for a layout that cannot be.
    `progress(done, total)` is called as decode attention samples are simulated."""
    from archsim.graph.parallel import Parallelism
    from archsim.runner.generation import run_generation
    from archsim.runner.size import check_run_size

    hw, wl = as_hardware(hardware), as_workload(workload)
    par = Parallelism(tp, pp, ep)
    check_run_size(wl.workload, hw.system, par)  # TooLargeError before anything is built
    result = run_generation(wl.workload, hw.system, kv_stride=kv_stride, progress=progress, parallelism=par)
    return RunReport(result, hw, wl, par, run_config(hw, wl, kv_stride, tp, pp, ep))


def load_requests(name_or_path: str, count: int | None = None):
    """A request trace (a shipped name such as `azure_llm_2023_conv`, an Azure CSV, or a CSV or
    JSONL of arrival_s,prompt_tokens,output_tokens), its first `count` requests if given."""
    from archsim.serving.requests import load_trace

    return load_trace(name_or_path, limit=count)  # only the first `count` lines are read


def generate_requests(
    rate_per_s: float,
    count: int,
    prompt_tokens: int | str,
    output_tokens: int | str,
    *,
    arrival: str = "poisson",
    cv: float = 1.0,
    seed: int = 0,
):
    """`count` requests arriving at `rate_per_s` (poisson, or gamma with coefficient of variation
    `cv`); lengths a number or a distribution as `archsim serve --prompt` takes them
    (`"lognormal:1000:1.5"`, `"uniform:100:200"`, `"exponential:200"`)."""
    from archsim import limits
    from archsim.serving.arrivals import ArrivalProcess, generate_requests, parse_length

    def length(v: int | str):
        return parse_length(str(v))

    for name, value, (low, high) in (
        ("count", count, (1, limits.MAX_REQUESTS)),
        ("rate_per_s", rate_per_s, limits.RATE_RANGE_PER_S),
        ("cv", cv, limits.CV_RANGE),
        ("seed", seed, (0, limits.MAX_SEED)),
    ):
        if isinstance(value, bool) or not limits.within(value, low, high):
            raise ValueError(f"{name} must be from {low:g} to {high:g} (got {value!r})")

    return generate_requests(
        rate_per_s, count, length(prompt_tokens), length(output_tokens), ArrivalProcess(arrival), cv, seed
    )


def serve_setup(
    hardware: Hardware,
    workload: Workload,
    *,
    policy: str = "vllm",
    max_batched_tokens: int | None = None,
    max_num_seqs: int = MAX_NUM_SEQS,
    block_size: int = BLOCK_SIZE,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    kv_blocks: int | None = None,
    instances: int = 1,
    step_resolution: int = 2,
    prefill_hardware: Hardware | str | None = None,
    decode_hardware: Hardware | str | None = None,
    prefill_instances: int | None = None,
    decode_instances: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    ep: int | None = None,
    host: str = "vllm",
    preemption: str = "recompute",
    swap_space_bytes: float | None = None,
    kv_offload_bytes: float = 0.0,
    prefix_caching: bool = True,
    max_model_len: int | None = None,
    max_tokens: int | None = None,
    draft: Workload | str | None = None,
    mtp_layers: int | None = None,
    spec_tokens: int = 3,
    spec_acceptance: float | None = None,
):
    """The serving setup and its part of the resolved configuration; ServeSetupError for a
    setup the simulator cannot model. Disaggregated when any prefill/decode argument is given;
    `tp`, `pp`, `ep`: the layout of an instance (default: tensor parallel over all chips);
    `draft` (a workload) or `mtp_layers`: speculative decoding of `spec_tokens` tokens."""
    from archsim import limits
    from archsim.serving.options import build_setup
    from archsim.serving.simulate import ServeSetupError

    if not 0 <= step_resolution <= limits.MAX_STEP_RESOLUTION:
        raise ServeSetupError(f"step resolution: must be 0 to {limits.MAX_STEP_RESOLUTION} (got {step_resolution})")
    for name, n in (
        ("instances", instances),
        ("prefill instances", prefill_instances),
        ("decode instances", decode_instances),
    ):
        if n is not None and not 1 <= n <= limits.MAX_INSTANCES:
            raise ServeSetupError(f"{name}: must be 1 to {limits.MAX_INSTANCES:,} (got {n})")
    disagg = None
    if any(v is not None for v in (prefill_hardware, decode_hardware, prefill_instances, decode_instances)):
        p_hw = as_hardware(prefill_hardware) if prefill_hardware is not None else None
        d_hw = as_hardware(decode_hardware) if decode_hardware is not None else None
        disagg = (p_hw, d_hw, prefill_instances or 1, decode_instances or 1)
    return build_setup(
        hardware,
        workload,
        policy=policy,
        max_batched_tokens=max_batched_tokens,
        max_num_seqs=max_num_seqs,
        block_size=block_size,
        gpu_memory_utilization=gpu_memory_utilization,
        kv_blocks=kv_blocks,
        instances=instances,
        step_resolution=step_resolution,
        disaggregation=disagg,
        layout=(tp, pp, ep),
        host=host,
        preemption=preemption,
        swap_space_bytes=swap_space_bytes,
        kv_offload_bytes=kv_offload_bytes,
        prefix_caching=prefix_caching,
        max_model_len=max_model_len,
        max_tokens=max_tokens,
        draft=as_workload(draft) if draft is not None else None,
        mtp_layers=mtp_layers,
        spec_tokens=spec_tokens,
        spec_acceptance=spec_acceptance,
    )


def serve_config(
    hardware: Hardware, workload: Workload, serving: dict, requests, slo, attainment: float, rate_per_s: float | None
) -> ResolvedConfig:
    """The resolved configuration of a serving run: chip, workload, setup, and the requests by
    digest with their nominal rate (the requests' mean rate when none is given)."""
    if rate_per_s is None:
        rate_per_s = requests.rate_per_s if len(requests) > 1 else float("inf")
    return ResolvedConfig(
        hardware.config,
        workload.config,
        {
            "serving": serving,
            "requests": {
                "source": requests.source,
                "count": len(requests),
                "digest": requests.digest(),
                "rate_per_s": rate_per_s,
                "slo_ttft_s": slo.ttft_s,
                "slo_tpot_s": slo.tpot_s,
                "attainment": attainment,
            },
        },
    )


def serve(
    hardware: Hardware | str,
    workload: Workload | str,
    requests,
    *,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    attainment: float = 0.9,
    rate_per_s: float | None = None,
    **setup,
) -> ServeReport:
    """Serve `requests` (from `load_requests` or `generate_requests`, or a trace name) with
    continuous batching; the metrics are judged against the SLOs (seconds). `setup`: the
    keywords of `serve_setup` (policy, max_batched_tokens, ..., decode_instances). Raises
    DoesNotFitError when the model leaves no room for a KV cache, ServeSetupError for a setup
    that cannot be modelled. `rate_per_s`: the nominal arrival rate the configuration records
    (default: the requests' mean rate)."""
    from archsim.runner.size import check_serve_size
    from archsim.serving.metrics import Slo
    from archsim.serving.simulate import serve as simulate_serving

    hw, wl = as_hardware(hardware), as_workload(workload)
    reqs = load_requests(requests) if isinstance(requests, str) else requests
    serve_setup_, serving = serve_setup(hw, wl, **setup)
    d = serve_setup_.disaggregation
    check_serve_size(  # TooLargeError before a step is simulated
        wl.workload,
        [hw.system] if d is None else [d.prefill_system, d.decode_system],
        int(reqs.prompt_tokens.max()),
        int((reqs.prompt_tokens + reqs.output_tokens).max()),
        serve_setup_.scheduler.max_batched_tokens,
    )
    slo = Slo(slo_ttft_s, slo_tpot_s)
    resolved = serve_config(hw, wl, serving, reqs, slo, attainment, rate_per_s)
    result = simulate_serving(reqs, serve_setup_)
    return ServeReport(result, result.metrics(slo), slo, resolved, serve_setup_)


def shipped_spec(name_or_path: str) -> str:
    """A sweep spec as given if it is a file, else a shipped spec of that name (`h200_variants`)."""
    from archsim.config.loader import shipped_dir

    if Path(name_or_path).exists() or "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return name_or_path
    shipped = shipped_dir("hw_configs") / "sweeps" / f"{name_or_path}.yaml"
    return str(shipped) if shipped.is_file() else name_or_path


def executor_for(workers: int | None = None, dask: str | None = None, dask_local: int | None = None):
    """Where a sweep's points run: this process (workers=1), a local pool (the CPUs available by
    default), or Dask (a scheduler address, or a local cluster of `dask_local` workers)."""
    from archsim.sweep.executors import DaskExecutor, PoolExecutor, SerialExecutor

    if dask:
        return DaskExecutor(address=dask)
    if dask_local:
        return DaskExecutor(local_workers=dask_local)
    workers = workers or default_workers()
    return SerialExecutor() if workers == 1 else PoolExecutor(workers)


def default_workers() -> int:
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def sweep(
    spec: str,
    out_dir: str | Path,
    *,
    workers: int | None = None,
    dask: str | None = None,
    dask_local: int | None = None,
    chunk_size: int | None = None,
    on_resolved: Callable[[int, int], None] | None = None,
    on_progress: Callable[[int, int, int], None] | None = None,
    allow_paths: tuple[str, ...] = (),
):
    """Evaluate every point of a sweep spec (a file or a shipped name) not yet recorded in
    `out_dir`; returns (the run's SweepReport, the folder's SweepResults). The spec may name
    files under its own folder, the shipped ones, and those under `allow_paths`."""
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.spec import load_spec

    loaded = load_spec(shipped_spec(spec), allowed=tuple(allow_paths))
    executor = executor_for(workers, dask, dask_local)
    report = run_sweep(loaded, out_dir, executor, chunk_size, on_resolved, on_progress)
    return report, load_sweep(out_dir)


def load_sweep(out_dir: str | Path) -> SweepResults:
    """The results of a sweep folder (`DIR/points/` holds its Parquet parts)."""
    from archsim.sweep.store import read_manifest, read_results, read_summary

    table = read_results(out_dir)
    return SweepResults(Path(out_dir), table, read_manifest(out_dir).get("settings", {}), read_summary(out_dir))
