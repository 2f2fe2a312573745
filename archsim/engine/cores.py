"""One core's part of the event loop (archsim/engine/kernels.py): its state and what it does at
an event, in cycles and bytes.

The loop's state is kept in records (numpy structured arrays): one per sequence (SEQUENCE), one
per entry (ENTRY, the phase's work) and one per entry time slot (SLOT, `ring_slot`). Each step
below is inlined into the loop and takes the records it reads and changes: a record is a place
in its array, passed without the reference counting that an array argument costs at every call
(which made steps over arrays 2.5x slower). What a load asks of the memory system is
`issue_load`'s alone (archsim/hardware/memory.py has its formulas).
"""

from __future__ import annotations

import numpy as np

from archsim.engine.sharing import INF
from archsim.hardware.memory import load_latency, load_rate_cap
from archsim.jit import njit_inline

EPS = 1.0e-3  # cycles: events closer than this to a cycle boundary are on it
LOAD, STORE_HBM, STORE_L2 = 0, 1, 2  # flow kinds, the first index of the flow arrays

# A sequence: its entries (from `base`, `count` of them), the next entry whose load
# has not started, the entry whose data is flowing (-1 if none) and when its data may start
# flowing, the next entry to compute, until when the compute unit is busy and whether it is,
# busy and stall cycles (and of the stall, the cycles waited on a load's latency, on its HBM bytes
# and on its L2 bytes flowing: `start_compute`), its end and whether finished, the bytes left of
# its load and stores (kept here while it is taken up), and its loading entry's rate cap and HBM share.
SEQUENCE = np.dtype(
    [(name, np.int64) for name in ("base", "count", "next_load", "loading", "comp_next")]
    + [(name, np.float64) for name in ("ready_at", "busy_until", "busy", "stall", "end")]
    + [(name, np.float64) for name in ("stall_latency", "stall_hbm", "stall_l2")]
    + [(name, np.float64) for name in ("left_load", "left_hbm", "left_l2", "load_cap", "load_hbm_share")]
    + [("computing", np.bool_), ("finished", np.bool_)],
    align=True,
)
# An entry: bytes loaded from HBM and L2, stored to HBM and L2, loads one after another it
# stands for, compute cycles
ENTRY = np.dtype([(name, np.float64) for name in ("hbm", "l2", "store", "store_l2", "trips")] + [("cycles", np.int64)])
# An entry's times (`ring_slot`): when its compute ends, its load is done, its load was issued
# and its data started flowing, and the share of its load's bytes that came from HBM
SLOT = np.dtype([(name, np.float64) for name in ("comp_end", "load_done", "load_issue", "ready", "hbm_share")])


@njit_inline
def left_of(q, k):
    """Bytes left of flow kind k of sequence record q."""
    if k == LOAD:
        return q["left_load"]
    return q["left_hbm"] if k == STORE_HBM else q["left_l2"]


@njit_inline
def set_left(q, k, value):
    if k == LOAD:
        q["left_load"] = value
    elif k == STORE_HBM:
        q["left_hbm"] = value
    else:
        q["left_l2"] = value


@njit_inline
def finish_ended(q, last, loading, t):
    """What of sequence q ended at t: its load's data (done in its slot `loading`), its last
    compute (the entry `last`: its stores posted), the sequence itself once its stores drained.
    Returns 1 if it finished, else 0."""
    if q["loading"] >= 0 and q["ready_at"] <= t and q["left_load"] <= 0.0:
        loading["load_done"] = t
        q["loading"] = -1
    n = q["count"]
    if q["computing"] and q["busy_until"] <= t and q["comp_next"] == n:
        q["computing"] = False
        q["left_hbm"] += last["store"]
        q["left_l2"] += last["store_l2"]
    if q["comp_next"] == n and not q["computing"] and q["left_hbm"] <= 0.0 and q["left_l2"] <= 0.0:
        q["finished"] = True
        q["end"] = t
        return 1
    return 0


