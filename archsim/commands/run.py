"""`archsim run`: a generation (prefill, then decode) of a workload on a chip."""

from __future__ import annotations

import argparse
from dataclasses import replace

from archsim.commands import UsageError, positive_int, require_plots

DEFAULT_HW = "h200"
DEFAULT_WORKLOAD = "llama3_8b"
DEFAULT_TRACE_STEPS = (("prefill", 0), ("decode", 1))


def add_workload_flags(p) -> None:
    """Flags that pick and adjust the workload (shared with `archsim compare`)."""
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload YAML or shipped name (default llama3_8b)")
    p.add_argument(
        "--model",
        metavar="CONFIG.json",
        help="a Hugging Face config.json as the model (the workload's scenario is kept)",
    )
    p.add_argument("--batch", type=positive_int("--batch"), help="sequences decoded together")
    p.add_argument("--prompt", type=positive_int("--prompt"), help="prompt tokens per sequence")
    p.add_argument("--generate", type=positive_int("--generate"), help="tokens generated per sequence")
    p.add_argument("--fusion", choices=["eager", "fused"], help="kernel fusion profile (default from workload)")
    p.add_argument(
        "--kv-stride",
        type=positive_int("--kv-stride"),
        default=64,
        help="decode KV lengths between exactly simulated attention samples (default 64)",
    )


def add_parser(sub) -> None:
    run = sub.add_parser("run", help="simulate a generation: prefill, then decode")
    run.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    add_workload_flags(run)
    run.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    run.add_argument("--csv", metavar="PATH", help="write the per-op table (prefill and first decode step) as CSV")
    run.add_argument("--trace", metavar="PATH", help="write a Chrome trace-event JSON of steps (open in Perfetto)")
    run.add_argument(
        "--trace-step",
        action="append",
        type=trace_step,
        metavar="prefill|decode:N",
        help="step to trace, repeatable (default: prefill and decode:1, the first decode step)",
    )
    run.add_argument("--plots", metavar="DIR", help="write PNG plots (roofline, breakdown, decode, batch, memory)")
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    add_parallel_flags(run)


def add_parallel_flags(p) -> None:
    """--tp, --pp and --ep: how the model is spread over the chips of a multi-chip system."""
    p.add_argument("--tp", type=positive_int("--tp"), default=1, help="tensor parallel chips (default 1)")
    p.add_argument("--pp", type=positive_int("--pp"), default=1, help="pipeline stages (default 1)")
    p.add_argument("--ep", type=positive_int("--ep"), default=1, help="expert parallel groups, MoE only (default 1)")


def communication(step) -> dict:
    """Collective time of a step on the busiest chip (all its micro-batches), how much of it ran
    under compute, the exposed rest and its share of the step, and the pipeline bubble."""
    micro = step.pipeline.micro_batches if step.pipeline else 1
    comm, hidden = micro * step.comm_s, micro * step.comm_hidden_s
    return {
        "time_s": step.time_s,
        "collectives_s": comm,
        "hidden_s": hidden,
        "exposed_s": comm - hidden,
        "exposed_share": (comm - hidden) / step.time_s if step.time_s else 0.0,
        "bubble_s": step.pipeline.bubble_s if step.pipeline else 0.0,
        "micro_batches": micro,
    }


def communication_table(result, par, system_name: str):
    from rich.table import Table

    from archsim.units import format_seconds

    t = Table(title=f"communication on the busiest chip ({par.label()} on {system_name})", title_justify="left")
    t.caption = "a pipeline step's collectives are all its micro-batches'; hidden: run under the GEMM producing them"
    for col in ("step", "time", "collectives", "hidden", "exposed", "share", "bubble"):
        t.add_column(col, justify="left" if col == "step" else "right", no_wrap=True)
    steps = [("prefill", result.prefill)] + ([("first decode step", result.decode)] if result.decode else [])
    for name, step in steps:
        c = communication(step)
        t.add_row(
            name,
            format_seconds(c["time_s"]),
            format_seconds(c["collectives_s"]),
            format_seconds(c["hidden_s"]),
            format_seconds(c["exposed_s"]),
            f"{100 * c['exposed_share']:.1f}%",
            format_seconds(c["bubble_s"]) if step.pipeline else "-",
        )
    return t


