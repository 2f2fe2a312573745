"""Disaggregated serving (DistServe, Splitwise): prefill instances compute the prompt and the
first token, then the request's KV cache (prompt tokens x KV bytes per token) crosses a link to a
decode instance, which decodes the rest. The transfer takes link latency + bytes / bandwidth, the
bandwidth being all links of a chip in one direction (the lesser of the two chips'), each chip
sending its share of the KV; transfers from one prefill instance queue on its link. Requests are
dealt round-robin on both sides. Seconds.
"""

from __future__ import annotations

import numpy as np

from archsim.graph.model import Workload
from archsim.hardware import System
from archsim.hardware.collectives import Collective, collective_time, system_fabric
from archsim.serving.admission import fitting, need_tokens, request_limits
from archsim.serving.engine import simulate_instance
from archsim.serving.histogram import GapHistogram
from archsim.serving.metrics import RequestTimes
from archsim.serving.requests import RequestSet
from archsim.serving.result import InstanceRun, ServeResult
from archsim.serving.setup import LinkMissingError, ServeSetup, instance_for, pool_for


def kv_transfer_s(w: Workload, sender: System, receiver: System, prompt_tokens: np.ndarray) -> np.ndarray:
    """Time to send each request's KV cache (prompt tokens x KV bytes per token) from a prefill to
    a decode instance: a point-to-point send in the collectives model (archsim.hardware.collectives),
    each chip sending its share, at the pace of the slower side's links."""
    for s in (sender, receiver):
        if s.interconnect is None:
            raise LinkMissingError(
                f"{s.chip.name} has no interconnect section: disaggregated serving needs one to send the KV cache"
            )
    per_chip = prompt_tokens * w.model.kv_bytes_per_token(w.dtypes.kv_cache) / min(sender.chips, receiver.chips)

    fabrics = [system_fabric(s) for s in (sender, receiver)]

    def send_s(nbytes: float) -> float:
        return max(collective_time(f, Collective.SEND, 2, nbytes).time_s for f in fabrics)

    sizes, inverse = np.unique(per_chip, return_inverse=True)
    return np.array([send_s(float(b)) for b in sizes])[inverse]


def serve_disaggregated(reqs: RequestSet, setup: ServeSetup) -> ServeResult:
    d, w = setup.disaggregation, setup.workload
    assert d is not None
    p_pool, d_pool = pool_for(setup, w, d.prefill_system), pool_for(setup, w, d.decode_system)
    p_inst, d_inst = instance_for(setup, d.prefill_system, p_pool), instance_for(setup, d.decode_system, d_pool)
    limit, within = request_limits(reqs, setup)
    need = need_tokens(reqs, limit, setup.scheduler, d_pool)
    served = fitting(
        within & (reqs.prompt_tokens <= p_pool.tokens) & (need <= d_pool.tokens),
        need,
        min(p_pool, d_pool, key=lambda p: p.tokens),
    )
    sub, limit = reqs.subset(served), limit[served]
    n = len(served)
    fs, ft, fin = (np.full(n, np.nan) for _ in range(3))
    pre = np.zeros(n, dtype=np.int64)
    transfer = np.full((n, 2), np.nan)
    duration = kv_transfer_s(w, d.prefill_system, d.decode_system, sub.prompt_tokens)
    runs, itl = [], GapHistogram()
    for i in range(d.prefill_instances):
        mine = np.arange(i, n, d.prefill_instances)
        if len(mine) == 0:
            continue
        one = np.ones(len(mine), dtype=np.int64)
        r = simulate_instance(sub.subset(mine), p_inst, one, target=one)
        fs[mine], ft[mine], pre[mine] = r.first_scheduled_s, r.first_token_s, r.preemptions
        runs.append(InstanceRun("prefill", i, d.prefill_system.chip.name, p_pool, r))
        link_free = -np.inf
        for j in np.argsort(ft[mine], kind="stable").tolist():  # one link per prefill instance, FIFO
            q = mine[j]
            start = max(ft[q], link_free)
            transfer[q] = (start, start + duration[q])
            link_free = start + duration[q]
    single = sub.output_tokens == 1
    fin[single] = ft[single]
    decoding = np.flatnonzero(~single)
    decoding = decoding[np.argsort(transfer[decoding, 1], kind="stable")]
    for i in range(d.decode_instances):
        mine = decoding[i :: d.decode_instances]
        if len(mine) == 0:
            continue
        arrived = RequestSet(
            transfer[mine, 1], sub.prompt_tokens[mine], sub.output_tokens[mine], sub.source, sub.subset(mine).fields
        )
        r = simulate_instance(
            arrived,
            d_inst,
            limit[mine],
            computed0=sub.prompt_tokens[mine],
            generated0=np.ones(len(mine), dtype=np.int64),
            last_token0_s=ft[mine],
        )
        fin[mine] = r.finish_s
        pre[mine] += r.preemptions
        runs.append(InstanceRun("decode", i, d.decode_system.chip.name, d_pool, r))
        itl.merge(r.itl)
    times = RequestTimes(sub.arrival_s, fs, ft, fin, sub.prompt_tokens, sub.output_tokens)
    prompts = int(sub.prompt_tokens.sum())
    return ServeResult(times, served, len(reqs) - n, pre, itl, tuple(runs), transfer, prompts)
