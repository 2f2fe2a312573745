"""The event loop as it was before it took up only the sequences an event changes: every
sequence is scanned at every event, and every entry keeps its times (tests/test_speed_engine.py
plays programs through both and requires the same numbers). Kept verbatim but for this text, with
the fair share it called then (over every flow; archsim/engine/sharing.py now fills only the
active ones).

The event loop: cores working through tile entries, sharing L2 and HBM bandwidth as fluids.

Each simulated sequence stands for `weight` identical cores. Per core:
  * a DMA engine loads entries in order, each once an SRAM buffer is free (entry j may load
    when the compute of entry j - stages has finished); the data of a load starts flowing one
    access latency after it was issued and after the previous load's data;
  * the matrix/vector units compute entry j once its load is done and entry j - 1 is computed;
    time spent waiting for the load is a memory stall;
  * results are posted as writes into a store backlog that drains (to HBM or to L2) without
    blocking.
Each core thus has three flows, one of each kind (LOAD, STORE_HBM, STORE_L2), held in arrays
indexed [kind, sequence]. Every active flow is capped by the memory model
(archsim/hardware/memory.py: Little's law, the HBM channels a load touches), and HBM and L2 are
shared between flows max-min fairly (progressive filling). Between events all rates are
constant, so the timeline is exact for this fluid model. A load issued at an event sees the
HBM latency of the utilisation the rates of the last event set (the queueing delay of a loaded
controller). Event times are rounded up to whole cycles. Leaf kernels only: arrays, scalars and the MemoryParams record in, arrays out.
"""

from __future__ import annotations

import numpy as np

from archsim.engine.sharing import INF
from archsim.hardware.memory import load_latency, load_rate_cap, store_rate_cap
from archsim.jit import njit

EPS = 1.0e-3  # cycles: events closer than this to a cycle boundary are on it
LOAD, STORE_HBM, STORE_L2 = 0, 1, 2  # flow kinds, the first index of the flow arrays
MAX_TRACE_EVENTS = 8  # events recorded per entry when tracing (a phase has a few per entry)
FLOW_KINDS = 3


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
def _drained(left, rate, t_next):
    """Whether a flow with `left` bytes at `rate` is done at `t_next`: within EPS cycles of its
    end, or so close that its end cannot be told from now in float time (at huge cycle counts)."""
    return left <= rate * EPS or t_next + left / rate <= t_next


