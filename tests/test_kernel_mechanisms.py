"""Mechanisms that set the time of small and library kernels: bytes in flight per request and
per row, L2 residency of a just-written tensor, the matrix-kernel prologue."""

from dataclasses import replace

import pytest

from archsim.choose import simulate_op
from archsim.choose.conditions import prologue_s
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import DType
from archsim.program import Family


def _vec(vop, m, n, dtype=DType.BF16, **kw):
    return Op(OpKind.VECTOR, dtype, m=m, n=n, vop=vop, **kw, scaling=Scaling.FIXED)


def test_strided_views_cost_requests_not_just_bytes(h200):
    """Same bytes; an element per lane per request keeps fewer bytes in flight: slower by far
    once the op is large, and the narrower the element the slower."""
    chip = h200.chip
    contiguous = simulate_op(_vec(VectorOp.MUL, 8192, 14336), chip).time_s
    strided = simulate_op(_vec(VectorOp.MUL, 8192, 14336, strided=True), chip).time_s
    assert strided > 1.5 * contiguous
    # per byte, fp8 elements carry half the bytes per request of bf16 ones
    bf16 = simulate_op(_vec(VectorOp.MUL, 8192, 14336, strided=True), chip)
    fp8 = simulate_op(_vec(VectorOp.MUL, 8192, 14336, DType.FP8, strided=True), chip)
    assert fp8.time_s / fp8.hbm_bytes > 1.5 * bf16.time_s / bf16.hbm_bytes


def test_request_limit_is_off_without_max_requests(h200):
    chip = h200.chip
    unlimited = replace(chip, core=replace(chip.core, max_requests=0))
    assert unlimited.core.request_inflight_bytes(2) == unlimited.core.max_inflight_bytes
    assert chip.core.request_inflight_bytes(2) == chip.core.max_requests * 32 * 2
    # 16-byte vector loads: the requests' worth, under the shared memory a bulk load may fill
    assert chip.core.request_inflight_bytes(16) == chip.core.max_requests * 32 * 16 < chip.core.max_inflight_bytes


def test_one_row_of_a_norm_is_a_latency_chain(h200):
    """A lone row runs on one core, walking it a block-wide step at a time: twice the row,
    (nearly) twice the time, far below what the core's bandwidth would allow."""
    chip = h200.chip
    short = simulate_op(_vec(VectorOp.RMSNORM, 1, 4096), chip)
    long = simulate_op(_vec(VectorOp.RMSNORM, 1, 8192), chip)
    assert short.active_cores == 1
    kernel = chip.overheads.kernel_s
    assert (long.time_s - kernel) == pytest.approx(2 * (short.time_s - kernel), rel=0.15)
    # rows on different cores run side by side
    rows = simulate_op(_vec(VectorOp.RMSNORM, 128, 4096), chip)
    assert rows.active_cores == 128 and rows.time_s < 1.2 * short.time_s


def test_a_norm_row_steps_as_the_library_kernel_does(h200):
    """PyTorch's fused norm gives a row 128 threads that each load one 4-element vector per step:
    a bf16 row of 4096 is 4096 x 2 / (128 x 4 x 2) = 8 steps of 1 KiB per pass, two passes (the
    first from HBM, the second from L2). One access latency before the first byte, then the 16 KiB
    flow at 1 KiB per access latency (Little's law), the latency the HBM and L2 halves weigh
    equally: (1 + 16) x (L_hbm + L_l2) / 2, each with the crossbar's hops."""
    chip = h200.chip
    t = simulate_op(_vec(VectorOp.RMSNORM, 1, 4096), chip)
    hops = chip.noc.hops * chip.noc.hop_latency_s
    mix = (chip.hbm.latency_s + chip.l2.latency_s) / 2 + hops
    assert t.stall_cycles == pytest.approx(17 * mix * chip.clock_hz, rel=0.02)


def test_second_pass_of_a_norm_reads_l2(h200):
    t = simulate_op(_vec(VectorOp.RMSNORM, 4096, 4096), h200.chip)
    assert t.hbm_bytes == pytest.approx(2 * 4096 * 4096 * 2)  # read once, written once
    assert t.l2_bytes == pytest.approx(4096 * 4096 * 2)  # the second pass


