"""How every command shows what it found: `--format table` (rich tables that fit the terminal,
80 columns when output goes to a file; `--wide` for no folding), `--format json` (the document
`--json` writes, on stdout) or `--format csv` (the command's table, on stdout); progress on
stderr, only on a terminal and never under `--quiet`."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

from archsim import jit

FORMATS = ("table", "json", "csv")
WIDE_COLUMNS = 400  # --wide: tables at their natural width, no folding


def add_output_flags(p, formats: tuple[str, ...] = FORMATS, quiet_help: str | None = "no progress bar"):
    """--format, --wide and (unless `quiet_help` is None) --quiet."""
    p.add_argument(
        "--format",
        choices=formats,
        default="table",
        help="table (default), json (the --json document on stdout) or csv (the table on stdout)"
        if "csv" in formats
        else "table (default) or json (the --json document on stdout)",
    )
    p.add_argument("--wide", action="store_true", help="tables at full width: no folded columns or headers")
    if quiet_help is not None:
        p.add_argument("--quiet", action="store_true", help=quiet_help)


def renamed(p, old: str, new: str) -> None:
    """A flag that was renamed: giving it says what to use instead (exit 2), it does nothing else."""

    class Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.error(f"{old} was renamed: use {new}")

    p.add_argument(old, action=Renamed, nargs="?", help=argparse.SUPPRESS)


def console(args, stderr: bool = False):
    """The console tables go to: the terminal's width, 80 columns into a file, unlimited with --wide."""
    from rich.console import Console

    if getattr(args, "wide", False):
        return Console(width=WIDE_COLUMNS, stderr=stderr)
    return Console(stderr=stderr)


def data_only(args) -> bool:
    """Whether stdout carries a JSON or CSV document (so nothing else may be printed on it)."""
    return getattr(args, "format", "table") != "table"


def notes(args):
    """Where lines other than the result go: stdout with tables, stderr when stdout carries data."""
    return console(args, stderr=data_only(args))


def emit(args, out, tables=(), data: dict | None = None, rows: list[dict] | None = None) -> None:
    """The result in the chosen format: tables fitted to the console, or a document on stdout."""
    import json

    fmt = getattr(args, "format", "table")
    if fmt == "json":
        from archsim.report.export import _clean

        sys.stdout.write(json.dumps(_clean(data), indent=1, sort_keys=True) + "\n")
    elif fmt == "csv":
        import csv

        from archsim.errors import printable

        rows = [{k: printable(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows or []]
        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        for t in tables:
            if isinstance(t, str):
                out.print(t)
                continue
            from archsim.report.tables import fit  # rich's tables only where there is one

            for part in fit(t, out.width):
                out.print(part)


def jit_cold() -> bool:
    """Whether the simulation kernels are being compiled ahead of time (archsim/aot.py) or will
    be compiled on first use (no Numba cache on disk); False while neither is loaded
    (archsim/jit.py)."""
    if jit.building():
        return True
    if os.environ.get("NUMBA_DISABLE_JIT") == "1" or not jit.loaded():
        return False
    try:
        from numba.core.registry import CPUDispatcher

        from archsim.engine import kernels
    except ImportError:
        return False
    for obj in vars(kernels).values():
        index = getattr(getattr(getattr(obj, "_cache", None), "_cache_file", None), "_index_path", None)
        if isinstance(obj, CPUDispatcher) and index is not None and not os.path.exists(index):
            return True
    return False


COMPILING = "compiling the simulation kernels (first run only)"


class _Bar:
    """A started rich Progress with one task, or nothing at all when progress is off."""

    def __init__(self, progress, task):
        self.progress, self.task = progress, task

    def describe(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=text)

    def update(self, done: int, total: int | None = None, text: str | None = None) -> None:
        if self.progress is not None:
            kw = {"description": text} if text else {}
            self.progress.update(self.task, completed=done, total=total, **kw)

    def callback(self, text: str | None = None):
        """`progress(done, total)` as the runner calls it."""
        return lambda done, total: self.update(done, total, text)


@contextlib.contextmanager
def progress(args, label: str, total: int | None = None, compiles: bool = True) -> Iterator[_Bar]:
    """A progress line on stderr while the block runs: a spinner, the label, a bar once a total is
    known, the elapsed time. Off under --quiet or when stderr is not a terminal. `compiles`: the
    block may run the kernels first, so a cold Numba cache is named as what takes the time."""
    forced = any(os.environ.get(v) for v in ("FORCE_TERMINAL", "TTY_COMPATIBLE"))  # rich's own switches
    if getattr(args, "quiet", False) or not (forced or sys.stderr.isatty()):
        yield _Bar(None, None)  # without importing rich's progress
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    if not err.is_terminal:
        yield _Bar(None, None)
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def name_the_compile() -> None:  # when the first large kernel call is made (never, if the op cache has all)
            if jit_cold():
                bar.update(task, description=f"{COMPILING}, then {label}")

        if compiles:
            jit.when_loaded(name_the_compile)
        try:
            yield _Bar(bar, task)
        finally:
            jit.forget(name_the_compile)
