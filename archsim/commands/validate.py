"""`archsim validate`: predicted against measured timings, per case and per kind.

A shipped set names the chip it was measured on (and the multi-chip system of its all-reduce
cases); `archsim validate all` runs every shipped set on its chip and summarises per chip, the
cases a chip was calibrated on apart from those held out of calibration, and lists the chips
that follow from a calibrated one by datasheet changes, which have no measurements here (blind).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from archsim.commands import UsageError, check_outputs, shown
from archsim.commands.intervals import add_interval_flag, case_swings, check_interval
from archsim.commands.output import add_output_flags, console, emit, progress
from archsim.commands.run import DEFAULT_HW


@dataclass(frozen=True)
class ShippedSet:
    """A case file shipped with archsim: where it was measured, and its held-out cases."""

    chip: str
    collectives: str | None = None  # the system its all-reduce cases ran on
    held_out: tuple[int, int] | None = None  # (m, r): cases with index % m == r were never fitted
    role: str = "calibration"  # or "development": used to choose mechanisms, never fitted


ADDED_META = ("vector_kernels", "resolution", "split_kv")  # what archsim added to a shipped set's meta
SHIPPED = {
    "h200_calibration": ShippedSet("h200"),
    "h200_kernels": ShippedSet("h200"),
    "h200_holdout": ShippedSet("h200", role="development"),
    "a100_calibration": ShippedSet("a100_pcie", "a100x8", held_out=(4, 2)),
}
BLIND = {  # shipped files no measurement here judges: what their predictions rest on
    "h100": "h200's model with the H100's datasheet memory, L2 and power",
    "a100": "a100_pcie's model with the SXM4's datasheet memory and power",
    "h200x8": "h200 chips; collective costs from NCCL's published tuning constants",
    "h100x8": "h100 chips; collective costs from NCCL's published tuning constants",
}


def add_parser(sub) -> None:
    val = sub.add_parser("validate", help="compare predictions with measured timings")
    val.add_argument("cases", help=f"case file (JSON), a shipped set ({', '.join(SHIPPED)}) or all")
    val.add_argument("--hw", help="hardware YAML or shipped name (default: the set's chip, else h200)")
    val.add_argument("--system", help="multi-chip system for all-reduce cases (default: the set's, else --hw)")
    val.add_argument("--json", metavar="PATH", help="write cases and summary as JSON")
    val.add_argument("--kind", action="append", help="only cases of this kind (repeatable)")
    add_interval_flag(val)
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
    """The cases of a case file or shipped set (their file's meta: `load_case_file`)."""
    return load_case_file(name_or_path)[0]


def load_case_file(name_or_path: str):
    """(cases, CaseFile meta, the shipped set they come from or None) of a case file or shipped
    set, read as strict, bounded JSON; ConfigError naming what is wrong."""
    from archsim.config.jsonfile import read_json
    from archsim.errors import ConfigError
    from archsim.runner.validation import CaseError, CaseFile

    path = case_path(name_or_path)
    if not path.exists():
        raise ConfigError.single(name_or_path, "", "no such case file")
    data, _text = read_json(path, "case file")
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise ConfigError.single(str(path), "cases", 'expected {"cases": [...]}')
    raw = data.get("meta")
    name = name_or_path if str(path) != name_or_path else campaign(raw)  # a shipped set by name
    try:
        meta = CaseFile.from_meta(_with_shipped_meta(raw, name))
    except CaseError as err:
        raise ConfigError.single(str(path), "meta", str(err)) from None
    return cases, meta, name


@functools.cache
def _shipped_meta(name: str) -> dict:
    import json

    from archsim.config.loader import INSTALLED_DATA

    return json.loads((INSTALLED_DATA / f"{name}.json").read_text()).get("meta", {})


def campaign(meta: object) -> str | None:
    """The shipped set a file's cases come from, or None: by its meta's `source`, or for a set
    without one, a meta that is the shipped set's as measured (without what archsim added). A
    subset of a shipped set keeps its meta."""
    if not isinstance(meta, dict) or not meta:
        return None
    if "source" in meta:
        return next((name for name in SHIPPED if _shipped_meta(name).get("source") == meta["source"]), None)
    return next((name for name in SHIPPED if _as_measured(_shipped_meta(name)) == meta), None)


def _as_measured(meta: dict) -> dict:
    """A shipped set's meta as its measurement wrote it: less the keys archsim added and its note of them."""
    return {k: v for k, v in meta.items() if k not in (*ADDED_META, "archsim_note")}


def _with_shipped_meta(meta: object, name: str | None) -> object:
    """A file from a shipped campaign gets what archsim added to that set's meta (which kernels
    ran, `vector_kernels`; the timer's `resolution`) where it does not say itself."""
    if name is None or not isinstance(meta, dict):
        return meta
    added = {k: v for k, v in _shipped_meta(name).items() if k in ADDED_META}
    return {**added, **meta}


def refused(case, system) -> str | None:
    """Why a case's ops exceed the size limit or cannot run on the chip (refused before it is
    simulated, so one huge case neither exhausts memory nor stops the others), or None."""
    from archsim.errors import RefusedError, reraise_interrupt
    from archsim.runner.size import check_op, check_steps_size
    from archsim.runner.validation import case_ops, check_case, model_step_workload

    try:
        check_case(case)
        if case["kind"] == "model_step":
            w, step = model_step_workload(case)
            check_steps_size(w, system, [step])
        else:
            for op in case_ops(case):
                check_op(op, system.chip, case["kind"])
    except RefusedError as err:
        return str(err)
    except Exception as err:  # any other problem of the case is validate_cases' to report
        reraise_interrupt(err)  # Ctrl-C inside a compiled kernel
        return None
    return None


def validate_with_progress(cases: list, system, args, meta=None, collectives=None):
    """Every case simulated, one at a time under a progress bar; (results, errors) as validate_cases."""
    from archsim.runner.validation import CaseFile, validate_cases

    with progress(args, f"cases on {shown(system.chip.name)}", total=len(cases)) as bar:
        return validate_cases(
            cases,
            system,
            meta or CaseFile(),
            collectives,
            refuse=lambda case: refused(case, system),
            done=lambda i: bar.update(i + 1, len(cases)),
        )


def held_out_ids(cases: list, split: tuple[int, int] | None) -> set[str]:
    """Ids of the cases a set holds out of calibration (index % m == r)."""
    if split is None:
        return set()
    m, r = split
    return {str(c.get("id")) for i, c in enumerate(cases) if isinstance(c, dict) and i % m == r}


def summary_table(title: str, summary: dict):
    from rich.table import Table

    st = Table(title=title, title_justify="left")
    for col in ("kind", "n", "mean", "worst", "floor"):
        st.add_column(col, justify="left" if col == "kind" else "right")
    for kind, s in summary.items():
        st.add_row(kind, str(s["n"]), *summary_cells(s))
    return st


def summary_cells(s: dict) -> tuple[str, str, str]:
    """A kind's mean and worst error and its floor, as the tables show them."""
    return f"{s['mean_abs_error_pct']:.1f}%", f"{s['max_abs_error_pct']:.1f}%", f"{s['floor_pct']:.1f}%"


def run(args) -> int:
    check_interval(args)
    if args.cases == "all":
        return run_all(args)
    import sys

    from rich.table import Table

    from archsim.config.loader import load_system
    from archsim.errors import printable
    from archsim.report.export import write_json
    from archsim.runner.validation import summarise
    from archsim.units import format_seconds

    check_outputs(args, ("json",), inputs=(args.hw, args.system, args.cases, str(case_path(args.cases))))
    cases, meta, name = load_case_file(args.cases)
    shipped = SHIPPED.get(name or "")
    hw = args.hw or (shipped.chip if shipped else DEFAULT_HW)
    system, _ = load_system(hw)
    coll_name = args.system or (shipped.collectives if shipped else None)
    collectives = load_system(coll_name)[0] if coll_name else None
    held = held_out_ids(cases, shipped.held_out if shipped and args.cases in SHIPPED else None)
    if args.kind:
        cases = [c for c in cases if not isinstance(c, dict) or c.get("kind") in args.kind]
    results, errors = validate_with_progress(cases, system, args, meta, collectives)
    table = Table(title=f"{shown(args.cases)} on {shown(system.chip.name)}", title_justify="left")
    table.add_column("case", overflow="fold")
    timer = meta.resolution_s > 0  # predictions are what the timer reads; show the simulated time too
    for col in ("measured", "predicted", *(("simulated",) if timer else ()), "error"):
        table.add_column(col, justify="right", overflow="fold")
    for r in results:
        colour = "green" if abs(r.error_pct) <= 10 else "yellow" if abs(r.error_pct) <= 25 else "red"
        table.add_row(
            shown(r.id),
            format_seconds(r.measured_ms / 1e3),
            format_seconds(r.predicted_ms / 1e3),
            *((format_seconds(r.simulated_ms / 1e3),) if timer else ()),
            f"[{colour}]{r.error_pct:+.1f}%[/{colour}]",
        )
    summary = summarise(results, cases)
    tables = [
        table,
        summary_table(
            "summary (absolute error; floor: the least any model reaches whose time never falls as a case grows)",
            summary,
        ),
    ]
    data = {"hardware": hw, "summary": summary}
    if held:
        split = {
            "calibration": summarise([r for r in results if r.id not in held], cases),
            "held_out": summarise([r for r in results if r.id in held], cases),
        }
        tables += [summary_table(f"{name.replace('_', ' ')} cases", s) for name, s in split.items()]
        data["split"] = split
    rows = [
        {"id": r.id, "kind": r.kind, "measured_ms": r.measured_ms, "predicted_ms": r.predicted_ms,
         "simulated_ms": r.simulated_ms, "error_pct": r.error_pct}
        for r in results
    ]  # fmt: skip
    data["cases"] = rows
    data["errors"] = [{"id": i, "error": e} for i, e in errors]
    if args.interval:
        swings, data["interval_parameters"] = case_swings(args, hw, coll_name, cases, meta, results)
        tables.append(interval_table(args.interval, results, rows, held, data, swings))
    emit(args, console(args), tables, data=data, rows=rows)
    if args.json:
        write_json(args.json, data)
    for cid, err in errors:
        print(printable(f"{args.cases}: case {cid}: {err}"), file=sys.stderr)
    return 2 if errors else 0


def run_all(args) -> int:
    """Every shipped set on its chip: per chip and role, the mean and worst error per kind."""
    import sys

    from rich.table import Table

    from archsim.config.loader import load_system
    from archsim.errors import printable
    from archsim.report.export import write_json
    from archsim.runner.validation import summarise

    for flag, value in (("--hw", args.hw), ("--system", args.system)):
        if value:
            raise UsageError(f"{flag}: does not apply to 'validate all', which runs each set on its own chip")
    check_outputs(args, ("json",))
    table = Table(
        title="archsim on every shipped measurement (absolute error per kind; floor: the least any model reaches "
        "whose time never falls as a case grows)",
        title_justify="left",
    )
    for col in ("chip", "cases", "kind", "n", "mean", "worst", "floor"):
        table.add_column(col, justify="right" if col in ("n", "mean", "worst", "floor") else "left")
    data: dict = {"sets": {}, "blind": BLIND}
    rows: list[dict] = []  # the table's rows, for --format csv
    failed = False
    held_out: dict[str, list] = {}  # per chip, the results of cases never fitted
    swings: dict[str, dict] = {}  # with --interval, per chip and held-out case, each parameter's swing
    for name, s in SHIPPED.items():
        system = load_system(s.chip)[0]
        collectives = load_system(s.collectives)[0] if s.collectives else None
        cases, meta, _ = load_case_file(name)
        held = held_out_ids(cases, s.held_out)  # by index in the whole file, before --kind
        if args.kind:
            cases = [c for c in cases if c.get("kind") in args.kind]
        results, errors = validate_with_progress(cases, system, args, meta, collectives)
        failed |= bool(errors)
        for cid, err in errors:
            print(printable(f"{name}: case {cid}: {err}"), file=sys.stderr)
        parts = {s.role: [r for r in results if r.id not in held]}
        if held:
            parts["held out"] = [r for r in results if r.id in held]
        summaries = {role: summarise(rs, cases) for role, rs in parts.items()}
        held_out[s.chip] = held_out.get(s.chip, []) + parts.get("held out", parts.get("development", []))
        if args.interval:
            kept = {r.id for r in parts.get("held out", parts.get("development", []))}
            per_case, files = case_swings(args, s.chip, s.collectives, cases, meta, results, kept)
            swings.setdefault(s.chip, {}).update(per_case)
            data.setdefault("interval_parameters", {}).update(files)
        data["sets"][name] = {"chip": s.chip, **summaries}
        for role, summary in summaries.items():
            for kind, v in summary.items():
                chip = s.collectives if kind == "allreduce" and s.collectives else s.chip
                table.add_row(chip, f"{name} ({role})", kind, str(v["n"]), *summary_cells(v))
                rows.append({"chip": chip, "set": name, "role": role, "kind": kind} | v)
    tables = [table, *transfer_tables(args, table, rows, data, held_out, swings)]
    for chip, basis in BLIND.items():
        table.add_row(chip, f"blind: {basis}", "-", "-", "-", "-", "-")
    emit(args, console(args), tables, data=data, rows=rows)
    if args.json:
        write_json(args.json, data)
    return 2 if failed else 0


def transfer_tables(
    args, table, rows: list[dict], data: dict, held_out: dict[str, list], swings: dict[str, dict] | None = None
) -> list:
    """`validate all`'s leave-one-chip-out rows, read from the stored transfer result (beside each
    chip's own rows), and with --interval a table of the intervals' coverage of each chip's
    held-out cases (each case's parameters swinging as `swings[chip][case id]` gives; a stored
    transfer prediction's as its own fit's)."""
    from rich.table import Table

    from archsim.runner import transfer

    result = transfer.stored()
    if result is None:
        return []
    changed = transfer.stale(result)
    data["transfer"] = {"meta": result["meta"], "stale": changed, "rows": transfer.summaries(result, args.kind)}
    for r in data["transfer"]["rows"]:
        where = f"{r['set']} ({r['role']}): transfer from {r['source']}" + (" [stale]" if changed else "")
        table.add_row(r["chip"], where, r["kind"], str(r["n"]), *summary_cells(r))
        role = f"{r['role']} (transfer from {r['source']})"
        stat = {k: r[k] for k in ("n", "mean_abs_error_pct", "max_abs_error_pct", "floor_pct")}
        rows.append({"chip": r["chip"], "set": r["set"], "role": role, "kind": r["kind"]} | stat)
    if changed:
        table.caption = (
            f"transfer stored {result['meta']['date']}; since then {', '.join(changed)} changed: "
            "rerun python3 tools/calibrate.py --transfer"
        )
    if not args.interval:
        return []
    bands = transfer.bands(result, args.interval)
    cov = Table(
        title=f"{args.interval:g}% intervals (measured within +-q of predicted) on held-out cases: share inside",
        title_justify="left",
    )
    for col in ("chip", "kind", "q", "n", "own fit", "transfer"):
        cov.add_column(col, justify="left" if col in ("chip", "kind") else "right")
    moved = transfer.transfer_coverage(result, bands, swings)
    data["coverage"] = {}
    for chip, results in held_out.items():
        data["coverage"][chip] = transfer.coverage(results, bands, (swings or {}).get(chip))
        for kind, c in data["coverage"][chip].items():
            t = moved.get(chip, {}).get(kind)
            c |= {"q_pct": 100 * bands[kind].q, "transfer_coverage_pct": t and t["coverage_pct"]}
            shown_t = f"{t['coverage_pct']:.0f}% of {t['n']}" if t else "-"
            cov.add_row(chip, kind, f"{c['q_pct']:.1f}%", str(c["n"]), f"{c['coverage_pct']:.0f}%", shown_t)
        own, moved_all = pooled(data["coverage"][chip]), pooled(moved.get(chip, {}))
        if own:
            data["coverage_by_chip"] = data.get("coverage_by_chip", {}) | {
                chip: own | {"transfer_coverage_pct": moved_all and moved_all["coverage_pct"]}
            }
            shown_t = f"{moved_all['coverage_pct']:.0f}% of {moved_all['n']}" if moved_all else "-"
            cov.add_row(chip, "all kinds", "", str(own["n"]), f"{own['coverage_pct']:.0f}%", shown_t)
    cov.caption = ranges_caption(data.get("interval_parameters", {}))
    return [cov]


def pooled(by_kind: dict[str, dict]) -> dict | None:
    """Per-kind coverages ({kind: {n, coverage_pct}}) pooled over the kinds: every case counts the
    same; None where there are no cases."""
    n = sum(c["n"] for c in by_kind.values())
    if not n:
        return None
    return {"n": n, "coverage_pct": sum(c["n"] * c["coverage_pct"] for c in by_kind.values()) / n}


def interval_table(level: float, results: list, rows: list[dict], held: set[str], data: dict, swings: dict):
    """Each case's interval at `level` % (into its JSON row, with the swing of each parameter that
    moves it, up and down in percent) and the share of cases inside, per kind (the held-out cases
    apart where the set has them)."""
    from rich.table import Table

    from archsim.runner import sensitivity, transfer

    result = transfer.stored()
    bands = transfer.bands(result, level) if result else {}
    for r, row in zip(results, rows, strict=True):
        band, moved = bands.get(r.kind), swings.get(r.id, {})
        q_low, q_high = sensitivity.combined(band.q, moved.values()) if band else (0.0, 0.0)
        low, high = sensitivity.bounds(r.predicted_ms, q_low, q_high)
        row["interval_ms"] = [low, high] if band else None
        swung = {k: [100 * up, 100 * down] for k, (up, down) in moved.items() if up or down}
        if band and swung:
            row["swing_pct"] = swung
    parts = {"all": results} | ({"held out": [r for r in results if r.id in held]} if held else {})
    data["coverage"] = {part: transfer.coverage(rs, bands, swings) for part, rs in parts.items()}
    cov = Table(title=f"{level:g}% intervals (share of cases inside)", title_justify="left")
    for col in ("cases", "kind", "n", "coverage"):
        cov.add_column(col, justify="left" if col in ("cases", "kind") else "right")
    for part, by_kind in data["coverage"].items():
        for kind, c in by_kind.items():
            cov.add_row(part, kind, str(c["n"]), f"{c['coverage_pct']:.0f}%")
    cov.caption = ranges_caption(data.get("interval_parameters", {}))
    return cov


def ranges_caption(by_file: dict[str, dict]) -> str:
    """Which stated ranges the intervals carry, per file (sensitivity.parameter_swings' records)."""
    from pathlib import Path

    said = []
    for file, parts in by_file.items():
        keys = [p["key"] for p in parts["parameters"]]
        said.append(f"{Path(file).stem}: {', '.join(keys) if keys else 'none'}")
    return "stated ranges propagated: " + "; ".join(said) if said else ""