def test_a_hot_small_tensor_is_read_from_l2(h200):
    chip = h200.chip
    cold = simulate_op(_vec(VectorOp.ADD, 16, 4096), chip)
    hot = simulate_op(_vec(VectorOp.ADD, 16, 4096, hot=True), chip)
    assert hot.hbm_bytes == 0 and hot.time_s < cold.time_s
    # a tensor larger than its share of the L2 has been evicted by the time the next kernel reads it
    big = 2 * chip.l2.capacity_bytes // (4096 * 2)
    assert simulate_op(_vec(VectorOp.ADD, big, 4096, hot=True), chip).hbm_bytes > 0


def test_a_residual_add_reads_its_residual_stream_from_hbm(h200):
    """A hot add of 16 x 4096 bf16 reads two operands of 16 x 4096 x 2 = 131,072 B each: the
    block's output, just written, from L2, and the residual stream (`cold_reads` 1), written
    before the block's GEMMs streamed their weights through the L2, from HBM; its output, 131,072
    B more, is stored to L2 either way. The same holds for a serving engine's per-token kernel."""
    chip = h200.chip
    hot = simulate_op(_vec(VectorOp.ADD, 16, 4096, hot=True), chip)
    residual = simulate_op(_vec(VectorOp.ADD, 16, 4096, hot=True, cold_reads=1), chip)
    assert (hot.hbm_bytes, hot.l2_bytes) == (0, 2 * 131_072 + 131_072)
    assert (residual.hbm_bytes, residual.l2_bytes) == (131_072, 131_072 + 131_072)
    assert residual.time_s > hot.time_s
    # vLLM's fused add + rms_norm per token: the input and the residual, half of its reads cold
    fused = _vec(VectorOp.ADD_RMSNORM, 16, 4096, hot=True, per_row=True)
    warm, cold = simulate_op(fused, chip), simulate_op(replace(fused, cold_reads=1), chip)
    assert warm.hbm_bytes == 0 and cold.hbm_bytes == 131_072


def test_matrix_kernels_pay_their_prologue(h200):
    """The H200's 3,881 cycles of prologue at its 1.98 GHz: 1.96 us; at 1.41 GHz the same cycles
    take 3,881 / 1.41e9 = 2.75 us (the prologue is instructions the SMs run)."""
    chip = h200.chip
    bare = replace(chip, overheads=replace(chip.overheads, matrix_setup_cycles=0.0))
    gemm = Op(OpKind.GEMM, DType.BF16, m=64, k=4096, n=4096, scaling=Scaling.FIXED)
    add = _vec(VectorOp.ADD, 64, 4096)
    assert chip.overheads.matrix_setup_cycles == 3881
    for clock, setup in ((1.98e9, 1.960e-6), (1.41e9, 2.752e-6)):
        at, bare_at = replace(chip, clock_hz=clock), replace(bare, clock_hz=clock)
        assert prologue_s(at, Family.GEMM) == pytest.approx(setup, rel=1e-3)
        assert simulate_op(gemm, at).time_s - simulate_op(gemm, bare_at).time_s == pytest.approx(setup, rel=0.01)
    assert simulate_op(add, chip).time_s == simulate_op(add, bare).time_s


def test_a_flushed_l2_writes_back_what_random_victims_hit():
    """An L2 of C bytes left all dirty by a flush: each allocated line evicts a random victim,
    so after A bytes C exp(-A/C) stay dirty. By hand with C = 60 MB: A = 0.6 MB writes back
    60 (1 - e^-0.01) = 0.597 MB (almost all of A: few victims are clean yet); A = C writes back
    60 (1 - 1/e) = 37.9 MB; A = 10 C writes back 60 (1 - e^-10) = 59.997 MB (all of C)."""
    from archsim.choose import dirty_evicted_bytes

    mb = 1e6
    assert dirty_evicted_bytes(0.6 * mb, 60 * mb) == pytest.approx(0.597 * mb, rel=1e-3)
    assert dirty_evicted_bytes(60 * mb, 60 * mb) == pytest.approx(37.93 * mb, rel=1e-3)
    assert dirty_evicted_bytes(600 * mb, 60 * mb) == pytest.approx(60 * mb, rel=1e-4)
    assert dirty_evicted_bytes(mb, 0.0) == 0.0


