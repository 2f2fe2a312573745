"""`archsim run`: a generation (prefill, then decode) of a workload on a chip."""

from __future__ import annotations

import argparse

from archsim import limits
from archsim.commands import UsageError, check_outputs, positive_int, require_plots, shown, started
from archsim.commands.intervals import add_interval_flag, check_interval, screen_rerun, step_interval
from archsim.commands.output import add_output_flags, console, emit, notes, progress, renamed

DEFAULT_HW = "h200"
DEFAULT_WORKLOAD = "llama3_8b"
DEFAULT_TRACE_STEPS = (("prefill", 0), ("decode", 1))


def add_workload_flags(p) -> None:
    """Flags that pick and adjust the workload (shared with `archsim compare` and `archsim scale`)."""
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload YAML or shipped name (default llama3_8b)")
    p.add_argument(
        "--model",
        metavar="CONFIG.json",
        help="a Hugging Face config.json as the model (the workload's scenario and dtypes are kept)",
    )
    p.add_argument(
        "--model-dtypes",
        action="store_true",
        help="with --model: take the checkpoint's formats (torch_dtype, quantization_config) as the dtypes",
    )
    p.add_argument("--batch", type=positive_int("--batch", limits.MAX_BATCH), help="sequences decoded together")
    p.add_argument("--prompt", type=positive_int("--prompt", limits.MAX_TOKENS), help="prompt tokens per sequence")
    p.add_argument(
        "--generate", type=positive_int("--generate", limits.MAX_TOKENS), help="tokens generated per sequence"
    )
    p.add_argument("--fusion", choices=["eager", "fused"], help="kernel fusion profile (default from workload)")
    add_set_flag(p)
    p.add_argument(
        "--kv-stride",
        type=positive_int("--kv-stride"),
        default=1,
        help="decode KV lengths between simulated attention samples, interpolated between "
        "(default 1: every decode step at its own KV length, exact)",
    )


def add_set_flag(p) -> None:
    p.add_argument(
        "--set",
        action="append",
        type=setting,
        metavar="PATH=VALUE",
        help="set a value of the hardware or workload file by dotted path, as a sweep does, the "
        "hardware./workload. prefix optional where the path is plain (repeatable): --set "
        "workload.dtypes.weights=fp8 --set 'hbm.data_rate=8 Gbps' --set hardware.hbm.bandwidth=9.6TB/s",
    )


def setting(text: str) -> tuple[str, str, object]:
    """argparse type: `[hardware.]x.y=VALUE` or `[workload.]x.y=VALUE` -> (root, 'x.y', value read
    as a YAML 1.2 scalar, as a file would hold it: `8` a number, `8 Gbps` and `0x10` text). The
    root may be left out where the path names a value of one of the two (`hbm.data_rate`)."""
    from archsim.config.yamlfile import read_value

    path, eq, value = text.partition("=")
    root, dot, rest = path.strip().partition(".")
    if eq and root not in ("hardware", "workload"):
        root, rest = implied_root(path.strip()), path.strip()
        dot = "." if root else ""
    if not eq or root not in ("hardware", "workload") or not dot or not rest:
        raise argparse.ArgumentTypeError(
            f"expected hardware.PATH=VALUE or workload.PATH=VALUE, e.g. workload.scenario.batch=8 (got {text[:80]!r})"
        )
    parsed = read_value(value.strip()) if value.strip() else value
    return root, rest, value if isinstance(parsed, dict) or parsed is None else parsed


def implied_root(path: str) -> str:
    """ "hardware" or "workload": the one file whose schema has `path` (a path both or neither
    have: "")."""
    from archsim.config.paths import path_problem

    parts = tuple(path.split("."))
    if not all(parts):
        return ""
    roots = [root for root in ("hardware", "workload") if path_problem((root, *parts)) is None]
    return roots[0] if len(roots) == 1 else ""


def add_parser(sub) -> None:
    run = sub.add_parser("run", help="simulate a generation: prefill, then decode")
    run.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    add_workload_flags(run)
    run.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    add_interval_flag(run)
    run.add_argument("--csv", metavar="PATH", help="write the per-op table (prefill and first decode step) as CSV")
    run.add_argument("--trace-out", metavar="PATH", help="write a Chrome trace-event JSON of steps (open in Perfetto)")
    renamed(run, "--trace", "--trace-out PATH")
    run.add_argument(
        "--trace-step",
        action="append",
        type=trace_step,
        metavar="prefill|decode:N",
        help="step to trace, repeatable (default: prefill and decode:1, the first decode step)",
    )
    run.add_argument("--plots", metavar="DIR", help="write PNG plots (roofline, breakdown, decode, batch, memory)")
    run.add_argument(
        "--ops",
        action="store_true",
        help="also print the per-op tables of the prefill and first decode step, and energy, power and area "
        "in full (--json and --csv always hold them)",
    )
    add_output_flags(run, quiet_help="no progress; print only the summary")
    add_parallel_flags(run)
    add_cache_flag(run)
    run.add_argument(
        "--fidelity",
        choices=("full", "screen"),
        default="full",
        help="full (default), or screen: fewer tilings played, a one-step power hold, decode attention "
        "on a KV grid (docs/performance.md: within 2%%)",
    )


