"""`archsim serve`: continuous batching of a request stream (a trace or generated) on a chip,
with latency percentiles, goodput, capacity search and disaggregated prefill/decode."""

from __future__ import annotations

import argparse

from archsim.commands import UsageError, positive_int
from archsim.commands.run import DEFAULT_HW, DEFAULT_WORKLOAD, load_run_inputs

DEFAULT_REQUESTS = 100
DEFAULT_RATE_PER_S = 1.0


def _positive_float(flag: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number (got {text!r})") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be greater than zero (got {text})")
        return value

    parse.__name__ = flag
    return parse


def _fraction(flag: str):
    def parse(text: str) -> float:
        value = _positive_float(flag)(text)
        if value > 1:
            raise argparse.ArgumentTypeError(f"must be in (0, 1] (got {text})")
        return value

    parse.__name__ = flag
    return parse


def _seconds(flag: str):
    """'0.2', '200ms' or '200 ms' -> 0.2 seconds."""

    def parse(text: str) -> float:
        from archsim.units import Dim, parse_quantity

        try:
            value = float(text)
        except ValueError:
            try:
                value = parse_quantity(text.replace(" ", ""), Dim.SECONDS)
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be greater than zero (got {text!r})")
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
    g = p.add_argument_group("requests")
    g.add_argument(
        "--trace",
        metavar="FILE",
        help="Azure trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens), CSV or "
        "JSONL of arrival_s,prompt_tokens,output_tokens, or a shipped trace (azure_llm_2023_conv, ..._code)",
    )
    g.add_argument(
        "--requests",
        metavar="N",
        type=positive_int("--requests"),
        help=f"requests to generate (default {DEFAULT_REQUESTS}), or the first N of the trace",
    )
    g.add_argument(
        "--rate",
        metavar="R",
        type=_positive_float("--rate"),
        help=f"mean arrivals per second (default {DEFAULT_RATE_PER_S:g}); with --trace, rescales it to this rate",
    )
    g.add_argument(
        "--arrival", choices=["poisson", "gamma"], default="poisson", help="arrival process (default poisson)"
    )
    g.add_argument(
        "--cv",
        type=_positive_float("--cv"),
        default=1.0,
        help="coefficient of variation of gamma inter-arrival gaps (default 1; >1 is bursty)",
    )
    g.add_argument("--seed", metavar="N", type=int, default=0, help="seed of the generated stream (default 0)")
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
        type=_positive_float("--time-scale"),
        help="multiply trace arrival times by this (0.5 replays twice as fast)",
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
        type=positive_int("--max-batched-tokens"),
        help="tokens per step (default 8192; 512 for sarathi)",
    )
    g.add_argument(
        "--max-num-seqs",
        metavar="N",
        type=positive_int("--max-num-seqs"),
        default=256,
        help="requests running at once (default 256)",
    )
    g.add_argument(
        "--block-size",
        metavar="N",
        type=positive_int("--block-size"),
        default=16,
        help="tokens per KV block (default 16)",
    )
    g.add_argument(
        "--gpu-memory-utilization",
        metavar="F",
        type=_fraction("--gpu-memory-utilization"),
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
        type=positive_int("--instances"),
        default=1,
        help="co-located replicas, requests dealt round-robin (default 1)",
    )
    g.add_argument(
        "--step-resolution",
        type=int,
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
        type=positive_int("--prefill-instances"),
        help="prefill instances (default 1)",
    )
    g.add_argument(
        "--decode-instances", metavar="N", type=positive_int("--decode-instances"), help="decode instances (default 1)"
    )
    g = p.add_argument_group("output")
    g.add_argument("--json", metavar="PATH", help="write metrics, per-instance figures and the config as JSON")
    g.add_argument("--plots", metavar="DIR", help="write latency CDFs, KV use and batch size over time (PNG)")
    g.add_argument("--timeline", metavar="PATH", help="write a request timeline for Perfetto (Chrome trace JSON)")
    g.add_argument("--quiet", action="store_true", help="print only the summary")


