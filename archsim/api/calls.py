"""The simulations of the Python API: `run` (a generation), `serve` (a request stream), `sweep`
(a design-space sweep into a folder) and `load_sweep`. Each is a thin layer over the runner,
the serving simulator and the sweep driver, and keys its result by the hash of the resolved
configuration exactly as the command line does (the CLI calls these)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archsim import limits
from archsim.api import arguments
from archsim.api.inputs import Hardware, Workload, as_hardware, as_workload
from archsim.api.results import RunReport, ServeReport, SweepResults
from archsim.config.resolved import ResolvedConfig, run_options
from archsim.serving.options import KEYWORDS, ServeOptions, SloOptions
from archsim.sweep import shipped_spec
from archsim.sweep.executors import default_workers, executor_for  # noqa: F401  (the API's own)

if TYPE_CHECKING:
    from archsim.serving.requests import RequestSet
    from archsim.serving.setup import ServeSetup

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
    fidelity: str = "full",
) -> RunReport:
    """Prefill the scenario's prompt, then decode its output tokens with a growing KV cache.

    `tp`, `pp`, `ep`: how the model is spread over a multi-chip system. Raises
    DoesNotFitError when it does not fit in HBM, ParallelismError for a layout that cannot be.
    `progress(done, total)` is called as decode attention samples are simulated. `fidelity`:
    full, or screen (docs/performance.md)."""
    from archsim.graph.parallel import Parallelism
    from archsim.runner.generation import run_generation
    from archsim.runner.size import check_run_size

    where = "archsim.run"
    tp, pp, ep = (arguments.whole(where, k, v) for k, v in (("tp", tp), ("pp", pp), ("ep", ep)))
    kv_stride = arguments.whole(where, "kv_stride", kv_stride)
    arguments.callback(where, "progress", progress)
    fidelity = arguments.choice(where, "fidelity", fidelity, ("full", "screen"))
    _check_cache()
    hw, wl = as_hardware(hardware, where), as_workload(workload, where)
    _check_scenario(wl)
    par = Parallelism(tp, pp, ep)
    check_run_size(wl.workload, hw.system, par)  # TooLargeError before anything is built
    result = run_generation(wl.workload, hw.system, kv_stride, progress, par, fidelity)
    config = run_config(hw, wl, kv_stride, tp, pp, ep)
    return RunReport(result, hw, wl, par, config if fidelity == "full" else config.with_options(fidelity=fidelity))


def load_requests(name_or_path: str, count: int | None = None):
    """A request trace (a shipped name such as `azure_llm_2023_conv`, an Azure CSV, or a CSV or
    JSONL of arrival_s,prompt_tokens,output_tokens), its first `count` requests if given."""
    from archsim.serving.requests import load_trace

    where = "archsim.load_requests"
    name = arguments.path(where, "name_or_path", name_or_path)
    limit = None if count is None else arguments.whole(where, "count", count, 1, limits.MAX_REQUESTS)
    return load_trace(name, limit=limit)  # only the first `count` lines are read


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
    from archsim.serving.arrivals import ArrivalProcess, generate_requests, parse_length

    where = "archsim.generate_requests"

    def length(key: str, v: object):
        if not isinstance(v, str):
            v = str(arguments.whole(where, key, v, 1, limits.MAX_TOKENS))
        try:
            return parse_length(v)
        except ValueError as err:
            raise arguments.refusal(where, key, str(err)) from None

    return generate_requests(
        arguments.number(where, "rate_per_s", rate_per_s, *limits.RATE_RANGE_PER_S),
        arguments.whole(where, "count", count, 1, limits.MAX_REQUESTS),
        length("prompt_tokens", prompt_tokens),
        length("output_tokens", output_tokens),
        ArrivalProcess(arguments.choice(where, "arrival", arrival, tuple(a.value for a in ArrivalProcess))),
        arguments.number(where, "cv", cv, *limits.CV_RANGE),
        arguments.whole(where, "seed", seed, 0, limits.MAX_SEED),
    )


def serve_setup(hardware: Hardware, workload: Workload, options: ServeOptions) -> tuple[ServeSetup, dict]:
    """The serving setup and its part of the resolved configuration: ConfigError for a bad
    option (`ServeOptions.check`, before the chips and the draft it names are read), ServeSetupError for a setup the
    simulator cannot model. Loads the chips of disaggregated instances and the draft the
    options name."""
    from archsim.serving.build import ServeInputs, build_setup

    where = "archsim.serve"
    options.check()
    _check_cache()
    bound, asked = max_context(workload), options.scheduler.max_model_len
    if bound is not None and asked is not None and asked > bound[0]:
        raise arguments.refusal(
            where, "max_model_len", f"{asked:,} tokens is more than the model's maximum of {bound[0]:,} ({bound[1]})"
        )
    spec, d = options.speculative, options.disaggregation
    inputs = ServeInputs(
        hardware,
        workload,
        prefill_hardware=as_hardware(d.prefill_hardware, where, "prefill_hardware")
        if d and d.prefill_hardware is not None
        else None,
        decode_hardware=as_hardware(d.decode_hardware, where, "decode_hardware")
        if d and d.decode_hardware is not None
        else None,
        draft=as_workload(spec.draft, where, "draft") if spec and spec.draft is not None else None,
    )
    return build_setup(inputs, options)


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
    requests: RequestSet | str,
    *,
    slo_ttft_s: float | str | None = None,
    slo_tpot_s: float | str | None = None,
    attainment: float | None = None,
    rate_per_s: float | None = None,
    options: ServeOptions | None = None,
    **setup: Any,
) -> ServeReport:
    """Serve `requests` (from `load_requests` or `generate_requests`, or a trace name) with
    continuous batching; the metrics are judged against the SLOs (seconds; `attainment`, the
    share of requests that must meet them, default 0.9; a duration also as text: "200ms"). `setup`: the serving options as
    keywords (policy, max_batched_tokens, ..., decode_instances: the names of
    `ServeOptions.from_keywords`), or all of them and the SLOs as `options=ServeOptions(...)`.
    Raises ConfigError for a bad option, DoesNotFitError when the model leaves no room for a KV
    cache, ServeSetupError for a setup that cannot be modelled. `rate_per_s`: the nominal
    arrival rate the configuration records (default: the requests' mean rate)."""
    where = "archsim.serve"
    slo = {"slo_ttft_s": slo_ttft_s, "slo_tpot_s": slo_tpot_s, "attainment": attainment}
    for key in ("slo_ttft_s", "slo_tpot_s"):  # seconds, or a duration with its unit as the flags take it
        if isinstance(slo[key], str):
            slo[key] = arguments.duration_s(where, key, slo[key])
    opts = serve_options(options, slo, setup)
    opts.check()  # before any file is read
    if rate_per_s is not None:
        rate_per_s = arguments.number(where, "rate_per_s", rate_per_s, *limits.RATE_RANGE_PER_S)
    hw, wl = as_hardware(hardware, where), as_workload(workload, where)
    reqs = _requests(where, requests)
    return serve_built(hw, wl, reqs, serve_setup(hw, wl, opts), opts.slo, rate_per_s)


def _requests(where: str, requests: object) -> RequestSet:
    """The requests of `serve`: a RequestSet as given, or a trace read by name or path."""
    from archsim.serving.requests import RequestSet

    if isinstance(requests, RequestSet):
        return requests
    if isinstance(requests, (str, os.PathLike)):
        return load_requests(arguments.path(where, "requests", requests))
    raise arguments.refusal(
        where,
        "requests",
        "must be requests from archsim.load_requests or generate_requests, or a trace's name or path "
        f"(got {type(requests).__name__})",
    )


def serve_options(options: ServeOptions | None, slo: dict[str, Any], setup: dict[str, Any]) -> ServeOptions:
    """The options of `serve`: the record given, or one from the keywords (the SLOs' among
    them where given); ConfigError for an unknown keyword or both at once."""
    where = "archsim.serve"
    given = {k: v for k, v in slo.items() if v is not None}
    if options is None:
        unknown = sorted(k for k in setup if k not in KEYWORDS)
        if unknown:
            raise arguments.refusal(where, unknown[0], "is not a keyword of archsim.serve")
        return ServeOptions.from_keywords(**given, **setup)
    if not isinstance(options, ServeOptions):
        raise arguments.refusal(where, "options", f"must be an archsim.ServeOptions (got {type(options).__name__})")
    if given or setup:
        raise arguments.refusal(
            where,
            "options",
            f"give the options as options=ServeOptions(...) or as keywords, not both (got {[*given, *setup]})",
        )
    return options


def _check_cache() -> None:
    """CacheFolderError before any work where a cache folder may not be read (opcache.py)."""
    from archsim import opcache

    opcache.check_folders()


def max_context(workload: Workload) -> tuple[int, str] | None:
    """The longest sequence the workload's model takes and where that bound is from: its
    Hugging Face config's (as serving engines derive it), else its learned position table."""
    if workload.max_context is not None:
        return workload.max_context
    rows = workload.workload.model.max_positions
    return (rows, "model.max_positions") if rows else None


def _check_scenario(workload: Workload) -> None:
    """RefusedError for a scenario whose sequences (prompt and output) are longer than the model
    takes: past its positions, a step's cost means nothing."""
    from archsim.errors import RefusedError
    from archsim.graph.model import scenario_too_long

    if why := scenario_too_long(workload.workload, max_context(workload)):
        raise RefusedError(f"{workload.source}: {why}")


def _check_context(workload: Workload, requests: RequestSet) -> None:
    """RefusedError for a request longer (prompt and output) than the model takes: no serving
    engine runs it, and its cost past the model's positions means nothing."""
    from archsim.errors import RefusedError

    bound = max_context(workload)
    if bound is None or not len(requests):
        return
    context = requests.prompt_tokens + requests.output_tokens
    longest = int(context.argmax())
    if int(context[longest]) > bound[0]:
        raise RefusedError(
            f"request {longest} of {requests.source}: prompt + output is {int(context[longest]):,} tokens, "
            f"more than the model's maximum of {bound[0]:,} ({bound[1]})"
        )


def serve_built(
    hardware: Hardware,
    workload: Workload,
    requests: RequestSet,
    built: tuple[ServeSetup, dict],
    slo: SloOptions,
    rate_per_s: float | None,
) -> ServeReport:
    """Serve `requests` on a setup from `serve_setup` (the command line builds it once for its
    title and its capacity search), judged against `slo`."""
    from archsim.runner.size import check_serve_size
    from archsim.serving.metrics import Slo
    from archsim.serving.simulate import serve as simulate_serving

    setup, serving = built
    _check_context(workload, requests)
    d = setup.disaggregation
    check_serve_size(  # TooLargeError before a step is simulated
        workload.workload,
        [hardware.system] if d is None else [d.prefill_system, d.decode_system],
        int(requests.prompt_tokens.max()),
        int((requests.prompt_tokens + requests.output_tokens).max()),
        setup.scheduler.max_batched_tokens,
    )
    objectives = Slo(slo.ttft_s, slo.tpot_s)
    resolved = serve_config(hardware, workload, serving, requests, objectives, slo.attainment, rate_per_s)
    result = simulate_serving(requests, setup)
    return ServeReport(result, result.metrics(objectives), objectives, resolved, setup)


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
    fidelity: str = "full",
):
    """Evaluate every point of a sweep spec (a file or a shipped name) not yet recorded in
    `out_dir`; returns (the run's SweepReport, the folder's SweepResults). The spec may name
    files under its own folder, the shipped ones, and those under `allow_paths`. `fidelity`:
    auto (screen every point, the front again at full fidelity), screen or full (docs/sweeps.md)."""
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.spec import load_spec

    where = "archsim.sweep"
    spec = arguments.path(where, "spec", spec)
    out_dir = arguments.path(where, "out_dir", out_dir)
    workers, dask_local, chunk_size = (
        None if v is None else arguments.whole(where, k, v, 1, high)
        for k, v, high in (
            ("workers", workers, limits.MAX_INSTANCES),
            ("dask_local", dask_local, limits.MAX_INSTANCES),
            ("chunk_size", chunk_size, limits.MAX_SWEEP_POINTS),
        )
    )
    if dask is not None:
        dask = arguments.path(where, "dask", dask)  # a scheduler's address: a non-empty string
    arguments.callback(where, "on_resolved", on_resolved)
    arguments.callback(where, "on_progress", on_progress)
    fidelity = arguments.choice(where, "fidelity", fidelity, ("auto", "screen", "full"))
    allowed = tuple(arguments.path(where, "allow_paths", p) for p in arguments.paths(where, "allow_paths", allow_paths))
    _check_cache()  # here, not in each worker's points
    loaded = load_spec(shipped_spec(spec), allowed=allowed)
    executor = executor_for(workers, dask, dask_local)
    report = run_sweep(loaded, out_dir, executor, chunk_size, on_resolved, on_progress, fidelity)
    return report, load_sweep(out_dir)