def test_a_share_of_the_l2_left_dirty_writes_back_that_share():
    """A flush that left 0.6 of a 60 MB L2 dirty: victims are still drawn from all 60 MB, so
    after A bytes 0.6 x 60 exp(-A/60) stay dirty. By hand: A = 60 MB writes back
    36 (1 - 1/e) = 22.76 MB, 0.6 of the all-dirty case's 37.93; A = 0.6 MB writes back 0.6 x 0.597
    = 0.358 MB; a clean L2 (share 0) writes back nothing."""
    from archsim.choose import dirty_evicted_bytes

    mb = 1e6
    assert dirty_evicted_bytes(60 * mb, 60 * mb, 0.6) == pytest.approx(22.76 * mb, rel=1e-3)
    assert dirty_evicted_bytes(0.6 * mb, 60 * mb, 0.6) == pytest.approx(0.358 * mb, rel=1e-3)
    assert dirty_evicted_bytes(60 * mb, 60 * mb, 0.0) == 0.0


def test_a_standalone_gemv_pays_the_write_back_of_the_flush(h200):
    """Llama-3-8B's QKV GEMV on one token reads 4096 x 6144 x 2 B = 50.3 MB of weights. Timed
    alone after the flush, which left 0.6 of the H200's 60 MiB (62.9 MB) L2 dirty, its misses
    first write back 0.6 x 62.9 (1 - e^(-50.3/62.9)) = 20.8 MB: 71 MB through HBM instead of 50,
    about 1.4x the streaming time, less the fixed costs. A GEMV of 1 GB writes back all 0.6 x
    62.9 = 37.7 MB: 3.6% more than its own reads."""
    from archsim.choose import Condition

    assert h200.chip.l2.flush_dirty == 0.6
    chip = h200.chip
    launch = chip.overheads.launch_s
    for n, extra in ((6144, 20.8e6), (128256, 37.7e6)):
        gemv = Op(OpKind.GEMM, DType.BF16, m=1, k=4096, n=n, scaling=Scaling.FIXED)
        graph = simulate_op(gemv, chip, Condition.GRAPH)
        alone = simulate_op(gemv, chip, Condition.STANDALONE)
        assert alone.hbm_bytes - graph.hbm_bytes == pytest.approx(extra, rel=0.01)
        streaming = graph.time_s - chip.overheads.kernel_s - prologue_s(chip, Family.GEMM) - chip.overheads.gap_s
        added = alone.time_s - graph.time_s - launch
        assert 0.7 * extra / graph.hbm_bytes < added / streaming < 1.3 * extra / graph.hbm_bytes


def test_a_small_elementwise_kernel_spreads_its_blocks_over_cores(h200):
    """PyTorch's vectorised elementwise kernel gives a thread block 128 threads of one 16-byte
    vector per input: a bf16 add of 1 x 4096 reads 2 x 8,192 B = 16,384 B in blocks of
    128 x 16 x 2 = 4,096 B, so 4 blocks on 4 cores (not one core, as a 16 KiB chunk would); a
    SiLU of 1 x 14336 reads 28,672 B in blocks of 2,048 B: 14 cores, as the H200 profile shows
    (14 blocks). A strided view keeps its own block (512 elements)."""
    from archsim.compiler.streaming import vector_block_bytes

    assert vector_block_bytes(2) == 4096 and vector_block_bytes(1) == 2048
    chip = h200.chip
    assert simulate_op(_vec(VectorOp.ADD, 1, 4096), chip).active_cores == 4
    assert simulate_op(_vec(VectorOp.SILU, 1, 14336), chip).active_cores == 14
    # 2 x 2 x 2048 = 8,192 B of a strided add in blocks of 512 elements x 4 B = 2,048 B: 4 cores
    assert simulate_op(_vec(VectorOp.ADD, 1, 2048, strided=True), chip).active_cores == 4
    # more blocks than cores: every core takes work
    assert simulate_op(_vec(VectorOp.ADD, 64, 4096), chip).active_cores == chip.cores