def add_cache_flag(p) -> None:
    p.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the on-disk op-result cache (simulate every op)"
    )


def apply_cache_flag(args) -> None:
    """--no-cache: the on-disk op cache off for this process (and the workers it starts)."""
    if getattr(args, "no_cache", False):
        from archsim import opcache

        opcache.set_enabled(False)


def add_parallel_flags(p) -> None:
    """--tp, --pp and --ep: how the model is spread over the chips of a multi-chip system."""
    p.add_argument("--tp", type=positive_int("--tp"), default=1, help="tensor parallel chips (default 1)")
    p.add_argument("--pp", type=positive_int("--pp"), default=1, help="pipeline stages (default 1)")
    p.add_argument("--ep", type=positive_int("--ep"), default=1, help="expert parallel groups, MoE only (default 1)")


def communication_table(report, system_name: str):
    from rich.table import Table

    from archsim.units import format_seconds

    par = report.parallelism
    t = Table(title=f"communication on the busiest chip ({par.label()} on {system_name})", title_justify="left")
    t.caption = "a pipeline step's collectives are all its micro-batches'; hidden: run under the GEMM producing them"
    for col in ("step", "time", "collectives", "hidden", "exposed", "share", "bubble"):
        t.add_column(col, justify="left" if col == "step" else "right", no_wrap=True)
    for name, c in report.communication().items():
        t.add_row(
            "first decode step" if name == "decode" else name,
            format_seconds(c["time_s"]),
            format_seconds(c["collectives_s"]),
            format_seconds(c["hidden_s"]),
            format_seconds(c["exposed_s"]),
            f"{100 * c['exposed_share']:.1f}%",
            format_seconds(c["bubble_s"]) if c["micro_batches"] > 1 or c["bubble_s"] else "-",
        )
    return t


def energy_tables(report) -> list:
    """The run's energy and power against the chip's limit (the clock it held per op kind) and
    its die's area, in full (`--ops`)."""
    from archsim.report.energy import area_table, energy_table, format_joules, power_table

    e, a, chip = report.energy, report.area, report.hardware.system.chip
    name = shown(chip.name)
    out: list = []
    if e is not None:
        chips = f" (each of {e.chips} chips; the run's total: {format_joules(e.energy_j)})" if e.chips > 1 else ""
        out.append(
            energy_table(
                e,
                f"energy on {name}{chips}: {e.tokens_per_j:,.3g} tokens/J, "
                f"{format_joules(e.decode_j_per_token)} per decode token",
            )
        )
        out.append(power_table(e, name))
    if a is not None and chip.area is not None:
        out.append(area_table(a, name, chip.area.node.value, report.result, e.chips if e else 1))
    return out


def summary_tables(report, chip_name: str, model_name: str, ops: bool) -> list:
    """The run at a glance: the summary (TTFT and TPOT first), one line of diagnosis, and the
    die's area in a line (in full with the other tables under --ops)."""
    from archsim.report.summary import diagnosis, run_summary

    out: list = [run_summary(report.result, chip_name, model_name, report.energy), diagnosis(report.result)]
    chip, a = report.hardware.system.chip, report.area
    if not ops and a is not None and chip.area is not None:
        out.append(f"die {a.die_mm2:,.0f} mm2" + ("" if a.fits_reticle else f": over the reticle, {a.dies} chiplets"))
    return out


def trace_step(text: str) -> tuple[str, int]:
    """argparse type: `prefill` -> ("prefill", 0); `decode:N` -> ("decode", N), N from 1."""
    if text == "prefill":
        return ("prefill", 0)
    kind, _, n = text.partition(":")
    if kind == "decode" and n.isdigit() and int(n) >= 1:
        return ("decode", int(n))
    raise argparse.ArgumentTypeError(f"--trace-step: expected prefill or decode:N with N from 1 (got {text!r})")


