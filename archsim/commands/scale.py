"""`archsim scale`: one decode step at tensor-parallel degrees 1, 2, 4, ...: how the step shrinks
with more chips, how much of it the all-reduces take, and where their latency stops the gains."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archsim import limits
from archsim.commands import UsageError, check_outputs, positive_int, shown
from archsim.commands.output import add_output_flags, console, emit, notes, progress
from archsim.commands.run import add_set_flag

if TYPE_CHECKING:
    from archsim.api.scaling import ScalePoint

DEFAULT_HW = "h200x8"
DEFAULT_WORKLOAD = "llama3_70b"
MAX_DEGREES = 64  # tensor-parallel degrees one `scale` compares


def tp_list(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated whole numbers above zero, e.g. `1,2,4,8`."""
    parts = text.split(",")
    if len(parts) > MAX_DEGREES:
        raise argparse.ArgumentTypeError(f"at most {MAX_DEGREES} degrees (got {len(parts):,})")
    if not all(p.strip().isdigit() and len(p.strip()) <= 9 for p in parts):
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas (got {text[:60]!r})")
    values = tuple(int(part) for part in parts)
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every degree must be at least 1 (got {text[:60]!r})")
    return tuple(sorted(set(values)))


def add_parser(sub) -> None:
    p = sub.add_parser(
        "scale", help="decode step against tensor-parallel degree: where all-reduce latency stops the gains"
    )
    p.add_argument("--hw", default=DEFAULT_HW, help=f"multi-chip hardware YAML or shipped name (default {DEFAULT_HW})")
    p.add_argument(
        "--workload", default=DEFAULT_WORKLOAD, help=f"workload YAML or shipped name (default {DEFAULT_WORKLOAD})"
    )
    p.add_argument(
        "--batch", type=positive_int("--batch", limits.MAX_BATCH), help="decode batch (default: the workload's)"
    )
    p.add_argument(
        "--kv-len",
        type=positive_int("--kv-len", limits.MAX_TOKENS),
        help="KV length the decode step reads (default: the workload's prompt)",
    )
    p.add_argument(
        "--tp",
        type=tp_list,
        metavar="1,2,4,8",
        help="tensor-parallel degrees (default: powers of two up to the system's chips)",
    )
    add_set_flag(p)
    p.add_argument("--json", metavar="PATH", help="write the table as JSON")
    add_output_flags(p)


def scale_table(points: list[ScalePoint], title: str, batch: int):
    from rich.table import Table

    from archsim.api.scaling import marginal_gain
    from archsim.units import format_seconds

    t = Table(title=title, title_justify="left")
    for col in ("TP", "fits", "decode step", "collectives", "share", "one all-reduce", "tokens/s", "speed-up", "gain"):
        t.add_column(col, justify="right", no_wrap=True)
    base = points[0]
    for i, p in enumerate(points):
        marginal = f"{100 * marginal_gain(points[i - 1], p):.0f}%" if i else "-"
        t.add_row(
            str(p.tp),
            "yes" if p.fits else "[red]no[/red]",
            format_seconds(p.step_s),
            format_seconds(p.collectives_s),
            f"{100 * p.share:.0f}%",
            format_seconds(p.allreduce_s) if p.allreduce_s else "-",
            f"{batch / p.step_s:,.0f}",
            f"{base.step_s / p.step_s:.2f}x",
            marginal,
        )
    return t


def run(args) -> int:
    from archsim.api.scaling import gains_stop, point_dict, scale_points, verdict
    from archsim.commands.run import load_inputs
    from archsim.config.resolved import ResolvedConfig
    from archsim.graph.parallel import ParallelismError
    from archsim.report.export import write_json

    check_outputs(args, ("json",), inputs=(args.hw, args.workload))
    hardware, workload = load_inputs(args, args.hw)
    system, w = hardware.system, workload.workload
    tps = args.tp or tuple(1 << i for i in range(system.chips.bit_length()) if 1 << i <= system.chips)
    if max(tps) > system.chips:
        raise UsageError(f"--tp: {max(tps)} needs {max(tps)} chips; the system has {system.chips}")
    batch, kv_len = w.scenario.batch, args.kv_len or w.scenario.prompt_tokens
    try:
        with progress(args, "decode step") as bar:
            points = scale_points(w, system, batch, kv_len, tps, bar)
    except ParallelismError as err:
        raise UsageError(f"--tp: {err}") from None
    resolved = ResolvedConfig(hardware.config, workload.config, {"tp_degrees": list(tps), "kv_len": kv_len})
    digest = resolved.hash
    title = (
        f"{shown(w.model.name)} on {shown(system.chip.name)} x{system.chips}: one decode step, "
        f"batch {batch}, KV {kv_len}"
    )
    data = {
        "config_hash": digest,
        "config": resolved.as_dict(),
        "batch": batch,
        "kv_len": kv_len,
        "points": [point_dict(p) for p in points],
        "gains_stop_tp": getattr(gains_stop(points), "tp", None),
    }
    out, note = console(args), notes(args)
    emit(args, out, [scale_table(points, title, batch)], data=data, rows=data["points"])
    note.print(verdict(points))
    if any(not p.fits for p in points):
        note.print("a degree that does not fit in HBM is simulated all the same, as a reference")
    note.print(f"config hash {digest}")
    if args.json:
        write_json(args.json, data)
    return 0