def trace_step(text: str) -> tuple[str, int]:
    """argparse type: `prefill` -> ("prefill", 0); `decode:N` -> ("decode", N), N from 1."""
    if text == "prefill":
        return ("prefill", 0)
    kind, _, n = text.partition(":")
    if kind == "decode" and n.isdigit() and int(n) >= 1:
        return ("decode", int(n))
    raise argparse.ArgumentTypeError(f"--trace-step: expected prefill or decode:N with N from 1 (got {text!r})")


def load_workload_inputs(workload: str, batch=None, prompt=None, generate=None, fusion=None, model=None):
    """The workload with CLI overrides and, from `model` (a config.json), its model and dtype;
    its resolved config. Fields of the config.json that archsim cannot model go to stderr."""
    import sys

    from archsim.config.hf import load_hf_config, model_cfg
    from archsim.config.loader import load_workload
    from archsim.graph.model import DTypes, Fusion

    w, wl_cfg = load_workload(workload)
    if model:
        hf = load_hf_config(model)
        if hf.unmodelled:
            print(f"warning: {model}: archsim does not model: {'; '.join(hf.unmodelled)}", file=sys.stderr)
        dtypes = DTypes(hf.dtype, hf.dtype, hf.dtype) if hf.dtype else w.dtypes
        w = replace(w, model=hf.model, dtypes=dtypes)
        wl_cfg = {
            **wl_cfg,
            "name": hf.model.name,
            "model": model_cfg(hf.model),
            "dtypes": {
                "weights": dtypes.weights.value,
                "activations": dtypes.activations.value,
                "kv_cache": dtypes.kv_cache.value,
            },
        }
    sc = w.scenario
    sc = replace(
        sc,
        batch=batch or sc.batch,
        prompt_tokens=prompt or sc.prompt_tokens,
        output_tokens=generate or sc.output_tokens,
    )
    w = replace(w, scenario=sc, fusion=Fusion(fusion) if fusion else w.fusion)
    wl_cfg = {
        **wl_cfg,
        "scenario": {"batch": sc.batch, "prompt_tokens": sc.prompt_tokens, "output_tokens": sc.output_tokens},
        "fusion": w.fusion.value,
    }
    return w, wl_cfg


def load_run_inputs(hw: str, workload: str, batch=None, prompt=None, generate=None, fusion=None, model=None):
    """Hardware and workload with CLI overrides applied, and their resolved configuration (no
    options yet: each command adds its own)."""
    from archsim.config.loader import load_system
    from archsim.config.resolved import ResolvedConfig

    system, hw_cfg = load_system(hw)
    w, wl_cfg = load_workload_inputs(workload, batch, prompt, generate, fusion, model)
    return system, w, ResolvedConfig(hw_cfg, wl_cfg)


def check_trace_steps(steps, decode_steps: int) -> list[tuple[str, int]]:
    """The steps to trace: as asked (each must exist in the run), or the default ones that do."""
    if not steps:
        return [s for s in DEFAULT_TRACE_STEPS if s[1] <= decode_steps]
    for _kind, n in steps:
        if n > decode_steps:
            raise UsageError(
                f"--trace-step: decode:{n} is past the last decode step of this run "
                f"({decode_steps}: --generate minus 1) (got decode:{n})"
            )
    return sorted(set(steps), key=lambda s: (s[0] != "prefill", s[1]))


def trace_document(result, w, system, steps: list[tuple[str, int]], parallelism=None) -> dict:
    """Trace of the chosen steps of a run, each placed at its time in the run."""
    from archsim.graph.builder import Step
    from archsim.graph.model import Phase
    from archsim.report.trace import TraceBuilder
    from archsim.runner.generation import simulate_step

    builder = TraceBuilder(system.chip)
    s = w.scenario
    for kind, n in steps:
        if kind == "prefill":
            builder.add_step(result.prefill, f"prefill: batch {s.batch} x {s.prompt_tokens} tokens", 0.0)
            continue
        step = (
            result.decode
            if n == 1
            else simulate_step(w, system, Step(Phase.DECODE, s.batch, 1, s.prompt_tokens + n - 1), parallelism)
        )
        start_s = result.ttft_s + float(result.decode_step_s[: n - 1].sum())
        builder.add_step(step, f"decode step {n}: batch {s.batch}, KV {step.step.kv_len}", start_s)
    return builder.document()


