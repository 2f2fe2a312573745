"""The event loop: cores working through tile entries, sharing L2 and HBM bandwidth as fluids.

Each simulated sequence stands for `weight` identical cores. Per core:
  * a DMA engine loads entries in order, each once an SRAM buffer is free (entry j may load
    when the compute of entry j - stages has finished); the data of a load starts flowing one
    access latency after it was issued and after the previous load's data (an entry that
    stands for `trips` loads one after another pays that many latencies, and each of its parts
    lands on the HBM channels of its own bytes);
  * the matrix/vector units compute entry j once its load is done and entry j - 1 is computed;
    time spent waiting for the load is a memory stall;
  * results are posted as writes into a store backlog that drains (to HBM or to L2) without
    blocking.
Each core thus has three flows, one of each kind (LOAD, STORE_HBM, STORE_L2), held in arrays
indexed [kind, sequence]. Every active flow is capped by the memory model
(archsim/hardware/memory.py: Little's law, the HBM channels a load touches), and HBM and L2 are
shared between flows max-min fairly (progressive filling). Between events all rates are
constant, so the timeline is exact for this fluid model. A load issued at an event sees the
HBM latency of the utilisation of the flows still moving then (the queueing delay of a loaded
controller): the rates the last event set, less those of the flows that drained at this event,
whose requests have left the queue. Event times are rounded up to whole cycles. Leaf kernels only: arrays, scalars and the MemoryParams record in, arrays out.

What a sequence does at an event is a few small steps inlined into the loop (`finish_ended`,
`post_computed`, `issue_load`, `start_compute`, `next_event`), each over the records of its
sequence (SEQUENCE), of the entries it reads (ENTRY) and of their times (SLOT): what a load asks
of the memory system is `issue_load`'s alone, and how the flows share it archsim/engine/sharing.py's.
"""

from __future__ import annotations

import numpy as np

from archsim.engine.cores import (
    ENTRY,
    EPS,
    LOAD,
    SEQUENCE,
    SLOT,
    STORE_HBM,
    STORE_L2,
    finish_ended,
    issue_load,
    left_of,
    next_event,
    post_computed,
    ring_slot,
    set_left,
    start_compute,
)
from archsim.engine.events import earliest, ends_from_rates, move_flows, tree_due, tree_set
from archsim.engine.sharing import INF, Shares, flow_place, insert_flow, remove_flow, share
from archsim.hardware.memory import MemoryParams, store_rate_cap
from archsim.jit import F64Array2D, I64Array, njit_entry
from archsim.stopping import POLL_EVERY, asked

MAX_TRACE_EVENTS = 8  # events recorded per entry when tracing (a phase has a few per entry)
FLOW_KINDS = 3
FEW_FLOWS = 8  # active flows the loop moves itself; more go to `move_flows`'s vector loop
HBM, L2, STORE, STORE_TO_L2, TRIPS = 0, 1, 2, 3, 4  # the rows of a phase's `entries`, one column per entry


