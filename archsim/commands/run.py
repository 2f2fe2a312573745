"""`archsim run`: a generation (prefill, then decode) of a workload on a chip."""

from __future__ import annotations

from dataclasses import replace

from archsim.commands import positive_int

DEFAULT_HW = "h200"
DEFAULT_WORKLOAD = "llama3_8b"


def add_parser(sub) -> None:
    run = sub.add_parser("run", help="simulate a generation: prefill, then decode")
    run.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    run.add_argument("--workload", default=DEFAULT_WORKLOAD, help="workload YAML or shipped name (default llama3_8b)")
    run.add_argument("--batch", type=positive_int("--batch"), help="sequences decoded together")
    run.add_argument("--prompt", type=positive_int("--prompt"), help="prompt tokens per sequence")
    run.add_argument("--generate", type=positive_int("--generate"), help="tokens generated per sequence")
    run.add_argument("--fusion", choices=["eager", "fused"], help="kernel fusion profile (default from workload)")
    run.add_argument("--kv-stride", type=positive_int("--kv-stride"), default=64,
                     help="decode KV lengths between exactly simulated attention samples (default 64)")
    run.add_argument("--json", metavar="PATH", help="write the full result as JSON")
    run.add_argument("--quiet", action="store_true", help="print only the summary")


def load_run_inputs(hw: str, workload: str, batch=None, prompt=None, generate=None, fusion=None):
    """Hardware and workload with CLI overrides applied; the resolved config and its hash."""
    from archsim.config.loader import config_hash, load_system, load_workload
    from archsim.graph.model import Fusion

    system, hw_cfg = load_system(hw)
    w, wl_cfg = load_workload(workload)
    sc = w.scenario
    sc = replace(sc, batch=batch or sc.batch, prompt_tokens=prompt or sc.prompt_tokens,
                 output_tokens=generate or sc.output_tokens)
    w = replace(w, scenario=sc, fusion=Fusion(fusion) if fusion else w.fusion)
    wl_cfg = {**wl_cfg, "scenario": {"batch": sc.batch, "prompt_tokens": sc.prompt_tokens,
                                     "output_tokens": sc.output_tokens}, "fusion": w.fusion.value}
    config = {"hardware": hw_cfg, "workload": wl_cfg}
    return system, w, config, config_hash(config)


def run(args) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from archsim.report.export import run_dict, write_json
    from archsim.report.tables import print_run, summary_table
    from archsim.runner.generation import run_generation

    system, w, config, digest = load_run_inputs(args.hw, args.workload, args.batch, args.prompt,
                                                args.generate, args.fusion)
    console = Console()
    with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("decode attention", total=None)
        result = run_generation(w, system, kv_stride=args.kv_stride,
                                progress=lambda done, total: bar.update(task, completed=done, total=total))
    if args.quiet:
        console.print(summary_table(result, system.chip.name, w.model.name))
    else:
        print_run(result, system.chip.name, w.model.name, system.chip.clock_hz, console)
    console.print(f"config hash {digest}")
    if args.json:
        write_json(args.json, run_dict(result, config, digest))
    return 130 if result.interrupted else 0


