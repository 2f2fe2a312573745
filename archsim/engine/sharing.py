"""Sharing HBM and L2 bandwidth between the event loop's flows (archsim/engine/kernels.py), in
bytes per cycle: max-min fairly by progressive filling, and the list of active flows the loop
keeps in flow order so that every sum over them adds the same numbers in the same order as a
sum over all flows would (the rates, and so every result, are the same bit for bit).

A flow is numbered kind x sequences + sequence: its place in the [kind, sequence] arrays ravelled.
"""

from __future__ import annotations

import numpy as np

from archsim.jit import njit

INF = 1.0e300


@njit
def _fair_share(rate, use_h, use_l, weight, active, hbm_cap, l2_cap):
    """Max-min fair rates by progressive filling: every active flow's rate rises together from
    zero until it reaches its own cap (`rate` on entry) or a pool it uses (HBM, L2) is full;
    flows so stopped keep their rate and the rest go on. A flow moves `use_h` bytes of HBM and
    `use_l` of L2 traffic per byte; `weight` counts the identical cores it stands for. When every
    flow's cap fits under both pools, the caps are the rates (filling would stop every flow at
    its cap first), and no filling is needed. Returns the HBM bytes per cycle the rates use."""
    n = rate.shape[0]
    demand_h = 0.0
    demand_l = 0.0
    for i in range(n):
        if active[i]:
            demand_h += weight[i] * rate[i] * use_h[i]
            demand_l += weight[i] * rate[i] * use_l[i]
        else:
            rate[i] = 0.0
    if demand_h <= hbm_cap and demand_l <= l2_cap:
        return demand_h
    cap = rate.copy()
    frozen = np.empty(n, np.bool_)
    for i in range(n):
        rate[i] = 0.0
        frozen[i] = not active[i]
    while True:
        delta = INF
        inc_h = 0.0
        inc_l = 0.0
        load_h = 0.0
        load_l = 0.0
        for i in range(n):
            if not active[i]:
                continue
            load_h += weight[i] * rate[i] * use_h[i]
            load_l += weight[i] * rate[i] * use_l[i]
            if not frozen[i]:
                delta = min(delta, cap[i] - rate[i])
                inc_h += weight[i] * use_h[i]
                inc_l += weight[i] * use_l[i]
        if delta >= INF:
            return load_h
        if inc_h > 0.0:
            delta = min(delta, max(0.0, hbm_cap - load_h) / inc_h)
        if inc_l > 0.0:
            delta = min(delta, max(0.0, l2_cap - load_l) / inc_l)
        load_h += delta * inc_h
        load_l += delta * inc_l
        full_h = load_h >= hbm_cap * (1.0 - 1e-12)
        full_l = load_l >= l2_cap * (1.0 - 1e-12)
        for i in range(n):
            if frozen[i]:
                continue
            rate[i] += delta
            if rate[i] >= cap[i] * (1.0 - 1e-12) or (full_h and use_h[i] > 0.0) or (full_l and use_l[i] > 0.0):
                frozen[i] = True


@njit
def insert_flow(flows, count, f):
    """Add flow `f` to the first `count` entries of `flows`, kept in increasing order; the new count."""
    i = count
    while i > 0 and flows[i - 1] > f:
        flows[i] = flows[i - 1]
        i -= 1
    flows[i] = f
    return count + 1


@njit
def remove_flow(flows, count, f):
    """Take flow `f` out of the first `count` entries of `flows` (in order); the new count."""
    i = 0
    while flows[i] != f:
        i += 1
    while i < count - 1:
        flows[i] = flows[i + 1]
        i += 1
    return count - 1


@njit
def share(rate, cap, use_h, use_l, weight, active, flows, count, hbm_cap, l2_cap):
    """Rates of the active flows (`flows[:count]`, in order): their caps when the caps fit under
    both pools, summed over the active flows as `_fair_share` sums them; else `_fair_share`
    over every flow. Arrays ravelled; returns the HBM bytes per cycle the rates use."""
    demand_h = 0.0
    demand_l = 0.0
    for i in range(count):
        f = flows[i]
        demand_h += weight[f] * cap[f] * use_h[f]
        demand_l += weight[f] * cap[f] * use_l[f]
    if demand_h <= hbm_cap and demand_l <= l2_cap:
        for i in range(count):
            rate[flows[i]] = cap[flows[i]]
        return demand_h
    rate[:] = cap
    return _fair_share(rate, use_h, use_l, weight, active, hbm_cap, l2_cap)
