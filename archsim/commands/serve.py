"""`archsim serve`: continuous batching of a request stream (a trace or generated) on a chip or a
layout of chips, with latency percentiles, goodput, utilisation, capacity search and
disaggregated prefill/decode (flags: archsim/commands/serve_flags.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archsim.commands import UsageError, check_outputs, require_plots, shown
from archsim.commands.output import console, emit, notes, progress
from archsim.commands.serve_flags import DEFAULT_RATE_PER_S, DEFAULT_REQUESTS, FLAGS, SESSION_FLAGS, add_parser

if TYPE_CHECKING:
    from archsim.serving.options import ServeOptions

__all__ = ["add_parser", "run"]


def _requests(args, w):
    """The request stream, a function giving it at any mean rate (for the capacity search), and
    its rate."""
    if args.offline and (args.rate is not None or args.time_scale is not None or args.find_capacity):
        raise UsageError("--offline sends every request at once: it takes no --rate, --time-scale or --find-capacity")
    given = [f"--{k.replace('_', '-')}" for k in SESSION_FLAGS if getattr(args, k) is not None]
    if given and args.sessions is None:
        raise UsageError(f"{', '.join(given)} shape generated sessions: give --sessions N")
    if args.requests_from:
        if args.sessions is not None:
            raise UsageError("--sessions generates sessions; a session trace goes to --requests-from alone")
        reqs, at, rate = _trace_requests(args)
    elif args.sessions is not None:
        reqs, at, rate = _generated_sessions(args, w)
    else:
        from archsim.serving.arrivals import ArrivalProcess, LengthDist, LengthKind, generate_requests

        if args.time_scale is not None:
            raise UsageError("--time-scale applies to --requests-from only")
        sc = w.scenario
        prompt = args.prompt or LengthDist(LengthKind.FIXED, sc.prompt_tokens)
        output = args.generate or LengthDist(LengthKind.FIXED, sc.output_tokens)
        n, rate = args.requests or DEFAULT_REQUESTS, args.rate or DEFAULT_RATE_PER_S
        process = ArrivalProcess(args.arrival)

        def generated(r: float):
            reqs = generate_requests(r, n, prompt, output, process, args.cv, args.seed)
            return reqs.with_shared_prefix(args.shared_prefix, args.prefix_groups) if args.shared_prefix else reqs

        reqs, at = generated(rate), generated
    if args.offline:
        return reqs.at_once(), None, float("inf")
    return reqs, at, rate


def _generated_sessions(args, w):
    from archsim.serving.arrivals import ArrivalProcess, LengthDist, LengthKind
    from archsim.serving.session_gen import GapDist, GapKind, SessionSpec, generate_sessions

    for flag, value in (("--requests", args.requests), ("--shared-prefix", args.shared_prefix)):
        if value is not None:
            raise UsageError(f"{flag} does not apply to --sessions (a session is its own prefix group)")
    if args.time_scale is not None:
        raise UsageError("--time-scale applies to --requests-from only")
    sc = w.scenario
    prompt = args.prompt or LengthDist(LengthKind.FIXED, sc.prompt_tokens)
    spec = SessionSpec(
        args.sessions,
        args.turns or LengthDist(LengthKind.FIXED, 4),
        prompt,
        args.turn_prompt or prompt,
        args.generate or LengthDist(LengthKind.FIXED, sc.output_tokens),
        args.think_time or GapDist(GapKind.FIXED, 5.0),
        args.tool_calls or 0.0,
        args.tool_time or GapDist(GapKind.FIXED, 2.0),
    )
    process = ArrivalProcess(args.arrival)

    def generated(r: float):
        return generate_sessions(r, spec, process, args.cv, args.seed)

    rate = args.rate or DEFAULT_RATE_PER_S
    return generated(rate), generated, rate


def _trace_requests(args):
    from archsim.serving.requests import load_trace

    for flag, value in (
        ("--prompt", args.prompt),
        ("--generate", args.generate),
        ("--shared-prefix", args.shared_prefix),
    ):
        if value is not None:
            raise UsageError(f"{flag} does not apply to --requests-from (the trace gives the requests)")
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


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """The serving options the flags give, checked as `archsim.serve` checks them (a bad one is
    named by its flag)."""
    from archsim.errors import ConfigError, Problem
    from archsim.serving import options as o

    spec = None
    if args.draft is not None or args.mtp_layers is not None:
        spec = o.SpeculativeOptions(args.draft, args.mtp_layers, args.spec_tokens, args.spec_acceptance)
    disagg = None
    if any(v is not None for v in (args.prefill_hw, args.decode_hw, args.prefill_instances, args.decode_instances)):
        disagg = o.DisaggregationOptions(
            args.prefill_hw, args.decode_hw, args.prefill_instances or 1, args.decode_instances or 1
        )
    options = o.ServeOptions(
        scheduler=o.SchedulerOptions(
            policy=args.policy,
            max_batched_tokens=args.max_batched_tokens,
            max_num_seqs=args.max_num_seqs,
            block_size=args.block_size,
            preemption=args.preemption,
            prefix_caching=not args.no_prefix_caching,
            max_model_len=args.max_model_len,
            max_tokens=args.max_tokens,
        ),
        kv_pool=o.KvPoolOptions(args.gpu_memory_utilization, args.kv_blocks, args.swap_space, args.kv_offload or 0.0),
        layout=o.LayoutOptions(args.tp, args.pp, args.ep, args.instances),
        host=args.host,
        step_resolution=args.step_resolution,
        speculative=spec,
        disaggregation=disagg,
        slo=o.SloOptions(args.slo_ttft, args.slo_tpot, args.attainment),
    )
    problems = options.problems()
    if problems:
        raise ConfigError([Problem("archsim serve", None, FLAGS[key], why) for key, why in problems])
    return options


def _instance(setup, s) -> str:
    """A chip, or a layout of a system's chips."""
    par = setup.parallelism
    if par is None:
        return s.chip.name if s.chips == 1 else f"{s.chip.name} x{s.chips} (TP {s.chips})"
    return s.chip.name if par.is_single else f"{s.chip.name} x{par.chips} ({par.label()})"