def load_inputs(args, hw: str | None = None, scenario_flags: bool = True):
    """The hardware and workload of a command: files or shipped names, the Hugging Face model,
    then the scenario flags (--batch, --prompt, --generate; unless `scenario_flags` is false),
    --fusion, then each --set, all validated as files are. Warnings to stderr."""
    import sys

    from archsim.api import load_system, load_workload

    settings = getattr(args, "set", None) or []
    from archsim.errors import printable

    model = getattr(args, "model", None)
    if getattr(args, "model_dtypes", False) and model is None:
        raise UsageError("--model-dtypes: takes the formats of a --model config.json; give --model")
    workload = load_workload(args.workload, hf_config=model, hf_dtypes=getattr(args, "model_dtypes", False))
    for warning in workload.warnings:
        print(printable(f"warning: {warning}"), file=sys.stderr)
    flags = {"fusion": getattr(args, "fusion", None)}
    if scenario_flags:
        flags["scenario.batch"] = getattr(args, "batch", None)
        flags["scenario.prompt_tokens"] = getattr(args, "prompt", None)
        flags["scenario.output_tokens"] = getattr(args, "generate", None)
    workload = workload.with_params({k: v for k, v in flags.items() if v is not None}, "flags")
    workload = set_values(workload, settings, "workload")
    return (set_values(load_system(hw), settings, "hardware") if hw is not None else None), workload


def set_values(obj, settings, root: str):
    """`obj` with the --set values of `root`; a bad one reported as `--set: root.path: why`."""
    from archsim.errors import ConfigError, Problem

    try:
        return obj.with_params({path: v for r, path, v in settings if r == root}, "--set")
    except ConfigError as err:
        raise ConfigError(
            [Problem(p.file, p.line, f"{root}.{p.key}", p.message) if p.file == "--set" else p for p in err.problems]
        ) from None


def load_run_inputs(hw: str, workload: str, batch=None, prompt=None, generate=None, fusion=None, model=None):
    """Hardware and workload with the run flags applied, and their resolved configuration (no
    options yet: each command adds its own)."""
    from archsim.config.resolved import ResolvedConfig

    args = argparse.Namespace(
        workload=workload, batch=batch, prompt=prompt, generate=generate, fusion=fusion, model=model, model_dtypes=False
    )
    hardware, wl = load_inputs(args, hw)
    return hardware.system, wl.workload, ResolvedConfig(hardware.config, wl.config)


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


CURVE_POINTS = 12  # KV lengths of the decode-step curve
CURVE_MAX_KV = 131072  # tokens: the longest context the curve reaches


def decode_curve(w, system, result) -> tuple[str, list[int], list[float]]:
    """Decode step time at the run's batch over evenly spaced KV lengths from 128 to the longest
    context that fits in HBM (at most CURVE_MAX_KV): (label, KV lengths, step seconds)."""
    import numpy as np

    from archsim.graph.builder import Step
    from archsim.graph.model import Phase
    from archsim.runner.generation import simulate_step

    fp, m = result.footprint, w.model
    free = fp.capacity_bytes - fp.weights_bytes - fp.activations_bytes
    fits = int(free / (result.batch * m.kv_bytes_per_token(w.dtypes.kv_cache)))
    top = max(256, min(CURVE_MAX_KV, fits))
    kv = sorted({int(k) for k in np.linspace(128, top, CURVE_POINTS)})
    step_s = [simulate_step(w, system, Step(Phase.DECODE, result.batch, 1, k)).time_s for k in kv]
    limit = "the longest that fits in HBM" if top == fits else f"{top:,}"
    return f"{system.chip.name}: batch {result.batch}, KV 128 to {limit}", kv, step_s


def write_plots(out_dir: str, result, w, system, kv_stride: int, args, energy=None) -> list:
    """The plots of a run; the tokens/s-against-batch sweep runs the scenario at a few batches
    (and, with a power model, gives decode power and joules per token against batch)."""
    from dataclasses import replace
    from pathlib import Path

    from archsim.report import plots
    from archsim.report.roofline import roofline
    from archsim.report.sweep import batch_sweep

    d, chip = Path(out_dir), system.chip
    steps = [("prefill", result.prefill)] + ([("first decode step", result.decode)] if result.decode else [])
    try:
        paths = [
            roofline(d / "roofline.png", steps, chip, w.dtypes.activations),
            plots.breakdown(d / "breakdown.png", steps),
            plots.decode_by_kv(d / "decode_kv.png", [(chip.name, result)], [decode_curve(w, system, result)]),
            plots.memory(d / "memory.png", [(chip.name, result.footprint)]),
        ]
    except plots.PlotsUnavailable as err:
        raise UsageError(f"--plots: {err}") from None
    with progress(args, "plots: the scenario at batches up to the HBM limit") as bar:
        batches, runs, limit = batch_sweep(w, system, kv_stride, known=result, progress=bar.callback())
    title = f"{w.model.name} on {chip.name}: prompt {w.scenario.prompt_tokens}, generate {w.scenario.output_tokens}"
    paths.append(plots.throughput_by_batch(d / "throughput_batch.png", batches, runs, limit, title))
    if energy is not None:
        from archsim.report import energy_plots
        from archsim.runner.energy import run_energy

        kinds = [("prefill", energy.prefill)] + ([("first decode step", energy.decode)] if energy.decode else [])
        paths.append(energy_plots.energy_by_kind(d / "energy.png", kinds))
        paths.append(energy_plots.power_by_kind(d / "power_kind.png", kinds, energy.limit_w, chip.clock_hz))
        per_batch = [e for b, r in zip(batches, runs)  # the chip has a power model: every run has an energy
                     if (e := run_energy(r, replace(w, scenario=replace(w.scenario, batch=b)), system, kv_stride))]  # fmt: skip
        curve = (chip.name, batches, [e.decode_power_w for e in per_batch], [e.decode_j_per_token for e in per_batch],
                 energy.limit_w)  # fmt: skip
        paths.append(energy_plots.power_by_batch(d / "power_batch.png", [curve], title))
    return paths


