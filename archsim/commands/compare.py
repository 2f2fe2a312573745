"""`archsim compare`: one workload on several chips, side by side."""

from __future__ import annotations

from archsim.commands import require_plots
from archsim.commands.run import add_parallel_flags, add_workload_flags


def add_parser(sub) -> None:
    cmp = sub.add_parser("compare", help="one workload on several chips, side by side")
    cmp.add_argument("chips", nargs="+", metavar="CHIP", help="hardware YAML files or shipped names")
    add_workload_flags(cmp)
    add_parallel_flags(cmp)
    cmp.add_argument("--json", metavar="PATH", help="write every chip's numbers as JSON")
    cmp.add_argument("--plots", metavar="DIR", help="write PNG plots comparing the chips")


def write_plots(out_dir: str, rows, w) -> list:
    from pathlib import Path

    from archsim.report import plots

    ran = [(row.chip_name, row.result) for row in rows if row.result is not None]
    d = Path(out_dir)
    title = (
        f"{w.model.name}: batch {w.scenario.batch}, prompt {w.scenario.prompt_tokens}, "
        f"generate {w.scenario.output_tokens}"
    )
    return [
        plots.compare_summary(d / "compare_summary.png", ran, title),
        plots.compare_bounds(d / "compare_bounds.png", ran),
        plots.decode_by_kv(d / "compare_decode_kv.png", ran),
        plots.memory(d / "compare_memory.png", [(name, r.footprint) for name, r in ran]),
    ]


def run(args) -> int:
    import sys

    from rich.console import Console
    from rich.progress import Progress

    from archsim.commands.run import load_workload_inputs
    from archsim.config.loader import load_system
    from archsim.config.resolved import ResolvedConfig, run_options
    from archsim.errors import DoesNotFitError
    from archsim.graph.parallel import Parallelism, ParallelismError
    from archsim.report.comparison import ChipRun, compare_dict, compare_table
    from archsim.report.export import write_json
    from archsim.runner.generation import run_generation

    w, wl_cfg = load_workload_inputs(args.workload, args.batch, args.prompt, args.generate, args.fusion, args.model)
    systems = [(hw, *load_system(hw)) for hw in args.chips]  # every file checked before any simulation
    par = Parallelism(args.tp, args.pp, args.ep)
    if args.plots:
        require_plots()
    console = Console()
    rows = []
    with Progress(transient=True, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("chips", total=len(systems))
        for hw, system, hw_cfg in systems:
            digest = ResolvedConfig(hw_cfg, wl_cfg, run_options(args.kv_stride, par.tp, par.pp, par.ep)).hash
            try:
                result = run_generation(w, system, kv_stride=args.kv_stride, parallelism=par)
                rows.append(ChipRun(hw, system.chip.name, digest, result))
                if result.interrupted:
                    return 130
            except DoesNotFitError as err:
                print(f"archsim: {hw}: {err}", file=sys.stderr)
                rows.append(ChipRun(hw, system.chip.name, digest, None, "does not fit"))
            except ParallelismError as err:
                print(f"archsim: {hw}: --tp/--pp/--ep: {err}", file=sys.stderr)
                rows.append(ChipRun(hw, system.chip.name, digest, None, "layout does not apply"))
            bar.advance(task)
    sc = w.scenario
    layout = "" if par.is_single else f", {par.label()}"
    console.print(
        compare_table(
            rows, f"{w.model.name}: batch {sc.batch}, prompt {sc.prompt_tokens}, generate {sc.output_tokens}{layout}"
        )
    )
    if args.json:
        write_json(args.json, compare_dict(rows, wl_cfg))
    if args.plots and any(row.result for row in rows):
        for path in write_plots(args.plots, rows, w):
            console.print(f"plot {path}")
    return 0 if any(row.result for row in rows) else 2
