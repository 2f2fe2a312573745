"""`archsim sweep best_per_area | best_per_joule | best_under_cap --hw CHIP`: the flags of the shipped
templates (archsim/sweep/templates.py), their checks, and the tables of the best designs and the
Pareto front printed once the sweep has run."""

from __future__ import annotations

import argparse

from archsim import limits
from archsim.commands import UsageError, bounded_int, positive_int, shown

TEMPLATE_NAMES = ("best_per_area", "best_per_joule", "best_under_cap")  # archsim.sweep.templates.TEMPLATES
FLAGS = ("hw", "workload", "points", "seed", "power_cap", "batch", "prompt", "generate", "top")
HEADS = {  # short headers, so a row fits 80 columns; the legend line says what each is
    "tokens_per_s_per_mm2": "tok/s/mm2",
    "decode_tokens_per_s": "tok/s",
    "decode_tokens_per_j": "tok/J",
    "die_mm2": "mm2",
    "watts": "W",
    "cores": "cores",
    "cores_per_die": "cores/die",
    "matrix_units": "MUs",
    "sram_kib": "SRAM",
    "l2_kib": "L2",
    "hbm_stacks": "HBM",
    "clock_ghz": "GHz",
}
LEGEND = {  # what each short header means, for the legend line under the tables
    "tokens_per_s_per_mm2": "tok/s/mm2: decode tokens/s per mm2 of die",
    "decode_tokens_per_s": "tok/s: decode tokens/s",
    "decode_tokens_per_j": "tok/J: decode tokens per joule",
    "die_mm2": "mm2: die area",
    "watts": "W: average power",
    "cores": "cores per chip",
    "cores_per_die": "cores per die",
    "matrix_units": "MUs: matrix units per core",
    "sram_kib": "SRAM per core and L2 per chip in KiB",
    "hbm_stacks": "HBM: stacks",
    "clock_ghz": "GHz: clock",
}
DEFAULT_TOP = 5


def power_cap(text: str) -> float:
    """argparse type of --power-cap: watts, `500W`, `500 W`, `0.5 kW`, or a bare number of watts."""
    from archsim.sweep.templates import TemplateError, power_cap_w

    try:
        return power_cap_w(text)
    except TemplateError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_flags(p) -> None:
    g = p.add_argument_group(
        "templates", "with SPEC a template (best_per_area, best_per_joule, best_under_cap): the designs it generates"
    )
    g.add_argument("--hw", metavar="CHIP", help="the base chip the designs are generated around (a file or h200, ...)")
    g.add_argument("--workload", metavar="WORKLOAD", help="workload YAML or shipped name (default llama3_8b)")
    g.add_argument(
        "--points",
        type=positive_int("--points", limits.MAX_SWEEP_POINTS),
        metavar="N",
        help="designs to generate (default 100)",
    )
    g.add_argument(
        "--seed", type=bounded_int("--seed", 0, limits.MAX_SEED), metavar="S", help="seed of the designs (default 0)"
    )
    g.add_argument(
        "--power-cap",
        type=power_cap,
        metavar="WATTS",
        help="each design's power limit; a design whose peak power exceeds it is ruled out "
        "(needed by best_under_cap; 500W, 0.5kW)",
    )
    g.add_argument(
        "--batch",
        type=positive_int("--batch", limits.MAX_BATCH),
        help="sequences decoded together (default the workload's)",
    )
    g.add_argument("--prompt", type=positive_int("--prompt", limits.MAX_TOKENS), help="prompt tokens (default 512)")
    g.add_argument(
        "--generate", type=positive_int("--generate", limits.MAX_TOKENS), help="tokens generated (default 16)"
    )
    g.add_argument(
        "--top", type=positive_int("--top"), metavar="N", help=f"best designs to list (default {DEFAULT_TOP})"
    )


def given_flags(args) -> list[str]:
    return [f"--{f.replace('_', '-')}" for f in FLAGS if getattr(args, f, None) is not None]


def check_spec_flags(args, path: str) -> None:
    """A spec file names its own chip and workload: refuse the template flags beside it, and a
    name that is neither a file nor a shipped spec, with the template or spec it may mean."""
    import difflib
    from pathlib import Path

    from archsim.config.loader import shipped_dir

    if not Path(path).exists() and "/" not in path and not path.endswith((".yaml", ".yml")):
        names = [*TEMPLATE_NAMES, *sorted(p.stem for p in (shipped_dir("hw_configs") / "sweeps").glob("*.yaml"))]
        hint = difflib.get_close_matches(path, names, n=1)
        raise UsageError(
            f"{path}: no such spec file, shipped spec or template"
            + (f"; did you mean {hint[0]}?" if hint else f"; shipped: {', '.join(names)}")
        )
    given = given_flags(args)
    if given:
        raise UsageError(
            f"{given[0]} goes with a template ({', '.join(TEMPLATE_NAMES)}); {args.spec} is a spec, "
            "which names its own chip, workload and points"
        )


