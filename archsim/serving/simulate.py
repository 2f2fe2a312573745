"""Serve a set of requests on one or more instances, co-located or disaggregated.

Co-located: `instances` identical replicas of the setup's layout (archsim/serving/setup.py),
requests dealt round-robin in arrival order. Under expert parallelism EP=e an instance is e
data-parallel ranks, each scheduling its own share of the requests with its own KV pool, the
routed experts spread over all (the ranks are taken as balanced and in step). Disaggregated
prefill and decode instances: archsim/serving/disaggregated.py. Requests that can never fit are
refused before the run (archsim/serving/admission.py). A session's turns are served by one
instance (or rank), sessions dealt round-robin in order of their starts; a session ends at its
first turn that can never fit (archsim/serving/sessions.py). Seconds.
"""

from __future__ import annotations

import numpy as np

from archsim.compiler.gemm_phases import plans_kept_within
from archsim.serving.admission import fitting, need_tokens, request_limits
from archsim.serving.disaggregated import serve_disaggregated
from archsim.serving.engine import simulate_instance
from archsim.serving.histogram import GapHistogram
from archsim.serving.metrics import RequestTimes
from archsim.serving.requests import RequestSet
from archsim.serving.result import InstanceRun, ServeResult
from archsim.serving.scheduler import Policy
from archsim.serving.session_metrics import session_record
from archsim.serving.setup import ServeSetup, ServeSetupError, instance_for, layout, pool_for

# GEMM plans kept while serving (gemm_phases.plans_kept_within): a step shape's ops are each chosen
# once and their costs kept, so no plan is asked for twice; 128 MiB of them took a third of the
# 100,000 generated requests' peak memory
SERVE_PLAN_BYTES = 16 << 20


def serve(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    """Simulate serving `reqs`; DoesNotFitError if the model leaves no room for a KV cache."""
    with plans_kept_within(SERVE_PLAN_BYTES):
        return _serve(reqs, setup)


def _serve(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    if reqs.sessions is not None and (setup.disaggregation is not None or setup.scheduler.policy is Policy.STATIC):
        raise ServeSetupError("sessions are served by continuous batching on co-located instances")
    if setup.disaggregation is not None:
        if setup.scheduler.policy is Policy.STATIC:
            raise ServeSetupError("static batching cannot be disaggregated")
        return serve_disaggregated(reqs, setup)
    return serve_colocated(reqs, setup)


def serve_colocated(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    """`setup.instances` replicas of the setup's layout (each EP rank a replica of its own)."""
    pool = pool_for(setup, setup.workload, setup.system)
    inst = instance_for(setup, setup.system, pool)
    limit, within = request_limits(reqs, setup)
    need = need_tokens(reqs, limit, setup.scheduler, pool)
    fits = within & (need <= pool.tokens)
    turns = reqs.sessions
    served = fitting(fits if turns is None else turns.chained(fits), need, pool)
    n, ranks = len(served), setup.instances * (layout(setup, setup.workload, setup.system).ep)
    arrival = reqs.arrival_s[served]
    deal = np.arange(n) if turns is None else turns.session[served]
    fs, ft, fin = (np.full(n, np.nan) for _ in range(3))
    pre = np.zeros(n, dtype=np.int64)
    runs, itl = [], GapHistogram()
    for i in range(ranks):
        mine = np.arange(i, n, ranks) if turns is None else np.flatnonzero(deal % ranks == i)
        if len(mine) == 0:
            continue
        r = simulate_instance(reqs.subset(served[mine]), inst, limit[served[mine]])
        fs[mine], ft[mine], fin[mine], pre[mine] = r.first_scheduled_s, r.first_token_s, r.finish_s, r.preemptions
        if r.arrival_s is not None:
            arrival[mine] = r.arrival_s
        runs.append(InstanceRun("colocated", i, setup.system.chip.name, pool, r))
        itl.merge(r.itl)
    times = RequestTimes(arrival, fs, ft, fin, reqs.prompt_tokens[served], reqs.output_tokens[served])
    prompts = int(reqs.prompt_tokens[served].sum())
    sessions = None if turns is None else session_record(turns.take(served), reqs.prefix_tokens[served])
    return ServeResult(times, served, len(reqs) - n, pre, itl, tuple(runs), None, prompts, sessions)
