"""`archsim serve`: continuous batching of a request stream (a trace or generated) on a chip,
with latency percentiles, goodput, capacity search and disaggregated prefill/decode."""

from __future__ import annotations

import argparse

from archsim import limits
from archsim.commands import (
    UsageError,
    bounded_float,
    bounded_int,
    check_outputs,
    positive_int,
    require_plots,
    shown,
)
from archsim.commands.output import add_output_flags, console, emit, notes, progress, renamed
from archsim.commands.run import DEFAULT_HW, DEFAULT_WORKLOAD, add_set_flag

DEFAULT_REQUESTS = 100
DEFAULT_RATE_PER_S = 1.0
MIN_MEMORY_FRACTION = 1e-3  # of the memory left for the KV cache: less is a typo, not a setting


def _fraction(flag: str, low: float = 0.0):
    number = bounded_float(flag, low, float("inf"), low_open=low == 0.0)

    def parse(text: str) -> float:
        value = number(text)
        if value > 1:
            raise argparse.ArgumentTypeError(f"must be in (0, 1] (got {text})")
        return value

    parse.__name__ = flag
    return parse


def _seconds(flag: str):
    """'200ms', '200 ms' or '0.2s' -> 0.2 seconds; a bare number is refused (200 of what?)."""

    def parse(text: str) -> float:
        from archsim.units import Dim, parse_quantity

        try:
            float(text)
        except ValueError:
            pass
        else:
            raise argparse.ArgumentTypeError(f"a duration needs its unit, e.g. 200ms or 0.2s (got {text!r})")
        try:
            value = parse_quantity(text.replace(" ", ""), Dim.SECONDS)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than zero (got {text!r})")
        if value > limits.MAX_SLO_S:
            raise argparse.ArgumentTypeError(f"must be at most {limits.MAX_SLO_S:,.0f} s, a day (got {text!r})")
        return value

    parse.__name__ = flag
    return parse


