"""Rich tables for the terminal: per-op breakdowns with their legend, and fitting any table to a width
(archsim/report/summary.py: the run at a glance)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table

from archsim.engine.timing import OpTiming
from archsim.units import format_rate, format_seconds

if TYPE_CHECKING:
    from rich.console import JustifyMethod

    from archsim.runner.generation import StepResult


def si(x: float) -> str:
    """A number in 3 significant digits with a metric prefix and no unit: 535T, 4.5T, 12.3G, 870."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale * 0.9995:
            return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}" if x else "0"


def step_table(s: StepResult, title: str, clock_hz: float) -> Table:
    """Per-op breakdown, ~100 columns wide: the bound (in its colour) as its binding unit's utilisation, the
    critical core's compute cycles, the largest term of the op's time by cause, rates per second."""
    total = s.time_s
    t = Table(
        title=f"{title}: {format_seconds(total)}  ({format_rate(s.flops / total if total else 0, 'FLOP/s')}, "
        f"{format_rate(s.hbm_bytes / total if total else 0, 'B/s')} from HBM)",
        title_justify="left",
        caption=STEP_LEGEND,
        caption_justify="left",
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("op", "left"),
        ("x", "right"),
        ("time", "right"),
        ("share", "right"),
        ("bound", "left"),
        ("comp cyc", "right"),
        ("top cause", "left"),
        ("FLOP/s", "right"),
        ("HBM B/s", "right"),
        ("util", "right"),
    )
    for col, just in columns:
        t.add_column(col, justify=just, no_wrap=True)
    for r in s.ops:
        tm: OpTiming = r.timing
        t.add_row(
            r.op.name,
            str(r.op.repeat),
            format_seconds(r.time_s),
            f"{100 * r.time_s / total:.1f}%" if total else "-",
            _bound(tm.bound.value, _binding(tm)),
            si(tm.compute_cycles),
            _largest_cause(tm),
            si(tm.achieved_flops),
            si(tm.achieved_bytes_per_s),
            f"{100 * tm.utilisation:.0f}%",
        )
    return t


STEP_LEGEND = (
    "x: runs per step; share: of the step's time; bound: the unit most used against its own peak, and "
    "how much (mat matrix units, vec vector units, hbm HBM bandwidth, l2 L2 bandwidth, sram SRAM "
    "bandwidth, lat memory latency, stage the SRAM stages' feed, link chip-to-chip links, fixed per-kernel launch and gaps); comp cyc: "
    "compute cycles of the core that finishes last; top cause: the largest term of the op's time "
    "(comp computing, HBM/L2 waiting on that bandwidth, lat on memory latency, clock the power-held clock, "
    "fixed launch and gaps, load issue, stores, link); FLOP/s, HBM B/s: achieved rates; util: busy share of the cores' cycles; "
    "k M G T: 1e3 1e6 1e9 1e12"
)

CAUSE_NAMES = {"compute": "comp", "hbm_bandwidth": "HBM", "memory_latency": "lat", "l2": "L2", "held_clock": "clock"}


def _binding(tm: OpTiming) -> str:
    """An op's binding unit and its utilisation, e.g. "hbm 85%" ("mat", "vec": the matrix and vector units)."""
    unit = tm.binding_unit
    short = {"matrix": "mat", "vector": "vec", "staging": "stage"}.get(unit, unit)
    return f"{short} {100 * tm.unit_utilisation[unit]:.0f}%"


def _largest_cause(tm: OpTiming) -> str:
    """The largest term of an op's time by cause and its share, e.g. "HBM 63%" (HBM bandwidth)."""
    by = tm.by_cause
    name = by.largest
    share = getattr(by, name + "_s") / tm.time_s if tm.time_s else 0.0
    return f"{CAUSE_NAMES.get(name, name.replace('_', ' '))} {100 * share:.0f}%"


def _bound(b: str, text: str | None = None) -> str:
    """The bound `b` in its colour, as `text` (its binding unit and that unit's utilisation) or by name."""
    colour = {"compute": "green", "memory": "yellow", "overhead": "magenta", "communication": "cyan"}[b]
    return f"[{colour}]{text or {'communication': 'comm'}.get(b, b)}[/{colour}]"


