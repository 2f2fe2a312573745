"""Sharing HBM and L2 bandwidth between the event loop's flows (archsim/engine/kernels.py), in
bytes per cycle: max-min fairly by progressive filling, and the list of active flows the loop
keeps in flow order so that every sum over them adds the same numbers in the same order as a
sum over all flows would (the rates, and so every result, are the same bit for bit).

A flow is numbered kind x sequences + sequence: its place in the [kind, sequence] arrays ravelled.
The lists of flow numbers are unsigned (uint64) and so are the places the shifts below index:
Numba tests every signed index for a negative one to wrap around, which kept these loops from
running as plain moves and loads (15% of the event loop's time on a phase of 132 sequences);
the numbers and every result are the same.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from archsim.jit import njit_inline

INF = 1.0e300

# The arrays the sharing reads and sets, one place per flow (ravelled): each flow's `rate` and
# `cap` in bytes per cycle, the HBM (`use_h`) and L2 (`use_l`) bytes it moves per byte, the
# identical cores it stands for (`weight`); `flows` the active ones in flow order (the first
# `count`); `frozen` the fair share's scratch, one place per flow; `demand` [5, flows] the HBM
# and L2 demand at the caps, use per unit of rate and least cap summed in flow order up to each
# place (kept between calls: `share`).
# The functions below read each array through the record where they index it (`sh.rate[f]`), not
# through a local name bound once: a name bound to an array holds a reference that Numba counts
# when it is bound and when it is dropped, at every call (about 7% of the event loop's time, the
# pair being apart across loops), while a field read and indexed at once takes a reference it
# drops in the same step, a pair the compiler's reference-count pruning removes
Shares = namedtuple("Shares", ["rate", "cap", "use_h", "use_l", "weight", "flows", "frozen", "demand"])


@njit_inline
def _fair_share(sh, count, hbm_cap, l2_cap):
    """Max-min fair rates of the active flows (`flows[:count]` of the Shares `sh`, in flow order)
    by progressive filling: every flow's rate rises together from zero until it reaches its own
    cap or a pool it uses (HBM, L2) is full; flows so stopped keep their rate and the rest go on.
    Returns the HBM bytes per cycle the rates use.

    Each round sums, in flow order, the pools' load at the rates so far and, over the flows not
    yet stopped, the least headroom to a cap and the pools' use per unit of rate; then raises
    those flows by the step the first limit allows and stops the ones that reached theirs. The
    sums of the next round are taken in the same pass as this round's raise (a flow's terms read
    only its own rate, set before them in the pass), and the first round's load is zero, every
    rate being zero, its headroom and use the running sums `share` keeps (`demand` rows 2-4): one
    pass a round, the same additions of the same numbers in the same order. A round's pass starts
    at the first flow not yet stopped, from the load summed up to it by the pass before: the
    flows before it are stopped, their rates and so their terms as they were."""
    delta = sh.demand[4, count - 1]
    inc_h = sh.demand[2, count - 1]
    inc_l = sh.demand[3, count - 1]
    load_h = 0.0
    load_l = 0.0
    first = 0  # the first place whose flow is not stopped, and the load summed before it
    start_h = 0.0
    start_l = 0.0
    rise = True  # the first round: every rate rises from zero, no flow is stopped
    while True:
        if delta >= INF:
            if rise:  # no cap and no pool use: every rate stays zero
                for i in range(count):
                    sh.rate[sh.flows[i]] = 0.0
                    sh.frozen[sh.flows[i]] = False
            return load_h
        if inc_h > 0.0:
            delta = min(delta, max(0.0, hbm_cap - load_h) / inc_h)
        if inc_l > 0.0:
            delta = min(delta, max(0.0, l2_cap - load_l) / inc_l)
        load_h += delta * inc_h
        load_l += delta * inc_l
        full_h = load_h >= hbm_cap * (1.0 - 1e-12)
        full_l = load_l >= l2_cap * (1.0 - 1e-12)
        step = delta
        delta = INF
        inc_h = 0.0
        inc_l = 0.0
        load_h = 0.0
        load_l = 0.0
        start = first
        first = count
        if rise:
            for i in range(count):
                f = sh.flows[i]
                r = 0.0 + step
                sh.rate[f] = r
                stop = (
                    r >= sh.cap[f] * (1.0 - 1e-12) or (full_h and sh.use_h[f] > 0.0) or (full_l and sh.use_l[f] > 0.0)
                )
                sh.frozen[f] = stop
                if not stop and first == count:  # the next pass starts here, from the sums so far
                    first = i
                    start_h = load_h
                    start_l = load_l
                load_h += sh.weight[f] * r * sh.use_h[f]
                load_l += sh.weight[f] * r * sh.use_l[f]
                if not stop:
                    delta = min(delta, sh.cap[f] - r)
                    inc_h += sh.weight[f] * sh.use_h[f]
                    inc_l += sh.weight[f] * sh.use_l[f]
            rise = False
            continue
        load_h = start_h
        load_l = start_l
        for i in range(start, count):
            f = sh.flows[i]
            if not sh.frozen[f]:
                sh.rate[f] += step
                if (
                    sh.rate[f] >= sh.cap[f] * (1.0 - 1e-12)
                    or (full_h and sh.use_h[f] > 0.0)
                    or (full_l and sh.use_l[f] > 0.0)
                ):
                    sh.frozen[f] = True
                elif first == count:
                    first = i
                    start_h = load_h
                    start_l = load_l
            load_h += sh.weight[f] * sh.rate[f] * sh.use_h[f]
            load_l += sh.weight[f] * sh.rate[f] * sh.use_l[f]
            if not sh.frozen[f]:
                delta = min(delta, sh.cap[f] - sh.rate[f])
                inc_h += sh.weight[f] * sh.use_h[f]
                inc_l += sh.weight[f] * sh.use_l[f]


@njit_inline
def insert_flow(flows, count, at, f):
    """Add flow `f` at place `at` (`flow_place`) of the first `count` entries of `flows`, kept in
    increasing order; the new count. (Places counted unsigned, from the top down.)"""
    top = np.uint64(count)
    for i in range(count - at):
        j = top - np.uint64(i)
        flows[j] = flows[j - np.uint64(1)]
    flows[at] = np.uint64(f)
    return count + 1


@njit_inline
def remove_flow(flows, count, at):
    """Take the flow at place `at` out of the first `count` entries of `flows` (in order); the new count."""
    for i in range(np.uint64(at), np.uint64(count - 1)):
        flows[i] = flows[i + np.uint64(1)]
    return count - 1


@njit_inline
def flow_place(flows, count, f):
    """Where flow `f` is, or would go, in the first `count` entries of `flows` (in order)."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        if flows[mid] < np.uint64(f):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit_inline
