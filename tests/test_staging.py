"""The staging unit (archsim/choose/staging.py, docs/MODEL.md "The bound"): what a core's later
loads need of the buffer time its SRAM stages have free, checked by hand on the round-number
memory of tests/test_stalls.py, never above 1 on played phases, and the limit it names on a chip
whose stages are too few to cover its loads."""

import numpy as np
import pytest
from family_chips import chip, scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from test_stalls import ROUND, _phase

from archsim.choose import simulate_op
from archsim.choose.pick import choose
from archsim.choose.staging import entry_load_cycles, free_buffer_share, phase_staging_cycles
from archsim.engine.simulate import phase_memory, play_phase_on
from archsim.graph.ops import Op, OpKind, Scaling

EPS = 1e-3  # the event loop's rounding, taken off each load (one a trip and one for its flow)


def test_a_load_holds_its_buffer_for_its_latency_and_its_bytes_at_one_loads_rate():
    # 600 HBM + 400 L2 bytes: latency 0.6 x 100 + 0.4 x 20 = 68; one channel caps the load at
    # 10 / 0.6 B/cycle, so 1000 bytes flow in 60: 128 (as test_stalls plays it); no bytes: 0
    load = entry_load_cycles(_phase([600.0, 0.0], [400.0, 0.0], [10, 10]), ROUND)
    np.testing.assert_allclose(load, [128.0 - 2 * EPS, 0.0])


def test_too_few_stages_for_the_latency_fill_the_free_buffers():
    # 10 entries of 100 HBM bytes each, computing 50 cycles, 2 buffers: a load holds its buffer
    # 100 (latency) + 100 / 10 B/cycle = 110 cycles, more than the one compute (50) the other
    # buffer covers it with, so the arrays wait on each: each pair of entries takes 110 + 50 = 160
    # cycles. Played: entries 0 and 1 loaded by 110 and 120, computed 110-210; then e.g. entry 2's
    # buffer frees at 160, its data lands 260-270, it computes 270-320; the last ends at 850.
    # Later loads 8 x 110 = 880 buffer cycles, the fill 2 x 110 = 220, the computes 500, each over
    # the 2 stages; the free buffer time 2 x 850 - 500 - 220 = 980, of which the loads need 880
    phase = _phase([100.0] * 10, [0.0] * 10, [50] * 10, stages=2)
    assert play_phase_on(phase, ROUND).total_cycles == 850
    parts = phase_staging_cycles(phase, ROUND)
    np.testing.assert_allclose(parts, [440.0, 110.0, 250.0], atol=10 * EPS)
    assert free_buffer_share([parts], 1.0, 1, 850.0) == pytest.approx(880 / 980, rel=1e-4)


def test_stages_that_cover_the_loads_leave_their_buffers_room():
    # the same loads behind 200-cycle computes: each lands (110) within the other buffer's
    # compute, so the arrays wait only for the first: 110 + 10 x 200 = 2,110 cycles, and the loads
    # need 880 of 2 x 2,110 - 2,000 - 220 = 2,000 free buffer cycles: 44%
    phase = _phase([100.0] * 10, [0.0] * 10, [200] * 10, stages=2)
    assert play_phase_on(phase, ROUND).total_cycles == 2110
    parts = phase_staging_cycles(phase, ROUND)
    assert free_buffer_share([parts], 1.0, 1, 2110.0) == pytest.approx(880 / 2000, rel=1e-4)


def test_a_phase_no_longer_than_its_stages_waits_on_no_buffer():
    # 2 entries in 2 buffers: both loads are the fill, none waits for a buffer to free
    later, fill, _compute = phase_staging_cycles(_phase([100.0, 100.0], [0.0, 0.0], [50, 50], stages=2), ROUND)
    assert later == 0.0 and fill > 0.0
    assert free_buffer_share([(later, fill, 50.0)], 1.0, 1, 300.0) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 12),
    stages=st.integers(1, 5),
    hbm=st.lists(st.sampled_from([0.0, 64.0, 1000.0, 5000.0]), min_size=12, max_size=12),
    l2=st.lists(st.sampled_from([0.0, 200.0, 3000.0]), min_size=12, max_size=12),
    cycles=st.lists(st.integers(0, 400), min_size=12, max_size=12),
    inflight=st.sampled_from([100.0, 1000.0, 1.0e9]),
    queue=st.sampled_from([0.0, 30.0]),
)
def test_played_phases_never_beat_their_stages(n, stages, hbm, l2, cycles, inflight, queue):
    """S x t >= the loads and computes a sequence's buffers hold, so the share is at most 1."""
    memory = ROUND._replace(load_inflight_bytes=inflight, hbm_queue_latency=queue)
    phase = _phase(hbm[:n], l2[:n], cycles[:n], stages=stages)
    t = play_phase_on(phase, memory).total_cycles
    later, fill, compute = phase_staging_cycles(phase, memory)
    assert stages * t >= stages * (later + fill + compute) * (1 - 1e-12)
    assert 0.0 <= free_buffer_share([(later, fill, compute)], 1.0, 1, t) <= 1.0


def test_an_mi300x_with_half_its_lds_is_held_by_its_stages():
    """An MI300X of twice its CUs (608) and twice their matrix cores, half its LDS (32 KiB), L2
    and stacks runs a 4096 x 1024 x 4096 GEMM as 128 x 128 tiles of 32-deep K steps: 2 stages of
    16 KiB, 16 KiB in flight. A step loads 687 HBM + 15,697 L2 bytes: latency 0.042 x 798 + 0.958
    x 457.8 = 472 cycles (its HBM and Infinity Cache's at 2.1 GHz), its bytes at 16,384 / 472 =
    34.7 B/cycle in 472 more: 944 cycles, over the 286 of the one compute the other buffer covers
    it with. Its arrays wait on every step (22% of peak): the result names the stages, over half
    their free time (formerly its largest unit was L2 at 39%, neither arrays nor L2 holding half).
    (With its own matrix cores, 542 cycles a step, it now runs stream-K tiles, whose tail re-reads
    blocks within its dies' L2s: held by the L2 at 86%.)"""
    factors = {"cores": 2.0, "sram_capacity": 0.5, "inflight": 0.5, "l2_capacity": 0.25, "matrix_units": 2.0}
    factors |= {"hbm_data_rate": 1.5, "hbm_stacks": 0.5, "power_limit": 1.5}
    mi = chip("mi300x", scaled("mi300x", factors))
    op = Op(OpKind.GEMM, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    phase = choose(op, mi).program.phases[0]
    assert (phase.stages, phase.compute_cycles[0], phase.hbm_bytes[0] + phase.l2_bytes[0]) == (2, 286, 16384)
    assert entry_load_cycles(phase, phase_memory(phase, mi))[0] == pytest.approx(944, abs=1)
    t = simulate_op(op, mi)
    assert t.binding_unit == "staging" and t.bound.value == "memory"
    assert 0.5 <= t.staging_utilisation <= 1.0 and t.matrix_utilisation < 0.4
