"""The wait for the last rank of a collective launched on idle chips (archsim/hardware/arrival.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from archsim.config.loader import load_system
from archsim.hardware.arrival import arrival_wait_s, harmonic
from archsim.hardware.collectives import Collective, collective_time, lone_wait_s, system_fabric
from archsim.runner.validation import predict_ms

NVIDIA_SYSTEMS = ("a100x8", "h100x8", "h200x8", "b200x8", "gb200_nvl72")
CASE = {"id": "x", "kind": "allreduce", "dtype": "fp16", "ranks": 2, "bytes": 1 << 20, "measured_ms": 0.1}


def test_harmonic_numbers_by_hand():
    # H_1 = 1, H_2 = 3/2, H_4 = 1 + 1/2 + 1/3 + 1/4 = 25/12, H_8 = 761/280
    assert harmonic(1) == 1.0
    assert harmonic(2) == pytest.approx(1.5)
    assert harmonic(4) == pytest.approx(25 / 12)
    assert harmonic(8) == pytest.approx(761 / 280)


def test_the_wait_for_the_last_of_n_exponential_launches_by_hand():
    # jitter 10 us: one rank waits for nobody; two ranks 10 x (3/2 - 1) = 5 us; four
    # 10 x (25/12 - 1) = 10.833 us; eight 10 x (761/280 - 1) = 17.179 us
    assert arrival_wait_s(1, 10e-6) == 0.0
    assert arrival_wait_s(2, 10e-6) == pytest.approx(5e-6)
    assert arrival_wait_s(4, 10e-6) == pytest.approx(10.8333e-6, rel=1e-4)
    assert arrival_wait_s(8, 10e-6) == pytest.approx(17.1786e-6, rel=1e-4)
    assert arrival_wait_s(8, 0.0) == 0.0
    with pytest.raises(ValueError):
        arrival_wait_s(0, 1e-6)


def test_more_ranks_wait_longer_and_the_wait_scales_with_the_jitter():
    # what if: from 2 to 8 ranks the wait grows from 0.5 to 1.72 jitters (x 3.44), and doubling
    # the jitter doubles it; it grows as log n, so 72 ranks wait about 3.8 jitters, not 36
    waits = [arrival_wait_s(n, 1.0) for n in (2, 4, 8, 16, 72)]
    assert waits == sorted(waits) and waits[0] == pytest.approx(0.5)
    assert waits[2] / waits[0] == pytest.approx(3.4357, rel=1e-3)
    assert waits[-1] == pytest.approx(harmonic(72) - 1) and 3.7 < waits[-1] < 3.9
    assert arrival_wait_s(8, 2e-6) == pytest.approx(2 * arrival_wait_s(8, 1e-6))


def test_every_nvidia_system_states_the_same_launch_jitter():
    jitters = {name: system_fabric(load_system(name)[0]).launch_jitter_s for name in NVIDIA_SYSTEMS}
    assert len(set(jitters.values())) == 1 and jitters["h200x8"] == pytest.approx(9.65e-6), jitters


def test_the_wait_is_apart_from_the_protocols_latency_and_bandwidth():
    # the collective's own time (protocol latency and transfer) does not hold the wait; a lone
    # all-reduce case adds it once: on h200x8, 2 ranks 9.65 x 0.5 = 4.825 us, 8 ranks
    # 9.65 x (761/280 - 1) = 16.577 us
    system = load_system("h200x8")[0]
    f = system_fabric(system)
    for ranks, wait_s in ((2, 4.825e-6), (8, 16.577e-6)):
        case = {**CASE, "ranks": ranks}
        t = collective_time(f, Collective.ALL_REDUCE, ranks, case["bytes"])
        assert lone_wait_s(f, ranks) == pytest.approx(wait_s, rel=1e-4)
        assert predict_ms(case, system) == pytest.approx(1e3 * (t.time_s + wait_s), rel=1e-4)
    # with no jitter the case is the collective alone
    still = replace(system, interconnect=replace(system.interconnect, launch_jitter_s=0.0))
    t = collective_time(system_fabric(still), Collective.ALL_REDUCE, 2, CASE["bytes"])
    assert predict_ms(CASE, still) == pytest.approx(1e3 * t.time_s)


def test_a_lone_all_reduce_on_more_ranks_waits_longer():
    # what if: the same 1 MiB on 4 ranks instead of 2 of the h200x8 waits 9.65 x (25/12 - 3/2)
    # = 5.63 us more for its last rank, beside whatever the protocol adds
    system = load_system("h200x8")[0]
    f = system_fabric(system)
    extra_s = lone_wait_s(f, 4) - lone_wait_s(f, 2)
    assert extra_s == pytest.approx(9.65e-6 * (25 / 12 - 1.5))
    proto_s = (
        collective_time(f, Collective.ALL_REDUCE, 4, CASE["bytes"]).time_s
        - collective_time(f, Collective.ALL_REDUCE, 2, CASE["bytes"]).time_s
    )
    grown_ms = predict_ms({**CASE, "ranks": 4}, system) - predict_ms(CASE, system)
    assert grown_ms == pytest.approx(1e3 * (proto_s + extra_s), rel=1e-6)