def _length(flag: str):
    def parse(text: str):
        from archsim.serving.arrivals import parse_length

        try:
            return parse_length(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = flag
    return parse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve", help="simulate serving a request stream: continuous batching, latency percentiles, goodput"
    )
    g = p.add_argument_group("model and chip")
    g.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    g.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload YAML or shipped name (default llama3_8b)")
    g.add_argument("--fusion", choices=["eager", "fused"], help="kernel fusion profile (default from workload)")
    add_set_flag(g)
    g = p.add_argument_group("requests")
    g.add_argument(
        "--requests-from",
        metavar="FILE",
        help="Azure trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens), CSV or "
        "JSONL of arrival_s,prompt_tokens,output_tokens, or a shipped trace (azure_llm_2023_conv, ..._code)",
    )
    g.add_argument(
        "--requests",
        metavar="N",
        type=positive_int("--requests", limits.MAX_REQUESTS),
        help=f"requests to generate (default {DEFAULT_REQUESTS}), or the first N of --requests-from",
    )
    g.add_argument(
        "--rate",
        metavar="R",
        type=bounded_float("--rate", *limits.RATE_RANGE_PER_S),
        help=f"mean arrivals per second (default {DEFAULT_RATE_PER_S:g}); with --requests-from, rescales it to this rate",
    )
    g.add_argument(
        "--arrival", choices=["poisson", "gamma"], default="poisson", help="arrival process (default poisson)"
    )
    g.add_argument(
        "--cv",
        type=bounded_float("--cv", *limits.CV_RANGE),
        default=1.0,
        help="coefficient of variation of gamma inter-arrival gaps (default 1; >1 is bursty)",
    )
    g.add_argument(
        "--seed",
        metavar="N",
        type=bounded_int("--seed", 0, limits.MAX_SEED),
        default=0,
        help="seed of the generated stream (default 0)",
    )
    g.add_argument(
        "--prompt",
        metavar="SPEC",
        type=_length("--prompt"),
        help="prompt tokens: N, uniform:LO:HI, exponential:MEAN "
        "or lognormal:MEAN:CV (default: the workload's scenario)",
    )
    g.add_argument("--generate", metavar="SPEC", type=_length("--generate"), help="output tokens, as --prompt")
    g.add_argument(
        "--time-scale",
        metavar="S",
        type=bounded_float("--time-scale", *limits.TIME_SCALE_RANGE),
        help="multiply the arrival times of --requests-from by this (0.5 replays twice as fast)",
    )
    g = p.add_argument_group("scheduler and KV cache")
    g.add_argument(
        "--policy",
        choices=["vllm", "sarathi", "orca", "static"],
        default="vllm",
        help="vllm: continuous batching, chunked prompts, preemption by recompute (default); sarathi: "
        "decodes first, small chunks; orca: worst-case KV reserved; static: fixed batches",
    )
    g.add_argument(
        "--max-batched-tokens",
        metavar="N",
        type=positive_int("--max-batched-tokens", limits.MAX_TOKENS),
        help="tokens per step (default 8192; 512 for sarathi)",
    )
    g.add_argument(
        "--max-num-seqs",
        metavar="N",
        type=positive_int("--max-num-seqs", limits.MAX_BATCH),
        default=256,
        help="requests running at once (default 256)",
    )
    g.add_argument(
        "--block-size",
        metavar="N",
        type=positive_int("--block-size", limits.MAX_TOKENS),
        default=16,
        help="tokens per KV block (default 16)",
    )
    g.add_argument(
        "--gpu-memory-utilization",
        metavar="F",
        type=_fraction("--gpu-memory-utilization", MIN_MEMORY_FRACTION),
        default=0.9,
        help="fraction of (HBM - weights - activations) given to the KV cache (default 0.9)",
    )
    g.add_argument(
        "--kv-blocks",
        metavar="N",
        type=positive_int("--kv-blocks"),
        help="KV pool size in blocks per instance (overrides the sizing)",
    )
    g.add_argument(
        "--instances",
        metavar="N",
        type=positive_int("--instances", limits.MAX_INSTANCES),
        default=1,
        help="co-located replicas, requests dealt round-robin (default 1)",
    )
    g.add_argument(
        "--step-resolution",
        type=bounded_int("--step-resolution", 0, limits.MAX_STEP_RESOLUTION),
        default=2,
        metavar="N",
        help="simulated step shapes per doubling of the step's tokens, interpolated between "
        "(default 2; 0 simulates every shape: exact, slow)",
    )
    g = p.add_argument_group("service-level objectives")
    g.add_argument(
        "--slo-ttft", metavar="T", type=_seconds("--slo-ttft"), help="time-to-first-token objective (e.g. 200ms)"
    )
    g.add_argument(
        "--slo-tpot", metavar="T", type=_seconds("--slo-tpot"), help="time-per-output-token objective (e.g. 50ms)"
    )
    g.add_argument(
        "--attainment",
        metavar="F",
        type=_fraction("--attainment"),
        default=0.9,
        help="fraction of requests that must meet the SLOs for --find-capacity (default 0.9)",
    )
    g.add_argument("--find-capacity", action="store_true", help="search the highest arrival rate meeting the SLOs")
    g = p.add_argument_group("disaggregated prefill and decode (any of these turns it on)")
    g.add_argument("--prefill-hw", metavar="HW", help="chip of the prefill instances (default --hw)")
    g.add_argument("--decode-hw", metavar="HW", help="chip of the decode instances (default --hw)")
    g.add_argument(
        "--prefill-instances",
        metavar="N",
        type=positive_int("--prefill-instances", limits.MAX_INSTANCES),
        help="prefill instances (default 1)",
    )
    g.add_argument(
        "--decode-instances",
        metavar="N",
        type=positive_int("--decode-instances", limits.MAX_INSTANCES),
        help="decode instances (default 1)",
    )
    g = p.add_argument_group("output")
    g.add_argument("--json", metavar="PATH", help="write metrics, per-instance figures and the config as JSON")
    g.add_argument("--plots", metavar="DIR", help="write latency CDFs, KV use and batch size over time (PNG)")
    g.add_argument("--trace-out", metavar="PATH", help="write a request timeline for Perfetto (Chrome trace JSON)")
    add_output_flags(g, quiet_help="no progress; print only the summary table")
    renamed(p, "--trace", "--requests-from FILE (a request trace to replay) or --trace-out PATH (a timeline)")
    renamed(p, "--timeline", "--trace-out PATH")