@njit_inline
def post_computed(q, posted, t):
    """The compute unit posts the stores of the entry it finished by t (`posted`)."""
    if q["computing"] and q["busy_until"] <= t:
        q["computing"] = False
        q["left_hbm"] += posted["store"]
        q["left_l2"] += posted["store_l2"]


@njit_inline
def issue_load(q, entry, freed, slot, p, t, hbm_util, stages):
    """A free DMA takes sequence q's next load (`entry`, its times `slot`) once its buffer is
    free (the entry `stages` before it computed: its times `freed`): its data starts flowing one
    access latency per trip after, at the HBM latency of `hbm_util` (the share of the HBM
    bandwidth in use), at most at the rate the memory system `p` allows one load. Returns
    whether a load of bytes was issued, and whether one of no bytes was (done at once)."""
    j = q["next_load"]
    if q["loading"] >= 0 or j >= q["count"]:
        return False, False
    slot_free = 0.0 if j < stages else freed["comp_end"]
    if not (j < stages or (q["comp_next"] > j - stages and freed["comp_end"] <= t)):
        return False, False
    slot["load_issue"] = max(t, slot_free)
    q["next_load"] = j + 1
    nbytes = entry["hbm"] + entry["l2"]
    if nbytes <= 0.0:
        slot["load_done"] = max(t, slot_free)
        slot["ready"] = slot["load_done"]
        slot["hbm_share"] = 0.0
        return False, True
    hf = entry["hbm"] / nbytes
    lat = load_latency(p, hf, hbm_util)
    q["loading"] = j
    q["ready_at"] = max(np.ceil(slot_free + entry["trips"] * lat - EPS), t)
    q["left_load"] = nbytes
    q["load_cap"] = load_rate_cap(p, entry["hbm"] / entry["trips"], hf, lat)
    q["load_hbm_share"] = hf
    slot["ready"] = q["ready_at"]
    slot["hbm_share"] = hf
    return True, False


@njit_inline
def start_compute(q, entry, here, prev, t, trace):
    """The compute unit takes sequence q's next entry (`entry`, its times `here`) once it is
    loaded; the wait since the last compute ended (that of the entry before, `prev`) is a memory
    stall. Of the wait [before, t], the part while the load's data had not started flowing since
    its issue ([load_issue, ready]) is latency, the part while it flowed ([ready, load_done]) is
    transfer, split between HBM and L2 by the share of its bytes from each; the rest (before the
    load was issued: the DMA busy with the loads before it) is neither (docs/MODEL.md, "Time by
    cause")."""
    j = q["comp_next"]
    if q["computing"] or j >= q["count"]:
        return
    if here["load_done"] <= t:
        before = prev["comp_end"] if j > 0 else 0.0
        q["stall"] += t - before
        if t > before:
            latency = max(0.0, min(t, here["ready"]) - max(before, here["load_issue"]))
            flowing = max(0.0, min(t, here["load_done"]) - max(before, here["ready"]))
            q["stall_latency"] += latency
            q["stall_hbm"] += flowing * here["hbm_share"]
            q["stall_l2"] += flowing - flowing * here["hbm_share"]
        here["comp_end"] = t + entry["cycles"]
        q["busy_until"] = here["comp_end"]
        q["busy"] += entry["cycles"]
        if not trace:
            here["load_done"] = INF  # the slot waits for the load `ring` entries on
        q["computing"] = True
        q["comp_next"] = j + 1


@njit_inline
def next_event(q, load_active):
    """Sequence q's next event other than a flow draining: its compute ends, or its loading
    entry's data may start flowing (INF if neither)."""
    nxt = INF
    if not q["finished"]:
        if q["computing"]:
            nxt = q["busy_until"]
        if q["loading"] >= 0 and not load_active:
            nxt = min(nxt, q["ready_at"])
    return nxt


@njit_inline
def ring_slot(s, base, j, ring, trace):
    """Where entry j of sequence s (entries from `base`) keeps its compute end and load done:
    its own place under a trace, else slot j mod `ring` of the sequence's ring (a power of two:
    the remainder is a mask, not a division)."""
    if trace:
        return base + j
    return s * ring + (j & (ring - 1))
