"""Which points of the parameter space a sweep runs: a full grid, or N samples (seeded uniform
random or scrambled Halton), each a mapping of parameter name to value.

Samples are drawn in the unit cube and mapped onto each parameter's domain: a list of values is
cut into equal slices, a range is spread linearly or geometrically (`scale: log`), and
`integer` ranges give each whole number an equal share. The Halton sequence (Halton 1960) puts
dimension j's coordinate of point i at the radical inverse of i in the j-th prime base; its
digits are permuted at random (0 kept fixed), seeded, which breaks the correlation of the plain
sequence between dimensions of neighbouring primes (Faure and Lemieux 2009). Both samplers are
prefix-stable: the first N points of a longer run with the same seed are the same N points, so a
sweep can be grown in place. Points are produced lazily (`iter_grid`, `iter_sampled`): a sweep
of a million points never holds them all, and its size is counted arithmetically (`grid_size`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np

Value = bool | int | float | str


class Scale(str, Enum):
    LINEAR = "linear"
    LOG = "log"


@dataclass(frozen=True)
class Domain:
    """The values one parameter may take: `choices`, or a range from `low` to `high`."""

    choices: tuple[Value, ...] | None = None
    low: float = 0.0
    high: float = 0.0
    steps: int | None = None  # grid points of a range, ends included
    scale: Scale = Scale.LINEAR
    integer: bool = False

    def grid_length(self) -> int:
        """How many values `grid` gives, without making them when that is plain arithmetic."""
        if self.choices is not None:
            return len(self.choices)
        if not self.integer:
            return self.steps or 1
        if (self.steps or 1) > GRID_MATERIALISE:  # whole numbers in the range bound the distinct values
            return min(self.steps or 1, math.floor(self.high + 0.5) - math.ceil(self.low - 0.5) + 1)
        return len(self.grid())

    def grid(self) -> tuple[Value, ...]:
        """The values a grid takes: the choices, or `steps` points from low to high."""
        if self.choices is not None:
            return self.choices
        n = self.steps or 1
        if self.scale is Scale.LOG:
            raw = np.geomspace(self.low, self.high, n)
        else:
            raw = np.linspace(self.low, self.high, n)
        if self.integer:
            return tuple(dict.fromkeys(round(v) for v in raw))
        return tuple(float(v) for v in raw)

    def at(self, u: float) -> Value:
        """The value at `u` in [0, 1): an equal share of `u` for each choice or whole number."""
        if self.choices is not None:
            return self.choices[min(int(u * len(self.choices)), len(self.choices) - 1)]
        if self.scale is Scale.LOG:
            lo, hi = math.log(self.low), math.log(self.high)
            if self.integer:  # log-uniform over [low - 0.5, high + 0.5), rounded to a whole number
                lo, hi = math.log(max(self.low - 0.5, 0.5)), math.log(self.high + 0.5)
                return int(min(max(round(math.exp(lo + u * (hi - lo))), self.low), self.high))
            return float(math.exp(lo + u * (hi - lo)))
        if self.integer:
            lo, hi = math.ceil(self.low), math.floor(self.high)
            return int(min(lo + math.floor(u * (hi - lo + 1)), hi))
        return float(self.low + u * (self.high - self.low))


GRID_MATERIALISE = 1 << 20  # an integer range with more steps is counted, not listed, to size it
BLOCK = 4096  # sampled points made at a time


def iter_grid(domains: dict[str, Domain]) -> Iterator[dict[str, Value]]:
    """Every combination, the last parameter varying fastest, one at a time."""
    names = list(domains)
    axes = [domains[n].grid() for n in names]
    for combo in itertools.product(*axes):
        yield dict(zip(names, combo))


def grid_points(domains: dict[str, Domain]) -> list[dict[str, Value]]:
    return list(iter_grid(domains))


def grid_size(domains: dict[str, Domain]) -> int:
    """Points of the grid, by arithmetic on the axes' lengths (nothing is listed)."""
    return math.prod(d.grid_length() for d in domains.values())


def iter_sampled(domains: dict[str, Domain], n: int, seed: int, kind: str) -> Iterator[dict[str, Value]]:
    """`n` points from the unit-cube samples of `kind` ('random' or 'halton'), made in blocks."""
    names = list(domains)
    blocks = halton_blocks(n, len(names), seed) if kind == "halton" else uniform_blocks(n, len(names), seed)
    for cube in blocks:
        for row in cube:
            yield {name: domains[name].at(float(u)) for name, u in zip(names, row)}


def sampled_points(domains: dict[str, Domain], n: int, seed: int, kind: str) -> list[dict[str, Value]]:
    return list(iter_sampled(domains, n, seed, kind))


def uniform_blocks(n: int, dims: int, seed: int, block: int = BLOCK) -> Iterator[np.ndarray]:
    """`n` x `dims` uniform samples in [0, 1), point by point so that a prefix stays a prefix."""
    rng = np.random.Generator(np.random.PCG64(seed))
    for start in range(0, n, block):
        count = min(block, n - start)
        yield np.array([rng.random(dims) for _ in range(count)]).reshape(count, dims)


def uniform(n: int, dims: int, seed: int) -> np.ndarray:
    blocks = list(uniform_blocks(n, dims, seed))
    return np.concatenate(blocks) if blocks else np.zeros((0, dims))


def first_primes(count: int) -> list[int]:
    primes: list[int] = []
    candidate = 2
    while len(primes) < count:
        if all(candidate % p for p in primes if p * p <= candidate):
            primes.append(candidate)
        candidate += 1
    return primes


def radical_inverse(indices: np.ndarray, base: int, perm: np.ndarray | None = None) -> np.ndarray:
    """Sum of digit_k(i) * base^-(k+1) over the base-`base` digits of i, each digit mapped
    through `perm` (identity if None): the van der Corput sequence in that base."""
    i = indices.astype(np.int64).copy()
    out = np.zeros(len(i))
    scale = 1.0 / base
    while np.any(i > 0):
        digit = i % base
        out += (perm[digit] if perm is not None else digit) * scale
        i //= base
        scale /= base
    return out


def halton_blocks(n: int, dims: int, seed: int, block: int = BLOCK) -> Iterator[np.ndarray]:
    """Scrambled Halton points in [0, 1), `block` at a time, from index 1 (index 0 is the origin);
    the digit permutations depend on the seed only, so the blocks join into `halton(n, ...)`."""
    rng = np.random.Generator(np.random.PCG64(seed))
    bases = first_primes(dims)
    perms = [np.concatenate([[0], 1 + rng.permutation(base - 1)]) for base in bases]  # 0 stays 0
    for start in range(1, n + 1, block):
        indices = np.arange(start, min(n, start + block - 1) + 1)
        cols = [radical_inverse(indices, base, perm) for base, perm in zip(bases, perms)]
        yield np.stack(cols, axis=1) if cols else np.zeros((len(indices), 0))


def halton(n: int, dims: int, seed: int) -> np.ndarray:
    """`n` x `dims` scrambled Halton points in [0, 1), starting at index 1 (index 0 is the origin)."""
    blocks = list(halton_blocks(n, dims, seed))
    return np.concatenate(blocks) if blocks else np.zeros((0, dims))
