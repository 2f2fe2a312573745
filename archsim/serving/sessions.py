"""Multi-turn and agentic sessions: conversations whose next turn is sent only after the last one
has answered.

A session is a run of turns. Turn k's prompt is the whole context so far (every earlier turn's
prompt and output) plus `new_tokens` of its own (the user's next message, or a tool's result), so
prompt_k = prompt_(k-1) + output_(k-1) + new_k. The session is a prefix group of the prefix cache
(archsim/serving/prefix.py) whose token stream grows turn by turn: turn k states the previous
context, prompt_(k-1) + output_(k-1) tokens, as its prefix, and finds those of its blocks the
last turn computed and the pool still keeps.

Arrivals are closed-loop: a session's first turn arrives at the session's start, turn k > 0
arrives `think_s + tool_s` after turn k-1's last token (the user's think time, and the time a
tool call the last turn made runs before its result is sent). The engine releases each turn when
the one before finishes (`TurnArrivals`), so a slower chip delays every later turn, as it does
for an agent. Seconds and tokens.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class SessionTurns:
    """Per request (a turn): its session (0, 1, ... in order of the sessions' starts), its index
    in the session, its new prompt tokens, and the think and tool time before it (0 on a first
    turn). Indexed as the requests are."""

    session: np.ndarray
    turn: np.ndarray
    new_tokens: np.ndarray
    think_s: np.ndarray
    tool_s: np.ndarray

    def take(self, index: np.ndarray) -> SessionTurns:
        return SessionTurns(*(a[index] for a in self.arrays()))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.session, self.turn, self.new_tokens, self.think_s, self.tool_s

    @property
    def gap_s(self) -> np.ndarray:
        """Seconds between the previous turn's last token and this turn's arrival."""
        return self.think_s + self.tool_s

    def previous(self) -> np.ndarray:
        """The index of each turn's previous turn among these requests (-1 for a first turn, or
        when the previous turn is not among them)."""
        where = {(s, k): i for i, (s, k) in enumerate(zip(self.session.tolist(), self.turn.tolist()))}
        return np.array(
            [where.get((s, k - 1), -1) for s, k in zip(self.session.tolist(), self.turn.tolist())], dtype=np.int64
        )

    def chained(self, keep: np.ndarray) -> np.ndarray:
        """`keep` (a mask over the requests), less every turn whose previous turn is not kept: a
        session ends at its first turn that cannot be served."""
        out = keep.copy()
        prev = self.previous()
        for i in range(len(out)):  # a previous turn comes first
            if self.turn[i] > 0 and (prev[i] < 0 or not out[prev[i]]):
                out[i] = False
        return out


@dataclass(frozen=True)
class Turn:
    """One turn as a trace or a generator states it: new prompt tokens, output tokens, and the
    think and tool time before it (seconds, 0 on a first turn)."""

    new_tokens: int
    output_tokens: int
    think_s: float = 0.0
    tool_s: float = 0.0


class FixedArrivals:
    """Requests arriving at fixed times, in index order."""

    def __init__(self, arrival_s: np.ndarray):
        self.arrival_s = arrival_s
        self.times = arrival_s.tolist()
        self.i = 0

    def next_s(self) -> float | None:
        return self.times[self.i] if self.i < len(self.times) else None

    def admit(self, t: float, waiting) -> None:
        """Append the requests arrived by `t` to `waiting`."""
        times, i, n = self.times, self.i, len(self.times)
        while i < n and times[i] <= t:
            waiting.append(i)
            i += 1
        self.i = i

    def finished(self, ids: np.ndarray, end_s: float) -> None:
        pass

    def sorted_s(self) -> np.ndarray:
        return self.arrival_s


class TurnArrivals(FixedArrivals):
    """A session's first turn arrives at its start; each later turn `gap_s` after the previous
    one's last token (`finished`). Ties arrive in index order."""

    def __init__(self, arrival_s: np.ndarray, turns: SessionTurns):
        prev = turns.previous()
        self.arrival_s = np.where(prev < 0, arrival_s, np.nan)
        self.gap = turns.gap_s.tolist()
        self.follow = np.full(len(prev), -1, dtype=np.int64)
        self.follow[prev[prev >= 0]] = np.flatnonzero(prev >= 0)
        self.heap = [(a, r) for r, a in enumerate(self.arrival_s.tolist()) if prev[r] < 0]
        heapq.heapify(self.heap)

    def next_s(self) -> float | None:
        return self.heap[0][0] if self.heap else None

    def admit(self, t: float, waiting) -> None:
        heap = self.heap
        while heap and heap[0][0] <= t:
            waiting.append(heapq.heappop(heap)[1])

    def finished(self, ids: np.ndarray, end_s: float) -> None:
        for r in self.follow[ids].tolist():
            if r >= 0:
                a = end_s + self.gap[r]
                self.arrival_s[r] = a
                heapq.heappush(self.heap, (a, r))

    def sorted_s(self) -> np.ndarray:
        return np.sort(self.arrival_s)


def arrivals_for(arrival_s: np.ndarray, turns: SessionTurns | None) -> FixedArrivals:
    return FixedArrivals(arrival_s) if turns is None else TurnArrivals(arrival_s, turns)
