"""`archsim pareto`: the Pareto front of a sweep's results as a table and a plot."""

from __future__ import annotations

import argparse

from archsim.commands import UsageError, check_outputs, positive_int, require_plots, shown
from archsim.commands.output import add_output_flags, console, emit, notes


class _Goal(argparse.Action):
    """--maximize / --minimize append to one ordered list: the first two are the plot's axes."""

    def __call__(self, parser, namespace, values, option_string=None):
        goals = list(getattr(namespace, self.dest, None) or [])
        goals.append((values, option_string == "--maximize"))
        setattr(namespace, self.dest, goals)


def add_parser(sub) -> None:
    p = sub.add_parser("pareto", help="Pareto front of a sweep's results: table and plot")
    p.add_argument("dir", metavar="DIR", help="results folder of `archsim sweep`")
    for flag, verb in (("--maximize", "maximise"), ("--minimize", "minimise")):
        p.add_argument(
            flag,
            action=_Goal,
            dest="goals",
            metavar="COLUMN",
            help=f"a column to {verb}: an objective, parameter or derived value (repeatable; "
            "the first two are the plot's axes)",
        )
    p.add_argument("--plot", metavar="PATH", help="PNG of the front (default DIR/pareto_<x>_<y>.png)")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.add_argument("--json", metavar="PATH", help="write the front's rows as JSON")
    p.add_argument("--top", type=positive_int("--top"), metavar="N", help="show only the first N designs of the front")
    add_output_flags(p, quiet_help=None)


def front_table(front, top: int | None):
    from rich.table import Table

    from archsim.sweep.plot import show_value

    rows = front.front_rows()
    labels = ", ".join(shown(g.label) for g in front.goals)
    table = Table(title=f"Pareto front: {len(rows)} of {len(front.rows)} designs ({labels})")
    table.add_column("#", justify="right", no_wrap=True)
    for g in front.goals:
        table.add_column(shown(g.label), justify="right", style="bold", no_wrap=True)
    columns = [c for c in front.design_columns if c not in {g.column for g in front.goals}]
    for c in columns:
        table.add_column(shown(c), justify="right", no_wrap=True)
    table.add_column("config_hash", no_wrap=True, overflow="fold")
    for i, r in enumerate(rows[:top] if top else rows, start=1):
        table.add_row(
            str(i),
            *(shown(show_value(r[g.column])) for g in front.goals),
            *(shown(show_value(r[c])) for c in columns),
            shown(r["config_hash"]),
        )
    return table


def run(args) -> int:
    from pathlib import Path

    from archsim.sweep.pareto import Goal, ParetoError, find_front
    from archsim.sweep.store import StoreError

    check_outputs(args, ("json", "plot"), inputs=(args.dir,))
    goals = [Goal(c, m) for c, m in (args.goals or [])]
    if len(goals) < 2:
        raise UsageError("give at least two objectives: --maximize COLUMN and/or --minimize COLUMN")
    if len({g.column for g in goals}) < len(goals):
        raise UsageError("each column may be one objective only")
    if not args.no_plot:
        require_plots("--plot", " (or pass --no-plot)")
    try:
        front = find_front(args.dir, goals)
    except ParetoError as err:  # name the flag of a column that is not one
        flag = next(
            ("--maximize" if g.maximize else "--minimize" for g in goals if str(err).startswith(repr(g.column))), None
        )
        raise UsageError(f"{flag}: {err}" if flag else str(err)) from None
    except StoreError as err:
        raise UsageError(str(err)) from None
    front_rows = front.front_rows()
    data = {
        "goals": [{"column": g.column, "maximize": g.maximize} for g in goals],
        "designs": len(front.rows),
        "front": front_rows,
    }
    emit(args, console(args), [front_table(front, args.top)], data=data, rows=front_rows[: args.top])
    if args.json:
        from archsim.report.export import write_json

        write_json(args.json, data)
    if not args.no_plot:
        from archsim.sweep.plot import human, plot_front

        path = args.plot or str(Path(args.dir) / f"pareto_{goals[0].column}_{goals[1].column}.png")
        over = ", ".join(f"{human(g.column)} ({'max' if g.maximize else 'min'})" for g in goals)
        plot_front(path, front, f"{Path(args.dir).name}: Pareto front of {len(front.rows)} designs over {over}")
        notes(args).print(f"plot {shown(path)}")
    return 0
