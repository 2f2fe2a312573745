"""The fair share's shortcuts (archsim/engine/sharing.py) give the rates of the whole filling bit
for bit: its first round from the running sums `share` keeps between calls, each later round
from the first flow not yet stopped, and the flows' ends worked out again for every flow after a
share (archsim/engine/events.py). The reference below is the filling as it was written before
them: every round a pass over every active flow from zero, every sum from the first flow."""

import numpy as np
import pytest

from archsim.engine.events import ends_from_rates
from archsim.engine.sharing import INF, Shares, flow_place, insert_flow, remove_flow, share


def _filled(rate, cap, use_h, use_l, weight, flows, hbm_cap, l2_cap):
    """Progressive filling over `flows` (in order) with every sum taken from the first flow."""
    demand_h = demand_l = 0.0
    for f in flows:
        demand_h += weight[f] * cap[f] * use_h[f]
        demand_l += weight[f] * cap[f] * use_l[f]
    if demand_h <= hbm_cap and demand_l <= l2_cap:
        for f in flows:
            rate[f] = cap[f]
        return demand_h, False
    frozen = {}
    delta, inc_h, inc_l = INF, 0.0, 0.0
    for f in flows:
        rate[f] = 0.0
        frozen[f] = False
        delta = min(delta, cap[f])
        inc_h += weight[f] * use_h[f]
        inc_l += weight[f] * use_l[f]
    load_h = load_l = 0.0
    while True:
        if delta >= INF:
            return load_h, True
        if inc_h > 0.0:
            delta = min(delta, max(0.0, hbm_cap - load_h) / inc_h)
        if inc_l > 0.0:
            delta = min(delta, max(0.0, l2_cap - load_l) / inc_l)
        load_h += delta * inc_h
        load_l += delta * inc_l
        full_h = load_h >= hbm_cap * (1.0 - 1e-12)
        full_l = load_l >= l2_cap * (1.0 - 1e-12)
        step, delta, inc_h, inc_l, load_h, load_l = delta, INF, 0.0, 0.0, 0.0, 0.0
        for f in flows:
            if not frozen[f]:
                rate[f] += step
                if rate[f] >= cap[f] * (1.0 - 1e-12) or (full_h and use_h[f] > 0.0) or (full_l and use_l[f] > 0.0):
                    frozen[f] = True
            load_h += weight[f] * rate[f] * use_h[f]
            load_l += weight[f] * rate[f] * use_l[f]
            if not frozen[f]:
                delta = min(delta, cap[f] - rate[f])
                inc_h += weight[f] * use_h[f]
                inc_l += weight[f] * use_l[f]


def _shares(cap, use_h, use_l, weight):
    n = len(cap)
    return Shares(
        np.zeros(n), cap, use_h, use_l, weight, np.zeros(n, np.uint64), np.zeros(n, np.bool_), np.zeros((5, n))
    )


def test_a_later_round_starts_at_the_first_flow_not_stopped():
    """Flows B (L2, cap 5), A (HBM, cap 100), C (HBM, cap 100) and D (L2, cap 100) in that order,
    HBM 40 and L2 30 bytes per cycle. Round 1: every rate rises by min(5, 40 / 2, 30 / 2) = 5 and
    B stops at its cap (HBM load 10, L2 load 10); round 2 starts at A, from B's load: up by
    min(95, (40 - 10) / 2, (30 - 10) / 1) = 15, HBM full, A and C stop at 20; round 3 starts at
    D: up by (30 - 25) / 1 = 5 to 25, L2 full. HBM use 20 + 20 = 40."""
    sh = _shares(
        np.array([5.0, 100.0, 100.0, 100.0]), np.array([0.0, 1.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0, 1.0]), np.ones(4)
    )
    sh.flows[:] = np.arange(4)
    hbm, fair = share(sh, 4, 0, True, 40.0, 30.0)
    np.testing.assert_array_equal(sh.rate, [5.0, 20.0, 20.0, 25.0])
    assert (hbm, fair) == (40.0, True)


@pytest.mark.parametrize("seed", range(6))
def test_the_shortcuts_give_the_whole_fillings_rates_to_the_bit(seed):
    """Flows of random caps, pool shares and weights join, leave and change caps between calls
    (each call summing again only from the first changed place, as the event loop does); after
    each, every active flow's rate and the HBM use are the reference's, to the bit."""
    rng = np.random.default_rng(seed)
    n = 24
    cap = rng.uniform(1.0, 60.0, n)
    use_h = np.where(rng.random(n) < 0.3, 0.0, rng.random(n))
    use_l = 1.0 - use_h
    use_l[rng.random(n) < 0.2] = 0.0  # some flows of HBM alone
    weight = rng.integers(1, 4, n).astype(np.float64)
    sh = _shares(cap, use_h, use_l, weight)
    active = sorted(rng.choice(n, 12, replace=False).tolist())
    fair_before, dirty = True, 0
    for _ in range(40):
        sh.flows[: len(active)] = active
        hbm, fair = share(sh, len(active), dirty, fair_before, 300.0, 200.0)
        rate = np.full(n, np.nan)
        want_hbm, want_fair = _filled(rate, cap, use_h, use_l, weight, active, 300.0, 200.0)
        assert (hbm, fair) == (want_hbm, want_fair)
        np.testing.assert_array_equal(sh.rate[active], rate[active])
        fair_before = fair
        f = int(rng.integers(n))
        if f in active and len(active) > 2 and rng.random() < 0.5:
            dirty = active.index(f)
            active.remove(f)
        elif f not in active:
            active = sorted([*active, f])
            dirty = active.index(f)
        else:
            dirty = active.index(f)
            cap[f] = rng.uniform(1.0, 60.0)


def test_every_flows_end_again_after_a_share():
    """A flow's end is t + left / rate from its new rate: 10 + 30 / 3 = 20 and 10 + 8 / 4 = 12."""
    rate, end = np.zeros(2), np.zeros(2)
    ends_from_rates(np.array([2, 0]), np.array([4.0, 0.0, 3.0]), rate, np.array([30.0, 8.0]), end, 2, 10.0)
    np.testing.assert_array_equal(rate, [3.0, 4.0])
    np.testing.assert_array_equal(end, [20.0, 12.0])


def test_the_flow_list_stays_in_order_as_flows_join_and_leave():
    """The active flows [2, 5, 9] (unsigned, as the event loop keeps them): flow 7 goes at place
    2 (after 2 and 5) -> [2, 5, 7, 9]; flow 0 at place 0 -> [0, 2, 5, 7, 9]; taking out place 1
    (flow 2) -> [0, 5, 7, 9], then the last place (flow 9) -> [0, 5, 7]."""
    flows = np.zeros(6, np.uint64)
    flows[:3] = [2, 5, 9]
    count = insert_flow(flows, 3, flow_place(flows, 3, 7), 7)
    assert flows[:count].tolist() == [2, 5, 7, 9]
    count = insert_flow(flows, count, flow_place(flows, count, 0), 0)
    assert flows[:count].tolist() == [0, 2, 5, 7, 9]
    count = remove_flow(flows, count, flow_place(flows, count, 2))
    assert flows[:count].tolist() == [0, 5, 7, 9]
    count = remove_flow(flows, count, flow_place(flows, count, 9))
    assert flows[:count].tolist() == [0, 5, 7]
