"""Schedulers: which requests run in the next step, with how many tokens, and their KV blocks,
as the engines they are named after decide it (`--policy`). A decode is a request with one
known token left to compute; under speculative decoding it computes the k + 1 tokens of a
verify instead (`verify_tokens`).

* VLLM (vLLM's scheduler, vllm/v1/core/sched/scheduler.py): running requests first, in admission
  order, each its remaining tokens (1 for a decode, a prompt chunk otherwise) within the step's
  token budget (`max_num_batched_tokens`: chunked prefill); when blocks run out the newest
  running request is preempted, by recompute (its blocks freed, its tokens computed again from
  the front of the queue; blocks still cached are found again) or by swap (its KV copied to host
  memory over the host link, and back before it runs again; vLLM V0's other mode, within
  `--swap-space`, recompute when that is full). Waiting requests are admitted, first come first
  served, only in steps without preemption, while the budget, `max_num_seqs` and the free blocks
  allow: a request is admitted when the free blocks cover its whole prompt with the watermark
  (1% of the pool, vLLM's BlockSpaceManager) to spare, and it takes those blocks at once. The
  watermark and whole-prompt admission keep a KV-bound run from admitting requests it would
  preempt a step later.
* SARATHI (Sarathi-Serve): as VLLM, but decodes first, then ongoing prefills, then new ones,
  with a small budget (stall-free batching).
* TRTLLM (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler with chunked context): a request
  is admitted only when the free blocks cover its prompt and all `max_tokens` it may generate,
  which it reserves; it is never preempted. Decodes first, prompts chunked within the budget.
* ORCA: iteration-level batching with whole prompts and no preemption; each request reserves
  its prompt and its `max_tokens` (the limit it states, or what the context window leaves), as
  no server knows the true output length. A prompt larger than the remaining budget waits for
  the next step unless it is the first admitted in the step.
* STATIC: whole batches run to completion, padded (archsim/serving/static.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np

from archsim.engine_defaults import BLOCK_SIZE, MAX_BATCHED_TOKENS, MAX_NUM_SEQS
from archsim.serving.kernels import plan_running
from archsim.serving.kvpool import blocks_for
from archsim.serving.state import InstanceState


class Policy(str, Enum):
    VLLM = "vllm"
    SARATHI = "sarathi"
    TRTLLM = "trtllm"
    ORCA = "orca"
    STATIC = "static"

    @property
    def reserves(self) -> bool:
        """Whether admission reserves a request's worst case (no preemption)."""
        return self in _RESERVING

    @property
    def paged(self) -> bool:
        """Whether KV is kept in shared blocks a prefix cache can key (all but ORCA and STATIC)."""
        return self not in _WHOLE


_RESERVING = frozenset({Policy.TRTLLM, Policy.ORCA, Policy.STATIC})
_WHOLE = frozenset({Policy.ORCA, Policy.STATIC})


class Preemption(str, Enum):
    RECOMPUTE = "recompute"
    SWAP = "swap"


DEFAULT_MAX_BATCHED_TOKENS = {
    Policy.VLLM: MAX_BATCHED_TOKENS,
    Policy.SARATHI: 512,
    Policy.TRTLLM: 8192,  # TensorRT-LLM's default max_num_tokens
    Policy.ORCA: 8192,
    Policy.STATIC: 8192,
}
DEFAULT_MAX_NUM_SEQS = MAX_NUM_SEQS  # vLLM's default
DEFAULT_BLOCK_SIZE = BLOCK_SIZE
VLLM_WATERMARK = 0.01  # share of the pool vLLM keeps free when admitting (BlockSpaceManager)


@dataclass(frozen=True)
class SchedulerConfig:
    policy: Policy = Policy.VLLM
    max_batched_tokens: int = 8192  # tokens computed per step, all requests together
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS  # requests running at once
    block_size: int = DEFAULT_BLOCK_SIZE
    preemption: Preemption = Preemption.RECOMPUTE
    watermark: float = VLLM_WATERMARK  # VLLM and SARATHI only
    prefix_caching: bool = True  # paged policies only
    verify_tokens: int = 1  # tokens a decode computes: k + 1 under speculative decoding


