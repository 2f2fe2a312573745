"""`archsim scale`: one decode step at tensor-parallel degrees 1, 2, 4, ...: how the step shrinks
with more chips, how much of it the all-reduces take, and where their latency stops the gains."""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass

from archsim import limits
from archsim.commands import UsageError, check_outputs, positive_int, shown
from archsim.commands.output import add_output_flags, console, emit, notes, progress
from archsim.commands.run import add_set_flag

DEFAULT_HW = "h200x8"
DEFAULT_WORKLOAD = "llama3_70b"
STOP_GAIN = 0.25  # a step up that saves less than a quarter of the time its chips could has stopped paying
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


@dataclass(frozen=True)
class ScalePoint:
    """One decode step at one tensor-parallel degree, on the busiest chip."""

    tp: int
    step_s: float
    collectives_s: float  # exposed collective time in the step
    allreduces: int  # all-reduces per step
    allreduce_s: float  # one of the step's all-reduces (after the attention output projection)
    fits: bool

    @property
    def share(self) -> float:
        return self.collectives_s / self.step_s if self.step_s else 0.0


def scale_points(w, system, batch: int, kv_len: int, tps: tuple[int, ...], bar=None) -> list[ScalePoint]:
    """The first decode step after a `kv_len` prompt at each degree in `tps`."""
    from archsim.graph.builder import Step
    from archsim.graph.model import Phase
    from archsim.graph.ops import OpKind
    from archsim.graph.parallel import Parallelism
    from archsim.runner.generation import simulate_step
    from archsim.runner.memory import footprint
    from archsim.runner.size import check_steps_size

    points = []
    for i, tp in enumerate(tps):
        if bar is not None:
            bar.update(i, len(tps), f"decode step at TP {tp}")
        par = Parallelism(tp)
        shape = Step(Phase.DECODE, batch, 1, kv_len)
        check_steps_size(w, system, [shape], par)
        step = simulate_step(w, system, shape, par)
        reduces = [r for r in step.ops if r.op.kind is OpKind.ALL_REDUCE]
        points.append(
            ScalePoint(
                tp,
                step.time_s,
                step.comm_s - step.comm_hidden_s,
                sum(r.op.repeat for r in reduces),
                next((r.timing.time_s for r in reduces if r.op.name == "o_proj_allreduce"), 0.0),
                footprint(w, system, batch, par).fits,
            )
        )
    return points


def marginal_gain(prev: ScalePoint, cur: ScalePoint) -> float:
    """The time a step up in chips saves over what it could save (1 - prev.tp / cur.tp of the
    step): 1 is perfect scaling, 0 no gain, below 0 a slower step."""
    return (prev.step_s - cur.step_s) / (prev.step_s * (1.0 - prev.tp / cur.tp))


def gains_stop(points: list[ScalePoint], threshold: float = STOP_GAIN) -> ScalePoint | None:
    """The first degree whose step saves less than `threshold` of what its extra chips could."""
    return next((cur for prev, cur in itertools.pairwise(points) if marginal_gain(prev, cur) < threshold), None)


def verdict(points: list[ScalePoint]) -> str:
    from archsim.units import format_seconds

    if len(points) < 2:
        return "one degree only: nothing to compare"
    stop = gains_stop(points)
    if stop is None:
        last = points[-1]
        return (
            f"no stop up to TP {last.tp}: each step up saves at least {STOP_GAIN:.0%} of what its chips could; "
            f"at TP {last.tp} the collectives are {last.share:.0%} of the step "
            f"({last.allreduces} all-reduces of {format_seconds(last.allreduce_s)})"
        )
    prev = points[points.index(stop) - 1]
    return (
        f"the gains stop at TP {stop.tp}: from TP {prev.tp} the step falls only from "
        f"{format_seconds(prev.step_s)} to {format_seconds(stop.step_s)} ({100 * marginal_gain(prev, stop):.0f}% "
        f"of what {stop.tp // prev.tp if stop.tp % prev.tp == 0 else round(stop.tp / prev.tp, 2)}x the chips "
        f"could save): its {stop.allreduces} all-reduces of {format_seconds(stop.allreduce_s)}, latency-bound, "
        f"are {stop.share:.0%} of it"
    )


def scale_table(points: list[ScalePoint], title: str, batch: int):
    from rich.table import Table

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


def point_dict(p: ScalePoint) -> dict:
    return {
        "tp": p.tp,
        "step_s": p.step_s,
        "collectives_s": p.collectives_s,
        "share": p.share,
        "allreduces": p.allreduces,
        "allreduce_s": p.allreduce_s,
        "fits": p.fits,
    }


def run(args) -> int:
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
