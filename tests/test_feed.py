"""A core's feed (archsim/hardware/memory.py, core_inflight_bytes): the bytes its loads keep in
flight are the kernel's own, within what the core tracks (its DMA's bytes and, for a kernel whose
warps issue its loads, their outstanding requests), and over the access latency they set its
rate (Little's law). Values by hand."""

from dataclasses import replace

import pytest
from attention_ops import gqa_attention

from archsim.choose.pick import same_play
from archsim.compiler.attention import DECODE_WARPS, compile_attention
from archsim.compiler.streaming import compile_vector
from archsim.config.loader import load_system
from archsim.engine.simulate import phase_memory
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware.memory import core_inflight_bytes, core_requests, load_rate_cap, memory_params


def _chip(max_requests: int, hbm_latency_s: float = 233e-9, l2_latency_s: float = 110e-9):
    chip = load_system("h200")[0].chip
    hbm, l2 = replace(chip.hbm, latency_s=hbm_latency_s), replace(chip.l2, latency_s=l2_latency_s)
    return replace(chip, core=replace(chip.core, max_requests=max_requests), hbm=hbm, l2=l2)


def test_outstanding_requests_bound_a_warp_kernels_bytes_in_flight():
    # the H200's SM: 32-lane requests of 16 B (a 128-bit load per thread), 228 KiB = 233,472 B of DMA;
    # a kernel of 64 warps (a full SM)
    chip = _chip(141)
    assert core_inflight_bytes(chip, 1e6, 64) == 141 * 32 * 16 == 72_192  # requests bind, not the DMA
    assert core_inflight_bytes(chip, 50_000.0, 64) == 50_000.0  # a kernel keeping less in flight: its own
    assert core_inflight_bytes(_chip(1000), 1e6, 64) == 233_472  # 512,000 B of requests: the DMA binds
    assert core_inflight_bytes(_chip(0), 1e6, 64) == 233_472  # no request limit: bytes only
    # bulk copies (a GEMM's TMA loads: no warps stated) are tracked by bytes, not by request slots
    assert core_requests(chip, 0) == float("inf")
    assert core_inflight_bytes(chip, 1e6) == 233_472


def test_a_stream_and_a_chain_take_their_times_from_the_same_latency():
    # 28 requests: 28 x 32 x 16 = 14,336 B in flight. An L2 hit: 110 ns + 2 hops x 20 ns = 150 ns,
    # 297 cycles at 1.98 GHz; a stream from L2 then flows at 14,336 / 297 = 48.27 B per cycle
    # (95.6 GB/s per SM), whatever its pipeline's buffers (3 x 48 KiB)
    p = memory_params(_chip(28), 0.0, 3 * 48 * 1024, 0.0, 64)
    assert p.l2_latency == pytest.approx(297.0)
    assert p.load_inflight_bytes == 14_336
    assert load_rate_cap(p, 0.0, 0.0, p.l2_latency) == pytest.approx(14_336 / 297.0)
    # the HBM: 233 + 40 ns = 273 ns, 540.5 cycles: 26.5 B per cycle, 52.5 GB/s per SM. A load of
    # one interleave (256 B) lands on one channel, 4.8 TB/s / 96 at the stream's efficiency, 22.8 B
    # per cycle, which binds; on two (512 B) the requests bind
    assert p.hbm_latency == pytest.approx(540.54, abs=0.01)
    one_channel = p.channel_bytes_per_cycle
    assert one_channel == pytest.approx(22.8, abs=0.05)
    assert load_rate_cap(p, 256.0, 1.0, p.hbm_latency) == pytest.approx(one_channel)
    assert load_rate_cap(p, 512.0, 1.0, p.hbm_latency) == pytest.approx(14_336 / 540.54, rel=1e-4)


def _warp_chip(max_requests: int, loads_per_warp: int):
    chip = _chip(max_requests)
    return replace(chip, core=replace(chip.core, loads_per_warp=loads_per_warp))


def test_a_kernel_of_few_warps_keeps_its_warps_loads_in_flight():
    # 6 loads a warp: a 4-warp block keeps 24 requests (under the SM's 141), 24 x 32 x 16 = 12,288 B;
    # 64 warps (a full SM) could keep 384, so the SM's 141 bind: 72,192 B, as without warps
    chip = _warp_chip(141, 6)
    assert core_requests(chip, 4) == 24
    assert core_inflight_bytes(chip, 1e6, 4) == 12_288
    assert core_requests(chip, 64) == 141
    assert core_inflight_bytes(chip, 1e6, 64) == 72_192
    assert core_requests(chip, 0) == float("inf")  # no warps stated (bulk copies): bytes only
    assert core_requests(_warp_chip(141, 0), 4) == 141  # no bound per warp stated: the SM's
    assert core_requests(_warp_chip(0, 6), 4) == 24  # no SM limit: the warps' still binds
    assert core_requests(_warp_chip(0, 0), 4) == float("inf")
    # over an HBM access of 273 ns (540.5 cycles at 1.98 GHz): 12,288 / 540.54 = 22.7 B per cycle
    p = memory_params(chip, 0.0, 1e6, 0.0, 4)
    assert load_rate_cap(p, 1e6, 1.0, p.hbm_latency) == pytest.approx(12_288 / 540.54, rel=1e-4)


def test_the_compiler_passes_each_kernels_resident_warps():
    chip = _warp_chip(141, 6)
    # decode attention: one 4-warp block per (sequence, KV head, split) resident on its core
    (decode,) = compile_attention(gqa_attention(1, 4096, batch=8, split_kv=False), chip).phases
    assert decode.warps == DECODE_WARPS == 4
    assert phase_memory(decode, chip).load_inflight_bytes == 12_288
    prefill = compile_attention(gqa_attention(2048, 2048), chip).phases[0]
    assert prefill.warps == 0  # bulk (TMA) loads: the SM's requests and the kernel's buffers
    # a per-token rms_norm over 4,096 elements: blocks of min(4096, 1024) = 1024 threads = 32 warps,
    # 2,048 / 1,024 = 2 resident on an SM; one row: one block (32 warps), 1,000 rows on 132 SMs: 2 (64)
    one = Op(OpKind.VECTOR, m=1, n=4096, vop=VectorOp.RMSNORM, per_row=True, scaling=Scaling.FIXED)
    assert compile_vector(one, chip).phases[0].warps == 32
    many = Op(OpKind.VECTOR, m=1000, n=4096, vop=VectorOp.RMSNORM, per_row=True, scaling=Scaling.FIXED)
    assert compile_vector(many, chip).phases[0].warps == 64


def test_programs_that_differ_only_in_their_warps_play_apart():
    # a decode kernel of 4 warps and the same kernel bounded only by the SM feed differently:
    # neither stands in for the other when the candidates are played (choose/pick.py same_play)
    chip = _warp_chip(141, 6)
    program = compile_attention(gqa_attention(1, 4096, batch=8, split_kv=False), chip)
    unbounded = replace(program, phases=(replace(program.phases[0], warps=0),))
    assert same_play(program, program)
    assert not same_play(program, unbounded)
