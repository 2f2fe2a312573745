"""Static batching, the baseline before iteration-level scheduling (FasterTransformer, HF generate).

Whenever the instance is idle it takes up to `max_num_seqs` waiting requests, first come first
served (as many as the KV pool holds and whose padded prompts fit `max_batched_tokens`), and
runs them to completion as one batch: every prompt padded to the longest, one
prefill step, then decode steps until the longest output is done; finished sequences keep their
slot (padding) and nobody joins. KV for the padded worst case (longest prompt + longest output)
of every sequence is reserved, and the batch is cut to what the pool holds. With equal prompts
it is exactly `archsim run` at that batch size.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from archsim.serving.engine import InstanceResult, _Recorder
from archsim.serving.kvpool import blocks_for
from archsim.serving.requests import RequestSet
from archsim.serving.scheduler import InstanceState, SchedulerConfig
from archsim.serving.steptime import StepTimer


def _take_batch(
    waiting: deque, prompt: np.ndarray, output: np.ndarray, cfg: SchedulerConfig, pool_blocks: int
) -> list[int]:
    """The longest prefix of the queue, up to max_num_seqs, whose padded KV fits the pool and
    whose padded prompts fit max_batched_tokens (the activations the memory was sized for);
    the first request always goes."""
    batch: list[int] = []
    p_max = o_max = 0
    for r in list(waiting)[: cfg.max_num_seqs]:
        p, o = max(p_max, int(prompt[r])), max(o_max, int(output[r]))
        if batch and (
            (len(batch) + 1) * blocks_for(p + o - 1, cfg.block_size) > pool_blocks
            or (len(batch) + 1) * p > cfg.max_batched_tokens
        ):
            break
        batch.append(r)
        p_max, o_max = p, o
    for _ in batch:
        waiting.popleft()
    return batch


def simulate_static(reqs: RequestSet, timer: StepTimer, cfg: SchedulerConfig, pool_blocks: int) -> InstanceResult:
    n = len(reqs)
    arrival, prompt, output = reqs.arrival_s, reqs.prompt_tokens, reqs.output_tokens
    first_sched, first_tok, finish = (np.full(n, np.nan) for _ in range(3))
    state = InstanceState(
        prompt, output, np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), pool_blocks, cfg.block_size
    )
    rec = _Recorder()
    t = float(arrival[0]) if n else 0.0
    nxt = done = steps = computed = 0
    while done < n:
        while nxt < n and arrival[nxt] <= t:
            state.waiting.append(nxt)
            nxt += 1
        if not state.waiting:
            rec.sample(t, float(arrival[nxt]), 0, 0, 0, state, done)
            t = float(arrival[nxt])
            continue
        batch = np.array(_take_batch(state.waiting, prompt, output, cfg, pool_blocks), dtype=np.int64)
        if len(batch) == 0:
            raise RuntimeError("a request does not fit the KV pool on its own")
        b, p_max, o_max = len(batch), int(prompt[batch].max()), int(output[batch].max())
        state.running = batch.tolist()
        for r in state.running:
            state.take(r, blocks_for(p_max + o_max - 1, cfg.block_size))
        first_sched[batch] = t
        end = t + timer.uniform_prefill_s(b, p_max)
        first_tok[batch] = end
        rec.sample(t, end, 1, b, b * p_max, state, done)
        steps, computed = steps + 1, computed + b * p_max
        times = timer.decode_run_s(b, b * (p_max + 1), p_max + 1, o_max - 1) if o_max > 1 else np.zeros(0)
        ends = end + np.cumsum(times)
        outs = output[batch]
        finish[batch] = np.where(outs > 1, ends[np.maximum(outs - 2, 0)] if len(ends) else end, end)
        j = np.arange(len(times))
        rec.gaps(times, b - np.searchsorted(np.sort(outs), j + 2, "left"))
        # one timeline sample per group of finishes (requests in system drop at each)
        start, prev = end, 0
        for o in np.unique(outs).tolist():
            if o - 1 > prev:
                stop = float(ends[o - 2])
                rec.sample(start, stop, o - 1 - prev, b, b, state, done)
                start, prev = stop, o - 1
            done += int(np.sum(outs == o))
        steps, computed = steps + o_max - 1, computed + b * (o_max - 1)
        for r in state.running:
            state.release(r)
        state.generated[batch] = outs
        state.running = []
        t = float(ends[-1]) if len(ends) else end
    return InstanceResult(
        first_sched,
        first_tok,
        finish,
        state.generated,
        state.preemptions,
        *rec.itl_arrays(),
        rec.timeline(arrival),
        steps,
        computed,
        0,
        pool_blocks,
    )