def _requests(args, w):
    """The request stream, a function giving it at any mean rate (for the capacity search), and
    its rate."""
    if args.trace:
        return _trace_requests(args)
    from archsim.serving.arrivals import ArrivalProcess, LengthDist, LengthKind, generate_requests

    if args.time_scale is not None:
        raise UsageError("--time-scale applies to --trace only")
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
            raise UsageError(f"{flag} does not apply to --trace (the trace gives the lengths)")
    if args.rate is not None and args.time_scale is not None:
        raise UsageError("give --rate or --time-scale with --trace, not both")
    trace = load_trace(args.trace)
    if args.requests:
        trace = trace.head(args.requests)
    native = trace.rate_per_s if len(trace) > 1 else float("inf")
    if native == float("inf") and (args.rate or args.find_capacity):
        raise UsageError("the trace's arrivals span no time: there is no arrival rate to rescale")

    def at(rate: float):
        return trace.scaled(native / rate)

    reqs = at(args.rate) if args.rate else trace.scaled(args.time_scale) if args.time_scale else trace
    return reqs, at, reqs.rate_per_s if len(reqs) > 1 else float("inf")


def _setup(args, system, w):
    from archsim.config.loader import load_system
    from archsim.serving.scheduler import DEFAULT_MAX_BATCHED_TOKENS, Policy, SchedulerConfig
    from archsim.serving.simulate import Disaggregation, ServeSetup

    policy = Policy(args.policy)
    sched = SchedulerConfig(
        policy, args.max_batched_tokens or DEFAULT_MAX_BATCHED_TOKENS[policy], args.max_num_seqs, args.block_size
    )
    if args.step_resolution < 0:
        raise UsageError(f"--step-resolution: must be 0 or more (got {args.step_resolution})")
    extra = {}
    disagg = None
    if any(v is not None for v in (args.prefill_hw, args.decode_hw, args.prefill_instances, args.decode_instances)):
        if policy is Policy.STATIC:
            raise UsageError("static batching cannot be disaggregated; use --policy vllm, sarathi or orca")
        if args.instances != 1:
            raise UsageError("--instances is for co-located serving; use --prefill-instances and --decode-instances")
        prefill, p_cfg = load_system(args.prefill_hw) if args.prefill_hw else (system, None)
        decode, d_cfg = load_system(args.decode_hw) if args.decode_hw else (system, None)
        disagg = Disaggregation(prefill, decode, args.prefill_instances or 1, args.decode_instances or 1)
        extra = {"prefill_hardware": p_cfg, "decode_hardware": d_cfg}
    setup = ServeSetup(
        w, system, sched, args.gpu_memory_utilization, args.kv_blocks, args.instances, args.step_resolution, disagg
    )
    serving = {
        "policy": policy.value,
        "max_batched_tokens": sched.max_batched_tokens,
        "max_num_seqs": sched.max_num_seqs,
        "block_size": sched.block_size,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "kv_blocks": args.kv_blocks,
        "instances": args.instances,
        "step_resolution": args.step_resolution,
        "disaggregation": None
        if disagg is None
        else {
            "prefill_instances": disagg.prefill_instances,
            "decode_instances": disagg.decode_instances,
            "prefill_chip": disagg.prefill_system.chip.name,
            "decode_chip": disagg.decode_system.chip.name,
        },
    }
    return setup, {**serving, **extra}


