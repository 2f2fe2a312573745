"""Routing of tokens to experts, in expectation: which experts a step touches, how many rows the
busiest one gets, and how an expert-parallel group's share compares with the others'.

Each token picks `top_k` distinct experts; expert e is among a token's picks with probability
p_e (sum over e of p_e = top_k, each p_e at most 1). Under uniform routing p_e = k/E. A routing
skew gives expert weights w_e = (e + 1)^-s (Zipf's law with exponent s, the hottest expert
first) or measured loads, and p_e = k w_e / sum(w), where an expert whose share would exceed
one is capped at one and the excess spread over the others in proportion to their weights
(water-filling).

With T tokens routed independently:
    expected experts touched    G = sum_e 1 - (1 - p_e)^T            (E (1 - (1 - k/E)^T) uniform)
    expected rows of expert e, given it is touched    T p_e / (1 - (1 - p_e)^T)
A grouped expert GEMM gives every expert it runs the rows of its busiest expert, so the
busiest expert sets its time (uniform routing: T k / G rows, the mean). Experts are placed on
expert-parallel ranks in contiguous blocks of E / ep in the order the loads are given; the
busiest rank is the one whose experts draw the most tokens. Nothing here is rounded: the
builder spreads a fractional expert count over the layers (archsim/graph/builder.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=256)
def routing_probabilities(experts: int, top_k: int, skew: float = 0.0, loads: tuple[float, ...] = ()) -> np.ndarray:
    """p_e for each expert (read-only array): the chance a token picks expert e."""
    if loads:
        if len(loads) != experts:
            raise ValueError(f"{len(loads)} expert loads given for {experts} experts")
        w = np.asarray(loads, dtype=np.float64)
    elif skew > 0:
        w = np.arange(1, experts + 1, dtype=np.float64) ** -skew
    else:
        w = np.ones(experts)
    p = np.zeros(experts)
    free = w > 0
    mass = float(top_k)
    while True:
        p[free] = mass * w[free] / w[free].sum()
        over = free & (p > 1.0)
        if not over.any():
            break
        p[over] = 1.0
        free &= ~over
        mass = top_k - float(np.sum(p[~free]))
    p.setflags(write=False)
    return p


def expected_touched(p: np.ndarray, tokens: float) -> float:
    """Experts that receive at least one of `tokens` tokens, in expectation."""
    return float(np.sum(1.0 - (1.0 - p) ** tokens))


def expected_active_experts(experts: int, top_k: int, tokens: int) -> float:
    """Uniform routing: E (1 - (1 - k/E)^T)."""
    return expected_touched(routing_probabilities(experts, top_k), tokens)


def busiest_rows(p: np.ndarray, tokens: float) -> float:
    """Expected rows of the busiest expert that is touched: max over e of T p_e / (1 - (1 - p_e)^T)."""
    live = p[p > 0]
    return float(np.max(tokens * live / (1.0 - (1.0 - live) ** tokens)))


@dataclass(frozen=True)
class ExpertShare:
    """What one chip's experts do in a step: experts touched (in expectation), the busiest
    expert's rows, and the tokens routed to the chip (rows over all its experts)."""

    touched: float
    rows: float
    routed: float


def rank_share(p: np.ndarray, tokens: float, ep: int = 1) -> ExpertShare:
    """The busiest expert-parallel rank's share of `tokens` tokens routed over all experts
    (`ep` = 1: the whole chip)."""
    blocks = p.reshape(ep, -1)
    r = int(np.argmax(blocks.sum(axis=1)))
    mine = blocks[r]
    return ExpertShare(expected_touched(mine, tokens), busiest_rows(mine, tokens), float(tokens * mine.sum()))