def _requests(args, w):
    """The request stream, a function giving it at any mean rate (for the capacity search), and
    its rate."""
    if args.requests_from:
        return _trace_requests(args)
    from archsim.serving.arrivals import ArrivalProcess, LengthDist, LengthKind, generate_requests

    if args.time_scale is not None:
        raise UsageError("--time-scale applies to --requests-from only")
    sc = w.scenario
    prompt = args.prompt or LengthDist(LengthKind.FIXED, sc.prompt_tokens)
    output = args.generate or LengthDist(LengthKind.FIXED, sc.output_tokens)
    n, rate = args.requests or DEFAULT_REQUESTS, args.rate or DEFAULT_RATE_PER_S
    process = ArrivalProcess(args.arrival)

    def at(r: float):
        return generate_requests(r, n, prompt, output, process, args.cv, args.seed)

    return at(rate), at, rate


def _trace_requests(args):
    from archsim.serving.requests import load_trace

    for flag, value in (("--prompt", args.prompt), ("--generate", args.generate)):
        if value is not None:
            raise UsageError(f"{flag} does not apply to --requests-from (the trace gives the lengths)")
    if args.rate is not None and args.time_scale is not None:
        raise UsageError("give --rate or --time-scale with --requests-from, not both")
    trace = load_trace(args.requests_from, limit=args.requests)  # only the first N lines are read
    native = trace.rate_per_s if len(trace) > 1 else float("inf")
    if native == float("inf") and (args.rate or args.find_capacity):
        raise UsageError("the trace's arrivals span no time: there is no arrival rate to rescale")

    def at(rate: float):
        return trace.scaled(native / rate)

    reqs = at(args.rate) if args.rate else trace.scaled(args.time_scale) if args.time_scale else trace
    return reqs, at, reqs.rate_per_s if len(reqs) > 1 else float("inf")


def setup_options(args) -> dict:
    """The serving setup as `archsim.serve` takes it."""
    return {
        "policy": args.policy,
        "max_batched_tokens": args.max_batched_tokens,
        "max_num_seqs": args.max_num_seqs,
        "block_size": args.block_size,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "kv_blocks": args.kv_blocks,
        "instances": args.instances,
        "step_resolution": args.step_resolution,
        "prefill_hardware": args.prefill_hw,
        "decode_hardware": args.decode_hw,
        "prefill_instances": args.prefill_instances,
        "decode_instances": args.decode_instances,
    }


def _instance(s) -> str:
    """A chip, or a tensor-parallel group of a system's chips."""
    return s.chip.name if s.chips == 1 else f"{s.chip.name} x{s.chips} (TP {s.chips})"


def _title(w, setup, system, reqs) -> str:
    d = setup.disaggregation
    where = (
        f"prefill {d.prefill_instances} x {_instance(d.prefill_system)}, decode {d.decode_instances} x "
        f"{_instance(d.decode_system)}"
        if d
        else f"{setup.instances} x {_instance(system)}"
        if setup.instances > 1
        else _instance(system)
    )
    return f"{w.model.name} on {where}: {setup.scheduler.policy.value}, {len(reqs):,} requests ({reqs.source})"


