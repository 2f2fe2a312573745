"""`archsim validate`: predicted against measured timings, per case and per kind."""

from __future__ import annotations

from archsim.commands import check_outputs, shown
from archsim.commands.output import add_output_flags, console, emit, progress
from archsim.commands.run import DEFAULT_HW

SHIPPED = ("h200_calibration", "h200_holdout")


def add_parser(sub) -> None:
    val = sub.add_parser("validate", help="compare predictions with measured timings")
    val.add_argument("cases", help=f"case file (JSON) or a shipped set: {', '.join(SHIPPED)}")
    val.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    val.add_argument("--json", metavar="PATH", help="write cases and summary as JSON")
    val.add_argument("--kind", action="append", help="only cases of this kind (repeatable)")
    add_output_flags(val)


def case_path(name_or_path: str):
    """The file of a case set: a path as given, else a shipped set of that name."""
    from pathlib import Path

    path = Path(name_or_path)
    if not path.exists() and name_or_path in SHIPPED:
        from archsim.config.loader import INSTALLED_DATA

        path = INSTALLED_DATA / f"{name_or_path}.json"
    return path


def load_cases(name_or_path: str) -> list:
    """The cases of a case file or shipped set, read as strict, bounded JSON."""
    from archsim.config.jsonfile import read_json
    from archsim.errors import ConfigError

    path = case_path(name_or_path)
    if not path.exists():
        raise ConfigError.single(name_or_path, "", "no such case file")
    data, _text = read_json(path, "case file")
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise ConfigError.single(str(path), "cases", 'expected {"cases": [...]}')
    return cases


def oversized(case, system) -> str | None:
    """Why a case's ops exceed the size limit (refused before it is simulated, so one huge case
    neither exhausts memory nor stops the others), or None."""
    from archsim.errors import TooLargeError
    from archsim.limits import check_op_size, check_steps_size
    from archsim.runner.validation import case_ops, check_case, model_step_workload

    try:
        check_case(case)
        if case["kind"] == "model_step":
            w, step = model_step_workload(case)
            check_steps_size(w, system, [step])
        else:
            for op in case_ops(case):
                check_op_size(op, system.chip, case["kind"])
    except TooLargeError as err:
        return str(err)
    except Exception:  # any other problem of the case is validate_cases' to report
        return None
    return None


def validate_with_progress(cases: list, system, args):
    """Every case simulated, one at a time under a progress bar; (results, errors) as validate_cases."""
    from archsim.runner.validation import validate_cases

    results, errors = [], []
    with progress(args, f"cases on {shown(system.chip.name)}", total=len(cases)) as bar:
        for i, case in enumerate(cases):
            anonymous = not isinstance(case, dict) or "id" not in case
            too_large = oversized(case, system)
            if too_large:
                errors.append((f"#{i}" if anonymous else str(case["id"]), too_large))
                bar.update(i + 1, len(cases))
                continue
            done, bad = validate_cases([case], system)
            results += done
            errors += [(f"#{i}" if anonymous else cid, why) for cid, why in bad]
            bar.update(i + 1, len(cases))
    return results, errors


def run(args) -> int:
    import sys

    from rich.table import Table

    from archsim.config.loader import load_system
    from archsim.errors import printable
    from archsim.report.export import write_json
    from archsim.report.tables import format_seconds
    from archsim.runner.validation import summarise

    check_outputs(args, ("json",), inputs=(args.hw, args.cases, str(case_path(args.cases))))
    system, _ = load_system(args.hw)
    cases = load_cases(args.cases)
    if args.kind:
        cases = [c for c in cases if not isinstance(c, dict) or c.get("kind") in args.kind]
    results, errors = validate_with_progress(cases, system, args)
    table = Table(title=f"{shown(args.cases)} on {shown(system.chip.name)}", title_justify="left")
    for col, just in (("case", "left"), ("measured", "right"), ("predicted", "right"), ("error", "right")):
        table.add_column(col, justify=just, overflow="fold")
    for r in results:
        colour = "green" if abs(r.error_pct) <= 10 else "yellow" if abs(r.error_pct) <= 25 else "red"
        table.add_row(
            shown(r.id),
            format_seconds(r.measured_ms / 1e3),
            format_seconds(r.predicted_ms / 1e3),
            f"[{colour}]{r.error_pct:+.1f}%[/{colour}]",
        )
    summary = summarise(results)
    st = Table(title="summary (absolute error)", title_justify="left")
    for col in ("kind", "n", "mean", "worst"):
        st.add_column(col, justify="left" if col == "kind" else "right")
    for kind, s in summary.items():
        st.add_row(kind, str(s["n"]), f"{s['mean_abs_error_pct']:.1f}%", f"{s['max_abs_error_pct']:.1f}%")
    rows = [
        {
            "id": r.id,
            "kind": r.kind,
            "measured_ms": r.measured_ms,
            "predicted_ms": r.predicted_ms,
            "error_pct": r.error_pct,
        }
        for r in results
    ]
    data = {
        "hardware": args.hw,
        "cases": rows,
        "summary": summary,
        "errors": [{"id": i, "error": e} for i, e in errors],
    }
    emit(args, console(args), [table, st], data=data, rows=rows)
    if args.json:
        write_json(args.json, data)
    for cid, err in errors:
        print(printable(f"{args.cases}: case {cid}: {err}"), file=sys.stderr)
    return 2 if errors else 0