def share(sh, count, dirty, was_fair, hbm_cap, l2_cap):
    """Rates of the active flows (`flows[:count]` of the Shares `sh`, in order): their caps when
    the caps fit under both pools (filling would stop every flow at its cap first), else
    `_fair_share`; an inactive flow's rate is left as it was. Returns the HBM bytes per cycle
    the rates use, and whether they were shared fairly (else each is its cap).

    The pools' demand at the caps is summed in flow order, and so are the pools' use per unit of
    rate and the least cap (the first round of `_fair_share`); `demand` [5, flows] keeps these
    sums up to each place i from one call to the next (HBM and L2 demand in rows 0 and 1, use in
    rows 2 and 3, least cap in row 4), and only the places from `dirty` on (the first whose flow
    or cap changed since) are summed again: the same additions of the same numbers. The caps are
    set as the rates from `dirty` on, or all of them after rates were last shared fairly
    (`was_fair`)."""
    demand_h = sh.demand[0, dirty - 1] if dirty > 0 else 0.0
    demand_l = sh.demand[1, dirty - 1] if dirty > 0 else 0.0
    use_h = sh.demand[2, dirty - 1] if dirty > 0 else 0.0
    use_l = sh.demand[3, dirty - 1] if dirty > 0 else 0.0
    low = sh.demand[4, dirty - 1] if dirty > 0 else INF
    for i in range(dirty, count):
        f = sh.flows[i]
        demand_h += sh.weight[f] * sh.cap[f] * sh.use_h[f]
        demand_l += sh.weight[f] * sh.cap[f] * sh.use_l[f]
        use_h += sh.weight[f] * sh.use_h[f]
        use_l += sh.weight[f] * sh.use_l[f]
        low = min(low, sh.cap[f])
        sh.demand[0, i] = demand_h
        sh.demand[1, i] = demand_l
        sh.demand[2, i] = use_h
        sh.demand[3, i] = use_l
        sh.demand[4, i] = low
    if demand_h <= hbm_cap and demand_l <= l2_cap:
        for i in range(0 if was_fair else dirty, count):
            sh.rate[sh.flows[i]] = sh.cap[sh.flows[i]]
        return demand_h, False
    return _fair_share(sh, count, hbm_cap, l2_cap), True