def sweep_template(
    name: str,
    out_dir: str | Path,
    *,
    hw: str,
    workload: str | None = None,
    points: int | None = None,
    seed: int = 0,
    power_cap: float | str | None = None,
    batch: int | None = None,
    prompt: int | None = None,
    generate: int | None = None,
    workers: int | None = None,
    fidelity: str = "full",
):
    """Run a shipped sweep template (`best_per_area`, `best_per_joule`, `best_under_cap`:
    docs/sweeps.md) around the chip `hw`, as `archsim sweep NAME --hw CHIP` does; `power_cap` in
    watts or with its unit ("500W"). Returns (the run's SweepReport, the folder's SweepResults,
    its designs that ran within the constraints, best first by the template's objective)."""
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.store import read_results
    from archsim.sweep.templates import (
        DEFAULT_POINTS,
        DEFAULT_WORKLOAD,
        OUTPUT_TOKENS,
        PROMPT_TOKENS,
        TEMPLATES,
        TemplateError,
        TemplateOptions,
        power_cap_w,
        ranked,
        template_spec,
    )

    where = "archsim.sweep_template"
    name = arguments.choice(where, "name", name, tuple(TEMPLATES))
    out_dir = arguments.path(where, "out_dir", out_dir)
    cap = None
    if power_cap is not None:
        try:
            cap = power_cap_w(power_cap)
        except TemplateError as err:
            raise arguments.refusal(where, "power_cap", str(err)) from None
    options = TemplateOptions(
        hardware=arguments.path(where, "hw", hw),
        workload=arguments.path(where, "workload", workload or DEFAULT_WORKLOAD),
        points=arguments.whole(
            where, "points", DEFAULT_POINTS if points is None else points, 1, limits.MAX_SWEEP_POINTS
        ),
        seed=arguments.whole(where, "seed", seed, 0),
        power_cap_w=cap,
        batch=None if batch is None else arguments.whole(where, "batch", batch),
        prompt=arguments.whole(where, "prompt", PROMPT_TOKENS if prompt is None else prompt),
        generate=arguments.whole(where, "generate", OUTPUT_TOKENS if generate is None else generate),
    )
    workers = None if workers is None else arguments.whole(where, "workers", workers, 1, limits.MAX_INSTANCES)
    fidelity = arguments.choice(where, "fidelity", fidelity, ("auto", "screen", "full"))
    if TEMPLATES[name].cap_required and cap is None:
        raise arguments.refusal(where, "power_cap", f"{name} needs a power cap (e.g. power_cap='500W')")
    try:
        spec = template_spec(name, options)
    except TemplateError as err:
        raise arguments.refusal(where, name, str(err)) from None
    _check_cache()
    report = run_sweep(spec, out_dir, executor_for(workers, None, None), None, None, None, fidelity)
    return report, load_sweep(out_dir), ranked(read_results(out_dir).to_pylist(), TEMPLATES[name])


def load_sweep(out_dir: str | Path) -> SweepResults:
    """The results of a sweep folder (`DIR/points/` holds its Parquet parts)."""
    from archsim.sweep.store import READABLE, read_manifest, read_results, read_summary

    out_dir = arguments.path("archsim.load_sweep", "out_dir", out_dir)
    table = read_results(out_dir)
    return SweepResults(
        Path(out_dir), table, read_manifest(out_dir, READABLE).get("settings", {}), read_summary(out_dir)
    )