class Plan(NamedTuple):
    """One step: requests `ids` compute `tokens` tokens each (int64 arrays); the last `admitted`
    joined this step; `preempted`: some request was preempted while it was formed;
    `all_decodes`: every one computes one token of a decode; `run_bounds`: where the scheduler
    worked them out, the bounds of a run of decode-only steps from it (`decode_bounds` in
    archsim/serving/kernels.py, after the step's blocks are taken)."""

    ids: np.ndarray
    tokens: np.ndarray
    admitted: int
    preempted: bool
    all_decodes: bool = False
    run_bounds: tuple[int, int, int] | None = None


def schedule(s: InstanceState, cfg: SchedulerConfig) -> Plan:
    if cfg.policy is Policy.ORCA:
        return _schedule_whole_prompts(s, cfg)
    return _schedule_paged(s, cfg)


def _decode_tokens(s: InstanceState, r: int, verify: int) -> int:
    """Tokens r computes this step: its remaining known ones, or a verify's when it decodes."""
    need = int(s.prompt[r] + s.generated[r] - s.computed[r])
    if need == 1 and verify > 1 and s.generated[r] > 0:
        return min(verify, int(s.target[r] - s.generated[r]))
    return need


def _running_with_preemption(
    s: InstanceState, cfg: SchedulerConfig, order: list[int]
) -> tuple[list[int], list[int], int, bool]:
    """vLLM's pass over the running requests when blocks run short: preempt the newest until the
    current request fits; stop if the current request is itself preempted."""
    budget, verify = cfg.max_batched_tokens, cfg.verify_tokens
    ids: list[int] = []
    ntok: list[int] = []
    gone: set[int] = set()
    for r in order:
        if r in gone:
            continue
        if budget <= 0:
            break
        k = min(_decode_tokens(s, r, verify), budget)
        grow = blocks_for(int(s.computed[r]) + k, s.bs) - int(s.blocks[r])
        if grow > 0:
            while grow > s.free:
                victim = s.preempt_newest(cfg.preemption is Preemption.SWAP)
                gone.add(victim)
                if victim in ids:
                    j = ids.index(victim)
                    budget += ntok.pop(j)
                    ids.pop(j)
                if victim == r:
                    break
            if r in gone:
                break
            s.take(r, grow)
        ids.append(r)
        ntok.append(k)
        budget -= k
    return ids, ntok, budget, bool(gone)


_knobs: dict[tuple[SchedulerConfig, int], np.ndarray] = {}
_last_knobs: list[tuple[SchedulerConfig, int, np.ndarray]] = []  # the last asked for: a loop asks for it every step


def scheduler_knobs(cfg: SchedulerConfig, block_size: int) -> np.ndarray:
    """The record `plan_running` reads the scheduler's settings from (archsim/serving/kernels.py
    KNOB_*), made once per configuration: not to be written."""
    if _last_knobs and _last_knobs[0][0] is cfg and _last_knobs[0][1] == block_size:
        return _last_knobs[0][2]
    knobs = _knobs.get((cfg, block_size))
    if knobs is None:
        if len(_knobs) >= 64:
            _knobs.clear()
        decodes_first = cfg.policy is not Policy.VLLM
        settings = (block_size, cfg.max_batched_tokens, cfg.verify_tokens, decodes_first, not cfg.policy.reserves)
        knobs = _knobs[cfg, block_size] = np.array(settings, dtype=np.int64)
    _last_knobs[:] = [(cfg, block_size, knobs)]
    return knobs


