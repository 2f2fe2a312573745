"""Requests to serve: arrival times (seconds) and prompt and output lengths (tokens).

Traces come in four formats, told apart by their first line:

* the Azure LLM inference trace (`TIMESTAMP,ContextTokens,GeneratedTokens`, wall-clock times;
  arrivals are taken relative to the first request),
* a plain CSV with the header `arrival_s,prompt_tokens,output_tokens` (any column order),
* JSON lines, one `{"arrival_s": ..., "prompt_tokens": ..., "output_tokens": ...}` a line,
* sessions' turns as JSON lines, one `{"session": ..., "turn": ..., "new_tokens": ...,
  "output_tokens": ...}` a line (archsim/serving/session_trace.py).

Every problem of a file is reported at once, as `file:line: column: why` (the first
MAX_PROBLEMS of them). A trace is read line by line into typed arrays, never whole: it may be
at most MAX_TRACE_BYTES and MAX_REQUESTS requests, and with `limit` only its first lines are
read (`archsim.serving.tracefile` parses the lines). A file that is not a trace is never quoted.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from archsim.errors import ConfigError, Problem
from archsim.limits import MAX_ARRIVAL_S, MAX_TOKENS, MAX_TRACE_BYTES
from archsim.serving.request_fields import RequestFields, read_fields
from archsim.serving.session_trace import is_session_line, read_session_trace
from archsim.serving.sessions import SessionTurns, Turn
from archsim.serving.tracefile import AZURE_COLUMNS, MAX_PROBLEMS, PLAIN_COLUMNS, TraceReader

TRACES_DIR = Path(__file__).resolve().parents[1] / "data" / "traces"


@dataclass(frozen=True, eq=False)
class RequestSet:
    """Requests sorted by arrival: `arrival_s` (float64), `prompt_tokens` and `output_tokens`
    (int64), what they state of themselves (archsim/serving/request_fields.py), if anything, and
    the sessions whose turns they are (archsim/serving/sessions.py: a later turn's arrival_s is
    its session's start until the run releases it)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = field(default="")
    fields: RequestFields | None = None
    sessions: SessionTurns | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise ValueError("arrival, prompt and output arrays differ in length")
        if n and (np.any(np.diff(self.arrival_s) < 0) or self.arrival_s[0] < 0):
            raise ValueError("arrivals must be sorted and not negative")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("every request needs at least one prompt and one output token")
        if self.fields is not None and any(len(a) != n for a in self.fields.arrays()):
            raise ValueError("the requests' fields differ in length from the requests")
        if self.sessions is not None and any(len(a) != n for a in self.sessions.arrays()):
            raise ValueError("the requests' sessions differ in length from the requests")

    def __len__(self) -> int:
        return len(self.arrival_s)

    def _fields(self) -> RequestFields:
        return self.fields if self.fields is not None else RequestFields.unstated(len(self))

    @property
    def max_tokens(self) -> np.ndarray:
        """Each request's stated max_tokens (0: not stated)."""
        return self._fields().max_tokens

    @property
    def prefix_id(self) -> np.ndarray:
        """Each request's prefix group (-1: none)."""
        return self._fields().prefix_id

    @property
    def prefix_tokens(self) -> np.ndarray:
        return self._fields().prefix_tokens

    @property
    def acceptance(self) -> np.ndarray:
        """Each request's speculative acceptance rate (NaN: not stated)."""
        return self._fields().acceptance

    def acceptance_or(self, default: float) -> np.ndarray:
        a = self.acceptance
        return np.where(np.isnan(a), default, a)

    def scaled(self, time_scale: float) -> RequestSet:
        """Arrival times multiplied by `time_scale` (0.5 replays twice as fast)."""
        return RequestSet(
            self.arrival_s * time_scale, self.prompt_tokens, self.output_tokens, self.source, self.fields, self.sessions
        )

    def at_once(self) -> RequestSet:
        """Every request arriving at 0 (an offline batch)."""
        return RequestSet(
            np.zeros(len(self)), self.prompt_tokens, self.output_tokens, self.source, self.fields, self.sessions
        )

    def with_shared_prefix(self, tokens: int, groups: int = 1) -> RequestSet:
        """Request i's first min(tokens, prompt) tokens are prompt template i mod `groups`."""
        f = self._fields()
        prefix_id = np.arange(len(self), dtype=np.int64) % groups
        prefix_tokens = np.minimum(tokens, self.prompt_tokens)
        shared = RequestFields(f.max_tokens, prefix_id, prefix_tokens, f.acceptance)
        return RequestSet(self.arrival_s, self.prompt_tokens, self.output_tokens, self.source, shared, self.sessions)

    def head(self, n: int) -> RequestSet:
        """The first `n` requests."""
        return self.subset(np.arange(min(n, len(self))))

    def subset(self, index: np.ndarray) -> RequestSet:
        fields = self.fields.take(index) if self.fields is not None else None
        sessions = self.sessions.take(index) if self.sessions is not None else None
        return RequestSet(
            self.arrival_s[index], self.prompt_tokens[index], self.output_tokens[index], self.source, fields, sessions
        )

    @property
    def rate_per_s(self) -> float:
        """Mean arrival rate: requests after the first over the span of arrivals (of sessions, by
        their first turns)."""
        starts = self.arrival_s if self.sessions is None else self.arrival_s[self.sessions.turn == 0]
        span = float(starts[-1] - starts[0]) if len(starts) > 1 else 0.0
        return (len(starts) - 1) / span if span > 0 else float("inf")

    def digest(self) -> str:
        """SHA-256 of the arrays (and of the fields the requests state): names the requests in a
        config hash."""
        h = hashlib.sha256()
        arrays = [
            self.arrival_s.astype(np.float64),
            self.prompt_tokens.astype(np.int64),
            self.output_tokens.astype(np.int64),
        ]
        if self.fields is not None and self.fields.stated():
            arrays += list(self.fields.arrays())
        if self.sessions is not None:
            arrays += list(self.sessions.arrays())
        for a in arrays:
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()


def make_requests(
    arrival_s: ArrayLike,
    prompt_tokens: ArrayLike,
    output_tokens: ArrayLike,
    source: str = "",
    fields: RequestFields | None = None,
) -> RequestSet:
    """A RequestSet from any sequences, sorted by arrival (stably)."""
    arrival = np.asarray(arrival_s, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    return RequestSet(
        arrival[order],
        np.asarray(prompt_tokens, dtype=np.int64)[order],
        np.asarray(output_tokens, dtype=np.int64)[order],
        source,
        fields.take(order) if fields is not None else None,
    )


def session_requests(start_s: list[float], turns: list[list[Turn]], source: str = "") -> RequestSet:
    """The requests of sessions (archsim/serving/sessions.py) starting at `start_s` with
    these turns: ordered by (start, session, turn), each later turn's arrival_s its session's
    start until the run releases it; ValueError where a context passes MAX_TOKENS."""
    order = sorted(range(len(start_s)), key=lambda i: start_s[i])
    cols: dict[str, list] = {k: [] for k in ("arr", "prompt", "out", "sess", "turn", "new", "think", "tool", "ctx")}
    for s, i in enumerate(order):
        context = 0
        for k, t in enumerate(turns[i]):
            prompt = context + t.new_tokens
            if prompt + t.output_tokens > MAX_TOKENS:
                raise ValueError(f"session {i}'s context passes {MAX_TOKENS:,} tokens at turn {k}")
            for key, v in zip(cols, (start_s[i], prompt, t.output_tokens, s, k, t.new_tokens, t.think_s, t.tool_s)):
                cols[key].append(v)
            cols["ctx"].append(context)
            context = prompt + t.output_tokens
    n = len(cols["arr"])

    def ints(key: str) -> np.ndarray:
        return np.array(cols[key], dtype=np.int64)

    fields = RequestFields(np.zeros(n, dtype=np.int64), ints("sess"), ints("ctx"), np.full(n, np.nan))
    floats = [np.array(cols[k], dtype=np.float64) for k in ("think", "tool")]
    sessions = SessionTurns(ints("sess"), ints("turn"), ints("new"), *floats)
    arrival = np.array(cols["arr"], dtype=np.float64)
    return RequestSet(arrival, ints("prompt"), ints("out"), source, fields, sessions)


def shipped_traces() -> list[str]:
    return sorted(p.stem for p in TRACES_DIR.iterdir() if p.suffix in (".csv", ".jsonl"))


def resolve_trace(name_or_path: str) -> Path:
    """A path as given if it exists, else a shipped trace of that name (`azure_llm_2023_conv`,
    `sessions_example`)."""
    p = Path(name_or_path)
    if p.is_file():
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise ConfigError.single(
                name_or_path, "", f"is {size:,} bytes, larger than {MAX_TRACE_BYTES >> 30} GiB: not a request trace"
            )
        return p
    if p.exists():
        what = "a directory" if p.is_dir() else "not a regular file (a device, pipe or socket)"
        raise ConfigError.single(name_or_path, "", f"is {what}, not a trace file")
    for suffix in (".csv", ".jsonl"):
        shipped = TRACES_DIR / f"{name_or_path}{suffix}"
        if "/" not in name_or_path and shipped.is_file():
            return shipped
    known = shipped_traces()
    hint = difflib.get_close_matches(name_or_path, known, n=1)
    extra = f"; did you mean {hint[0]!r}?" if hint else f"; shipped: {', '.join(known)}"
    raise ConfigError.single(name_or_path, "", f"no such trace file or shipped trace{extra}")


def load_trace(name_or_path: str, limit: int | None = None) -> RequestSet:
    """Read a trace in any of the three formats (its first `limit` requests, if given); raises
    ConfigError listing every bad line."""
    path = resolve_trace(name_or_path)
    reader = TraceReader(str(path), limit)
    try:
        with path.open("r", encoding="utf-8", newline="") as f:
            lines = enumerate(f, start=1)
            head = next(((n, t) for n, t in lines if t.strip()), None)
            if head is not None and is_session_line(head[1]):
                starts, turns = read_session_trace(str(path), itertools.chain([head], lines), limit)
                return session_requests(starts, turns, path.stem)
            f.seek(0)
            reader.read(f)
    except OSError as err:
        raise ConfigError.single(str(path), "", f"cannot read the trace ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise ConfigError.single(
            str(path), "", f"is not UTF-8 text (binary data at byte {err.start} of line {reader.line})"
        ) from None
    problems = reader.problems
    if problems:
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            stopped = " (reading stopped there)" if reader.stopped else ""
            problems = problems[:MAX_PROBLEMS] + [Problem(str(path), None, "", f"... and {more} more{stopped}")]
        raise ConfigError(problems)
    if not reader.arrival:
        raise ConfigError.single(str(path), "", "the trace has no requests")
    arrival = np.frombuffer(reader.arrival, dtype=np.float64)
    if reader.azure:  # whole nanoseconds since the epoch, taken relative to the first request
        stamps = reader.stamps
        first = min(stamps)
        if (max(stamps) - first) / 1e9 > MAX_ARRIVAL_S:
            raise ConfigError.single(
                str(path), "", f"arrivals span more than {MAX_ARRIVAL_S:,.0f} s (31 years): check the timestamps"
            )
        arrival = np.array([(t - first) / 1e9 for t in stamps], dtype=np.float64)
    prompt = np.frombuffer(reader.prompt, dtype=np.int64)
    output = np.frombuffer(reader.output, dtype=np.int64)
    fields = None if reader.azure else read_fields(path, prompt, output)
    return make_requests(arrival, prompt, output, source=path.stem, fields=fields)


__all__ = ["AZURE_COLUMNS", "PLAIN_COLUMNS", "RequestSet", "load_trace", "make_requests", "session_requests"]
