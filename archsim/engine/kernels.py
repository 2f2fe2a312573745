"""The event loop: cores working through tile entries, sharing L2 and HBM bandwidth as fluids.

Each simulated sequence stands for `weight` identical cores. Per core:
  * a DMA engine loads entries in order, each once an SRAM buffer is free (entry j may load
    when the compute of entry j - stages has finished); the data of a load starts flowing one
    access latency after it was issued and after the previous load's data;
  * the matrix/vector units compute entry j once its load is done and entry j - 1 is computed;
    time spent waiting for the load is a memory stall;
  * results are posted as writes into a store backlog that drains to HBM without blocking.
Bandwidth: every active flow (a load's data phase, a non-empty store backlog) is capped by
its core's Little's-law rate (bytes in flight / latency) and by the HBM channels its transfer
touches; HBM and L2 are shared between flows max-min fairly (progressive filling). Between events all
rates are constant, so the timeline is exact for this fluid model. Event times are rounded up to
whole cycles. Leaf kernels only: arrays and scalars in, arrays out.
"""

from __future__ import annotations

import numpy as np

from archsim.jit import njit

INF = 1.0e300
EPS = 1.0e-3  # cycles: events closer than this to a cycle boundary are on it


@njit
def _fair_share(rate, use_h, use_l, weight, active, hbm_cap, l2_cap):
    """Max-min fair rates by progressive filling: every active flow's rate rises together from
    zero until it reaches its own cap (`rate` on entry) or a pool it uses (HBM, L2) is full;
    flows so stopped keep their rate and the rest go on. A flow moves `use_h` bytes of HBM and
    `use_l` of L2 traffic per byte; `weight` counts the identical cores it stands for."""
    n = rate.shape[0]
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
            return
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
def simulate_phase(
    core_start,
    weight,
    hbm,
    l2,
    cycles,
    store,
    store_l2,
    stages,
    inflight,
    store_inflight,
    hbm_latency,
    l2_latency,
    hbm_bw,
    l2_bw,
    chan_bw,
    interleave,
    channels,
):
    """Play one phase. Bandwidths in bytes/cycle, latencies in cycles, inflight (loads) and
    store_inflight (posted writes) in bytes.

    Returns per sequence (end cycle, busy cycles, stall cycles), the total cycles of the
    phase, and per entry (load issue, load done, compute end) cycles for timelines.
    """
    s_count = core_start.shape[0] - 1
    n_total = hbm.shape[0]
    comp_end = np.zeros(n_total)
    load_done = np.full(n_total, INF)
    load_issue = np.zeros(n_total)
    next_load = np.zeros(s_count, np.int64)  # next entry whose load has not started
    loading = np.full(s_count, -1, np.int64)  # entry whose data is flowing, -1 if none
    ready_at = np.zeros(s_count)  # when the loading entry's data may start flowing
    load_left = np.zeros(s_count)  # bytes of the loading entry still to move
    load_hfrac = np.zeros(s_count)
    load_cap = np.zeros(s_count)
    comp_next = np.zeros(s_count, np.int64)  # next entry to compute
    comp_busy_until = np.zeros(s_count)
    computing = np.zeros(s_count, np.bool_)
    store_left = np.zeros(s_count)  # posted writes to HBM not yet drained
    store_l2_left = np.zeros(s_count)  # posted writes to L2 not yet drained
    busy = np.zeros(s_count)
    stall = np.zeros(s_count)
    end = np.zeros(s_count)
    wf = weight.astype(np.float64)
    store_cap = store_inflight / hbm_latency
    store_l2_cap = store_inflight / l2_latency
    # flows: s for loads, s_count + s for HBM store backlogs, 2 s_count + s for L2 store backlogs
    rate = np.zeros(3 * s_count)
    use_h = np.zeros(3 * s_count)
    use_l = np.zeros(3 * s_count)
    active = np.zeros(3 * s_count, np.bool_)
    wflow = np.concatenate((wf, wf, wf))
    t = 0.0
    done = 0
    finished = np.zeros(s_count, np.bool_)
    for s in range(s_count):
        if core_start[s + 1] == core_start[s]:
            finished[s] = True
            done += 1
    while done < s_count:
        # start whatever can start at time t
        for s in range(s_count):
            if finished[s]:
                continue
            base = core_start[s]
            n = core_start[s + 1] - base
            # the compute unit takes the next entry once it is loaded
            if computing[s] and comp_busy_until[s] <= t:
                computing[s] = False
                e = base + comp_next[s] - 1
                store_left[s] += store[e]
                store_l2_left[s] += store_l2[e]
            # a free DMA takes the next load once its buffer is free
            if loading[s] < 0 and next_load[s] < n:
                j = next_load[s]
                slot_free = 0.0 if j < stages else comp_end[base + j - stages]
                if j < stages or (comp_next[s] > j - stages and comp_end[base + j - stages] <= t):
                    e = base + j
                    load_issue[e] = max(t, slot_free)
                    nbytes = hbm[e] + l2[e]
                    if nbytes <= 0.0:
                        load_done[e] = max(t, slot_free)
                        next_load[s] += 1
                    else:
                        hf = hbm[e] / nbytes
                        lat = hf * hbm_latency + (1.0 - hf) * l2_latency
                        loading[s] = j
                        ready_at[s] = max(np.ceil(slot_free + lat - EPS), t)
                        load_left[s] = nbytes
                        load_hfrac[s] = hf
                        cap = inflight / lat
                        if hbm[e] > 0.0:
                            touched = min(channels, np.ceil(hbm[e] / interleave))
                            cap = min(cap, touched * chan_bw / hf)
                        load_cap[s] = cap
                        next_load[s] += 1
            if not computing[s] and comp_next[s] < n:
                e = base + comp_next[s]
                if load_done[e] <= t:
                    prev = comp_end[e - 1] if comp_next[s] > 0 else 0.0
                    start = t
                    stall[s] += start - prev
                    comp_end[e] = start + cycles[e]
                    comp_busy_until[s] = comp_end[e]
                    busy[s] += cycles[e]
                    computing[s] = True
                    comp_next[s] += 1
        # rates of the active flows
        for s in range(s_count):
            f = s_count + s
            active[s] = loading[s] >= 0 and ready_at[s] <= t
            rate[s] = load_cap[s]
            use_h[s] = load_hfrac[s]
            use_l[s] = 1.0 - load_hfrac[s]
            active[f] = store_left[s] > 0.0
            rate[f] = store_cap
            use_h[f] = 1.0
            use_l[f] = 0.0
            g = 2 * s_count + s
            active[g] = store_l2_left[s] > 0.0
            rate[g] = store_l2_cap
            use_h[g] = 0.0
            use_l[g] = 1.0
        _fair_share(rate, use_h, use_l, wflow, active, hbm_bw, l2_bw)
        # next event
        t_next = INF
        for s in range(s_count):
            if finished[s]:
                continue
            if computing[s]:
                t_next = min(t_next, comp_busy_until[s])
            if loading[s] >= 0:
                if active[s]:
                    t_next = min(t_next, t + load_left[s] / rate[s])
                else:
                    t_next = min(t_next, ready_at[s])
            f = s_count + s
            if active[f]:
                t_next = min(t_next, t + store_left[s] / rate[f])
            g = 2 * s_count + s
            if active[g]:
                t_next = min(t_next, t + store_l2_left[s] / rate[g])
        if t_next >= INF:
            # nothing in flight: every remaining core is waiting on a zero-time transition
            t_next = t
        # whole cycles; an event within EPS of a cycle boundary lands on it, and flows still move
        # the (sub-EPS) distance to their exact completion so that no flow is left a hair short
        t_exact = t_next
        t_next = max(t, np.ceil(t_next - EPS))
        dt = max(t_next, t_exact) - t
        for s in range(s_count):
            # a flow within EPS cycles of its end is done, as is one whose end float time cannot
            # tell from now (at very large cycle counts)
            if active[s]:
                load_left[s] -= rate[s] * dt
                if load_left[s] <= rate[s] * EPS or t_next + load_left[s] / rate[s] <= t_next:
                    load_left[s] = 0.0
            f = s_count + s
            if active[f]:
                store_left[s] -= rate[f] * dt
                if store_left[s] <= rate[f] * EPS or t_next + store_left[s] / rate[f] <= t_next:
                    store_left[s] = 0.0
            g = 2 * s_count + s
            if active[g]:
                store_l2_left[s] -= rate[g] * dt
                if store_l2_left[s] <= rate[g] * EPS or t_next + store_l2_left[s] / rate[g] <= t_next:
                    store_l2_left[s] = 0.0
        t = t_next
        for s in range(s_count):
            if finished[s]:
                continue
            base = core_start[s]
            n = core_start[s + 1] - base
            if loading[s] >= 0 and ready_at[s] <= t and load_left[s] <= 0.0:
                load_done[base + loading[s]] = t
                loading[s] = -1
            if computing[s] and comp_busy_until[s] <= t and comp_next[s] == n:
                computing[s] = False
                store_left[s] += store[base + n - 1]
                store_l2_left[s] += store_l2[base + n - 1]
            if comp_next[s] == n and not computing[s] and store_left[s] <= 0.0 and store_l2_left[s] <= 0.0:
                finished[s] = True
                end[s] = t
                done += 1
    return end, busy, stall, t, load_issue, load_done, comp_end
