"""Which requests a setup can ever serve, and how much each may generate.

A request is refused before the run, and counted as missing its SLOs, when it can never fit: it
is longer than `max_model_len` (default: the longest request), or its KV (prompt + output - 1
tokens, or, under a reserving policy, prompt + max_tokens - 1) exceeds an instance's pool.
A request stating no max_tokens may generate what max_model_len leaves after its prompt (or
`max_tokens` when the setup gives one). Tokens.
"""

from __future__ import annotations

import numpy as np

from archsim.errors import DoesNotFitError
from archsim.serving.kvpool import KvPool
from archsim.serving.requests import RequestSet
from archsim.serving.scheduler import Policy, SchedulerConfig
from archsim.serving.setup import ServeSetup


def request_limits(reqs: RequestSet, setup: ServeSetup) -> tuple[np.ndarray, np.ndarray]:
    """(the most tokens each request may generate, whether it is within max_model_len). A
    request's limit is the max_tokens it states, else the setup's, else what max_model_len leaves
    after its prompt; max_model_len is the setup's, else the longest a request may reach."""
    stated = reqs.max_tokens
    asked = np.where(stated > 0, stated, setup.max_tokens if setup.max_tokens is not None else 0)
    reach = reqs.prompt_tokens + np.maximum(reqs.output_tokens, asked)
    max_len = setup.max_model_len or (int(reach.max()) if len(reqs) else 1)
    limit = np.where(asked > 0, asked, max_len - reqs.prompt_tokens)
    limit = np.maximum(np.minimum(limit, max_len - reqs.prompt_tokens), 1)
    within = (reqs.prompt_tokens + reqs.output_tokens <= max_len) & (reqs.output_tokens <= limit)
    if len(reqs) and not within.any():
        shortest = int((reqs.prompt_tokens + reqs.output_tokens).min())
        raise DoesNotFitError(
            f"none of the {len(reqs):,} requests is within the context window of {max_len:,} tokens "
            f"(max_model_len) and its max_tokens: the shortest has {shortest:,}"
        )
    return limit, within


def need_tokens(reqs: RequestSet, limit: np.ndarray, cfg: SchedulerConfig, pool: KvPool) -> np.ndarray:
    """KV tokens a request must hold at once: its worst case under a reserving policy; under
    vllm and sarathi its output too, and its prompt with the watermark to spare (else it could
    never be admitted)."""
    if cfg.policy in (Policy.TRTLLM, Policy.ORCA):
        return reqs.prompt_tokens + limit - 1
    need = reqs.prompt_tokens + reqs.output_tokens - 1
    if cfg.policy.reserves:
        return need
    watermark = int(cfg.watermark * pool.blocks)
    admits = -(-reqs.prompt_tokens // cfg.block_size) <= pool.blocks - watermark
    return np.where(admits, need, np.iinfo(np.int64).max)


def fitting(fits: np.ndarray, need: np.ndarray, pool: KvPool) -> np.ndarray:
    """Indices of the requests that fit; DoesNotFitError when none does."""
    if len(fits) and not fits.any():
        smallest = int(need.min())
        needs = (
            f"the smallest needs {smallest:,} tokens"
            if smallest < np.iinfo(np.int64).max
            else ("no prompt fits it with the admission watermark to spare")
        )
        raise DoesNotFitError(
            f"none of the {len(fits):,} requests fits a KV cache of {pool.blocks:,} blocks "
            f"({pool.tokens:,} tokens): {needs}"
        )
    return np.flatnonzero(fits)
