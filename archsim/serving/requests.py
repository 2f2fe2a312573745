"""Requests to serve: arrival times (seconds) and prompt and output lengths (tokens).

Traces come in three formats, told apart by their first line:

* the Azure LLM inference trace (`TIMESTAMP,ContextTokens,GeneratedTokens`, wall-clock times;
  arrivals are taken relative to the first request),
* a plain CSV with the header `arrival_s,prompt_tokens,output_tokens` (any column order),
* JSON lines, one `{"arrival_s": ..., "prompt_tokens": ..., "output_tokens": ...}` a line.

Every problem of a file is reported at once, as `file:line: column: why`.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from archsim.errors import ConfigError, Problem, quote

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
PLAIN_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
MAX_PROBLEMS = 20  # problems listed before the rest are summarised
TRACES_DIR = Path(__file__).resolve().parents[1] / "data" / "traces"


@dataclass(frozen=True, eq=False)
class RequestSet:
    """Requests sorted by arrival: `arrival_s` (float64), `prompt_tokens` and `output_tokens` (int64)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = field(default="")

    def __post_init__(self):
        n = len(self.arrival_s)
        if len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise ValueError("arrival, prompt and output arrays differ in length")
        if n and (np.any(np.diff(self.arrival_s) < 0) or self.arrival_s[0] < 0):
            raise ValueError("arrivals must be sorted and not negative")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("every request needs at least one prompt and one output token")

    def __len__(self) -> int:
        return len(self.arrival_s)

    def scaled(self, time_scale: float) -> RequestSet:
        """Arrival times multiplied by `time_scale` (0.5 replays twice as fast)."""
        return RequestSet(self.arrival_s * time_scale, self.prompt_tokens, self.output_tokens, self.source)

    def head(self, n: int) -> RequestSet:
        """The first `n` requests."""
        return self.subset(np.arange(min(n, len(self))))

    def subset(self, index: np.ndarray) -> RequestSet:
        return RequestSet(self.arrival_s[index], self.prompt_tokens[index], self.output_tokens[index], self.source)

    @property
    def rate_per_s(self) -> float:
        """Mean arrival rate: requests after the first over the span of arrivals."""
        span = float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) > 1 else 0.0
        return (len(self) - 1) / span if span > 0 else float("inf")

    def digest(self) -> str:
        """SHA-256 of the arrays: names the requests in a config hash."""
        h = hashlib.sha256()
        for a in (
            self.arrival_s.astype(np.float64),
            self.prompt_tokens.astype(np.int64),
            self.output_tokens.astype(np.int64),
        ):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()


