"""The event loop on programs small enough to time by hand; JIT parity."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from archsim.compiler.program import build_phase
from archsim.engine.simulate import play_phase
from archsim.program import entries


def _chip(h200, **hbm):
    chip = h200.chip
    return replace(chip, hbm=replace(chip.hbm, **hbm)) if hbm else chip


def test_one_entry_latency_transfer_compute(h200):
    """One core, one entry: latency, then bytes at the core's Little's-law rate, then compute."""
    chip = h200.chip
    clock = chip.clock_hz
    nbytes = 64 * 1024
    phase = build_phase([entries(1, hbm_bytes=nbytes, cycles=1000)], stages=2)
    r = play_phase(phase, chip)
    busy, stall, total = r.busy_cycles, r.stall_cycles, r.total_cycles
    lat = np.ceil((chip.hbm.latency_s + chip.noc.hops * chip.noc.hop_latency_s) * clock)
    exact_lat = (chip.hbm.latency_s + chip.noc.hops * chip.noc.hop_latency_s) * clock
    rate = chip.core.max_inflight_bytes / exact_lat  # bytes per cycle
    expected = lat + np.ceil(nbytes / rate) + 1000
    assert total == pytest.approx(expected, abs=2)
    assert busy[0] == 1000 and stall[0] == pytest.approx(expected - 1000, abs=2)


def test_a_deadlocked_phase_is_an_error_not_a_hang(h200):
    """A phase no state can leave (no SRAM buffer at all, stages = 0: the first load waits for a
    buffer that only a computed entry frees) would keep time at 0 forever; the loop's guard
    refuses after a bounded number of zero-time iterations, and play_phase names the phase and
    the chip."""
    chip = h200.chip
    phase = replace(build_phase([entries(2, hbm_bytes=4096, cycles=10)], stages=2), stages=0, label="stuck")
    with pytest.raises(RuntimeError, match="stuck on NVIDIA H200 SXM: the event loop made no progress"):
        play_phase(phase, chip)


def test_double_buffering_hides_loads_behind_compute(h200):
    """Compute-heavy entries: after the first load, every load overlaps the previous compute."""
    seq = entries(5, hbm_bytes=4096, cycles=100_000)
    r = play_phase(build_phase([seq], stages=2), h200.chip)
    busy, stall = r.busy_cycles, r.stall_cycles
    assert busy[0] == 500_000
    chip = h200.chip
    lat = (chip.hbm.latency_s + chip.noc.hops * chip.noc.hop_latency_s) * chip.clock_hz
    first_load = lat + 4096 / (chip.core.max_inflight_bytes / lat)
    assert stall[0] == pytest.approx(first_load, abs=2)  # only the first load is exposed
    serial = play_phase(build_phase([seq], stages=1), h200.chip)
    assert serial.stall_cycles[0] > 4 * stall[0]  # one buffer: every load is exposed


def test_weighted_sequences_share_hbm(h200):
    """132 cores streaming 1 MiB each are limited by HBM, not by their own rates."""
    chip = h200.chip
    phase = build_phase([entries(1, hbm_bytes=1 << 20)] * 132, stages=2)
    assert phase.core_weight.tolist() == [132]
    total = play_phase(phase, chip).total_cycles
    from archsim.hardware.memory import hbm_bandwidth

    floor = 132 * (1 << 20) / hbm_bandwidth(chip, 0.0) * chip.clock_hz
    assert floor < total < floor * 1.1


def test_more_bandwidth_never_slower(h200):
    seq = entries(8, hbm_bytes=300_000, l2_bytes=100_000, cycles=5_000, store_bytes=50_000)
    phase = build_phase([seq] * 100 + [seq[:3]] * 20, stages=3)
    slow = play_phase(phase, _chip(h200)).total_cycles
    fast = play_phase(phase, _chip(h200, data_rate_bits_per_s=h200.chip.hbm.data_rate_bits_per_s * 2)).total_cycles
    assert fast <= slow


JIT_SCRIPT = """
import json
from archsim.config.loader import load_system
from archsim.choose import simulate_op
from archsim.graph.ops import Op, OpKind, Scaling
chip = load_system('h200')[0].chip
ops = [Op(OpKind.GEMM, m=64, k=4096, n=6144, scaling=Scaling.FIXED), Op(OpKind.ATTENTION, batch=2, heads=32,
       kv_heads=8, head_dim=128, q_len=1, kv_len=1000, scaling=Scaling.FIXED)]