@njit
def simulate_phase(core_start, weight, hbm, l2, cycles, store, store_l2, stages, p, trace):
    """Play one phase on the memory system `p` (a MemoryParams, in cycles and bytes).

    Returns per sequence (end cycle, busy cycles, stall cycles), the total cycles of the phase,
    and, when `trace`, per entry (load issue, load done, compute end) cycles and, at every event,
    its cycle and the HBM bytes per cycle all cores read and write from then on (else empty
    arrays; the event series stops growing at MAX_TRACE_EVENTS per entry).
    """
    s_count = core_start.shape[0] - 1
    n_total = hbm.shape[0]
    n_trace = n_total if trace else 0
    comp_end = np.zeros(n_total)
    load_done = np.full(n_total, INF)
    load_issue = np.zeros(n_trace)
    n_events = MAX_TRACE_EVENTS * n_trace + 2 if trace else 0
    ev_t = np.zeros(n_events)
    ev_read = np.zeros(n_events)
    ev_write = np.zeros(n_events)
    n_ev = 0
    next_load = np.zeros(s_count, np.int64)  # next entry whose load has not started
    loading = np.full(s_count, -1, np.int64)  # entry whose data is flowing, -1 if none
    ready_at = np.zeros(s_count)  # when the loading entry's data may start flowing
    load_hfrac = np.zeros(s_count)
    comp_next = np.zeros(s_count, np.int64)  # next entry to compute
    comp_busy_until = np.zeros(s_count)
    computing = np.zeros(s_count, np.bool_)
    busy = np.zeros(s_count)
    stall = np.zeros(s_count)
    end = np.zeros(s_count)
    # per flow [kind, sequence]: bytes left, cap, rate, HBM and L2 pool use per byte, active
    left = np.zeros((FLOW_KINDS, s_count))
    cap = np.zeros((FLOW_KINDS, s_count))
    rate = np.zeros((FLOW_KINDS, s_count))
    use_h = np.zeros((FLOW_KINDS, s_count))
    use_l = np.zeros((FLOW_KINDS, s_count))
    active = np.zeros((FLOW_KINDS, s_count), np.bool_)
    wflow = np.empty((FLOW_KINDS, s_count))
    for k in range(FLOW_KINDS):
        wflow[k] = weight.astype(np.float64)
    cap[STORE_HBM, :] = store_rate_cap(p, True)
    cap[STORE_L2, :] = store_rate_cap(p, False)
    use_h[STORE_HBM, :] = 1.0
    use_l[STORE_L2, :] = 1.0
    t = 0.0
    hbm_util = 0.0  # share of the HBM bandwidth the flows use between the last event and the next
    done = 0
    finished = np.zeros(s_count, np.bool_)
    for s in range(s_count):
        if core_start[s + 1] == core_start[s]:
            finished[s] = True
            done += 1
    # zero-time iterations each start or finish at least one entry's load, compute or store, so
    # more of them in a row than that means nothing can move: refuse rather than spin
    stuck, stuck_limit = 0, 4 * (core_start[s_count] + s_count) + 16
    while done < s_count:
        # start whatever can start at time t
        for s in range(s_count):
            if finished[s]:
                continue
            base = core_start[s]
            n = core_start[s + 1] - base
            # the compute unit posts the entry it finished and takes the next once it is loaded
            if computing[s] and comp_busy_until[s] <= t:
                computing[s] = False
                e = base + comp_next[s] - 1
                left[STORE_HBM, s] += store[e]
                left[STORE_L2, s] += store_l2[e]
            # a free DMA takes the next load once its buffer is free
            if loading[s] < 0 and next_load[s] < n:
                j = next_load[s]
                slot_free = 0.0 if j < stages else comp_end[base + j - stages]
                if j < stages or (comp_next[s] > j - stages and comp_end[base + j - stages] <= t):
                    e = base + j
                    if trace:
                        load_issue[e] = max(t, slot_free)
                    nbytes = hbm[e] + l2[e]
                    if nbytes <= 0.0:
                        load_done[e] = max(t, slot_free)
                    else:
                        hf = hbm[e] / nbytes
                        lat = load_latency(p, hf, hbm_util)
                        loading[s] = j
                        ready_at[s] = max(np.ceil(slot_free + lat - EPS), t)
                        left[LOAD, s] = nbytes
                        load_hfrac[s] = hf
                        cap[LOAD, s] = load_rate_cap(p, hbm[e], hf, lat)
                        use_h[LOAD, s] = hf
                        use_l[LOAD, s] = 1.0 - hf
                    next_load[s] += 1
            if not computing[s] and comp_next[s] < n:
                e = base + comp_next[s]
                if load_done[e] <= t:
                    prev = comp_end[e - 1] if comp_next[s] > 0 else 0.0
                    stall[s] += t - prev
                    comp_end[e] = t + cycles[e]
                    comp_busy_until[s] = comp_end[e]
                    busy[s] += cycles[e]
                    computing[s] = True
                    comp_next[s] += 1
        # rates of the active flows: each at its cap, then shared max-min fairly
        for s in range(s_count):
            active[LOAD, s] = loading[s] >= 0 and ready_at[s] <= t
            active[STORE_HBM, s] = left[STORE_HBM, s] > 0.0
            active[STORE_L2, s] = left[STORE_L2, s] > 0.0
        rate[:, :] = cap
        hbm_load = _fair_share(
            rate.ravel(),
            use_h.ravel(),
            use_l.ravel(),
            wflow.ravel(),
            active.ravel(),
            p.hbm_bytes_per_cycle,
            p.l2_bytes_per_cycle,
        )
        hbm_util = hbm_load / p.hbm_bytes_per_cycle
        if trace and n_ev < n_events:
            read = 0.0
            write = 0.0
            for s in range(s_count):
                if active[LOAD, s]:
                    read += wflow[LOAD, s] * rate[LOAD, s] * use_h[LOAD, s]
                if active[STORE_HBM, s]:
                    write += wflow[STORE_HBM, s] * rate[STORE_HBM, s]
            ev_t[n_ev] = t
            ev_read[n_ev] = read
            ev_write[n_ev] = write
            n_ev += 1
        # next event: a compute ends, a load's data starts flowing, or a flow drains
        t_next = INF
        for s in range(s_count):
            if finished[s]:
                continue
            if computing[s]:
                t_next = min(t_next, comp_busy_until[s])
            if loading[s] >= 0 and not active[LOAD, s]:
                t_next = min(t_next, ready_at[s])
            for k in range(FLOW_KINDS):
                if active[k, s]:
                    t_next = min(t_next, t + left[k, s] / rate[k, s])
        if t_next >= INF:
            # nothing in flight: every remaining core is waiting on a zero-time transition
            t_next = t
        # whole cycles; an event within EPS of a cycle boundary lands on it, and flows still move
        # the (sub-EPS) distance to their exact completion so that no flow is left a hair short
        t_exact = t_next
        t_next = max(t, np.ceil(t_next - EPS))
        stuck = stuck + 1 if t_exact <= t else 0
        if stuck > stuck_limit:
            raise ValueError("the event loop made no progress: no load, compute or transfer can proceed")
        dt = max(t_next, t_exact) - t
        for k in range(FLOW_KINDS):
            for s in range(s_count):
                if active[k, s]:
                    left[k, s] -= rate[k, s] * dt
                    if _drained(left[k, s], rate[k, s], t_next):
                        left[k, s] = 0.0
        t = t_next
        for s in range(s_count):
            if finished[s]:
                continue
            base = core_start[s]
            n = core_start[s + 1] - base
            if loading[s] >= 0 and ready_at[s] <= t and left[LOAD, s] <= 0.0:
                load_done[base + loading[s]] = t
                loading[s] = -1
            if computing[s] and comp_busy_until[s] <= t and comp_next[s] == n:
                computing[s] = False
                left[STORE_HBM, s] += store[base + n - 1]
                left[STORE_L2, s] += store_l2[base + n - 1]
            if comp_next[s] == n and not computing[s] and left[STORE_HBM, s] <= 0.0 and left[STORE_L2, s] <= 0.0:
                finished[s] = True
                end[s] = t
                done += 1
    if not trace:
        return end, busy, stall, t, load_issue, load_issue, load_issue, ev_t, ev_read, ev_write
    return end, busy, stall, t, load_issue, load_done, comp_end, ev_t[:n_ev], ev_read[:n_ev], ev_write[:n_ev]