def make_requests(arrival_s, prompt_tokens, output_tokens, source: str = "") -> RequestSet:
    """A RequestSet from any sequences, sorted by arrival (stably)."""
    arrival = np.asarray(arrival_s, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    return RequestSet(
        arrival[order],
        np.asarray(prompt_tokens, dtype=np.int64)[order],
        np.asarray(output_tokens, dtype=np.int64)[order],
        source,
    )


def shipped_traces() -> list[str]:
    return sorted(p.stem for p in TRACES_DIR.glob("*.csv"))


def resolve_trace(name_or_path: str) -> Path:
    """A path as given if it exists, else a shipped trace of that name (`azure_llm_2023_conv`)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    shipped = TRACES_DIR / f"{name_or_path}.csv"
    if "/" not in name_or_path and shipped.is_file():
        return shipped
    known = shipped_traces()
    hint = difflib.get_close_matches(name_or_path, known, n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else f"; shipped: {', '.join(known)}"
    raise ConfigError.single(name_or_path, "", f"no such trace file or shipped trace{extra}")


def load_trace(name_or_path: str) -> RequestSet:
    """Read a trace in any of the three formats; raises ConfigError listing every bad line."""
    path = resolve_trace(name_or_path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError.single(str(path), "", f"cannot read the trace ({err})") from None
    first = text.lstrip()[:1]
    rows, problems = _read_jsonl(text, str(path)) if first == "{" else _read_csv(text, str(path))
    if problems:
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            problems = problems[:MAX_PROBLEMS] + [Problem(str(path), None, "", f"... and {more} more")]
        raise ConfigError(problems)
    if not rows[0]:
        raise ConfigError.single(str(path), "", "the trace has no requests")
    return make_requests(*rows, source=path.stem)


def _read_csv(text: str, file: str):
    reader = csv.reader(text.splitlines())
    header = [h.strip() for h in next(reader, [])]
    if set(AZURE_COLUMNS) <= set(header):
        columns, azure = AZURE_COLUMNS, True
    elif set(PLAIN_COLUMNS) <= set(header):
        columns, azure = PLAIN_COLUMNS, False
    else:
        raise ConfigError.single(
            file,
            "",
            f"unknown trace header {quote(','.join(header))}; expected "
            f"{','.join(PLAIN_COLUMNS)} or the Azure {','.join(AZURE_COLUMNS)}",
            line=1,
        )
    idx = [header.index(c) for c in columns]
    records = [
        (line, [row[i].strip() if i < len(row) else "" for i in idx])
        for line, row in enumerate(reader, start=2)
        if row and any(c.strip() for c in row)
    ]
    return _columns(records, columns, file, azure)


def _read_jsonl(text: str, file: str):
    records, problems = [], []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            problems.append(Problem(file, line, "", f"not JSON ({err.msg})"))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(file, line, "", f"expected an object with {', '.join(PLAIN_COLUMNS)}"))
            continue
        missing = [c for c in PLAIN_COLUMNS if c not in obj]
        if missing:
            problems.append(Problem(file, line, missing[0], "missing"))
            continue
        records.append((line, [obj[c] for c in PLAIN_COLUMNS]))
    rows, more = _columns(records, PLAIN_COLUMNS, file, azure=False)
    return rows, problems + more


def _columns(records, columns, file: str, azure: bool):
    """Parse (line, [arrival, prompt, output]) records; every bad value becomes a Problem."""
    arrival, prompt, output, problems = [], [], [], []
    times = _azure_times([r[0] for _, r in records]) if azure else None
    for i, (line, (a, p, o)) in enumerate(records):
        bad = False
        if azure:
            if times[i] is None:
                problems.append(Problem(file, line, columns[0], f"not a timestamp (got {quote(a)})"))
                bad = True
        else:
            try:
                seconds = float(a)
                if isinstance(a, bool) or not np.isfinite(seconds) or seconds < 0:
                    raise ValueError
            except (TypeError, ValueError):
                problems.append(Problem(file, line, columns[0], f"expected seconds >= 0 (got {quote(a)})"))
                bad = True
        counts = []
        for col, v, least in ((columns[1], p, 1), (columns[2], o, 1)):
            try:
                n = int(v) if not isinstance(v, float) or v.is_integer() else None
                if n is None or isinstance(v, bool) or n < least:
                    raise ValueError
                counts.append(n)
            except (TypeError, ValueError):
                problems.append(Problem(file, line, col, f"expected a whole number >= {least} (got {quote(v)})"))
                bad = True
        if not bad:
            arrival.append(times[i] if azure else seconds)
            prompt.append(counts[0])
            output.append(counts[1])
    if azure and arrival:
        first = min(arrival)
        arrival = [(t - first) / 1e9 for t in arrival]
    return (arrival, prompt, output), problems


def _azure_times(stamps: list[str]) -> list[int | None]:
    """Wall-clock stamps ('2023-11-16 18:15:46.6805900') as whole nanoseconds; None if bad."""
    nat = int(np.iinfo(np.int64).min)  # what numpy reads an empty stamp or 'NaT' as
    try:
        ns = np.array(stamps, dtype="datetime64[ns]").astype(np.int64).tolist()
        return [None if v == nat else v for v in ns]
    except ValueError:
        out = []
        for s in stamps:
            try:
                v = int(np.datetime64(s, "ns").astype(np.int64))
                out.append(None if v == nat else v)
            except ValueError:
                out.append(None)
        return out
