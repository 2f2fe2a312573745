"""The serving loop of one instance: arrivals, scheduling, steps timed by the hardware model and
the host profile.

Each iteration ingests the requests that have arrived, asks the scheduler for the next step,
plays it (archsim/serving/stepping.py: the step model's GPU time, host-link transfers, a draft's
proposals, then the host profile) and advances the clock; requests that computed all their known
tokens emit one (or, verifying a speculation, the tokens accepted). Runs of decode-only steps
are advanced together: while the batch is all decodes, nobody arrives, nobody finishes and the
KV blocks last, step j differs from the first only by j more tokens of KV per request, so k
steps are timed at once (identical to stepping one by one). A trace of tens of thousands of
requests thus costs one iteration per event (an arrival, a finish, a prompt chunk), not one per
token, and the per-request work of a step is a kernel (archsim/serving/kernels.py). A session's
turn arrives when the turn before it has finished and its think time has passed: each finish is
an event that may schedule an arrival (archsim/serving/sessions.py).

Times are seconds from the first arrival; token counts are whole tokens.
"""

from __future__ import annotations

import math

import numpy as np

from archsim.serving.instance import Books, Instance, InstanceResult
from archsim.serving.prefix import BlockCache, HostTier
from archsim.serving.requests import RequestSet
from archsim.serving.scheduler import Plan, Policy, schedule
from archsim.serving.sessions import arrivals_for
from archsim.serving.state import InstanceState
from archsim.serving.stepping import run_decodes, run_static, run_step


def _state(
    reqs: RequestSet,
    inst: Instance,
    limit: np.ndarray,
    target: np.ndarray | None,
    computed0: np.ndarray | None,
    generated0: np.ndarray | None,
) -> InstanceState:
    n, cfg = len(reqs), inst.cfg
    cache = None
    if cfg.prefix_caching and cfg.policy.paged:
        cache = BlockCache(HostTier(inst.offload_blocks) if inst.offload_blocks else None)
    zeros = np.zeros(n, dtype=np.int64)
    return InstanceState(
        reqs.prompt_tokens,
        reqs.output_tokens if target is None else target,
        limit,
        zeros if computed0 is None else computed0,
        zeros if generated0 is None else generated0,
        reqs.prefix_id,
        reqs.prefix_tokens,
        pool_blocks=inst.pool_blocks,
        block_size=cfg.block_size,
        block_bytes=inst.block_bytes,
        cache=cache,
        swap_blocks=inst.swap_blocks,
    )


def simulate_instance(
    reqs: RequestSet,
    inst: Instance,
    limit: np.ndarray | None = None,
    target: np.ndarray | None = None,
    computed0: np.ndarray | None = None,
    generated0: np.ndarray | None = None,
    last_token0_s: np.ndarray | None = None,
    decode_runs: bool = True,
) -> InstanceResult:
    """Serve `reqs` (arriving at this instance) until each has generated `target` tokens (default:
    its output); `limit`: the most each may generate, what a reserving policy sets aside
    (default: its output). A request may arrive with `computed0` tokens of KV and `generated0`
    tokens already generated, the last at `last_token0_s` (a decode instance after a KV
    transfer). `decode_runs=False` steps decode-only runs one step at a time (same result)."""
    n, cfg = len(reqs), inst.cfg
    s = _state(reqs, inst, reqs.output_tokens if limit is None else limit, target, computed0, generated0)
    arrivals = arrivals_for(reqs.arrival_s, reqs.sessions)
    last0 = np.full(n, np.nan) if last_token0_s is None else last_token0_s.astype(np.float64).copy()
    books = Books(np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), last0)
    accept = reqs.acceptance_or(inst.spec.acceptance).tolist() if inst.spec is not None else []
    credit = [0.0] * n
    fast = decode_runs and inst.spec is None
    first = arrivals.next_s()
    t = first if first is not None else 0.0
    done = 0
    while done < n:
        arrivals.admit(t, s.waiting)
        if not s.running and not s.waiting and not s.swapped:
            nxt = arrivals.next_s()
            assert nxt is not None, "requests left that never arrive"
            books.sample(t, nxt, 0, 0, 0, s, done, 0.0)
            t = nxt
            continue
        if cfg.policy is Policy.STATIC:
            t, done, _ = run_static(s, inst, t, books, done)
            continue
        plan = schedule(s, cfg)
        if not len(plan.ids):
            if plan.preempted:
                continue
            raise RuntimeError("the scheduler formed an empty step with requests waiting")
        if plan.admitted:  # a few requests a step: one by one, not as arrays
            first_scheduled = books.first_scheduled
            for r in plan.ids[len(plan.ids) - plan.admitted :].tolist():
                if math.isnan(first_scheduled[r]):  # scheduled for the first time
                    first_scheduled[r] = t
        gpu0 = books.gpu_s
        if fast and _decodes_only(s, plan):
            k, end, fin = run_decodes(s, plan.ids, inst, t, arrivals.next_s(), books, plan.run_bounds)
            tokens = len(plan.ids)
        else:
            k = 1
            end, fin, tokens = run_step(s, plan, inst, t, books, accept, credit)
        if len(fin):
            books.finish[fin] = end
            done_ids = fin.tolist()
            for r in done_ids:
                s.release(r)
            if len(done_ids) == 1:
                s.running.remove(done_ids[0])
            else:
                gone = set(done_ids)
                s.running = [r for r in s.running if r not in gone]
            arrivals.finished(fin, end)
        books.sample(t, end, k, len(plan.ids), tokens, s, done, books.gpu_s - gpu0)
        done += len(fin)
        t = end
    return books.result(s, arrivals.sorted_s(), arrivals.arrival_s if reqs.sessions is not None else None)


def _decodes_only(s: InstanceState, plan: Plan) -> bool:
    """A step of every running request decoding, nobody joining, nothing moving to or from the
    host, and no waiting request the prefix cache might let in sooner."""
    if not plan.all_decodes or plan.admitted or s.step_transfer_bytes or len(plan.ids) != len(s.running):
        return False
    return not (s.grouped and s.waiting and any(s.group[r] >= 0 for r in s.waiting))
