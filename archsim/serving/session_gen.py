"""Generated sessions (archsim/serving/sessions.py), from one seed.

Sessions start as the generated requests arrive (archsim/serving/arrivals.py: Poisson, or gamma
gaps of a given cv, at `rate_per_s` sessions per second, the first at 0). Each has a number of
turns drawn from `turns` (a length distribution: N, uniform:LO:HI, ...); its first turn's new
tokens are drawn from `prompt`, a later turn's from `turn_prompt`, every output from `output`.
A later turn waits a think time drawn from `think` and, with probability `tool_share`, is a
tool's result: the tool runs for a time drawn from `tool` before the turn is sent, and the turn
has no think time of its own (an agent sends it at once).

Durations: `5s` (fixed), `exponential:5s` (mean 5 s) or `uniform:2s:8s`, in any unit of time.
Each quantity comes from its own stream spawned from the seed, so changing one distribution
leaves the others' draws as they were (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from archsim.limits import MAX_SLO_S, MAX_TOKENS
from archsim.serving.arrivals import ArrivalProcess, LengthDist, unit_arrivals
from archsim.serving.requests import RequestSet, session_requests
from archsim.serving.sessions import Turn

MAX_TURNS = 10_000  # turns of one session
DURATION_SPECS = "a duration (5s), exponential:MEAN or uniform:LO:HI, e.g. exponential:5s"


class GapKind(str, Enum):
    FIXED = "fixed"
    EXPONENTIAL = "exponential"
    UNIFORM = "uniform"


@dataclass(frozen=True)
class GapDist:
    """A distribution of durations, seconds."""

    kind: GapKind
    a_s: float
    b_s: float = 0.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind is GapKind.FIXED:
            return np.full(n, self.a_s)
        if self.kind is GapKind.EXPONENTIAL:
            return rng.exponential(self.a_s, size=n)
        return rng.uniform(self.a_s, self.b_s, size=n)

    def __str__(self) -> str:
        if self.kind is GapKind.FIXED:
            return f"{self.a_s:g}s"
        tail = f":{self.b_s:g}s" if self.kind is GapKind.UNIFORM else ""
        return f"{self.kind.value}:{self.a_s:g}s{tail}"


def parse_gap(text: str) -> GapDist:
    """'5s', '200ms', 'exponential:5s' or 'uniform:2s:8s'; ValueError if bad."""
    from archsim.units import Dim, parse_quantity

    parts = text.strip().split(":")
    kind = GapKind.FIXED if len(parts) == 1 else None
    if kind is None:
        try:
            kind = GapKind(parts[0])
        except ValueError:
            raise ValueError(f"expected {DURATION_SPECS} (got {text!r:.60})") from None
        parts = parts[1:]
    if len(parts) != (2 if kind is GapKind.UNIFORM else 1):
        raise ValueError(f"expected {DURATION_SPECS} (got {text!r:.60})")
    values = []
    for p in parts:
        try:
            float(p)
        except ValueError:
            pass
        else:
            if float(p) != 0:
                raise ValueError(f"a duration needs its unit, e.g. 5s or 200ms (got {text!r:.60})")
        try:
            v = 0.0 if p.strip() in ("0", "0s") else parse_quantity(p.replace(" ", ""), Dim.SECONDS)
        except ValueError as err:
            raise ValueError(f"{err} (in {text!r:.60})") from None
        if not 0 <= v <= MAX_SLO_S:
            raise ValueError(f"durations are from 0 to {MAX_SLO_S:,.0f} s, a day (got {text!r:.60})")
        values.append(v)
    if kind is GapKind.UNIFORM and values[0] > values[1]:
        raise ValueError(f"uniform:LO:HI needs LO <= HI (got {text!r:.60})")
    return GapDist(kind, *values)


@dataclass(frozen=True)
class SessionSpec:
    """What generated sessions are drawn from (see the module docstring)."""

    sessions: int
    turns: LengthDist
    prompt: LengthDist
    turn_prompt: LengthDist
    output: LengthDist
    think: GapDist
    tool_share: float = 0.0
    tool: GapDist = GapDist(GapKind.FIXED, 0.0)


def generate_sessions(
    rate_per_s: float,
    spec: SessionSpec,
    process: ArrivalProcess = ArrivalProcess.POISSON,
    cv: float = 1.0,
    seed: int = 0,
) -> RequestSet:
    """`spec.sessions` sessions starting at `rate_per_s` (a RequestSet of their turns); a turn
    whose context would pass MAX_TOKENS ends its session before it."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(8)]
    n = spec.sessions
    start = unit_arrivals(rngs[0], n, process, cv) / rate_per_s
    counts = np.minimum(spec.turns.draw(rngs[1], n), MAX_TURNS)
    total = int(counts.sum())
    first_new, later_new = spec.prompt.draw(rngs[2], n), spec.turn_prompt.draw(rngs[3], total)
    out, think = spec.output.draw(rngs[4], total), spec.think.draw(rngs[5], total)
    is_tool = rngs[6].random(total) < spec.tool_share
    tool = spec.tool.draw(rngs[7], total)
    sessions, j = [], 0
    for i in range(n):
        turns, context = [], 0
        for k in range(int(counts[i])):
            new = int(first_new[i] if k == 0 else later_new[j])
            if context + new + int(out[j]) > MAX_TOKENS:
                j += int(counts[i]) - k
                break
            gap = (0.0, 0.0) if k == 0 else (0.0, float(tool[j])) if is_tool[j] else (float(think[j]), 0.0)
            turns.append(Turn(new, int(out[j]), *gap))
            context += new + int(out[j])
            j += 1
        sessions.append(turns)
    label = f"{n:,} sessions, {process.value} {rate_per_s:g}/s"
    return session_requests(start.tolist(), sessions, source=label)