def template_spec(args):
    """The spec of the template args.spec names, from its flags (UsageError for a bad one)."""
    from archsim.sweep.templates import DEFAULT_POINTS, DEFAULT_WORKLOAD, TemplateError, TemplateOptions
    from archsim.sweep.templates import template_spec as make

    if args.hw is None:
        raise UsageError(f"{args.spec} needs --hw CHIP: the base chip its designs are generated around (h200, ...)")
    options = TemplateOptions(
        hardware=args.hw,
        workload=args.workload or DEFAULT_WORKLOAD,
        points=args.points or DEFAULT_POINTS,
        seed=args.seed or 0,
        power_cap_w=args.power_cap,
        batch=args.batch,
        **{k: v for k, v in (("prompt", args.prompt), ("generate", args.generate)) if v is not None},
    )
    try:
        return make(args.spec, options)
    except TemplateError as err:
        raise UsageError(str(err)) from None


def show_value(v: object) -> str:
    """3 significant digits, a large number whole (2504, not 2.50e+03)."""
    from archsim.units import sig3

    return (f"{v:.0f}" if abs(v) >= 1000 else sig3(v)) if isinstance(v, float) else str(v)


def design_table(title: str, rows: list[dict], columns: list[str], bold: set[str]):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    for c in columns:
        table.add_column(HEADS.get(c, shown(c)), justify="right", no_wrap=True, style="bold" if c in bold else None)
    for i, r in enumerate(rows, start=1):
        table.add_row(str(i), *(shown(show_value(r[c])) for c in columns))
    return table


def show_results(args, spec) -> None:
    """The best designs by the template's objective, then the Pareto front of what it trades."""
    from archsim.commands.output import console, emit
    from archsim.sweep.pareto import Goal, find_front
    from archsim.sweep.store import read_results
    from archsim.sweep.templates import TEMPLATES, base_row, ranked

    t = TEMPLATES[args.spec]
    out = console(args)
    rows = read_results(args.out).to_pylist()
    best = ranked(rows, t)
    if not best:
        out.print(f"no design of {len(rows)} ran within the constraints: {shown(ruled_out(rows))}")
        return
    params = [p.name for p in spec.parameters]
    objectives = [o.name for o in spec.objectives if o.name in HEADS]
    top = args.top or DEFAULT_TOP
    title = f"best {min(top, len(best))} of {len(best)} designs by {t.rank_label}"
    tables = [design_table(title, best[:top], objectives + params, {t.rank})]
    goals = [Goal(c, m) for c, m in t.front]
    front = find_front(args.out, goals).front_rows()
    labels = ", ".join(f"{HEADS[g.column]} {'max' if g.maximize else 'min'}" for g in goals)
    heading = f"Pareto front ({labels}): {len(front)} design{'s' if len(front) > 1 else ''}"
    heading += f", the first {top}" if len(front) > top else ""
    tables.append(design_table(heading, front[:top], objectives + params, {g.column for g in goals}))
    legend = "; ".join(LEGEND[c] for c in objectives + params if c in LEGEND)
    emit(args, out, [*tables, legend])
    base = base_row(spec)
    if base["status"] == "ok":
        values = ", ".join(f"{show_value(base[c])} {HEADS[c]}" for c in objectives)
        out.print(f"the base chip as it is: {values}")
    else:
        out.print(f"the base chip as it is: ruled out ({shown(base['error'])})")
    if len(rows) > len(best):
        out.print(f"ruled out: {shown(ruled_out(rows))}")
    axes = " ".join(f"--{'maximize' if m else 'minimize'} {c}" for c, m in t.front)
    out.print(f"plot and the whole front: archsim pareto {shown(args.out)} {axes}", soft_wrap=True)


def ruled_out(rows: list[dict]) -> str:
    """How many designs did not run or rank, by reason: `12 by fits_reticle, 3 failed`."""
    from collections import Counter

    reasons = Counter(
        "failed" if r["status"] == "failed" else (r["error"] or "").split(" (")[0].removeprefix("constraint not met: ")
        for r in rows
        if r["status"] != "ok"
    )
    return ", ".join(f"{n} by {why}" if why != "failed" else f"{n} failed" for why, n in reasons.most_common())
