"""Generated requests: arrival processes and length distributions, from one seed.

Arrivals are a renewal process whose gaps have mean 1 / rate: exponential (Poisson arrivals),
or gamma with coefficient of variation `cv` (shape 1 / cv^2; cv > 1 is burstier than Poisson,
cv = 1 is Poisson). The first request arrives at 0. The gaps, prompt and output lengths come
from three independent streams spawned from the seed, so changing the rate rescales the same
arrivals (common random numbers: a capacity search compares like with like).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from archsim.limits import MAX_TOKENS
from archsim.serving.requests import RequestSet

MAX_LENGTH_CV = 100.0  # a lognormal length's coefficient of variation


class ArrivalProcess(str, Enum):
    POISSON = "poisson"
    GAMMA = "gamma"


class LengthKind(str, Enum):
    FIXED = "fixed"
    UNIFORM = "uniform"  # uniform:LO:HI, both included
    EXPONENTIAL = "exponential"  # exponential:MEAN, rounded up, at least 1
    LOGNORMAL = "lognormal"  # lognormal:MEAN:CV, rounded, at least 1


LENGTH_SPECS = "N, uniform:LO:HI, exponential:MEAN or lognormal:MEAN:CV"
# Lengths are at most MAX_TOKENS: a drawn length above it (the tail of a wide distribution) is
# clipped to it, as a serving engine caps its context.


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts."""

    kind: LengthKind
    a: float
    b: float = 0.0

    def __str__(self) -> str:
        if self.kind is LengthKind.FIXED:
            return str(int(self.a))
        if self.kind is LengthKind.EXPONENTIAL:
            return f"exponential:{self.a:g}"
        return f"{self.kind.value}:{self.a:g}:{self.b:g}"

    @property
    def mean(self) -> float:
        return (self.a + self.b) / 2.0 if self.kind is LengthKind.UNIFORM else self.a

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` lengths, each from 1 to MAX_TOKENS tokens."""
        if self.kind is LengthKind.FIXED:
            x = np.full(n, self.a)
        elif self.kind is LengthKind.UNIFORM:
            x = rng.integers(int(self.a), int(self.b) + 1, size=n)
        elif self.kind is LengthKind.EXPONENTIAL:
            x = np.ceil(rng.exponential(self.a, size=n))
        else:
            sigma2 = np.log1p(self.b**2)
            x = np.rint(rng.lognormal(np.log(self.a) - sigma2 / 2.0, np.sqrt(sigma2), size=n))
        return np.clip(x, 1, MAX_TOKENS).astype(np.int64)


def parse_length(text: str) -> LengthDist:
    """'512', 'uniform:128:1024', 'exponential:256' or 'lognormal:1000:1.5'; ValueError if bad."""
    parts = text.strip().split(":")
    try:
        numbers = [float(p) for p in parts[1:]] if len(parts) > 1 else [float(parts[0])]
    except ValueError:
        raise ValueError(f"expected {LENGTH_SPECS} (got {text!r:.60})") from None
    if not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"every number must be finite (got {text!r:.60})")
    if len(parts) == 1:
        if not numbers[0].is_integer() or not 1 <= numbers[0] <= MAX_TOKENS:
            raise ValueError(f"a fixed length must be a whole number from 1 to {MAX_TOKENS:,} (got {text!r:.60})")
        return LengthDist(LengthKind.FIXED, numbers[0])
    try:
        kind = LengthKind(parts[0])
    except ValueError:
        raise ValueError(f"unknown distribution {parts[0]!r}; expected {LENGTH_SPECS}") from None
    want = {LengthKind.UNIFORM: 2, LengthKind.EXPONENTIAL: 1, LengthKind.LOGNORMAL: 2}.get(kind, 0)
    if len(numbers) != want:
        raise ValueError(f"{kind.value} takes {want} number(s) (got {text!r})")
    if kind is LengthKind.UNIFORM and not (1 <= numbers[0] <= numbers[1] and all(v.is_integer() for v in numbers)):
        raise ValueError(f"uniform:LO:HI needs whole numbers 1 <= LO <= HI (got {text!r:.60})")
    if numbers[0] <= 0 or (kind is LengthKind.LOGNORMAL and numbers[1] <= 0):
        raise ValueError(f"the mean and cv must be greater than zero (got {text!r:.60})")
    if max(numbers[:2] if kind is LengthKind.UNIFORM else numbers[:1]) > MAX_TOKENS:
        raise ValueError(f"lengths are at most {MAX_TOKENS:,} tokens (got {text!r:.60})")
    if kind is LengthKind.LOGNORMAL and numbers[1] > MAX_LENGTH_CV:
        raise ValueError(f"the cv must be at most {MAX_LENGTH_CV:g} (got {text!r:.60})")
    return LengthDist(kind, *numbers)


def unit_arrivals(rng: np.random.Generator, n: int, process: ArrivalProcess, cv: float = 1.0) -> np.ndarray:
    """Arrival times of `n` requests at rate 1: first at 0, gaps of mean 1."""
    if process is ArrivalProcess.POISSON:
        gaps = rng.exponential(1.0, size=max(0, n - 1))
    else:
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / shape, size=max(0, n - 1))
    return np.concatenate([[0.0], np.cumsum(gaps)])[:n]


def generate_requests(
    rate_per_s: float,
    n: int,
    prompt: LengthDist,
    output: LengthDist,
    process: ArrivalProcess = ArrivalProcess.POISSON,
    cv: float = 1.0,
    seed: int = 0,
) -> RequestSet:
    """`n` requests arriving at `rate_per_s` with lengths drawn from `prompt` and `output`."""
    arrivals_rng, prompt_rng, output_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    arrival = unit_arrivals(arrivals_rng, n, process, cv) / rate_per_s
    return RequestSet(
        arrival, prompt.draw(prompt_rng, n), output.draw(output_rng, n), source=f"{process.value} {rate_per_s:g}/s"
    )