def run(args) -> int:
    from rich.console import Console

    from archsim.serving.metrics import Slo
    from archsim.serving.simulate import ServeSetupError, serve

    system, w, resolved = load_run_inputs(args.hw, args.workload, fusion=args.fusion)
    reqs, requests_at, rate = _requests(args, w)
    setup, serving = _setup(args, system, w)
    slo = Slo(args.slo_ttft, args.slo_tpot)
    if args.find_capacity and not slo.any:
        raise UsageError("--find-capacity needs --slo-ttft and/or --slo-tpot")
    resolved = resolved.with_options(
        serving=serving,
        requests={
            "source": reqs.source,
            "count": len(reqs),
            "digest": reqs.digest(),
            "rate_per_s": rate,
            "slo_ttft_s": slo.ttft_s,
            "slo_tpot_s": slo.tpot_s,
            "attainment": args.attainment,
        },
    )
    console = Console()
    d = setup.disaggregation

    def instance(s) -> str:  # a chip, or a tensor-parallel group of a system's chips
        return s.chip.name if s.chips == 1 else f"{s.chip.name} x{s.chips} (TP {s.chips})"

    where = (
        f"prefill {d.prefill_instances} x {instance(d.prefill_system)}, decode {d.decode_instances} x "
        f"{instance(d.decode_system)}"
        if d
        else f"{setup.instances} x {instance(system)}"
        if setup.instances > 1
        else instance(system)
    )
    title = f"{w.model.name} on {where}: {setup.scheduler.policy.value}, {len(reqs):,} requests ({reqs.source})"
    try:
        capacity = None
        if args.find_capacity:
            capacity = _find_capacity(requests_at, setup, slo, rate, args.attainment, console, args.quiet)
            if capacity.metrics is None:
                console.print(f"[red]no rate meets the SLOs for {100 * args.attainment:.0f}% of requests[/red]")
                return 1
            reqs = requests_at(capacity.rate_per_s)
        result = serve(reqs, setup)
    except ServeSetupError as err:
        raise UsageError(str(err)) from None
    metrics = result.metrics(slo)
    _print(console, result, metrics, slo, title, capacity, args)
    console.print(f"config hash {resolved.hash}")
    _write(args, result, metrics, slo, resolved, capacity, title)
    return 0


def _find_capacity(requests_at, setup, slo, rate, attainment, console, quiet):
    from archsim.serving.capacity import find_capacity

    def progress(p):
        if not quiet:
            console.print(f"  rate {p.rate_per_s:8.3f} requests/s: {100 * p.attainment:5.1f}% meet the SLOs")

    return find_capacity(requests_at, setup, slo, rate, attainment, progress=progress)


def _print(console, result, metrics, slo, title, capacity, args) -> None:
    from archsim.serving.report import summary_tables

    if capacity is not None:
        console.print(
            f"[bold]capacity: {capacity.rate_per_s:.3f} requests/s[/bold] with "
            f"{100 * capacity.attainment:.1f}% of requests meeting the SLOs "
            f"(target {100 * capacity.target_attainment:.0f}%, {len(capacity.probes)} runs)"
        )
    lat, totals = summary_tables(result, metrics, slo, title)
    if not args.quiet:
        console.print(lat)
    console.print(totals)


def _write(args, result, metrics, slo, resolved, capacity, title) -> None:
    from pathlib import Path

    from archsim.report.export import write_json
    from archsim.serving.report import perfetto_trace, serve_dict

    if args.json:
        data = serve_dict(result, metrics, slo, resolved)
        if capacity is not None:
            data["capacity"] = {
                "rate_per_s": capacity.rate_per_s,
                "attainment": capacity.attainment,
                "target_attainment": capacity.target_attainment,
                "probes": [p.__dict__ for p in capacity.probes],
            }
        write_json(args.json, data)
    if args.timeline:
        write_json(args.timeline, perfetto_trace(result))
    if args.plots:
        from archsim.serving.plots import latency_cdfs, over_time

        out = Path(args.plots)
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in (
            ("latency_cdf.png", latency_cdfs(result, title)),
            ("kv_cache.png", over_time(result, title, "kv")),
            ("batch_size.png", over_time(result, title, "batch")),
        ):
            fig.savefig(out / name, dpi=120)
            import matplotlib.pyplot as plt

            plt.close(fig)
