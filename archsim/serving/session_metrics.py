"""Metrics of multi-turn sessions (archsim/serving/sessions.py), beside the per-request ones.

* TTFT per turn: a turn's first token - its arrival (the previous turn's last token plus its
  think and tool time), over every served turn and by turn index, each summarised by its mean
  and the 50th, 90th and 99th percentiles (archsim/serving/metrics.py).
* Session duration: its last served turn's last token - its first turn's arrival, over the
  sessions with a served turn.
* Context reuse: of the previous-context tokens the later turns state as their prefix, the share
  found in the prefix cache (device or host tier) instead of computed again. A turn computes at
  least its last prompt token, and the previous turn's last output token and the tail of its
  last, partly filled block were never keyed, so the share stays a little below 1 even when the
  cache keeps everything.

Seconds and tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archsim.serving.metrics import RequestTimes, Stats, stats
from archsim.serving.sessions import SessionTurns


@dataclass(frozen=True, eq=False)
class SessionRecord:
    """The served turns' sessions and the previous-context tokens each stated, indexed as the
    served requests are."""

    turns: SessionTurns
    context_tokens: np.ndarray


def session_record(turns: SessionTurns, context_tokens: np.ndarray) -> SessionRecord:
    return SessionRecord(turns, np.asarray(context_tokens, dtype=np.int64))


@dataclass(frozen=True)
class TurnStats:
    """TTFT of the turns of one index (0: the sessions' first turns)."""

    turn: int
    count: int
    ttft_s: Stats

    def as_dict(self) -> dict:
        return {"turn": self.turn, "count": self.count, "ttft_s": self.ttft_s.as_dict()}


@dataclass(frozen=True)
class SessionMetrics:
    sessions: int  # with at least one served turn
    turns: int  # served
    ttft_s: Stats  # over turns
    ttft_by_turn: tuple[TurnStats, ...]
    duration_s: Stats  # over sessions
    think_s: float  # think and tool time the served turns waited before arriving, summed
    tool_s: float
    context_tokens: int  # previous-context tokens the later turns state
    reused_tokens: int  # of which found in the prefix cache
    context_hit_rate: float  # reused / context (0 when no turn follows another)

    def as_dict(self) -> dict:
        return {
            "sessions": self.sessions,
            "turns": self.turns,
            "ttft_s": self.ttft_s.as_dict(),
            "ttft_by_turn": [t.as_dict() for t in self.ttft_by_turn],
            "duration_s": self.duration_s.as_dict(),
            "think_s": self.think_s,
            "tool_s": self.tool_s,
            "context_tokens": self.context_tokens,
            "reused_tokens": self.reused_tokens,
            "context_hit_rate": self.context_hit_rate,
        }


def session_metrics(record: SessionRecord, times: RequestTimes, reused_tokens: int) -> SessionMetrics:
    """The session metrics of a run whose served requests have these `times`; `reused_tokens`:
    prompt tokens the run found in its prefix cache (every prefix group is a session's)."""
    turns = record.turns
    ttft = times.ttft_s
    by_turn = tuple(
        TurnStats(k, int(np.sum(turns.turn == k)), stats(ttft[turns.turn == k])) for k in np.unique(turns.turn).tolist()
    )
    ids, where = np.unique(turns.session, return_inverse=True)
    first = np.full(len(ids), np.inf)
    last = np.full(len(ids), -np.inf)
    np.minimum.at(first, where, times.arrival_s)
    np.maximum.at(last, where, times.finish_s)
    context = int(record.context_tokens.sum())
    return SessionMetrics(
        sessions=len(ids),
        turns=len(turns.turn),
        ttft_s=stats(ttft),
        ttft_by_turn=by_turn,
        duration_s=stats(last - first),
        think_s=float(turns.think_s.sum()),
        tool_s=float(turns.tool_s.sum()),
        context_tokens=context,
        reused_tokens=reused_tokens,
        context_hit_rate=reused_tokens / context if context else 0.0,
    )
