"""A core's feed (archsim/hardware/memory.py, core_inflight_bytes): the bytes its loads keep in
flight are the kernel's own, within what the core tracks (its DMA's bytes and its outstanding
requests), and over the access latency they set its rate (Little's law). Values by hand."""

from dataclasses import replace

import pytest

from archsim.config.loader import load_system
from archsim.hardware.memory import core_inflight_bytes, load_rate_cap, memory_params


def _chip(max_requests: int, hbm_latency_s: float = 233e-9, l2_latency_s: float = 110e-9):
    chip = load_system("h200")[0].chip
    hbm, l2 = replace(chip.hbm, latency_s=hbm_latency_s), replace(chip.l2, latency_s=l2_latency_s)
    return replace(chip, core=replace(chip.core, max_requests=max_requests), hbm=hbm, l2=l2)


def test_outstanding_requests_bound_every_kernels_bytes_in_flight():
    # the H200's SM: 32-lane requests of 16 B (a 128-bit load per thread), 228 KiB = 233,472 B of DMA
    chip = _chip(141)
    assert core_inflight_bytes(chip, 1e6) == 141 * 32 * 16 == 72_192  # requests bind, not the DMA
    assert core_inflight_bytes(chip, 50_000.0) == 50_000.0  # a kernel keeping less in flight: its own
    assert core_inflight_bytes(_chip(1000), 1e6) == 233_472  # 512,000 B of requests: the DMA binds
    assert core_inflight_bytes(_chip(0), 1e6) == 233_472  # no request limit: bytes only


def test_a_stream_and_a_chain_take_their_times_from_the_same_latency():
    # 28 requests: 28 x 32 x 16 = 14,336 B in flight. An L2 hit: 110 ns + 2 hops x 20 ns = 150 ns,
    # 297 cycles at 1.98 GHz; a stream from L2 then flows at 14,336 / 297 = 48.27 B per cycle
    # (95.6 GB/s per SM), whatever its pipeline's buffers (a GEMM's 3 x 48 KiB)
    p = memory_params(_chip(28), 0.0, 3 * 48 * 1024)
    assert p.l2_latency == pytest.approx(297.0)
    assert p.load_inflight_bytes == 14_336
    assert load_rate_cap(p, 0.0, 0.0, p.l2_latency) == pytest.approx(14_336 / 297.0)
    # the HBM: 233 + 40 ns = 273 ns, 540.5 cycles: 26.5 B per cycle, 52.5 GB/s per SM. A load of
    # one interleave (256 B) lands on one channel, 4.8 TB/s / 96 at the stream's efficiency, 23.8 B
    # per cycle, which binds; on two (512 B) the requests bind
    assert p.hbm_latency == pytest.approx(540.54, abs=0.01)
    one_channel = p.channel_bytes_per_cycle
    assert one_channel == pytest.approx(23.8, abs=0.05)
    assert load_rate_cap(p, 256.0, 1.0, p.hbm_latency) == pytest.approx(one_channel)
    assert load_rate_cap(p, 512.0, 1.0, p.hbm_latency) == pytest.approx(14_336 / 540.54, rel=1e-4)