def write_plots(out_dir: str, result, w, system, kv_stride: int, console) -> list:
    """The plots of a run; the tokens/s-against-batch sweep runs the scenario at a few batches."""
    from pathlib import Path

    from rich.progress import Progress

    from archsim.report import plots
    from archsim.report.sweep import batch_sweep

    d, chip = Path(out_dir), system.chip
    steps = [("prefill", result.prefill)] + ([("first decode step", result.decode)] if result.decode else [])
    try:
        paths = [
            plots.roofline(d / "roofline.png", steps, chip, w.dtypes.activations),
            plots.breakdown(d / "breakdown.png", steps),
            plots.decode_by_kv(d / "decode_kv.png", [(chip.name, result)]),
            plots.memory(d / "memory.png", [(chip.name, result.footprint)]),
        ]
    except plots.PlotsUnavailable as err:
        raise UsageError(f"--plots: {err}") from None
    with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("tokens/s against batch", total=None)
        batches, runs, limit = batch_sweep(
            w,
            system,
            kv_stride,
            known=result,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    title = f"{w.model.name} on {chip.name}: prompt {w.scenario.prompt_tokens}, generate {w.scenario.output_tokens}"
    paths.append(plots.throughput_by_batch(d / "throughput_batch.png", batches, runs, limit, title))
    return paths


def run(args) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from archsim.config.resolved import run_options
    from archsim.graph.parallel import Parallelism, ParallelismError
    from archsim.report.export import run_dict, write_json
    from archsim.report.tables import print_run, summary_table
    from archsim.runner.generation import run_generation

    system, w, resolved = load_run_inputs(
        args.hw, args.workload, args.batch, args.prompt, args.generate, args.fusion, args.model
    )
    par = Parallelism(args.tp, args.pp, args.ep)
    resolved = resolved.with_options(**run_options(args.kv_stride, par.tp, par.pp, par.ep))
    if not par.is_single and args.plots:
        raise UsageError("--plots: the batch sweep runs on one chip; leave out --plots with --tp/--pp/--ep")
    steps = check_trace_steps(args.trace_step, w.scenario.output_tokens - 1) if args.trace else []
    if args.plots:
        require_plots()
    console = Console()
    with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("decode attention", total=None)
        try:
            result = run_generation(
                w,
                system,
                kv_stride=args.kv_stride,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                parallelism=par,
            )
        except ParallelismError as err:
            raise UsageError(f"--tp/--pp/--ep: {err}") from None
    if args.quiet:
        console.print(summary_table(result, system.chip.name, w.model.name))
    else:
        print_run(result, system.chip.name, w.model.name, system.chip.clock_hz, console)
    if not par.is_single:
        console.print(communication_table(result, par, f"{system.chip.name} x{system.chips}"))
    elif system.chips > 1:
        console.print(f"note: one of the {system.chips} chips runs everything; --tp/--pp/--ep spread the model")
    console.print(f"config hash {resolved.hash}")
    if args.json:
        data = run_dict(result, resolved)
        if not par.is_single:
            data["communication"] = {
                name: communication(step)
                for name, step in (("prefill", result.prefill), ("decode", result.decode))
                if step
            }
        write_json(args.json, data)
    if args.csv:
        from archsim.report.csvfile import write_op_csv

        write_op_csv(args.csv, result)
    if args.trace and not result.interrupted:
        from archsim.report.trace import write_trace

        write_trace(args.trace, trace_document(result, w, system, steps, par))
        console.print(f"trace {args.trace} ({', '.join(k if k == 'prefill' else f'decode:{n}' for k, n in steps)})")
    if args.plots and not result.interrupted:
        for path in write_plots(args.plots, result, w, system, args.kv_stride, console):
            console.print(f"plot {path}")
    return 130 if result.interrupted else 0
