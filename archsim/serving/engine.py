"""The serving loop of one instance: arrivals, scheduling, steps timed by the hardware model.

Each iteration ingests the requests that have arrived, asks the scheduler for the next step,
times it with the StepModel and advances the clock; requests that computed all their known
tokens emit one. Runs of decode-only steps are advanced together: while the batch is all
decodes, nobody arrives, nobody finishes and the KV blocks last, step j differs from the first
only by j more tokens of KV per request, so k steps are timed and booked as arrays at once
(identical to stepping one by one). A 20,000-request trace thus costs one Python iteration per
event (an arrival, a finish, a prompt chunk), not one per token.

Times are seconds from the first arrival; token counts are whole tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archsim.runner.steps import StepModel
from archsim.serving.requests import RequestSet
from archsim.serving.scheduler import InstanceState, Plan, Policy, SchedulerConfig, schedule
from archsim.serving.static import play_batch, take_batch


@dataclass(frozen=True, eq=False)
class Timeline:
    """Samples of the instance over time, one per iteration (a step or a run of decode steps,
    or an idle gap): span, steps, sequences and tokens per step, KV blocks in use after it,
    running and waiting requests, and the integral of requests in system over the span (s)."""

    start_s: np.ndarray
    end_s: np.ndarray
    steps: np.ndarray
    batch: np.ndarray
    tokens: np.ndarray
    kv_blocks: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    in_system_s: np.ndarray


@dataclass(frozen=True, eq=False)
class InstanceResult:
    """Per-request times (NaN where not reached here), counters and the timeline of one instance."""

    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    generated: np.ndarray
    preemptions: np.ndarray
    itl_s: np.ndarray  # inter-token gaps, each standing for `itl_weight` gaps of equal length
    itl_weight: np.ndarray
    timeline: Timeline
    steps: int
    computed_tokens: int  # tokens whose KV was computed, recomputation included
    recomputed_tokens: int
    pool_blocks: int


class _Recorder:
    def __init__(self):
        self.rows: list[tuple] = []
        self.itl: list[np.ndarray] = []
        self.itl_w: list[np.ndarray | int] = []

    def sample(self, start, end, steps, batch, tokens, s: InstanceState, done: int) -> None:
        self.rows.append(
            (start, end, steps, batch, tokens, s.pool_blocks - s.free, len(s.running), len(s.waiting), done)
        )

    def gaps(self, values: np.ndarray, weight: np.ndarray | int) -> None:
        """Inter-token gaps; each stands for `weight` gaps (a number, or one per value)."""
        if len(values):
            self.itl.append(values)
            self.itl_w.append(weight)

    def itl_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.itl:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        w = [
            np.full(len(v), w, dtype=np.int64) if np.isscalar(w) else np.asarray(w, dtype=np.int64)
            for v, w in zip(self.itl, self.itl_w)
        ]
        values, weights = np.concatenate(self.itl).astype(np.float64), np.concatenate(w)
        keep = weights > 0
        return values[keep], weights[keep]

    def timeline(self, arrival_s: np.ndarray) -> Timeline:
        cols = list(zip(*self.rows)) if self.rows else [()] * 9
        start, end = np.array(cols[0], dtype=float), np.array(cols[1], dtype=float)
        done = np.array(cols[8], dtype=np.int64)
        prefix = np.concatenate([[0.0], np.cumsum(arrival_s)])
        i0, i1 = np.searchsorted(arrival_s, start, "right"), np.searchsorted(arrival_s, end, "right")
        area = (i0 - done) * (end - start) + (i1 - i0) * end - (prefix[i1] - prefix[i0])
        steps, batch, tokens, kv_blocks, running, waiting = (np.array(c, dtype=np.int64) for c in cols[2:8])
        return Timeline(start, end, steps, batch, tokens, kv_blocks, running, waiting, area)


@dataclass(eq=False)
class _Clock:
    """Per-request times of one instance, filled in as the run goes (NaN until reached)."""

    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    last_token_s: np.ndarray


def simulate_instance(
    reqs: RequestSet,
    timer: StepModel,
    cfg: SchedulerConfig,
    pool_blocks: int,
    target: np.ndarray | None = None,
    computed0: np.ndarray | None = None,
    generated0: np.ndarray | None = None,
    last_token0_s: np.ndarray | None = None,
    decode_runs: bool = True,
) -> InstanceResult:
    """Serve `reqs` (arriving at this instance) until each has generated `target` tokens (default:
    its output). A request may arrive with `computed0` tokens of KV and `generated0` tokens
    already generated, the last at `last_token0_s` (a decode instance after a KV transfer).
    `decode_runs=False` steps decode-only runs one step at a time (same result, slower)."""
    n = len(reqs)
    zeros = np.zeros(n, dtype=np.int64)
    s = InstanceState(
        reqs.prompt_tokens,
        reqs.output_tokens if target is None else target,
        zeros if computed0 is None else computed0,
        zeros if generated0 is None else generated0,
        pool_blocks,
        cfg.block_size,
    )
    arrival = reqs.arrival_s
    clock = _Clock(
        np.full(n, np.nan),
        np.full(n, np.nan),
        np.full(n, np.nan),
        np.full(n, np.nan) if last_token0_s is None else last_token0_s.astype(float).copy(),
    )
    rec = _Recorder()
    t = float(arrival[0]) if n else 0.0
    nxt = done = steps = computed = 0
    while done < n:
        while nxt < n and arrival[nxt] <= t:
            s.waiting.append(nxt)
            nxt += 1
        if not s.running and not s.waiting:
            rec.sample(t, float(arrival[nxt]), 0, 0, 0, s, done)
            t = float(arrival[nxt])
            continue
        if cfg.policy is Policy.STATIC:  # a whole batch, prefill to the longest output
            k, computed_k, fin = _run_static(s, cfg, timer, t, clock, rec, done)
            steps, computed, done, t = (
                steps + k,
                computed + computed_k,
                done + len(fin),
                float(clock.finish_s[fin].max()),
            )
            continue
        plan = schedule(s, cfg)
        if len(plan.ids) == 0:
            if plan.preempted:
                continue
            raise RuntimeError("the scheduler formed an empty step with requests waiting")
        if plan.admitted:
            new = plan.ids[-plan.admitted :]
            clock.first_scheduled_s[new[np.isnan(clock.first_scheduled_s[new])]] = t
        if (
            decode_runs
            and not plan.admitted
            and not plan.preempted
            and len(plan.ids) == len(s.running)
            and plan.tokens.max() == 1
            and s.generated[plan.ids].min() > 0
        ):
            k, end, emit = _run_decodes(s, plan.ids, timer, cfg, t, arrival[nxt] if nxt < n else None, clock, rec)
            tokens = len(plan.ids)
        else:
            k, tokens = 1, int(plan.tokens.sum())
            end, emit = _run_step(s, plan, timer, t, clock, rec)
        fin = emit[s.generated[emit] >= s.target[emit]]
        if len(fin):
            clock.finish_s[fin] = end
            for r in fin.tolist():
                s.release(r)
            gone = set(fin.tolist())
            s.running = [r for r in s.running if r not in gone]
        rec.sample(t, end, k, len(plan.ids), tokens, s, done)
        steps, computed, done, t = steps + k, computed + k * tokens, done + len(fin), end
    return InstanceResult(
        clock.first_scheduled_s,
        clock.first_token_s,
        clock.finish_s,
        s.generated,
        s.preemptions,
        *rec.itl_arrays(),
        rec.timeline(arrival),
        steps,
        computed,
        s.recomputed_tokens,
        pool_blocks,
    )


def _run_static(
    s: InstanceState, cfg: SchedulerConfig, timer: StepModel, t: float, clock: _Clock, rec: _Recorder, done: int
) -> tuple[int, int, np.ndarray]:
    """A static batch from the queue run to completion (archsim/serving/static.py): its steps,
    tokens computed (padding included) and requests; one timeline sample per group of finishes."""
    batch = take_batch(s, cfg)
    if len(batch) == 0:
        raise RuntimeError("a request does not fit the KV pool on its own")
    outs = s.target[batch]
    run = play_batch(s.prompt[batch], outs, timer, t)
    b, p_max, o_max = len(batch), int(s.prompt[batch].max()), int(outs.max())
    clock.first_scheduled_s[batch] = t
    clock.first_token_s[batch] = run.prefill_end_s
    clock.finish_s[batch] = run.finish_s
    rec.sample(t, run.prefill_end_s, 1, b, b * p_max, s, done)
    times = np.diff(np.concatenate([[run.prefill_end_s], run.step_ends_s]))
    j = np.arange(len(times))
    rec.gaps(times, b - np.searchsorted(np.sort(outs), j + 2, "left"))  # requests still generating
    start, prev = run.prefill_end_s, 0
    for o in np.unique(outs).tolist():
        if o - 1 > prev:
            stop = float(run.step_ends_s[o - 2])
            rec.sample(start, stop, o - 1 - prev, b, b, s, done)
            start, prev = stop, o - 1
        done += int(np.sum(outs == o))
    for r in batch.tolist():
        s.release(r)
    s.generated[batch] = outs
    s.running = []
    return o_max, b * (p_max + o_max - 1), batch


def _run_step(
    s: InstanceState, plan: Plan, timer: StepModel, t: float, clock: _Clock, rec: _Recorder
) -> tuple[float, np.ndarray]:
    """One step of the plan: its end time and the requests that emitted a token."""
    ids, ntok = plan.ids, plan.tokens
    c = s.computed[ids]
    dec = ntok == 1
    end = t + timer.step_s(c[dec] + 1, list(zip(ntok[~dec].tolist(), c[~dec].tolist())))
    s.computed[ids] += ntok
    emit = ids[s.computed[ids] == s.prompt[ids] + s.generated[ids]]
    had = s.generated[emit] > 0
    clock.first_token_s[emit[~had]] = end
    rec.gaps(end - clock.last_token_s[emit[had]], 1)
    s.generated[emit] += 1
    clock.last_token_s[emit] = end
    return end, emit


def _run_decodes(
    s: InstanceState,
    ids: np.ndarray,
    timer: StepModel,
    cfg: SchedulerConfig,
    t: float,
    next_arrival: float | None,
    clock: _Clock,
    rec: _Recorder,
) -> tuple[int, float, np.ndarray]:
    """k decode-only steps of every running request: k, the end time, the requests (all emit)."""
    k, ends = _decode_run(s, ids, s.computed[ids], timer, cfg, t, next_arrival)
    rec.gaps(ends[:1] - clock.last_token_s[ids], 1)
    rec.gaps(np.diff(ends), len(ids))
    s.computed[ids] += k
    s.generated[ids] += k
    end = float(ends[-1])
    clock.last_token_s[ids] = end
    return k, end, ids


def _decode_run(
    s: InstanceState,
    ids: np.ndarray,
    c: np.ndarray,
    timer: StepModel,
    cfg: SchedulerConfig,
    t: float,
    next_arrival: float | None,
) -> tuple[int, np.ndarray]:
    """Advance a decode-only batch by k >= 1 steps (its first step already holds its blocks):
    up to the first finish, the last step the free blocks cover, and the step in which the next
    request arrives. Returns k and the end time of each of the k steps; books the KV blocks."""
    b = len(ids)
    kmax = int(np.min(s.target[ids] - s.generated[ids]))
    if cfg.policy is not Policy.ORCA and kmax > 1:
        kmax = _steps_blocks_last(s, ids, c, kmax)
    total_kv, max_kv = int(c.sum()) + b, int(c.max()) + 1
    if next_arrival is not None and kmax > 1:  # no step is shorter than its non-attention part
        kmax = min(kmax, int((next_arrival - t) / timer.decode_fixed_s(b)) + 2)
    ends = t + np.cumsum(timer.decode_run_s(b, total_kv, max_kv, kmax))
    k = kmax
    if next_arrival is not None:
        k = min(k, int(np.searchsorted(ends, next_arrival, "left")) + 1)
    if cfg.policy is not Policy.ORCA:
        grow = np.maximum(-(-(c + k) // s.bs) - s.blocks[ids], 0)
        s.blocks[ids] += grow
        s.free -= int(grow.sum())
        assert s.free >= 0, "KV blocks in use exceed the pool"
    return k, ends[:k]


def _steps_blocks_last(s: InstanceState, ids: np.ndarray, c: np.ndarray, kmax: int) -> int:
    """The most decode steps (<= kmax) whose KV blocks the pool covers: step j holds
    ceil((c + j) / bs) blocks per request (c: computed tokens before the first step)."""
    held = int(s.blocks[ids].sum())
    if int((-(-(c + kmax) // s.bs)).sum()) - held <= s.free:
        return kmax
    q, m = np.divmod(c + s.bs - 1, s.bs)  # ceil((c + j) / bs) = q + (m + j) // bs
    j = np.arange(1, kmax + 1)
    total = int(q.sum()) + len(ids) * (j // s.bs) + (len(ids) - np.searchsorted(np.sort(m), s.bs - j % s.bs, "left"))
    return int(np.searchsorted(total - held, s.free, "right"))
