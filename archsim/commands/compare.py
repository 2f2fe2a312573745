"""`archsim compare`: one workload on several chips, side by side."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from archsim.commands import check_outputs, require_plots, shown
from archsim.commands.intervals import add_interval_flag, check_interval, screen_rerun, step_interval
from archsim.commands.output import add_output_flags, console, emit, notes, progress
from archsim.commands.run import add_parallel_flags, add_workload_flags

if TYPE_CHECKING:
    from archsim.api.inputs import Hardware, Workload
    from archsim.report.comparison import ChipRun


def add_parser(sub) -> None:
    cmp = sub.add_parser("compare", help="one workload on several chips, side by side")
    cmp.add_argument("chips", nargs="+", metavar="CHIP", help="hardware YAML files or shipped names")
    add_workload_flags(cmp)
    add_parallel_flags(cmp)
    cmp.add_argument("--json", metavar="PATH", help="write every chip's numbers as JSON")
    cmp.add_argument("--plots", metavar="DIR", help="write PNG plots comparing the chips")
    add_interval_flag(cmp)
    add_output_flags(cmp)


def write_plots(out_dir: str, rows, w, systems: dict) -> list:
    """The comparison's plots; `systems`: the System of each row's `hw`, for the decode curves."""
    from pathlib import Path

    from archsim.commands.run import decode_curve
    from archsim.report import plots

    ran = [(row.chip_name, row.result) for row in rows if row.result is not None]
    single = [row for row in rows if row.result is not None and systems[row.hw].chips == 1]
    curves = [decode_curve(w, systems[row.hw], row.result) for row in single]
    d = Path(out_dir)
    title = (
        f"{w.model.name}: batch {w.scenario.batch}, prompt {w.scenario.prompt_tokens}, "
        f"generate {w.scenario.output_tokens}"
    )
    return [
        plots.compare_summary(d / "compare_summary.png", ran, title),
        plots.compare_bounds(d / "compare_bounds.png", ran),
        plots.decode_by_kv(d / "compare_decode_kv.png", ran, curves),
        plots.memory(d / "compare_memory.png", [(name, r.footprint) for name, r in ran]),
    ]


CSV_FIELDS = (
    "hw",
    "chip",
    "config_hash",
    "ttft_s",
    "tpot_s",
    "decode_tokens_per_s",
    "throughput_tokens_per_s",
    "energy_j",
    "power_w",
    "tokens_per_j",
    "decode_j_per_token",
    "area_mm2",
)


def given_systems(args: argparse.Namespace) -> list[tuple[str, Hardware, str]]:
    """(the name that runs, its Hardware, the name given) of each chip given, with the --set
    values, every one checked before any runs; a lone chip under a layout of several chips as
    its shipped system (`system_for`), with a note."""
    from archsim import api
    from archsim.api.more import system_for
    from archsim.commands.run import set_values

    chips = [
        (hw, set_values(api.load_system(hw), args.set or [], "hardware")) for hw in args.chips
    ]  # all checked first
    need = args.tp * args.pp * args.ep
    systems = []
    for hw, hardware in chips:
        found = system_for(hw, hardware, need)
        if found is not None and found[0] != hw:
            notes(args).print(f"note: {hw}: {need} chips for the layout: {found[0]}")
            found = (found[0], set_values(found[1], args.set or [], "hardware"))
        systems.append((*(found or (hw, hardware)), hw))
    return systems


def run_chip(args: argparse.Namespace, hw: str, hardware: Hardware, workload: Workload, given: str = "") -> ChipRun:
    """One chip's run, or why it has none (a chip the workload does not fit, a layout it cannot
    take, a run too large or not supported), that reason also printed on stderr; named by the chip
    `given` where `hw` is the system that ran for the layout, and by the layout."""
    from archsim.graph.parallel import Parallelism

    par = Parallelism(args.tp, args.pp, args.ep)
    run = _run_chip(args, hw, hardware, workload)
    return replace(run, layout="" if par.is_single else par.label(), given=given if given != hw else "")


def _run_chip(args: argparse.Namespace, hw: str, hardware: Hardware, workload: Workload) -> ChipRun:
    import sys

    from archsim import api
    from archsim.errors import DoesNotFitError, RefusedError, TooLargeError, printable
    from archsim.graph.parallel import ParallelismError
    from archsim.report.comparison import ChipRun

    digest = api.calls.run_config(hardware, workload, args.kv_stride, args.tp, args.pp, args.ep).hash
    try:
        report = api.run(hardware, workload, tp=args.tp, pp=args.pp, ep=args.ep, kv_stride=args.kv_stride)
        spec = hardware.system.chip.area
        return ChipRun(
            hw,
            hardware.name,
            report.config_hash,
            report.result,
            energy=report.energy,
            area=report.area,
            node=spec.node.value if spec else "",
        )
    except DoesNotFitError as err:
        print(printable(f"archsim: {hw}: {err}"), file=sys.stderr)
        return ChipRun(hw, hardware.name, digest, None, "does not fit")
    except ParallelismError as err:
        print(printable(f"archsim: {hw}: --tp/--pp/--ep: {err}"), file=sys.stderr)
        return ChipRun(hw, hardware.name, digest, None, "layout does not apply")
    except RefusedError as err:
        print(printable(f"archsim: {hw}: {err}"), file=sys.stderr)
        why = "too large to simulate" if isinstance(err, TooLargeError) else "not supported by the chip"
        return ChipRun(hw, hardware.name, digest, None, why)


def same_runs(rows) -> list[str]:
    """A note for each set of rows that ran one configuration (a chip given beside the system
    a layout runs it as): why their numbers are the same."""
    groups: dict[str, list] = {}
    for row in rows:
        if row.result is not None:
            groups.setdefault(row.config_hash, []).append(row)
    return [
        f"note: {' = '.join(r.label for r in group)}: one configuration, the same run"
        for group in groups.values()
        if len(group) > 1
    ]


def run(args) -> int:
    from archsim.commands.run import load_inputs
    from archsim.graph.parallel import Parallelism
    from archsim.report.comparison import compare_dict, compare_table, energy_area_table
    from archsim.report.export import write_json

    check_outputs(args, ("json", "plots"), ("plots",), (*args.chips, args.workload, args.model))
    check_interval(args)
    _, workload = load_inputs(args)
    w = workload.workload
    chips = given_systems(args)
    if args.plots:
        require_plots()
    rows = []
    with progress(args, "chips", total=len(chips)) as bar:
        for i, (hw, hardware, given) in enumerate(chips):
            bar.update(i, len(chips), f"{shown(hardware.name)} ({i + 1} of {len(chips)})")
            rows.append(run_chip(args, hw, hardware, workload, given))
            if rows[-1].result is not None and rows[-1].result.interrupted:
                return 130
    sc = w.scenario
    par = Parallelism(args.tp, args.pp, args.ep)
    layout = "" if par.is_single else f", {par.label()}"
    title = f"{shown(w.model.name)}: batch {sc.batch}, prompt {sc.prompt_tokens}, generate {sc.output_tokens}{layout}"
    data = compare_dict(rows, workload.config)
    if args.interval is not None:
        rerun = screen_rerun(args, workload)
        for row, entry, (_, hardware, _) in zip(rows, data["chips"], chips, strict=True):
            if row.result is not None:
                clause = step_interval(args.interval, row.result, entry, hardware, rerun, args.set or ())
                notes(args).print(f"{shown(row.hw)}: " + clause.removeprefix("; "))
    csv_rows = [{k: c.get(k) for k in (*CSV_FIELDS, "bound", "error")} for c in data["chips"]]
    shown_rows = [
        replace(row, hw=shown(row.hw), chip_name=shown(row.chip_name), given=shown(row.given)) for row in rows
    ]
    tables = [compare_table(shown_rows, title)]
    if any(row.energy is not None or row.area is not None for row in rows):
        tables.append(energy_area_table(shown_rows, f"energy and area: {title}"))
    emit(args, console(args), tables, data=data, rows=csv_rows)
    for note in same_runs(shown_rows):
        notes(args).print(note)
    if args.json:
        write_json(args.json, data)
    if args.plots and any(row.result for row in rows):
        for path in write_plots(args.plots, rows, w, {hw: hardware.system for hw, hardware, _ in chips}):
            notes(args).print(f"plot {shown(path)}")
    return 0 if any(row.result for row in rows) else 2
