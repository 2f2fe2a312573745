"""Schedulers: which requests run in the next step, with how many tokens, and their KV blocks.

A request holds `prompt + generated` known tokens, of which `computed` have KV in the cache; a
step computes `n` more for it, and when all are computed it emits a new token. A decode is a
request with one token left to compute. Policies (`--policy`):

* VLLM (vLLM's scheduler): running requests first, in admission order, each its remaining
  tokens (1 for a decode, a prompt chunk otherwise) within the step's token budget; KV blocks
  allocated as tokens are computed; when blocks run out the newest running request is
  preempted (its blocks freed, recomputed later from the front of the queue). Waiting requests
  are admitted, first come first served, only in steps without preemption, while the budget,
  `max_num_seqs` and free blocks allow.
* SARATHI (Sarathi-Serve): as VLLM, but decodes first, then ongoing prefills, then new ones,
  with a small budget (stall-free batching).
* ORCA: iteration-level batching with whole prompts; the worst case (prompt + output) of KV is
  reserved at admission, so it never preempts. A prompt larger than the remaining budget waits
  for the next step unless it is the first admitted in the step.
* STATIC: whole batches run to completion, padded (archsim/serving/static.py; the serving loop
  runs a batch at a time).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

import numpy as np

from archsim.serving.kvpool import blocks_for


class Policy(str, Enum):
    VLLM = "vllm"
    SARATHI = "sarathi"
    ORCA = "orca"
    STATIC = "static"


DEFAULT_MAX_BATCHED_TOKENS = {Policy.VLLM: 8192, Policy.SARATHI: 512, Policy.ORCA: 8192, Policy.STATIC: 8192}
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default
DEFAULT_BLOCK_SIZE = 16  # tokens per KV block, vLLM's default


@dataclass(frozen=True)
class SchedulerConfig:
    policy: Policy = Policy.VLLM
    max_batched_tokens: int = 8192  # tokens computed per step, all requests together
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS  # requests running at once
    block_size: int = DEFAULT_BLOCK_SIZE


class InstanceState:
    """Mutable state of one serving instance: per-request counters and the queues."""

    def __init__(
        self,
        prompt: np.ndarray,
        target: np.ndarray,
        computed: np.ndarray,
        generated: np.ndarray,
        pool_blocks: int,
        block_size: int,
    ):
        n = len(prompt)
        self.prompt, self.target = prompt, target
        self.computed, self.generated = computed.copy(), generated.copy()
        self.blocks = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.pool_blocks, self.free, self.bs = pool_blocks, pool_blocks, block_size
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.recomputed_tokens = 0

    def need(self, r: int) -> int:
        return int(self.prompt[r] + self.generated[r] - self.computed[r])

    def grow(self, r: int, tokens: int) -> int:
        """Blocks request r lacks to hold `tokens` tokens of KV."""
        return max(0, blocks_for(tokens, self.bs) - int(self.blocks[r]))

    def take(self, r: int, blocks: int) -> None:
        self.blocks[r] += blocks
        self.free -= blocks
        assert self.free >= 0, "KV blocks in use exceed the pool"

    def release(self, r: int) -> None:
        self.free += int(self.blocks[r])
        self.blocks[r] = 0

    def preempt_newest(self) -> int:
        """Preempt the newest running request: free its KV, queue it first for recompute."""
        r = self.running.pop()
        self.release(r)
        self.recomputed_tokens += int(self.computed[r])
        self.computed[r] = 0
        self.preemptions[r] += 1
        self.waiting.appendleft(r)
        return r


@dataclass(frozen=True)
class Plan:
    """One step: requests `ids` compute `tokens` tokens each; the last `admitted` joined this step."""

    ids: np.ndarray
    tokens: np.ndarray
    admitted: int
    preempted: bool


def schedule(s: InstanceState, cfg: SchedulerConfig) -> Plan:
    if cfg.policy is Policy.ORCA:
        return _schedule_reserved(s, cfg)
    return _schedule_paged(s, cfg, decodes_first=cfg.policy is Policy.SARATHI)


def _schedule_paged(s: InstanceState, cfg: SchedulerConfig, decodes_first: bool) -> Plan:
    budget = cfg.max_batched_tokens
    ids = np.array(s.running, dtype=np.int64)
    need = s.prompt[ids] + s.generated[ids] - s.computed[ids]
    if decodes_first and len(ids):
        order = np.argsort(~((need == 1) & (s.generated[ids] > 0)), kind="stable")
        ids, need = ids[order], need[order]
    total = int(need.sum())
    n = need if total <= budget else np.minimum(need, np.maximum(budget - (np.cumsum(need) - need), 0))
    grow = np.maximum(-(-(s.computed[ids] + n) // s.bs) - s.blocks[ids], 0)
    grown = int(grow.sum())
    if grown <= s.free:  # common case: every running request fits
        s.blocks[ids] += grow
        s.free -= grown
        if total > budget:
            keep = n > 0
            ids, n = ids[keep], n[keep]
        left, preempted = budget - int(n.sum()), False
    else:
        sched, preempted = _running_with_preemption(s, ids.tolist(), budget)
        ids, n = _arrays(sched)
        left = budget - int(n.sum())
    if preempted:
        return Plan(ids, n, 0, True)

    def chunk(r: int, left: int) -> tuple[int, int] | None:  # a prompt chunk, blocks as computed
        k = min(s.need(r), left)
        return k, s.grow(r, int(s.computed[r]) + k)

    return _admit(s, cfg, ids, n, left, chunk)


def _admit(s: InstanceState, cfg: SchedulerConfig, ids: np.ndarray, n: np.ndarray, left: int, plan) -> Plan:
    """Admit waiting requests in order while the token budget, the sequence limit and the free
    KV blocks allow; `plan(r, left)` gives (tokens this step, blocks to take) or None to stop."""
    new_ids, new_n = [], []
    while s.waiting and left > 0 and len(s.running) < cfg.max_num_seqs:
        r = s.waiting[0]
        planned = plan(r, left)
        if planned is None or planned[1] > s.free:
            break
        k, blocks = planned
        s.waiting.popleft()
        s.running.append(r)
        s.take(r, blocks)
        new_ids.append(r)
        new_n.append(k)
        left -= k
    if new_ids:
        ids, n = np.concatenate([ids, new_ids]), np.concatenate([n, new_n])
    return Plan(ids, n, len(new_ids), False)


def _arrays(sched: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.fromiter(sched.keys(), dtype=np.int64, count=len(sched)),
        np.fromiter(sched.values(), dtype=np.int64, count=len(sched)),
    )


def _running_with_preemption(s: InstanceState, order: list[int], budget: int) -> tuple[dict, bool]:
    """vLLM's loop over running requests when blocks run short: preempt the newest until the
    current request fits; stop if the current request is itself preempted."""
    sched: dict[int, int] = {}
    gone: set[int] = set()
    for r in order:
        if r in gone:
            continue
        if budget <= 0:
            break
        k = min(s.need(r), budget)
        grow = s.grow(r, int(s.computed[r]) + k)
        while grow > s.free:
            victim = s.preempt_newest()
            gone.add(victim)
            budget += sched.pop(victim, 0)
            if victim == r:
                break
        if r in gone:
            break
        s.take(r, grow)
        sched[r] = k
        budget -= k
    return sched, bool(gone)


def _schedule_reserved(s: InstanceState, cfg: SchedulerConfig) -> Plan:
    ids = np.array(s.running, dtype=np.int64)
    n = s.prompt[ids] + s.generated[ids] - s.computed[ids]
    left = cfg.max_batched_tokens - int(n.sum())
    admitted = len(s.running)

    def whole(r: int, left: int) -> tuple[int, int] | None:  # the whole prompt, worst-case blocks
        k = s.need(r)
        if k > left and len(s.running) > admitted:
            return None
        return k, s.grow(r, int(s.prompt[r] + s.target[r] - 1))

    return _admit(s, cfg, ids, n, left, whole)
