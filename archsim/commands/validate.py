"""`archsim validate`: predicted against measured timings, per case and per kind."""

from __future__ import annotations

from archsim.commands.run import DEFAULT_HW

SHIPPED = ("h200_calibration", "h200_holdout")


def add_parser(sub) -> None:
    val = sub.add_parser("validate", help="compare predictions with measured timings")
    val.add_argument("cases", help=f"case file (JSON) or a shipped set: {', '.join(SHIPPED)}")
    val.add_argument("--hw", default=DEFAULT_HW, help="hardware YAML or shipped name (default h200)")
    val.add_argument("--json", metavar="PATH", help="write cases and summary as JSON")
    val.add_argument("--kind", action="append", help="only cases of this kind (repeatable)")


def load_cases(name_or_path: str) -> list:
    import json
    from pathlib import Path

    from archsim.errors import ConfigError

    path = Path(name_or_path)
    if not path.exists() and name_or_path in SHIPPED:
        path = Path(__file__).resolve().parents[1] / "data" / f"{name_or_path}.json"
    if not path.is_file():
        raise ConfigError.single(name_or_path, "", "no such case file" if not path.exists() else "not a file")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError.single(str(path), "", f"not a JSON case file ({err})") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise ConfigError.single(str(path), "cases", 'expected {"cases": [...]}')
    return cases


def run(args) -> int:
    import sys

    from rich.console import Console
    from rich.table import Table

    from archsim.config.loader import load_system
    from archsim.report.export import write_json
    from archsim.runner.validation import summarise, validate_cases

    system, _ = load_system(args.hw)
    cases = load_cases(args.cases)
    if args.kind:
        cases = [c for c in cases if not isinstance(c, dict) or c.get("kind") in args.kind]
    results, errors = validate_cases(cases, system)
    console = Console()
    table = Table(title=f"{args.cases} on {system.chip.name}", title_justify="left")
    for col, just in (("case", "left"), ("measured", "right"), ("predicted", "right"), ("error", "right")):
        table.add_column(col, justify=just)
    for r in results:
        colour = "green" if abs(r.error_pct) <= 10 else "yellow" if abs(r.error_pct) <= 25 else "red"
        table.add_row(
            r.id, f"{r.measured_ms:.4g} ms", f"{r.predicted_ms:.4g} ms", f"[{colour}]{r.error_pct:+.1f}%[/{colour}]"
        )
    console.print(table)
    summary = summarise(results)
    st = Table(title="summary (absolute error)", title_justify="left")
    for col in ("kind", "n", "mean", "worst"):
        st.add_column(col, justify="left" if col == "kind" else "right")
    for kind, s in summary.items():
        st.add_row(kind, str(s["n"]), f"{s['mean_abs_error_pct']:.1f}%", f"{s['max_abs_error_pct']:.1f}%")
    console.print(st)
    if args.json:
        write_json(
            args.json,
            {
                "hardware": args.hw,
                "cases": [
                    {
                        "id": r.id,
                        "kind": r.kind,
                        "measured_ms": r.measured_ms,
                        "predicted_ms": r.predicted_ms,
                        "error_pct": r.error_pct,
                    }
                    for r in results
                ],
                "summary": summary,
                "errors": [{"id": i, "error": e} for i, e in errors],
            },
        )
    for cid, err in errors:
        print(f"{args.cases}: case {cid}: {err}", file=sys.stderr)
    return 2 if errors else 0