def _title(w, setup, system, reqs) -> str:
    d = setup.disaggregation
    where = (
        f"prefill {d.prefill_instances} x {_instance(setup, d.prefill_system)}, decode {d.decode_instances} x "
        f"{_instance(setup, d.decode_system)}"
        if d
        else f"{setup.instances} x {_instance(setup, system)}"
        if setup.instances > 1
        else _instance(setup, system)
    )
    spec = setup.speculation
    extra = "" if spec is None else f", speculating {spec.tokens} tokens ({spec.draft.model.name})"
    return (
        f"{w.model.name} on {where}: {setup.scheduler.policy.value} policy, {setup.host.name} host{extra}, "
        f"{len(reqs):,} requests ({reqs.source})"
    )


def run(args) -> int:
    from archsim import api, opcache
    from archsim.commands.run import load_inputs
    from archsim.serving.metrics import Slo
    from archsim.serving.setup import ServeSetupError

    check_outputs(
        args,
        ("json", "trace_out", "plots"),
        ("plots",),
        (args.hw, args.workload, args.requests_from, args.prefill_hw, args.decode_hw, args.draft),
    )
    if args.plots:
        require_plots()
    if args.no_cache:
        opcache.set_enabled(False)
    hardware, workload = load_inputs(args, args.hw, scenario_flags=False)
    reqs, requests_at, rate = _requests(args, workload.workload)
    options = serve_options(args)
    try:
        built = api.calls.serve_setup(hardware, workload, options)
    except ServeSetupError as err:
        raise UsageError(str(err)) from None
    setup = built[0]
    slo = Slo(options.slo.ttft_s, options.slo.tpot_s)
    if args.find_capacity and not slo.any:
        raise UsageError("--find-capacity needs --slo-ttft and/or --slo-tpot")
    out, note = console(args), notes(args)
    capacity = None
    try:
        if args.find_capacity:
            capacity = _find_capacity(requests_at, setup, slo, rate, options.slo.attainment, note, args.quiet)
            if capacity.metrics is None:
                note.print(f"[red]no rate meets the SLOs for {100 * args.attainment:.0f}% of requests[/red]")
                return 1
            reqs, rate = requests_at(capacity.rate_per_s), capacity.rate_per_s
        with progress(args, f"serving {len(reqs):,} requests ({shown(reqs.source)})"):
            report = api.calls.serve_built(hardware, workload, reqs, built, options.slo, rate)
    except ServeSetupError as err:
        raise UsageError(str(err)) from None
    title = _title(workload.workload, setup, hardware.system, reqs)
    written = args.json or getattr(args, "format", "table") == "json"  # the document is built only to be written
    data = _data(report, capacity) if written else {}
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
            "breaks": [b.__dict__ for b in capacity.breaks()],
        }
    return data


def _breaks(capacity) -> str:
    parts = []
    for b in capacity.breaks():
        held = f"holds to {b.holds_to_per_s:.3f}" if b.holds_to_per_s is not None else "never holds"
        broke = f", breaks by {b.breaks_at_per_s:.3f} requests/s" if b.breaks_at_per_s is not None else ", never breaks"
        parts.append(f"{b.name} {held}{broke}")
    return "; ".join(parts)


def _print(args, out, report, title, capacity, data: dict) -> None:
    from archsim.serving.report import summary_tables

    tables = []
    if capacity is not None:
        tables.append(
            f"[bold]capacity: {capacity.rate_per_s:.3f} requests/s[/bold] with "
            f"{100 * capacity.attainment:.1f}% of requests meeting the SLOs "
            f"(target {100 * capacity.target_attainment:.0f}%, {len(capacity.probes)} runs): {_breaks(capacity)}"
        )
    lat, totals = summary_tables(report.result, report.metrics, report.slo, shown(title))
    tables += [totals] if args.quiet else [lat, totals]
    # the energy (a timeline priced step by step, with shapes only it needs) only where it is shown
    fmt = getattr(args, "format", "table")
    if fmt == "table" and not args.quiet and report.energy is not None:
        from archsim.serving.energy_report import serve_energy_table

        tables.append(serve_energy_table(report.energy))
    rows = report.requests() if fmt == "csv" else None  # one per request
    emit(args, out, tables, data=data, rows=rows)


def _write(args, report, data: dict, title) -> None:
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
        if report.energy is not None:
            from archsim.serving.energy_report import power_over_time

            power_over_time(report.energy, title).savefig(out / "power.png")
