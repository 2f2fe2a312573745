"""What a request may state of itself beside its arrival and lengths, read by some features.

* `max_tokens`: the most tokens it asked for (a client's max_tokens), what a reserving scheduler
  sets aside (orca, trtllm); at least its output_tokens.
* `prefix_id`, `prefix_tokens`: its first prefix_tokens tokens are those of its prefix group's
  token stream (a shared prompt template, the earlier turns of a conversation), for prefix
  caching (archsim/serving/prefix.py); a whole number >= 0 and at most prompt_tokens, both or
  neither.
* `acceptance`: speculative decoding's per-token acceptance rate on it, in [0, 1].

In a plain CSV trace they are extra columns of these names, in JSON lines extra keys; an empty
CSV cell or an absent key states nothing. The Azure format has none. Every bad value of a file is
reported at once, as `file:line: column: why`.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archsim.errors import ConfigError, Problem, quote

OPTIONAL_COLUMNS = ("max_tokens", "prefix_id", "prefix_tokens", "acceptance")
MAX_PROBLEMS = 20


@dataclass(frozen=True, eq=False)
class RequestFields:
    """Per request: max_tokens (0: not stated), prefix_id (-1: none), prefix_tokens, acceptance
    (NaN: not stated)."""

    max_tokens: np.ndarray
    prefix_id: np.ndarray
    prefix_tokens: np.ndarray
    acceptance: np.ndarray

    @staticmethod
    def unstated(n: int) -> RequestFields:
        return RequestFields(
            np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.full(n, np.nan)
        )

    def take(self, index: np.ndarray) -> RequestFields:
        return RequestFields(*(a[index] for a in self.arrays()))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.max_tokens, self.prefix_id, self.prefix_tokens, self.acceptance

    def stated(self) -> bool:
        return bool((self.max_tokens > 0).any() or (self.prefix_id >= 0).any() or np.isfinite(self.acceptance).any())


def _whole(v: object, least: int) -> int | None:
    try:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            return None
        n = int(v) if not isinstance(v, float) or v.is_integer() else None
    except (TypeError, ValueError):
        return None
    return n if n is not None and n >= least else None


def _records(path: Path, count: int) -> tuple[list[tuple[int, dict]], bool]:
    """(line, {column: value}) of the first `count` requests of a plain CSV or JSON-lines trace,
    read line by line as archsim/serving/tracefile.py reads them, and whether it is JSON."""
    from archsim.config.jsonfile import strict_loads

    out: list[tuple[int, dict]] = []
    idx: dict[str, int] | None = None
    json_lines = False
    with path.open("r", encoding="utf-8", newline="") as f:
        for line, raw in enumerate(f, start=1):
            if len(out) >= count:
                break
            if not raw.strip():
                continue
            if idx is None and not json_lines:
                if raw.lstrip("\ufeff").lstrip().startswith("{"):
                    json_lines = True
                else:
                    header = [h.strip().lstrip("\ufeff") for h in next(csv.reader([raw]), [])]
                    idx = {c: header.index(c) for c in OPTIONAL_COLUMNS if c in header}
                    if not idx:
                        return [], False
                    continue
            if json_lines:
                obj = strict_loads(raw.lstrip("\ufeff"))
                out.append((line, {k: obj[k] for k in OPTIONAL_COLUMNS if k in obj}))
                continue
            row = next(csv.reader([raw]), [])
            if row and any(c.strip() for c in row):
                assert idx is not None
                out.append((line, {c: row[i].strip() for c, i in idx.items() if i < len(row) and row[i].strip()}))
    return out, json_lines


def read_fields(path: Path, prompt: np.ndarray, output: np.ndarray) -> RequestFields | None:
    """The optional fields of a trace whose requests, in file order, have these lengths; None when
    it states none. ConfigError listing every bad value."""
    records, json_lines = _records(path, len(prompt))
    if not any(values for _, values in records):
        return None
    f = RequestFields.unstated(len(prompt))
    problems: list[Problem] = []

    def bad(line: int, column: str, why: str, value: object) -> None:
        problems.append(Problem(str(path), line, column, f"{why} (got {quote(value)})"))

    for i, (line, values) in enumerate(records):
        if json_lines:  # JSON values are numbers, as for the trace's own columns
            for k, v in list(values.items()):
                if isinstance(v, (str, bool)) or not isinstance(v, (int, float)):
                    bad(line, k, "expected a number", v)
                    del values[k]
        if "max_tokens" in values:
            n = _whole(values["max_tokens"], 1)
            if n is None or n < output[i]:
                bad(line, "max_tokens", f"expected a whole number >= output_tokens ({output[i]})", values["max_tokens"])
            else:
                f.max_tokens[i] = n
        if ("prefix_id" in values) != ("prefix_tokens" in values):
            missing = "prefix_tokens" if "prefix_id" in values else "prefix_id"
            problems.append(Problem(str(path), line, missing, "give prefix_id and prefix_tokens together"))
        elif "prefix_id" in values:
            g, p = _whole(values["prefix_id"], 0), _whole(values["prefix_tokens"], 0)
            if g is None:
                bad(line, "prefix_id", "expected a whole number >= 0", values["prefix_id"])
            if p is None or p > prompt[i]:
                bad(
                    line,
                    "prefix_tokens",
                    f"expected a whole number from 0 to prompt_tokens ({prompt[i]})",
                    values["prefix_tokens"],
                )
            if g is not None and p is not None and p <= prompt[i]:
                f.prefix_id[i], f.prefix_tokens[i] = g, p
        if "acceptance" in values:
            try:
                a = float(values["acceptance"]) if not isinstance(values["acceptance"], bool) else math.nan
            except (TypeError, ValueError):
                a = math.nan
            if not 0.0 <= a <= 1.0:
                bad(line, "acceptance", "expected a rate from 0 to 1", values["acceptance"])
            else:
                f.acceptance[i] = a
    if problems:
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            problems = problems[:MAX_PROBLEMS] + [Problem(str(path), None, "", f"... and {more} more")]
        raise ConfigError(problems)
    return f