def natural_width(table: Table) -> int:
    """Columns the table takes when nothing limits it."""
    return Console(width=10_000).measure(table).maximum


def fit(table: Table, width: int) -> list[Table]:
    """`table` as one or more tables that read in `width` columns without splitting a token: as
    built if it fits; else without vertical rules and with one space between columns; then with
    multi-word headers on several lines; then with headers also broken after underscores; then
    with cells of prose wrapped between words; then, where the names and numbers alone are still
    too wide, with the columns that do not fit moved to a second table that repeats the first
    column. A name or number is never folded across lines (so it can be copied and grepped) and
    no column is dropped; rich cuts a cell short (with its visible '…') only when one column
    alone is wider than `width`."""
    steps = (_compact, _stacked_headers, _broken_names, _wrapped_words)
    for step in steps:
        if natural_width(table) <= width:
            return [table]
        step(table)
    _narrowed_prose(table, width)
    if natural_width(table) <= width:
        return [table]
    parts = _split(table, width)
    for part in parts:
        for column in part.columns:
            column.max_width = None
        _narrowed_prose(part, width)
    return parts


def minimum_width(table: Table) -> int:
    """Columns the table needs with its prose wrapped at its longest word and its names and
    numbers whole (rich's own minimum would count a number with a unit as wrappable)."""
    narrowest = _with_columns(table, table.columns)
    for column in narrowest.columns:
        if not column.no_wrap:
            column.max_width = _content_width(column)[0]
    return natural_width(narrowest)


def _content_width(column: Column) -> tuple[int, int]:
    """The narrowest (its longest word) and widest (its longest line) a column's cells can be."""
    console = Console(width=10_000)
    cells = [*([column.header] if column.header else []), *column._cells]
    spans = [Measurement.get(console, console.options, c) for c in cells]
    return max((m.minimum for m in spans), default=1), max((m.maximum for m in spans), default=1)


def _narrowed_prose(table: Table, width: int) -> None:
    """The columns that wrap narrowed, the widest first and none below its longest word, until
    `table` fits `width` or none can give more. rich alone would narrow them past their longest
    word and cut that word short."""
    while (excess := natural_width(table) - width) > 0:
        spans = [(c, *_content_width(c)) for c in table.columns if not c.no_wrap]
        spans = [(c, least, c.max_width or most) for c, least, most in spans if (c.max_width or most) > least]
        if not spans:
            return
        column, least, most = max(spans, key=lambda s: s[2])
        column.max_width = max(least, most - excess)


def _split(table: Table, width: int) -> list[Table]:
    """`table` as tables of its first column and as many of the next columns as fit `width`."""
    key = table.columns[0]
    groups: list[list[Column]] = [[]]
    for column in table.columns[1:]:
        if groups[-1] and minimum_width(_with_columns(table, [key, *groups[-1], column])) > width:
            groups.append([])
        groups[-1].append(column)
    parts = [_with_columns(table, [key, *g]) for g in groups]
    for part in parts[1:]:
        part.title = None
    for part in parts[:-1]:
        part.caption = None
    return parts


def _with_columns(table: Table, columns: list[Column]) -> Table:
    """A copy of `table` (title, style, rows) with only `columns`."""
    import copy

    part = copy.copy(table)
    part.columns = [copy.copy(c) for c in columns]
    for i, column in enumerate(part.columns):
        column._index = i
    return part


def _compact(table: Table) -> None:
    from rich import box

    table.box = box.SIMPLE_HEAD
    table.show_edge = False
    table.pad_edge = False
    table.padding = (0, 1, 0, 0)
    table.collapse_padding = True


def _stacked_headers(table: Table) -> None:
    for column in table.columns:
        if isinstance(column.header, str):
            column.header = column.header.replace(" ", "\n")


def _broken_names(table: Table) -> None:
    for column in table.columns:
        if isinstance(column.header, str):
            column.header = column.header.replace("_", "_\n").replace("(", "\n(").replace("\n\n", "\n")


def _wrapped_words(table: Table) -> None:
    """Columns of prose (left-justified, with spaces in a cell) wrap between words; names and
    numbers stay whole on one line; nothing folds mid-word."""
    for column in table.columns:
        column.overflow = "ellipsis"
        column.no_wrap = column.justify != "left" or not any(" " in str(c) for c in column._cells)
