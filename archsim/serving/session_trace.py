"""Session traces: JSON lines, one turn a line, told apart from a request trace by a `session` key
on its first line.

    {"session": 7, "turn": 0, "start_s": 0.5, "new_tokens": 900, "output_tokens": 120}
    {"session": 7, "turn": 1, "think_s": 4.0, "new_tokens": 60, "output_tokens": 200}
    {"session": 7, "turn": 2, "tool_s": 1.5, "new_tokens": 400, "output_tokens": 80}

* `session`: a whole number naming the session; `turn`: 0, 1, 2, ... in file order within its
  session (sessions may interleave);
* `new_tokens`, `output_tokens`: whole numbers from 1 to MAX_TOKENS; the turn's prompt is every
  earlier turn's prompt and output plus its new tokens, at most MAX_TOKENS with its output;
* `start_s` (a first turn only, required): the session's arrival, seconds from 0 to
  MAX_ARRIVAL_S; `think_s`, `tool_s` (later turns only, default 0): the user's think time and a
  tool call's duration between the previous turn's last token and this turn's arrival, seconds
  from 0 to MAX_GAP_S.

Any other key is refused. Every bad line is reported at once, as `file:line: key: why` (the
first MAX_PROBLEMS), and reading stops after STOP_AFTER_PROBLEMS bad lines or `limit` turns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from archsim.errors import ConfigError, Problem, quote
from archsim.limits import MAX_ARRIVAL_S, MAX_REQUESTS, MAX_SLO_S, MAX_TOKENS
from archsim.serving.sessions import Turn
from archsim.serving.tracefile import MAX_LINE_CHARS, MAX_PROBLEMS, STOP_AFTER_PROBLEMS

KEYS = ("session", "turn", "new_tokens", "output_tokens", "start_s", "think_s", "tool_s")
MAX_GAP_S = MAX_SLO_S  # a think or tool time of more than a day is a unit mistake


def is_session_line(text: str) -> bool:
    """Whether the first line of a trace is a session trace's (a JSON object with `session`)."""
    from archsim.config.jsonfile import strict_loads

    text = text.lstrip("\ufeff").strip()
    if not text.startswith("{") or len(text) > MAX_LINE_CHARS:
        return False
    try:
        obj = strict_loads(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and "session" in obj


def _whole(v: object, low: int, high: int) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        return None
    return int(v) if low <= v <= high else None


def _seconds(v: object, high: float) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= high:
        return None
    return float(v)


class SessionReader:
    """Reads the turns of a session trace, collecting the problems of every bad line."""

    def __init__(self, file: str, limit: int | None):
        self.file, self.limit = file, limit
        self.start: dict[int, float] = {}
        self.turns: dict[int, list[Turn]] = {}
        self.context: dict[int, int] = {}
        self.count = 0
        self.problems: list[Problem] = []

    def bad(self, line: int, key: str, why: str) -> None:
        self.problems.append(Problem(self.file, line, key, why))

    def read(self, lines: Iterable[tuple[int, str]]) -> None:
        from archsim.config.jsonfile import strict_loads

        for line, raw in lines:
            if len(self.problems) >= STOP_AFTER_PROBLEMS or (self.limit is not None and self.count >= self.limit):
                return
            if not raw.strip():
                continue
            if self.count >= MAX_REQUESTS:
                self.bad(line, "", f"more than {MAX_REQUESTS:,} turns: take the first N with --requests N")
                return
            if len(raw) > MAX_LINE_CHARS or "\x00" in raw:
                self.bad(line, "", "not a line of a session trace (too long, or binary)")
                continue
            try:
                obj = strict_loads(raw.lstrip("\ufeff"))
            except ValueError as err:
                self.bad(line, "", f"not JSON ({err})")
                continue
            if not isinstance(obj, dict):
                self.bad(line, "", f"expected an object with {', '.join(KEYS[:4])}")
                continue
            self._turn(line, obj)

    def _turn(self, line: int, obj: dict) -> None:
        before = len(self.problems)
        for k in obj:
            if k not in KEYS:
                self.bad(line, str(k)[:40], f"unknown key; expected {', '.join(KEYS)}")
        missing = [k for k in KEYS[:4] if k not in obj]
        for k in missing:
            self.bad(line, k, "missing")
        if missing:
            return
        s, k = _whole(obj["session"], 0, 2**62), _whole(obj["turn"], 0, MAX_REQUESTS)
        new, out = (_whole(obj[c], 1, MAX_TOKENS) for c in ("new_tokens", "output_tokens"))
        for key, v, want in (
            ("session", s, "a whole number >= 0"),
            ("turn", k, "a whole number >= 0"),
            ("new_tokens", new, f"a whole number from 1 to {MAX_TOKENS:,}"),
            ("output_tokens", out, f"a whole number from 1 to {MAX_TOKENS:,}"),
        ):
            if v is None:
                self.bad(line, key, f"expected {want} (got {quote(obj[key])})")
        if s is None or k is None:
            return
        have = len(self.turns.get(s, ()))
        if k != have:
            why = f"turn {k} of session {s} follows turn {have - 1}" if have else f"session {s} starts at turn {k}"
            self.bad(line, "turn", f"{why}; expected turn {have} (turns are listed in order)")
            return
        gaps = self._gaps(line, obj, k)
        if gaps is None or new is None or out is None or len(self.problems) > before:
            return
        context = self.context.get(s, 0)
        if context + new + out > MAX_TOKENS:
            self.bad(line, "new_tokens", f"the session's context and this turn pass {MAX_TOKENS:,} tokens")
            return
        if k == 0:
            self.start[s] = gaps[0]
            self.turns[s] = []
        self.turns[s].append(Turn(new, out, *gaps[1:]))
        self.context[s] = context + new + out
        self.count += 1

    def _gaps(self, line: int, obj: dict, turn: int) -> tuple[float, float, float] | None:
        """(start, think, tool) seconds of a turn, or None with its problems booked."""
        first, later = ("start_s",), ("think_s", "tool_s")
        wrong = [key for key in (later if turn == 0 else first) if key in obj]
        for key in wrong:
            where = "a first turn" if turn == 0 else "a later turn"
            self.bad(line, key, f"{where} takes {'start_s' if turn == 0 else 'think_s and tool_s'}, not {key}")
        if turn == 0 and "start_s" not in obj:
            self.bad(line, "start_s", "missing: a first turn gives its session's start")
            return None
        values = []
        for key in first if turn == 0 else later:
            high = MAX_ARRIVAL_S if key == "start_s" else MAX_GAP_S
            v = _seconds(obj.get(key, 0.0), high)
            if v is None:
                self.bad(line, key, f"expected seconds from 0 to {high:,.0f} (got {quote(obj[key])})")
            values.append(v)
        if wrong or any(v is None for v in values):
            return None
        return (values[0], 0.0, 0.0) if turn == 0 else (0.0, values[0], values[1])  # type: ignore[return-value]


def read_session_trace(
    path: str, lines: Iterable[tuple[int, str]], limit: int | None
) -> tuple[list[float], list[list[Turn]]]:
    """The sessions of a trace's lines (its first `limit` turns): their starts and turns, in
    order of first appearance; ConfigError listing every bad line."""
    reader = SessionReader(path, limit)
    reader.read(lines)
    problems = reader.problems
    if problems:
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            problems = problems[:MAX_PROBLEMS] + [Problem(path, None, "", f"... and {more} more")]
        raise ConfigError(problems)
    if not reader.count:
        raise ConfigError.single(path, "", "the trace has no turns")
    ids = list(reader.turns)
    return [reader.start[s] for s in ids], [reader.turns[s] for s in ids]
