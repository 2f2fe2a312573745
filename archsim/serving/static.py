"""Static batching, the baseline before iteration-level scheduling (FasterTransformer, HF generate):
the `static` policy of the serving loop (archsim/serving/engine.py).

Whenever the instance is idle it takes up to `max_num_seqs` waiting requests, first come first
served (as many as the KV pool holds and whose padded prompts fit `max_batched_tokens`), and
runs them to completion as one batch: every prompt padded to the longest, one prefill step, then
decode steps until the longest output is done; finished sequences keep their slot (padding) and
nobody joins. KV for the padded worst case (longest prompt + longest output) of every sequence
is reserved, and the batch is cut to what the pool holds. With equal prompts and no host profile
it is exactly `archsim run` at that batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archsim.runner.steps import StepModel
from archsim.serving.host import HostProfile
from archsim.serving.kvpool import blocks_for
from archsim.serving.scheduler import SchedulerConfig
from archsim.serving.state import InstanceState


def take_batch(s: InstanceState, cfg: SchedulerConfig) -> list[int]:
    """The longest prefix of the queue, up to max_num_seqs, whose padded KV fits the pool and
    whose padded prompts fit max_batched_tokens (the activations the memory was sized for); the
    first request always goes. Taken off the queue, their padded KV reserved."""
    batch: list[int] = []
    p_max = o_max = 0
    for r in list(s.waiting)[: cfg.max_num_seqs]:
        p, o = max(p_max, int(s.prompt[r])), max(o_max, int(s.target[r]))
        if batch and (
            (len(batch) + 1) * blocks_for(p + o - 1, cfg.block_size) > s.free
            or (len(batch) + 1) * p > cfg.max_batched_tokens
        ):
            break
        batch.append(r)
        p_max, o_max = p, o
    for r in batch:
        s.waiting.popleft()
        s.take(r, blocks_for(p_max + o_max - 1, cfg.block_size))
    s.running = list(batch)
    return batch


@dataclass(frozen=True, eq=False)
class BatchRun:
    """A static batch played out: when its prefill ended, each decode step ended, and each
    request finished; its GPU time (in all, the prefill's and each decode step's), and over steps
    step time x tokens emitted (in all and the host's exposed part)."""

    prefill_end_s: float
    step_ends_s: np.ndarray  # one per decode step
    finish_s: np.ndarray  # per request of the batch
    wall_s: float  # the batch's time
    gpu_s: float
    token_s: float
    host_token_s: float
    prefill_gpu_s: float
    step_gpu_s: np.ndarray  # one per decode step

    @property
    def end_s(self) -> float:
        return float(self.step_ends_s[-1]) if len(self.step_ends_s) else self.prefill_end_s


def play_batch(prompt: np.ndarray, output: np.ndarray, timer: StepModel, host: HostProfile, t: float) -> BatchRun:
    """The batch's prefill (padded to the longest prompt, one batched attention kernel) and its
    decode steps (all sequences at the padded KV length) until the longest output is done."""
    b, p_max, o_max = len(prompt), int(prompt.max()), int(output.max())
    prefill_gpu = timer.uniform_prefill_s(b, p_max)
    prefill = host.wall_s(prefill_gpu, b, b)
    gpu = timer.decode_run_s(b, b * (p_max + 1), p_max + 1, o_max - 1) if o_max > 1 else np.zeros(0)
    walls = host.wall_series_s(gpu, b, b)
    ends = t + prefill + np.cumsum(walls)
    end = t + prefill
    finish = np.where(output > 1, ends[np.maximum(output - 2, 0)] if len(ends) else end, end)
    emitting = b - np.searchsorted(np.sort(output), np.arange(len(walls)) + 2, "left")  # tokens per decode step
    # (sums, not np.dot: BLAS splits a long dot product over threads, so its last bits would
    # depend on the machine's cores)
    token_s = prefill * b + float(np.sum(walls * emitting))
    host_token_s = (prefill - prefill_gpu) * b + float(np.sum((walls - gpu) * emitting))
    wall = prefill + float(walls.sum())
    return BatchRun(end, ends, finish, wall, prefill_gpu + float(gpu.sum()), token_s, host_token_s, prefill_gpu, gpu)