print(json.dumps([simulate_op(o, chip).cycles for o in ops]))
"""


def test_jit_and_python_give_identical_cycles():
    env = dict(os.environ)
    outs = []
    for flag in ("0", "1"):
        env["NUMBA_DISABLE_JIT"] = flag
        res = subprocess.run([sys.executable, "-c", JIT_SCRIPT], env=env, capture_output=True, text=True, check=True)
        outs.append(json.loads(res.stdout))
    assert outs[0] == outs[1]


def test_fair_share_by_progressive_filling():
    """Flows A (cap 10, HBM), B (cap 100, HBM, weight w_b) and C (cap 100, L2) on an HBM pool of
    50 and an L2 pool of 30 bytes per cycle. All rise together to 10, where A stops at its cap;
    B then fills what HBM has left, (50 - 10) / w_b; C is stopped by L2 at 30. The HBM bytes per
    cycle used are 10 + w_b x (50 - 10) / w_b = 50."""
    from archsim.engine.sharing import Shares, share

    def shares(rate, cap, use_h, use_l, weight):
        n = len(rate)
        return Shares(rate, cap, use_h, use_l, weight, np.arange(n), np.zeros(n, np.bool_), np.zeros((5, n)))

    for w_b, expected_b in ((1.0, 40.0), (2.0, 20.0)):
        rate, cap = np.zeros(3), np.array([10.0, 100.0, 100.0])
        use_h, use_l = np.array([1.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
        hbm, fair = share(shares(rate, cap, use_h, use_l, np.array([1.0, w_b, 1.0])), 3, 0, True, 50.0, 30.0)
        np.testing.assert_allclose(rate, [10.0, expected_b, 30.0])
        assert hbm == pytest.approx(50.0) and fair
    # a flow not in the active list takes nothing and keeps its rate; a flow using both pools
    # stops at the first full: 0.5 x 20 = 10 fills L2
    rate = np.array([-1.0, -1.0])
    both = shares(rate, np.array([100.0, 100.0]), np.array([0.5, 1.0]), np.array([0.5, 0.0]), np.ones(2))
    share(both, 1, 0, True, 50.0, 10.0)
    np.testing.assert_allclose(rate, [20.0, -1.0])
    # caps that fit under both pools are the rates: 5 + 2 x 5 = 15 B of HBM per cycle
    rate = np.zeros(2)
    fits = shares(rate, np.array([5.0, 5.0]), np.ones(2), np.zeros(2), np.array([1.0, 2.0]))
    hbm, fair = share(fits, 2, 0, True, 50.0, 10.0)
    np.testing.assert_allclose(rate, [5.0, 5.0])
    assert hbm == 15.0 and not fair


def test_the_fair_share_sums_again_only_from_the_first_changed_flow():
    """The pools' demand at the caps is kept as running sums in flow order between calls: after
    the second flow's cap goes from 5 to 7, summing from place 1 on gives 5 + 2 x 7 = 19 B of HBM
    per cycle, as summing all does, and only the changed flow's rate is set (the first, left at
    -1 on purpose, is taken to be at its cap since the last call)."""
    from archsim.engine.sharing import Shares, share

    demand, cap = np.zeros((5, 2)), np.array([5.0, 5.0])
    rate = np.zeros(2)
    sh = Shares(
        rate, cap, np.ones(2), np.zeros(2), np.array([1.0, 2.0]), np.array([0, 1]), np.zeros(2, np.bool_), demand
    )
    share(sh, 2, 0, True, 50.0, 10.0)
    cap[1] = 7.0
    rate[0] = -1.0
    hbm, fair = share(sh, 2, 1, False, 50.0, 10.0)
    assert (hbm, fair) == (19.0, False)
    np.testing.assert_array_equal(rate, [-1.0, 7.0])
    np.testing.assert_array_equal(demand[0], [5.0, 19.0])


def test_a_load_is_issued_by_one_step_on_the_records_it_changes():
    """`issue_load` on a sequence's record: entry 0 loads 768 HBM bytes as 3 trips, one SRAM
    buffer, HBM latency 100 cycles, 8 channels of 1 byte a cycle interleaved every 256 bytes. Its
    data may flow after 3 x 100 = 300 cycles, at most 1 byte a cycle (each 256-byte trip lands on
    ceil(256 / 256) = 1 channel; Little's law, 1e9 / 100, is no bound). Entry 1 waits for its
    buffer: entry 0 has not computed."""
    from archsim.engine.cores import ENTRY, SEQUENCE, SLOT, issue_load
    from archsim.hardware.memory import MemoryParams

    p = MemoryParams(100.0, 0.0, 50.0, 1e9, 1e9, 1.0, 256.0, 8.0, 1e9, 1e9)
    seqs, ents, times = np.zeros(1, SEQUENCE), np.zeros(2, ENTRY), np.zeros(2, SLOT)
    seqs[0]["count"], seqs[0]["loading"] = 2, -1
    ents["hbm"], ents["trips"] = 768.0, 3.0
    q = seqs[0]
    assert issue_load(q, ents[0], times[0], times[0], p, 0.0, 0.0, 1) == (True, False)
    assert (q["loading"], q["next_load"], q["ready_at"], q["left_load"]) == (0, 1, 300.0, 768.0)
    assert (q["load_cap"], q["load_hbm_share"]) == (1.0, 1.0)
    assert (times[0]["load_issue"], times[0]["ready"], times[0]["hbm_share"]) == (0.0, 300.0, 1.0)  # for its stall
    q["loading"] = -1  # its data arrived; entry 0 still computes
    assert issue_load(q, ents[1], times[0], times[1], p, 400.0, 0.0, 1) == (False, False)
    assert q["next_load"] == 1