@njit_entry
def simulate_phase(
    core_start: I64Array,
    weight: I64Array,
    entries: F64Array2D,
    cycles: I64Array,
    stages: int,
    p: MemoryParams,
    trace: bool,
    stop: I64Array,
):
    """Play one phase on the memory system `p` (a MemoryParams, in cycles and bytes): sequence s's
    entries from core_start[s] to core_start[s + 1], each standing for `weight[s]` cores; per
    entry its bytes loaded from HBM and L2, stored to HBM and L2 and the loads one after another
    it stands for (`entries`, one row each: HBM, L2, STORE, STORE_TO_L2, TRIPS) and its compute
    `cycles`; `stages` SRAM buffers per core.

    Returns per sequence (end cycle, busy cycles, stall cycles), the total cycles of the phase,
    and, when `trace`, per entry (load issue, load done, compute end) cycles and, at every event,
    its cycle and the HBM bytes per cycle all cores read and write from then on (else empty
    arrays; the event series stops growing at MAX_TRACE_EVENTS per entry); last, per sequence
    the stall cycles waited on a load's latency, its HBM bytes and its L2 bytes ([3, sequences]:
    `start_compute`; the rest of the stall waited for the load's issue).

    Where `stop[0]` is set (archsim/stopping.py, read once an event and every POLL_EVERY entries
    set up) it returns at once, with results of the events played so far, not to be used.
    """
    s_count = core_start.shape[0] - 1
    n_total = cycles.shape[0]
    n_trace = n_total if trace else 0
    ents = np.empty(n_total, ENTRY)
    for e in range(n_total):
        if e % POLL_EVERY == 0 and asked(stop):  # the loop below then plays no event
            break
        ent = ents[e]
        ent["hbm"], ent["l2"], ent["store"] = entries[HBM, e], entries[L2, e], entries[STORE, e]
        ent["store_l2"], ent["trips"], ent["cycles"] = entries[STORE_TO_L2, e], entries[TRIPS, e], cycles[e]
    # when each entry's compute ends and its load is done: a trace keeps every entry's; otherwise
    # only a ring per sequence of the `stages` + 1 entries a core can still read (those from
    # `stages` before its next compute up to its last load issued), `ring_slot` giving the place;
    # a ring of more places (the next power of two) only reuses each place later
    longest = 0
    for s in range(s_count):
        longest = max(longest, core_start[s + 1] - core_start[s])
    ring = 1
    while ring < min(stages, longest) + 1:  # a core never holds more entries than it has
        ring *= 2
    kept = n_total if trace else s_count * ring
    times = np.zeros(kept, SLOT)
    for i in range(kept):
        if i % POLL_EVERY == 0 and asked(stop):
            break
        times[i]["load_done"] = INF
    n_events = MAX_TRACE_EVENTS * n_trace + 2 if trace else 0
    ev_t = np.zeros(n_events)
    ev_read = np.zeros(n_events)
    ev_write = np.zeros(n_events)
    n_ev = 0
    seqs = np.zeros(s_count, SEQUENCE)
    # per flow [kind, sequence]: cap, rate, HBM and L2 pool use per byte, active (its bytes left
    # are its sequence's while it is taken up)
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
    for s in range(s_count):
        q = seqs[s]
        q["base"], q["count"], q["loading"] = core_start[s], core_start[s + 1] - core_start[s], -1
        if q["count"] == 0:
            q["finished"] = True
            done += 1
    # zero-time iterations each start or finish at least one entry's load, compute or store, so
    # more of them in a row than that means nothing can move: refuse rather than spin
    stuck, stuck_limit = 0, 4 * (core_start[s_count] + s_count) + 16
    # Per event, only the sequences that something happened to are taken up: every active flow
    # moves to the new time t (and may drain), and a sequence whose compute ended, whose load's
    # data may start flowing, one of whose flows drained, or that issued a load of no bytes at
    # the last event (a DMA takes one load per event), completes what ended, starts what can
    # start and sets its flows' activity. The others' state cannot change at t (each waits for
    # an event of its own), so the rest is as if every sequence were taken; the order they are
    # taken up in does not matter, as each changes only its own state and flows. `seq_next`
    # holds each sequence's next event other than a flow draining, as a min tree (`tree_set`,
    # `tree_due`: the earliest and the due ones found without a pass over all sequences);
    # `flows[:n_flows]` the active flows in flow order (kind x s_count + s), so the sums over
    # them are those over all flows. Flow numbers are kept unsigned (`flows`, `act_flow`, `stale`:
    # archsim/engine/sharing.py says why).
    rate_f, cap_f, use_h_f, use_l_f = rate.ravel(), cap.ravel(), use_h.ravel(), use_l.ravel()
    wflow_f = wflow.ravel()
    flows = np.zeros(FLOW_KINDS * s_count, np.uint64)
    n_flows = 0
    frozen = np.zeros(FLOW_KINDS * s_count, np.bool_)  # the fair share's scratch
    # the active flows in no order, as compact arrays that moving them to the next event runs
    # over: flow, bytes left, rate, end (t + left / rate, at the current t) and whether it
    # drained at the last move; `slot[f]` is flow f's place, -1 while inactive. A flow's bytes
    # are kept here while it is active (`left` has them when its sequence is taken up), its rate
    # in `rate` as well (the fair share's). The flows of the sequences taken up at an event
    # (`stale`, `n_stale` of them) are the only ones whose bytes or cap can change there; their
    # ends are worked out again once the rates are set
    slot = np.full(FLOW_KINDS * s_count, -1, np.int64)
    act_flow = np.zeros(FLOW_KINDS * s_count, np.uint64)
    act_seq = np.zeros(FLOW_KINDS * s_count, np.int64)  # the flow's sequence
    act_left = np.zeros(FLOW_KINDS * s_count)
    act_rate = np.zeros(FLOW_KINDS * s_count)
    act_end = np.zeros(FLOW_KINDS * s_count)
    act_drained = np.zeros(FLOW_KINDS * s_count, np.bool_)
    stale = np.zeros(FLOW_KINDS * s_count, np.uint64)
    n_stale = 0
    fair = True  # whether the rates were last set by fair sharing (else every rate is its cap)
    demand = np.zeros((5, FLOW_KINDS * s_count))  # the fair share's running sums (`share`)
    shares = Shares(rate_f, cap_f, use_h_f, use_l_f, wflow_f, flows, frozen, demand)
    dirty = 0  # the first place in `flows` whose flow or cap changed since the rates were set
    leaves = 1
    while leaves < s_count:
        leaves *= 2
    seq_next = np.full(2 * leaves, INF)  # a min tree over the sequences' next events (`tree_set`)
    stack = np.zeros(64, np.int64)  # `tree_due`'s scratch
    taken = np.zeros(s_count, np.bool_)
    again = np.zeros(s_count, np.int64)  # issued a load of no bytes: its next load may go at the next event
    n_again = 0
    todo = np.arange(s_count)  # the sequences to take up at this event, `n_todo` of them
    n_todo = s_count
    changed = True  # whether the active flows or their caps changed since the rates were set
    reshared = False  # whether the rates were set at this event and any may have changed
    while not asked(stop):
        n_again = 0
        n_stale = 0
        for i in range(n_todo):
            s = todo[i]
            taken[s] = False
            q = seqs[s]
            issued = False
            for k in range(FLOW_KINDS):
                at = slot[k * s_count + s]
                if at >= 0:
                    set_left(q, k, act_left[at])
            base, last_entry, last_slot = q["base"], max(q["base"] + q["count"] - 1, 0), kept - 1
            if not q["finished"]:
                loading = times[ring_slot(s, base, max(q["loading"], 0), ring, trace)]
                done += finish_ended(q, ents[last_entry], loading, t)
            if not q["finished"]:
                post_computed(q, ents[max(base + q["comp_next"] - 1, 0)], t)
                j = q["next_load"]
                freed = times[ring_slot(s, base, max(j - stages, 0), ring, trace)]
                here = times[min(ring_slot(s, base, j, ring, trace), last_slot)]
                issued, nothing = issue_load(q, ents[min(base + j, last_entry)], freed, here, p, t, hbm_util, stages)
                if issued:
                    cap[LOAD, s] = q["load_cap"]
                    use_h[LOAD, s] = q["load_hbm_share"]
                    use_l[LOAD, s] = 1.0 - q["load_hbm_share"]
                if nothing:  # one load a pass: the next one waits for the next event
                    again[n_again] = s
                    n_again += 1
                c = q["comp_next"]
                here = times[min(ring_slot(s, base, c, ring, trace), last_slot)]
                prev = times[ring_slot(s, base, max(c - 1, 0), ring, trace)]
                start_compute(q, ents[min(base + c, last_entry)], here, prev, t, trace)
            # which of its flows move from t on
            for k in range(FLOW_KINDS):
                now = (q["loading"] >= 0 and q["ready_at"] <= t) if k == LOAD else left_of(q, k) > 0.0
                f = k * s_count + s
                if now and not active[k, s]:
                    slot[f] = n_flows
                    act_flow[n_flows] = f
                    act_seq[n_flows] = s
                    place = flow_place(flows, n_flows, f)
                    dirty = min(dirty, place)
                    n_flows = insert_flow(flows, n_flows, place, f)
                    changed = True
                elif active[k, s] and not now:
                    place = flow_place(flows, n_flows, f)
                    dirty = min(dirty, place)
                    n_flows = remove_flow(flows, n_flows, place)
                    at = slot[f]
                    last = act_flow[n_flows]  # the last in place of the removed
                    act_flow[at] = last
                    act_seq[at] = act_seq[n_flows]
                    act_left[at] = act_left[n_flows]
                    act_rate[at] = act_rate[n_flows]
                    act_end[at] = act_end[n_flows]
                    slot[last] = at
                    slot[f] = -1
                    changed = True
                elif now and k == LOAD and issued:
                    dirty = min(dirty, flow_place(flows, n_flows, f))
                    changed = True  # a new load at a new cap
                active[k, s] = now
                if now:
                    act_left[slot[f]] = left_of(q, k)
                    stale[n_stale] = f
                    n_stale += 1
            tree_set(seq_next, leaves, s, next_event(q, active[LOAD, s]))
        if done >= s_count:
            break
        # rates of the active flows: each at its cap, then shared max-min fairly; the same flows
        # at the same caps as when the rates were set keep them
        if changed:
            hbm_load, fair_now = share(shares, n_flows, dirty, fair, p.hbm_bytes_per_cycle, p.l2_bytes_per_cycle)
            hbm_util = hbm_load / p.hbm_bytes_per_cycle
            changed = False
            dirty = n_flows
            reshared = fair or fair_now  # any rate may have changed: each flow's end again if its did (below)
            # else every rate is its cap, as it was, but for the stale flows' (below)
            fair = fair_now
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
        # next event: a compute ends, a load's data starts flowing, or a flow drains. The stale
        # flows' ends from their rates first; then, where rates were shared again, every other
        # flow's whose rate changed, the earliest end taken in the same pass (a least value is
        # the same in any order); where every flow's end is worked out again (many flows), the
        # stale ones' are among them, from the same numbers
        every = reshared and n_flows > FEW_FLOWS
        for i in range(0 if every else n_stale):
            at = slot[stale[i]]
            act_rate[at] = rate_f[stale[i]]
            act_end[at] = t + act_left[at] / act_rate[at]
        if every:
            ends_from_rates(act_flow, rate_f, act_rate, act_left, act_end, n_flows, t)
            first_end = earliest(act_end, n_flows)
            reshared = False
        elif reshared:
            first_end = INF
            for i in range(n_flows):
                r = rate_f[act_flow[i]]
                if r != act_rate[i]:
                    act_rate[i] = r
                    act_end[i] = t + act_left[i] / r
                first_end = min(first_end, act_end[i])
            reshared = False
        else:
            first_end = earliest(act_end, n_flows)
        t_next = min(seq_next[1], first_end)
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
        t = t_next
        # the flows move to t (each within EPS of its end, or past it in float time, ends), and
        # the sequences with an event at t are taken up
        n_todo = 0
        if n_flows <= FEW_FLOWS:  # moved here, without a call: the same operations, one by one
            drained = 0
            for i in range(n_flows):
                left_i = act_left[i] - act_rate[i] * dt
                act_left[i] = left_i
                gone = left_i <= act_rate[i] * EPS
                if not gone:
                    act_end[i] = t_next + left_i / act_rate[i]
                    gone = act_end[i] <= t_next
                act_drained[i] = gone
                drained += gone
        else:
            drained = move_flows(act_left, act_rate, act_end, act_drained, n_flows, dt, t_next)
        if drained:
            gone = 0.0  # HBM bytes per cycle of the flows that drained: their queue has emptied
            for i in range(n_flows):
                if act_drained[i]:
                    act_left[i] = 0.0
                    f = act_flow[i]
                    gone += wflow_f[f] * act_rate[i] * use_h_f[f]
                    s = act_seq[i]
                    if not taken[s]:
                        taken[s] = True
                        todo[n_todo] = s
                        n_todo += 1
            hbm_util = max(0.0, hbm_util - gone / p.hbm_bytes_per_cycle)
        n_todo = tree_due(seq_next, leaves, t, todo, n_todo, taken, stack)
        for i in range(n_again):
            s = again[i]
            if not taken[s]:
                taken[s] = True
                todo[n_todo] = s
                n_todo += 1
    end, busy, stall = np.empty(s_count), np.empty(s_count), np.empty(s_count)
    stall_by = np.empty((3, s_count))
    for s in range(s_count):
        end[s], busy[s], stall[s] = seqs[s]["end"], seqs[s]["busy"], seqs[s]["stall"]
        q = seqs[s]
        stall_by[0, s], stall_by[1, s], stall_by[2, s] = q["stall_latency"], q["stall_hbm"], q["stall_l2"]
    load_issue = np.empty(n_trace)
    if not trace:
        return end, busy, stall, t, load_issue, load_issue, load_issue, ev_t, ev_read, ev_write, stall_by
    load_done, comp_end = np.empty(n_trace), np.empty(n_trace)
    for e in range(n_trace):
        load_issue[e], load_done[e], comp_end[e] = times[e]["load_issue"], times[e]["load_done"], times[e]["comp_end"]
    return end, busy, stall, t, load_issue, load_done, comp_end, ev_t[:n_ev], ev_read[:n_ev], ev_write[:n_ev], stall_by