def run(args) -> int:
    from archsim import api
    from archsim.commands.run import load_inputs
    from archsim.serving.metrics import Slo
    from archsim.serving.simulate import ServeSetupError

    check_outputs(
        args,
        ("json", "trace_out", "plots"),
        ("plots",),
        (args.hw, args.workload, args.requests_from, args.prefill_hw, args.decode_hw),
    )
    if args.plots:
        require_plots()
    hardware, workload = load_inputs(args, args.hw, scenario_flags=False)
    reqs, requests_at, rate = _requests(args, workload.workload)
    options = setup_options(args)
    try:
        setup, _ = api.calls.serve_setup(hardware, workload, **options)
    except ServeSetupError as err:
        raise UsageError(str(err)) from None
    slo = Slo(args.slo_ttft, args.slo_tpot)
    if args.find_capacity and not slo.any:
        raise UsageError("--find-capacity needs --slo-ttft and/or --slo-tpot")
    out, note = console(args), notes(args)
    capacity = None
    try:
        if args.find_capacity:
            capacity = _find_capacity(requests_at, setup, slo, rate, args.attainment, note, args.quiet)
            if capacity.metrics is None:
                note.print(f"[red]no rate meets the SLOs for {100 * args.attainment:.0f}% of requests[/red]")
                return 1
            reqs, rate = requests_at(capacity.rate_per_s), capacity.rate_per_s
        with progress(args, f"serving {len(reqs):,} requests ({shown(reqs.source)})"):
            report = api.serve(
                hardware,
                workload,
                reqs,
                slo_ttft_s=slo.ttft_s,
                slo_tpot_s=slo.tpot_s,
                attainment=args.attainment,
                rate_per_s=rate,
                **options,
            )
    except ServeSetupError as err:
        raise UsageError(str(err)) from None
    title = _title(workload.workload, setup, hardware.system, reqs)
    data = _data(report, capacity)
    _print(args, out, report, title, capacity, data)
    note.print(f"config hash {report.config_hash}")
    _write(args, report, data, title)
    return 0


def _find_capacity(requests_at, setup, slo, rate, attainment, console, quiet):
    from archsim.serving.capacity import find_capacity

    def progress(p):
        if not quiet:
            console.print(f"  rate {p.rate_per_s:8.3f} requests/s: {100 * p.attainment:5.1f}% meet the SLOs")

    return find_capacity(requests_at, setup, slo, rate, attainment, progress=progress)


def _data(report, capacity) -> dict:
    """The JSON document: the run's, and the capacity search's when there was one."""
    data = report.to_dict()
    if capacity is not None:
        data["capacity"] = {
            "rate_per_s": capacity.rate_per_s,
            "attainment": capacity.attainment,
            "target_attainment": capacity.target_attainment,
            "probes": [p.__dict__ for p in capacity.probes],
        }
    return data


def _print(args, out, report, title, capacity, data) -> None:
    from archsim.serving.report import summary_tables

    tables = []
    if capacity is not None:
        tables.append(
            f"[bold]capacity: {capacity.rate_per_s:.3f} requests/s[/bold] with "
            f"{100 * capacity.attainment:.1f}% of requests meeting the SLOs "
            f"(target {100 * capacity.target_attainment:.0f}%, {len(capacity.probes)} runs)"
        )
    lat, totals = summary_tables(report.result, report.metrics, report.slo, shown(title))
    tables += [totals] if args.quiet else [lat, totals]
    emit(args, out, tables, data=data, rows=report.requests())


def _write(args, report, data, title) -> None:
    from pathlib import Path

    from archsim.report.export import write_json
    from archsim.serving.report import perfetto_trace

    if args.json:
        write_json(args.json, data)
    if args.trace_out:
        write_json(args.trace_out, perfetto_trace(report.result))
    if args.plots:
        from archsim.serving.plots import latency_cdfs, over_time

        out = Path(args.plots)
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in (
            ("latency_cdf.png", latency_cdfs(report.result, title, report.slo)),
            ("kv_cache.png", over_time(report.result, title, "kv")),
            ("batch_size.png", over_time(report.result, title, "batch")),
        ):
            fig.savefig(out / name)
