"""The lines of a request trace, parsed one at a time into typed arrays (`TraceReader`).

The first non-empty line decides the format: `{` starts JSON lines, anything else is a CSV
header (the Azure `TIMESTAMP,ContextTokens,GeneratedTokens` or `arrival_s,prompt_tokens,
output_tokens`, in any column order). Arrivals are seconds in [0, MAX_ARRIVAL_S], in decimal
notation (CSV) or as JSON numbers; Azure timestamps are calendar dates and times checked field
by field and kept as whole nanoseconds since 1970, so no year wraps around (datetime64[ns]
stops at 2262); token counts are whole numbers from 1 to MAX_TOKENS, a request's prompt and
output together too. JSON values must be numbers, strict JSON as `archsim.config.jsonfile`
reads it. Every bad line becomes a Problem; reading stops after STOP_AFTER_PROBLEMS of them,
after `limit` good requests, or past MAX_REQUESTS. A header that is not one is described,
never quoted.
"""

from __future__ import annotations

import csv
import datetime
import difflib
import functools
import re
from array import array
from collections.abc import Iterable, Iterator

from archsim.errors import ConfigError, Problem, quote
from archsim.limits import MAX_ARRIVAL_S, MAX_REQUESTS, MAX_TOKENS

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
PLAIN_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
MAX_PROBLEMS = 20  # problems listed before the rest are summarised
STOP_AFTER_PROBLEMS = 1000  # bad lines read before giving up on a file
MAX_LINE_CHARS = 1 << 16  # a trace line is a few dozen characters
_SECONDS = re.compile(r"^[+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
_WHOLE = re.compile(r"^[+]?\d{1,12}$")
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$")


class TraceReader:
    """Reads lines of a trace into typed arrays, collecting the problems of every bad line."""

    def __init__(self, file: str, limit: int | None):
        self.file, self.limit = file, limit
        self.arrival, self.prompt, self.output = array("d"), array("q"), array("q")
        self.stamps: list[int] = []
        self.problems: list[Problem] = []
        self.azure = False
        self.line = 0
        self.stopped = False

    def full(self) -> bool:
        return (self.limit is not None and len(self.prompt) >= self.limit) or len(self.problems) >= STOP_AFTER_PROBLEMS

    def _lines(self, f: Iterable[str]) -> Iterator[tuple[int, str]]:
        for self.line, raw in enumerate(f, start=1):
            if len(raw) > MAX_LINE_CHARS:
                self.problems.append(
                    Problem(self.file, self.line, "", f"a line longer than {MAX_LINE_CHARS:,} characters")
                )
                continue
            if "\x00" in raw:
                self.problems.append(Problem(self.file, self.line, "", "contains NUL bytes: not a text trace"))
                continue
            yield self.line, raw

    def read(self, f: Iterable[str]) -> None:
        lines = self._lines(f)
        first = next(((n, t) for n, t in lines if t.strip()), None)
        if first is None:
            return
        n, text = first
        if text.lstrip("\ufeff").lstrip().startswith("{"):
            self._jsonl([(n, text)], lines)
        else:
            self._csv(n, text, lines)
        if self.full():
            self.stopped = len(self.problems) >= STOP_AFTER_PROBLEMS

    def _csv(self, line: int, header_text: str, lines: Iterator[tuple[int, str]]) -> None:
        header = [h.strip().lstrip("\ufeff") for h in next(csv.reader([header_text]), [])]
        if set(AZURE_COLUMNS) <= set(header):
            columns, self.azure = AZURE_COLUMNS, True
        elif set(PLAIN_COLUMNS) <= set(header):
            columns = PLAIN_COLUMNS
        else:
            raise ConfigError([Problem(self.file, line, "", _header_problem(header))])
        idx = [header.index(c) for c in columns]
        for line, raw in lines:
            if self.full():
                return
            try:
                row = next(csv.reader([raw]), [])
            except csv.Error as err:
                self.problems.append(Problem(self.file, line, "", f"not a CSV line ({err})"))
                continue
            if not row or not any(c.strip() for c in row):
                continue
            self._record(line, columns, [row[i].strip() if i < len(row) else "" for i in idx])

    def _jsonl(self, head: list[tuple[int, str]], lines: Iterator[tuple[int, str]]) -> None:
        from archsim.config.jsonfile import strict_loads

        for line, raw in [*head, *lines]:
            if self.full():
                return
            if not raw.strip():
                continue
            try:
                obj = strict_loads(raw.lstrip("\ufeff"))
            except ValueError as err:
                self.problems.append(Problem(self.file, line, "", f"not JSON ({err})"))
                continue
            if not isinstance(obj, dict):
                self.problems.append(
                    Problem(self.file, line, "", f"expected an object with {', '.join(PLAIN_COLUMNS)}")
                )
                continue
            missing = [c for c in PLAIN_COLUMNS if c not in obj]
            if missing:
                self.problems.append(Problem(self.file, line, missing[0], "missing"))
                continue
            self._record(line, PLAIN_COLUMNS, [obj[c] for c in PLAIN_COLUMNS], text=False)

    def _record(self, line: int, columns: tuple[str, ...], values: list, text: bool = True) -> None:
        """One request, or the problems of its line; JSON values must be numbers (`text` False)."""
        a, p, o = values
        before = len(self.problems)
        stamp = seconds = None
        if self.azure:
            stamp = timestamp_ns(a) if isinstance(a, str) else None
            if stamp is None:
                self.problems.append(Problem(self.file, line, columns[0], f"not a timestamp (got {quote(a)})"))
        else:
            seconds = _seconds(a) if text or not isinstance(a, str) else None
            if seconds is None:
                self.problems.append(
                    Problem(
                        self.file, line, columns[0], f"expected seconds from 0 to {MAX_ARRIVAL_S:,.0f} (got {quote(a)})"
                    )
                )
        counts = []
        for col, v in zip(columns[1:], (p, o)):
            n = _tokens(v) if text or not isinstance(v, str) else None
            if n is None:
                self.problems.append(
                    Problem(self.file, line, col, f"expected a whole number from 1 to {MAX_TOKENS:,} (got {quote(v)})")
                )
            counts.append(n)
        prompt, output = counts
        if len(self.problems) > before or prompt is None or output is None:
            return
        if prompt + output > MAX_TOKENS:
            self.problems.append(
                Problem(self.file, line, columns[2], f"prompt and output exceed {MAX_TOKENS:,} tokens")
            )
            return
        if len(self.prompt) >= MAX_REQUESTS:
            self.problems.append(
                Problem(self.file, line, "", f"more than {MAX_REQUESTS:,} requests: take the first N with --requests N")
            )
            self.problems.extend([self.problems[-1]] * STOP_AFTER_PROBLEMS)  # stop reading
            return
        if stamp is not None:  # an Azure trace's
            self.stamps.append(stamp)
            self.arrival.append(0.0)
        elif seconds is not None:
            self.arrival.append(seconds)
        self.prompt.append(prompt)
        self.output.append(output)


def _header_problem(header: list[str]) -> str:
    """What the first line lacks, naming only the expected columns (and a cell that is close to
    one of them): a file that is not a trace is not quoted."""
    wanted = AZURE_COLUMNS if any(h in AZURE_COLUMNS for h in header) else PLAIN_COLUMNS
    missing = [c for c in wanted if c not in header]
    hints = []
    for c in missing:
        close = difflib.get_close_matches(c, [h[:40] for h in header[:50]], n=1)
        if close:
            hints.append(f"{close[0]!r} for {c!r}?")
    return (
        f"not a trace header: expected the columns {','.join(PLAIN_COLUMNS)} or the Azure "
        f"{','.join(AZURE_COLUMNS)}; missing {', '.join(missing)}"
        + (f" (did you mean {' '.join(hints)})" if hints else "")
    )


def _seconds(value: object) -> float | None:
    """Arrival seconds in [0, MAX_ARRIVAL_S] from a decimal text or a JSON number; None if not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _SECONDS.match(value):
            return None
        value = float(value)
    if not isinstance(value, (int, float)) or not 0 <= value <= MAX_ARRIVAL_S:
        return None
    return float(value)


def _tokens(value: object) -> int | None:
    """A token count in [1, MAX_TOKENS] from a whole-number text or JSON number; None if not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if not _WHOLE.match(value):
            return None
        value = int(value)
    if isinstance(value, float):
        if not value.is_integer():
            return None
        if not 1 <= value <= MAX_TOKENS:
            return None
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        return None
    return value


@functools.lru_cache(maxsize=4096)
def _days_since_1970(year: str, month: str, day: str) -> int | None:
    """Days from 1970-01-01 to the date (its digits as written), None if there is no such date:
    once per date (a trace's stamps share a few)."""
    try:
        return datetime.date(int(year), int(month), int(day)).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None


def timestamp_ns(text: str) -> int | None:
    """A wall-clock stamp ('2023-11-16 18:15:46.6805900', optionally with a UTC offset) as whole
    nanoseconds since 1970 (a Python int: any year from 1 to 9999, no wrap-around); None if it is
    not a valid date and time."""
    m = _STAMP.match(text.strip())
    if not m:
        return None
    hour, minute, second = int(m.group(4)), int(m.group(5)), int(m.group(6))
    if hour > 23 or minute > 59 or second > 59:
        return None
    days = _days_since_1970(m.group(1), m.group(2), m.group(3))
    if days is None:
        return None
    offset_s = 0
    zone = m.group(8)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        hh, mm = int(zone[1:3]), int(zone[-2:])
        if hh > 23 or mm > 59:
            return None
        offset_s = sign * (hh * 3600 + mm * 60)
    fraction = (m.group(7) or "").ljust(9, "0")
    return ((days * 86400 + hour * 3600 + minute * 60 + second - offset_s) * 10**9) + int(fraction)