def simulate_run(args, hardware, workload, bar):
    """`api.run` of the inputs with the layout, KV stride and fidelity the flags give, its decode
    attention's progress on `bar`; a layout that cannot be is a usage error (run, explain)."""
    from archsim import api
    from archsim.graph.parallel import ParallelismError

    try:
        return api.run(
            hardware,
            workload,
            tp=args.tp,
            pp=args.pp,
            ep=args.ep,
            kv_stride=args.kv_stride,
            progress=bar.callback("decode attention over the growing KV cache"),
            fidelity=getattr(args, "fidelity", "full"),
        )
    except ParallelismError as err:
        raise UsageError(f"--tp/--pp/--ep: {err}") from None


def run(args) -> int:
    from archsim.report.export import write_json
    from archsim.report.tables import step_table

    check_outputs(args, ("json", "csv", "trace_out", "plots"), ("plots",), (args.hw, args.workload, args.model))
    check_interval(args)
    apply_cache_flag(args)
    hardware, workload = load_inputs(args, args.hw)
    started()
    system, w = hardware.system, workload.workload
    multi = (args.tp, args.pp, args.ep) != (1, 1, 1)
    if multi and args.plots:
        raise UsageError("--plots: the batch sweep runs on one chip; leave out --plots with --tp/--pp/--ep")
    steps = check_trace_steps(args.trace_step, w.scenario.output_tokens - 1) if args.trace_out else []
    if args.plots:
        require_plots()
    with progress(args, "simulating the prefill step") as bar:
        report = simulate_run(args, hardware, workload, bar)
    result, out, note = report.result, console(args), notes(args)
    chip_name, model_name = shown(system.chip.name), shown(w.model.name)
    tables = summary_tables(report, chip_name, model_name, args.ops)
    if args.ops:
        tables.append(step_table(result.prefill, "prefill step", system.chip.clock_hz))
        if result.decode:
            tables.append(
                step_table(result.decode, f"first decode step (KV {result.decode.step.kv_len})", system.chip.clock_hz)
            )
    if multi:
        tables.append(communication_table(report, f"{chip_name} x{system.chips}"))
    if args.ops:
        tables += energy_tables(report)
    elif not args.quiet:
        tables.append("per-op tables: --ops; what each resource is worth: archsim explain")
    fmt = getattr(args, "format", "table")
    # the JSON document and the per-op rows only where they are written or read
    data = report.to_dict() if args.json or fmt == "json" else {}
    if args.interval is not None:
        rerun = screen_rerun(args, workload)
        note.print(step_interval(args.interval, result, data, hardware, rerun, args.set or ()).removeprefix("; "))
    emit(args, out, tables, data=data, rows=report.ops() if fmt == "csv" else None)
    if not multi and system.chips > 1:
        note.print(f"note: one of the {system.chips} chips runs everything; --tp/--pp/--ep spread the model")
    note.print(f"config hash {report.config_hash}")
    if args.json:
        write_json(args.json, data)
    if args.csv:
        from archsim.report.csvfile import write_op_csv

        write_op_csv(args.csv, result)
    if args.trace_out and not result.interrupted:
        from archsim.report.trace import write_trace

        write_trace(args.trace_out, trace_document(result, w, system, steps, report.parallelism))
        traced = ", ".join(k if k == "prefill" else f"decode:{n}" for k, n in steps)
        note.print(f"trace {shown(args.trace_out)} ({traced})")
    if args.plots and not result.interrupted:
        for path in write_plots(args.plots, result, w, system, args.kv_stride, args, report.energy):
            note.print(f"plot {shown(path)}")
    return 130 if result.interrupted else 0
