"""`archsim sweep`: evaluate a design-space sweep spec into a resumable folder of Parquet parts."""

from __future__ import annotations

from archsim import limits
from archsim.commands import UsageError, positive_int, shown, sweep_templates
from archsim.commands.run import add_cache_flag, apply_cache_flag
from archsim.commands.sweep_templates import TEMPLATE_NAMES


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a design-space sweep (grid or sampled) into resumable Parquet parts")
    p.add_argument(
        "spec",
        metavar="SPEC.yaml",
        help="sweep spec, the name of a shipped one (h200_variants, h200_halton_1000, h200_energy), or a "
        f"template that generates the designs around --hw ({', '.join(TEMPLATE_NAMES)}; docs/sweeps.md)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="results folder; rerunning into it skips the points already recorded",
    )
    p.add_argument(
        "--workers",
        type=positive_int("--workers", limits.MAX_INSTANCES),
        metavar="N",
        help="local worker processes (default: the CPUs available; 1 runs in this process); "
        "at most the CPUs unless --force-workers",
    )
    p.add_argument(
        "--force-workers",
        action="store_true",
        help="allow more --workers or --dask-local workers than CPUs (each runs one point at a time)",
    )
    p.add_argument(
        "--allow-path",
        action="append",
        metavar="DIR",
        default=[],
        help="a folder whose files the spec may name, besides its own folder and the shipped ones (repeatable)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--dask", metavar="ADDRESS", help="run on the Dask scheduler at ADDRESS (tcp://host:8786)")
    where.add_argument(
        "--dask-local",
        type=positive_int("--dask-local", limits.MAX_INSTANCES),
        metavar="N",
        help="run on a local Dask cluster of N worker processes",
    )
    p.add_argument(
        "--chunk-size",
        type=positive_int("--chunk-size", limits.MAX_SWEEP_POINTS),
        metavar="N",
        help="points per task and per Parquet part (default: from the spec, else automatic)",
    )
    p.add_argument(
        "--fidelity",
        choices=("auto", "screen", "full"),
        default="full",
        help="full (default): all at full fidelity; auto: every point at screen fidelity, then every point "
        "that may be on the Pareto front of the objectives (each ranked its own way) again at full; screen: "
        "all at screen fidelity (docs/sweeps.md); each row records its own",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar; print the summary only")
    add_cache_flag(p)
    sweep_templates.add_flags(p)


def make_executor(args):
    from archsim.sweep.executors import ExecutorUnavailable, check_dask_address, default_workers, executor_for

    if (args.dask or args.dask_local) and args.workers:
        raise UsageError("--workers is for the local process pool: with Dask, size the cluster instead")
    cpus = default_workers()
    for flag, n in (("--workers", args.workers), ("--dask-local", args.dask_local)):
        if n and n > cpus and not args.force_workers:
            raise UsageError(f"{flag}: {n} workers on {cpus} CPUs only slows each down; add --force-workers to insist")
    if args.dask:
        try:
            check_dask_address(args.dask)  # a bad address fails in seconds, before the spec runs
        except ExecutorUnavailable as err:
            raise UsageError(str(err)) from None
    return executor_for(args.workers, args.dask, args.dask_local)


def run(args) -> int:
    from archsim.sweep.executors import default_workers, start_pool_server

    apply_cache_flag(args)
    if not (args.dask or args.dask_local) and (args.workers or default_workers()) > 1:
        start_pool_server()  # the workers' server imports beside this process, which loads the spec meanwhile
    from archsim.errors import printable
    from archsim.sweep import shipped_spec
    from archsim.sweep.driver import run_sweep
    from archsim.sweep.executors import ExecutorUnavailable
    from archsim.sweep.spec import load_spec
    from archsim.sweep.store import StoreError, check_pyarrow

    template = args.spec in TEMPLATE_NAMES
    if template:
        spec = sweep_templates.template_spec(args)
    else:
        path = shipped_spec(args.spec)
        sweep_templates.check_spec_flags(args, path)
        spec = load_spec(path, allowed=tuple(args.allow_path))
    out = printable(args.out)
    executor = make_executor(args)
    try:
        check_pyarrow()
        if args.quiet:  # nothing drawn: rich not even imported
            report = run_sweep(spec, args.out, executor, args.chunk_size, None, None, args.fidelity)
        else:
            report = run_with_progress(args, spec, executor)
    except (StoreError, ExecutorUnavailable) as err:
        raise UsageError(str(err)) from None
    except KeyboardInterrupt:
        print(f"{printable(spec.name)}: stopped; what finished is in {out}: run the same command to resume")
        raise
    if report.duplicates:
        print(
            f"{report.samples:,} samples resolve to {report.points_total:,} distinct points ({report.duplicates:,} repeated)"
        )
    print(
        f"{printable(spec.name)}: {report.points_done} of {report.points_total} points done "
        f"({report.points_ok} ok, {report.points_infeasible} infeasible, {report.points_failed} failed); "
        f"{report.points_run} run now in {report.elapsed_s:.1f} s on {executor.label}"
        + (f" ({executor.workers} workers)" if executor.workers > 1 else "")
        + (f"; {report.refined} of them again at full fidelity" if report.refined else "")
    )
    print(f"results {out}: summary.json, points/ (Parquet parts: pandas.read_parquet or archsim.load_sweep)")
    for why in sorted(set(report.lost)):
        print(f"warning: chunks lost, their points not recorded: {why}; rerun to finish")
    if report.stale_rows:
        print(
            f"note: {out} also holds {report.stale_rows} rows of points not in this spec "
            "(a value or a base file changed); `archsim pareto` reads them too"
        )
    if report.points_failed:
        print(f"{report.points_failed} points failed: their errors are in the `error` column")
    if template and report.complete:
        sweep_templates.show_results(args, spec)
    return 0 if report.complete and not report.points_failed else 1


def run_with_progress(args, spec, executor):
    """The sweep's SweepReport, a progress bar drawn on stderr while it runs (where that is a terminal)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from archsim.sweep.driver import run_sweep

    name = shown(spec.name)
    console = Console(stderr=True)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=console, disable=not console.is_terminal, transient=False) as bar:
        task = bar.add_task("resolving points", total=None, rate="")

        def resolved(total: int, todo: int) -> None:
            bar.update(task, description=f"{name}: {total - todo} of {total} done before", total=todo, completed=0)

        def progress(done: int, todo: int, failed: int) -> None:
            speed = bar.tasks[0].speed
            rate = f"{speed:.1f} points/s" if speed else ""
            label = name + (f" ({failed} failed)" if failed else "")
            bar.update(task, completed=done, description=label, rate=rate)

        return run_sweep(spec, args.out, executor, args.chunk_size, resolved, progress, args.fidelity)