def _schedule_paged(s: InstanceState, cfg: SchedulerConfig) -> Plan:
    ids, ntok, total, budget, all_decodes, kmax, total_kv, max_kv = plan_running(
        s.running_ids(), s.prompt, s.generated, s.computed, s.blocks, s.target, scheduler_knobs(cfg, s.bs), s.free
    )
    budget = int(budget)
    bounds = (int(kmax), int(total_kv), int(max_kv)) if kmax >= 0 else None
    if total <= s.free:  # the common case: every running request fits (the kernel grew their blocks)
        s.take_grown(int(total))
    else:
        ordered = s.running
        if cfg.policy is not Policy.VLLM:  # decodes first
            p, g, c = s.prompt, s.generated, s.computed
            dec = [r for r in ordered if g[r] > 0 and c[r] + 1 == p[r] + g[r]]
            rest = set(dec)
            ordered = dec + [r for r in ordered if r not in rest]
        id_list, tok_list, budget, preempted = _running_with_preemption(s, cfg, list(ordered))
        if preempted:
            return Plan(np.array(id_list, dtype=np.int64), np.array(tok_list, dtype=np.int64), 0, True)
        ids, ntok, all_decodes = np.array(id_list, dtype=np.int64), np.array(tok_list, dtype=np.int64), False
    if not s.waiting and not s.swapped:
        return Plan(ids, ntok, 0, False, all_decodes, bounds)
    new_ids: list[int] = []
    new_tok: list[int] = []
    watermark = 0 if cfg.policy.reserves else int(cfg.watermark * s.pool_blocks)
    verify = cfg.verify_tokens
    while s.swapped and budget > 0 and len(s.running) < cfg.max_num_seqs:  # swapped-out requests come back first
        r = s.swapped[0]
        k = min(_decode_tokens(s, r, verify), budget)
        held = s.swapped_blocks[r]
        if max(held, blocks_for(int(s.computed[r]) + k, s.bs)) > s.free - watermark:
            break
        s.swapped.popleft()
        s.swap_in(r)
        s.take(r, blocks_for(int(s.computed[r]) + k, s.bs) - int(s.blocks[r]))
        new_ids.append(r)
        new_tok.append(k)
        budget -= k
    swapped_in = len(new_ids)
    while s.waiting and budget > 0 and len(s.running) < cfg.max_num_seqs:
        r = s.waiting[0]
        device, unreferenced, host = s.lookup(r)
        known = int(s.prompt[r] + s.generated[r])
        whole = s.reserve_tokens(r) if cfg.policy.reserves else known
        blocks = blocks_for(whole, s.bs) - device
        if blocks + unreferenced > s.free - watermark:
            break
        s.waiting.popleft()
        s.running.append(r)
        s.claim(r, device, host)
        s.take(r, blocks - host)
        k = min(known - int(s.computed[r]), budget)
        new_ids.append(r)
        new_tok.append(k)
        budget -= k
    if new_ids:
        ids = np.concatenate([ids, np.array(new_ids, dtype=np.int64)])
        ntok = np.concatenate([ntok, np.array(new_tok, dtype=np.int64)])
        all_decodes = False
    return Plan(ids, ntok, len(new_ids) - swapped_in, False, all_decodes, None if new_ids else bounds)


def _schedule_whole_prompts(s: InstanceState, cfg: SchedulerConfig) -> Plan:
    ids = list(s.running)
    ntok = [int(s.prompt[r] + s.generated[r] - s.computed[r]) for r in ids]
    all_decodes = all(k == 1 for k in ntok) and all(s.generated[r] > 0 for r in ids)
    left = cfg.max_batched_tokens - sum(ntok)
    admitted = 0
    while s.waiting and left > 0 and len(s.running) < cfg.max_num_seqs:
        r = s.waiting[0]
        k = int(s.prompt[r] + s.generated[r] - s.computed[r])
        if k > left and admitted:
            break
        blocks = blocks_for(s.reserve_tokens(r), s.bs)
        if blocks > s.free:
            break
        s.waiting.popleft()
        s.running.append(r)
        s.take(r, blocks)
        ids.append(r)
        ntok.append(k)
        left -= k
        admitted += 1
    return Plan(
        np.array(ids, dtype=np.int64), np.array(ntok, dtype=np.int64), admitted, False, all_decodes and not admitted
    )
