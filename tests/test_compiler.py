"""The compiler on shapes small enough to map by hand: GEMM tiles, waves, split-K and stream-K
segments, L2 first-touch bytes, attention blocks and items, streaming chunks.

The H200 model: 132 cores of 4 tensor cores (16 x 32 weight-stationary arrays, pipelined
folds), 228 KiB of SRAM (233,472 B), 60 MiB of L2. Every expected value is derived in a comment.
"""

from dataclasses import replace

import numpy as np
import pytest
from attention_ops import gqa_attention

from archsim.compiler.attention import _blocks, compile_attention
from archsim.compiler.gemm import compile_gemm, tiling_hbm_bytes
from archsim.compiler.gemm_phases import GemmMapping, PhasePlan, Tiling, phase_on
from archsim.compiler.l2reuse import wave_hbm_fractions
from archsim.compiler.program import build_phase
from archsim.compiler.streaming import compile_vector
from archsim.graph.ops import Op, OpKind, Scaling, VectorOp
from archsim.hardware import DType
from archsim.program import ENTRY, entries


def _no_multicast(chip):
    return replace(chip, noc=replace(chip.noc, multicast=1))


def test_data_parallel_gemm_tiles_one_wave(h200):
    """256 x 1024 x 1024 in 128 x 128 tiles, 64 of K per step: 2 x 8 = 16 tiles, one wave, one
    item per core, each 1024 / 64 = 16 steps moving 64 x (128 + 128) x 2 B = 32 KiB.
    All operands (0.5 + 2 MiB) fit in L2, so the wave's first touch of each panel misses: two A
    panels and eight B panels of 128 x 1024 x 2 B = 256 KiB, 2.5 MiB of the 16 x 16 x 32 KiB =
    8 MiB the items load, a fraction of 0.3125: 10,240 B per step from HBM and 22,528 B from L2.
    A step is 4 folds of the 16-row arrays over K = 64, each streaming 128 rows, plus the
    16 + 32 - 2 cycles of fill and drain: 4 x 128 + 46 = 558 cycles. The tile's output,
    128 x 128 x 2 B, is written after its last step. Stages: 233,472 // 32,768 = 7."""
    op = Op(OpKind.GEMM, m=256, k=1024, n=1024, scaling=Scaling.FIXED)
    (phase,) = compile_gemm(op, _no_multicast(h200.chip), Tiling(128, 128, 64)).phases
    assert phase.core_weight.tolist() == [16] and phase.core_start.tolist() == [0, 16]
    np.testing.assert_allclose(phase.hbm_bytes, 10240)
    np.testing.assert_allclose(phase.l2_bytes, 22528)
    assert phase.store_bytes.tolist() == [0.0] * 15 + [32768.0]
    assert phase.compute_cycles.tolist() == [558] * 16
    assert phase.stages == 7


def test_split_k_items_partials_and_reduction(h200):
    """64 x 4096 x 256, tiles 64 x 128 split 4 ways along K: 2 tiles x 4 slices = 8 items of
    K = 1024, 16 steps each of 64 x (64 + 128) x 2 B = 24 KiB. Their fp32 partials, 64 x 128 x 4
    B = 32 KiB each, fit in L2 (4 x 64 x 256 x 4 B = 256 KiB) and are written there. First touch
    per wave and slice: 4 A panels of 64 x 1024 x 2 B (128 KiB) and 8 B panels of 128 x 1024 x 2
    B (256 KiB) = 2.5 MiB of 8 x 16 x 24 KiB = 3 MiB: 5/6 from HBM, 20,480 B of each step.
    The reduction reads 4 partials of 4 B per output element from L2 and writes 2 B: 16,384
    elements in chunks of at least 16 KiB / 16 B = 1,024 elements, so 16 cores."""
    op = Op(OpKind.GEMM, m=64, k=4096, n=256, scaling=Scaling.FIXED)
    gemm, reduce = compile_gemm(op, _no_multicast(h200.chip), Tiling(64, 128, 64, GemmMapping.SPLIT_K, 4)).phases
    assert gemm.core_weight.tolist() == [8] and gemm.entries == 16
    np.testing.assert_allclose(gemm.hbm_bytes, 20480)
    np.testing.assert_allclose(gemm.l2_bytes, 4096)
    assert gemm.store_l2_bytes[-1] == 32768 and gemm.store_bytes.sum() == 0
    assert reduce.new_kernel and reduce.core_weight.tolist() == [16]
    assert reduce.l2_bytes.tolist() == [16384.0] and reduce.store_bytes.tolist() == [2048.0]


def test_stream_k_segments_on_four_cores(h200):
    """128 x 256 x 384 in 128 x 128 tiles, 64 of K per step, on 4 cores: 3 tiles of 4 steps, fewer
    than the cores, so no data-parallel wave: the 12 iterations go 3 to a core. Core 0 takes tile
    0's steps 0-2 and leaves an fp32 partial (128 x 128 x 4 B = 64 KiB) in L2; core 1 finishes
    tile 0 (reading core 0's partial, writing the 32 KiB output) and starts tile 1 (steps 0-1);
    core 2 finishes tile 1 and starts tile 2; core 3 finishes tile 2. The tail's tiles are in
    flight together: one A panel and three B panels of 128 x 256 x 2 B missed, of 3 x 4 x 32 KiB
    loaded: 2/3 of each step from HBM."""
    chip = replace(_no_multicast(h200.chip), cores=4)
    op = Op(OpKind.GEMM, m=128, k=256, n=384, scaling=Scaling.FIXED)
    (phase,) = compile_gemm(op, chip, Tiling(128, 128, 64, GemmMapping.STREAM_K)).phases
    assert phase.core_weight.tolist() == [1, 1, 1, 1] and phase.core_start.tolist() == [0, 3, 6, 9, 12]
    step = 64 * (128 + 128) * 2
    np.testing.assert_allclose(phase.hbm_bytes, step * 2 / 3)
    finishing = [3, 7, 11]  # entries that finish a tile: the partial of one other core read back
    expected_l2 = np.full(12, step / 3)
    expected_l2[finishing] += 128 * 128 * 4
    np.testing.assert_allclose(phase.l2_bytes, expected_l2)
    assert np.flatnonzero(phase.store_bytes).tolist() == finishing
    assert np.flatnonzero(phase.store_l2_bytes).tolist() == [2, 5, 8]


def test_a_planned_phase_joins_cores_whose_steps_take_equally_long_on_the_chip(h200):
    """A phase planned once for every chip of a wave layout names each entry's step shape, not
    its cycles: cores that run different shapes are different sequences. On a chip where those
    shapes take equally long, the cores run alike and are one sequence of their summed weight.
    Two cores of weight 2 and 1 run two 128 x 64 x 128 steps, the second core's second step
    listed as another shape of the same size: each step 4 folds of the 16-row arrays over
    K = 64, each streaming 128 rows, plus 16 + 32 - 2 cycles of fill and drain, 558 cycles
    (as in test_data_parallel_gemm_tiles_one_wave), so one sequence of weight 3. A shape of
    K = 32 (2 folds: 2 x 128 + 46 = 302 cycles) keeps them apart."""
    op = Op(OpKind.GEMM, m=128, k=128, n=128, scaling=Scaling.FIXED)
    tiling = Tiling(128, 128, 64, GemmMapping.STREAM_K)
    runs = (entries(2, hbm_bytes=1.0, cycles=0.0), entries(2, hbm_bytes=1.0, cycles=[0.0, 1.0]))
    planned = build_phase(list(runs), 1, weights=[2, 1])
    same = PhasePlan(planned, ((128, 64, 128), (128, 64, 128)), runs, (2, 1))
    joined = phase_on(same, op, _no_multicast(h200.chip), tiling)
    assert joined.core_weight.tolist() == [3] and joined.compute_cycles.tolist() == [558, 558]
    apart = phase_on(replace(same, shapes=((128, 64, 128), (128, 32, 128))), op, _no_multicast(h200.chip), tiling)
    assert apart.core_weight.tolist() == [2, 1] and apart.compute_cycles.tolist() == [558, 558, 558, 302]
    assert joined.stages == apart.stages == 7  # 233,472 B of SRAM // 32 KiB a stage


def test_l2_first_touch_per_wave_and_lru_capacity():
    """Two waves of two items sharing one A panel (1,000 B) and each with a B panel of its own
    (1,000 B): a wave loads 4,000 B and misses A once and its two B panels, 3/4. In the second
    wave the A panel's stack distance is the panels of both waves, 5,000 B: with 5,000 B of L2
    it is still there (2/4 missed), with 4,999 B it was evicted (3/4 again)."""
    items = {
        "g": np.zeros(4, dtype=np.int64),
        "i": np.zeros(4, dtype=np.int64),
        "j": np.arange(4),
        "s": np.zeros(4, dtype=np.int64),
        "em": np.full(4, 10),
        "en": np.full(4, 10),
        "kl": np.full(4, 100),
    }
    wave = np.array([0, 0, 1, 1])
    # each item loads 10 x 100 x 1 B of A and of B: a wave 4,000 B; misses: A once + 2 B panels
    np.testing.assert_allclose(wave_hbm_fractions(items, wave, 1.0, 1.0, 4999.0), [3 / 4, 3 / 4])
    np.testing.assert_allclose(wave_hbm_fractions(items, wave, 1.0, 1.0, 5000.0), [3 / 4, 2 / 4])


def test_tiling_hbm_bytes_counts_operands_after_reuse_and_the_output(h200):
    """The data-parallel 256 x 1024 x 1024 of above: 2.5 MiB of operands missed, and the
    256 x 1024 x 2 B = 0.5 MiB output written: 3 MiB."""
    op = Op(OpKind.GEMM, m=256, k=1024, n=1024, scaling=Scaling.FIXED)
    assert tiling_hbm_bytes(op, _no_multicast(h200.chip), Tiling(128, 128, 64)) == 3 * 2**20


def test_a_cluster_multicasts_the_larger_operand_block(h200):
    """With two cores fed by one transfer, the 256 x 1024 x 1024 GEMM in 128 x 128 tiles shares
    its B block (equal to A's, B wins ties) between the two row blocks' cores: each core loads
    64 x (128 + 128 / 2) x 2 B = 24 KiB a step instead of 32 KiB; HBM bytes are unchanged (a
    panel is read from HBM once a wave either way), so the step's HBM share rises to 2.5 / 6."""
    op = Op(OpKind.GEMM, m=256, k=1024, n=1024, scaling=Scaling.FIXED)
    (phase,) = compile_gemm(op, h200.chip, Tiling(128, 128, 64)).phases
    np.testing.assert_allclose(phase.hbm_bytes + phase.l2_bytes, 24576)
    np.testing.assert_allclose(phase.hbm_bytes, 24576 * 2.5 / 6)
    assert tiling_hbm_bytes(op, h200.chip, Tiling(128, 128, 64)) == 3 * 2**20


def test_attention_blocks_fit_sram(h200):
    """Decode packs the 32 / 8 = 4 query heads of a KV group as 4 rows, with the smallest query
    block, 16; the largest K/V block whose two double-buffered 128-wide bf16 blocks fit beside Q
    and O: (2 x 4 x 128 + 4 x bk x 128) x 2 B <= 233,472 B gives bk <= 226, so 128. Prefill takes
    the largest, squarest pair: 128 x 128 ((2 x 128 + 4 x 128) x 128 x 2 = 196,608 B; 256 x 128
    needs 262,144)."""
    decode = gqa_attention(1, 1000)
    prefill = gqa_attention(1024, 1024, causal=True)
    assert _blocks(decode, h200.chip) == (4, 16, 128)
    assert _blocks(prefill, h200.chip) == (1024, 128, 128)


def test_causal_items_skip_masked_blocks_longest_first(h200):
    """One head, 512 causal queries in blocks of 128 over 512 keys: query block q attends to
    q + 1 key blocks, so items of 4, 3, 2 and 1 blocks, dealt longest first to 4 cores. Each
    step loads a K and a V block, 2 x 128 x 128 x 2 B = 64 KiB, the first also the 32 KiB query
    block. K/V (256 KiB) fits in L2: the first item to touch it reads it from HBM, the others
    from L2. Each item writes its 128 x 128 x 2 B output block."""
    chip = replace(h200.chip, cores=4)
    op = Op(
        OpKind.ATTENTION,
        batch=1,
        heads=1,
        kv_heads=1,
        head_dim=128,
        q_len=512,
        kv_len=512,
        causal=True,
        scaling=Scaling.FIXED,
    )
    (phase,) = compile_attention(op, chip).phases
    assert np.diff(phase.core_start).tolist() == [4, 3, 2, 1]
    kv, q = 2 * 128 * 128 * 2, 128 * 128 * 2
    first = phase.core_start[:-1]
    np.testing.assert_allclose(phase.hbm_bytes[:4], [kv + q, kv, kv, kv])  # the first toucher
    np.testing.assert_allclose(phase.hbm_bytes[first[1:]], q)  # the others load only their Q
    np.testing.assert_allclose(phase.l2_bytes[4:], kv)
    assert phase.store_bytes[phase.core_start[1:] - 1].tolist() == [q] * 4


def test_streaming_chunks_fill_cores_in_sram_sized_entries(h200):
    """A 1024 x 4096 bf16 add reads 4 B and writes 2 B per element, 8 lane ops each. 4,194,304
    elements over 132 cores: ceil(4,194,304 / 132) = 31,776 per chunk (above the 16 KiB / 4 B =
    4,096 minimum), 132 chunks of which the last holds 4,194,304 - 131 x 31,776 = 31,648. An
    entry holds at most a quarter of SRAM (233,472 / 4 / 4 B = 14,592 elements) and what the
    core's requests keep in flight: 50 requests x 32 lanes x 16 B = 25,600 B, 6,400 elements. A
    chunk is 4 x 6,400 + 6,176 (the last 4 x 6,400 + 6,048). 6,400 x 8 / 128 lanes = 400
    cycles. Stages: 233,472 // (6,400 x 4) = 9."""
    assert h200.chip.core.max_requests == 50
    (phase,) = compile_vector(
        Op(OpKind.VECTOR, m=1024, n=4096, vop=VectorOp.ADD, scaling=Scaling.FIXED), h200.chip
    ).phases
    assert phase.core_weight.tolist() == [131, 1]
    elements = np.array([6400] * 4 + [6176] + [6400] * 4 + [6048])
    np.testing.assert_allclose(phase.hbm_bytes, 4 * elements)
    np.testing.assert_allclose(phase.store_bytes, 2 * elements)
    assert phase.compute_cycles.tolist() == (elements * 8 // 128).tolist()
    assert phase.stages == 9


def test_build_phase_merges_identical_cores_and_refuses_unnamed_columns():
    seq = entries(2, hbm_bytes=100.0, cycles=3.5)
    phase = build_phase([seq, seq, entries(1, l2_bytes=7.0)], stages=2)
    assert phase.core_weight.tolist() == [2, 1] and phase.compute_cycles.tolist() == [4, 4, 0]
    assert seq.dtype == ENTRY
    with pytest.raises(TypeError, match="ENTRY record array"):
        build_phase([np.zeros((2, 5))], stages=2)
    # a core given as its parts in order keeps every part; alike cores still merge
    parts = (entries(2, hbm_bytes=1.0, cycles=2.0), entries(1, store_bytes=5.0, cycles=1.0))
    joined = build_phase([parts, parts], stages=2)
    assert joined.core_weight.tolist() == [2] and joined.entries == 3
    assert joined.store_bytes.tolist() == [0.0, 0.0, 5.0] and joined.compute_cycles.tolist() == [2, 2, 1]


def test_raster_orders_by_hand():
    """A 3 x 4 tile grid. Row-major: (0,0) (0,1) (0,2) (0,3) (1,0)...; column-major: (0,0) (1,0)
    (2,0) (0,1)...; grouped by 2 rows: the first two rows column by column, (0,0) (1,0) (0,1)
    (1,1) ... (1,3), then the last row alone, (2,0) ... (2,3)."""
    from archsim.compiler.l2reuse import Raster, raster_order

    rows, cols = raster_order(3, 4, Raster.ROW)
    assert list(zip(rows[:5].tolist(), cols[:5].tolist())) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    rows, cols = raster_order(3, 4, Raster.COLUMN)
    assert list(zip(rows[:4].tolist(), cols[:4].tolist())) == [(0, 0), (1, 0), (2, 0), (0, 1)]
    rows, cols = raster_order(3, 4, Raster.GROUPED, 2)
    assert list(zip(rows.tolist(), cols.tolist())) == [
        (0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 0), (2, 1), (2, 2), (2, 3)
    ]  # fmt: skip


def test_kv_split_follows_the_flash_decoding_heuristic():
    """8 items on 132 cores with 64 KV blocks: a split s gives 8s / 132 waves, efficiency
    w / ceil(w); the best is 0.97 at s = 16 (128 / 132). A split is eligible only if it changes
    the blocks per split: 15 and 14 keep ceil(64 / s) = 5 as 13 has, so the eligible ones near
    the top are 13 (0.79, under 85% of 0.97 = 0.82) and 16: 16. 128 items fill 80% of the cores
    already: no split. With only 4 KV blocks, splits stop at 4 (1, 2 and 4 are eligible)."""
    from archsim.compiler.attention import kv_splits

    assert kv_splits(8, 132, 64) == 16
    assert kv_splits(128, 132, 64) == 1
    assert kv_splits(8, 132, 4) == 4


def test_a_partial_last_kv_block_moves_only_its_rows(h200):
    """Decode over 1000 keys in blocks of 128: 8 blocks, the last holding 1000 - 7 x 128 = 104
    rows: 2 x 104 x 128 x 2 B = 53,248 B instead of 65,536 B. One (sequence, KV head) item, no
    split (the eager profile's kernel does not split)."""
    op = Op(OpKind.ATTENTION, batch=1, heads=4, kv_heads=1, head_dim=128, q_len=1, kv_len=1000, scaling=Scaling.FIXED)
    (phase,) = compile_attention(op, h200.chip).phases
    loaded = phase.hbm_bytes + phase.l2_bytes
    q = 4 * 128 * 2  # the four heads' query rows, with the first block
    np.testing.assert_allclose(loaded, [65536 + q] + [65536] * 6 + [2 * 104 * 128 * 2])


def test_per_token_kernels_chain_through_each_row_with_scalar_loads(h200):
    """A 2023 serving kernel on one token of 22,016 SiLU·mul outputs: one block of 1024 threads
    walks the row with an element per thread per operand, 21 full steps and one of 512 threads:
    each full step loads 1024 x 2 operands x 2 B = 4 KiB and stores 2 KiB, the last 2 KiB and
    1 KiB; a step's loads are all in flight at once (one latency), none ahead of its compute.
    The vectorised kernel over all cores keeps its requests' worth in flight and is faster."""
    row = Op(OpKind.VECTOR, m=1, n=22016, vop=VectorOp.SILU_MUL, per_row=True, scaling=Scaling.FIXED)
    (phase,) = compile_vector(row, h200.chip).phases
    assert phase.active_cores == 1 and phase.inflight_bytes == 4096 and phase.stages == 1
    np.testing.assert_array_equal(phase.hbm_bytes, [4096] * 21 + [2048])
    np.testing.assert_array_equal(phase.store_bytes, [2048] * 21 + [1024])
    vectorised = replace(row, per_row=False)
    from archsim.choose import simulate_op

    assert simulate_op(row, h200.chip).time_s > simulate_op(vectorised, h200.chip).time_s


@pytest.fixture(scope="module")
def a100():
    from archsim.config.loader import load_system

    return load_system("a100_pcie")[0]


def test_per_token_blocks_are_played_each_as_a_sequence_of_rows(a100):
    """rms_norm over 4,096-wide tokens on the A100: blocks of 1024 threads, two resident per SM
    (2,048 threads), so 108 x 2 = 216 block slots; 1,000 tokens give 5 rows to each of 200 slots
    (1000 // 5) and none left. A row is 4 steps reading 2 KiB from HBM (1024 threads x 2 B), then
    4 re-reading it from L2 and storing 2 KiB each."""
    op = Op(OpKind.VECTOR, DType.FP16, m=1000, n=4096, vop=VectorOp.RMSNORM, per_row=True, scaling=Scaling.FIXED)
    (phase,) = compile_vector(op, a100.chip).phases
    assert phase.core_weight.tolist() == [200] and phase.entries == 5 * 8
    np.testing.assert_array_equal(phase.hbm_bytes[:8], [2048] * 4 + [0] * 4)
    np.testing.assert_array_equal(phase.l2_bytes[:8], [0] * 4 + [2048] * 4)
    np.testing.assert_array_equal(phase.store_bytes[:8], [0] * 4 + [2048] * 4)
    # its input just written by the kernel before (8 MB, within a quarter of the 40 MiB L2): read in L2
    (hot,) = compile_vector(replace(op, hot=True), a100.chip).phases
    assert hot.hbm_bytes.sum() == 0 and (hot.l2_bytes * hot.entry_weights).sum() == 1000 * 2 * 4096 * 2


def test_a_per_token_rotary_block_follows_the_query_heads(a100):
    """rotary_embedding on Llama-3-8B's 32 q and 8 k heads of 128 (N = 5,120 a token): blocks of
    min(32 x 64, 512) = 512 threads, four resident per SM (432 slots); a token's block loads its
    position (8 B), then rotates 2,048 q pairs in 4 steps and 512 k pairs in 1, a pair per thread
    (x and y: 512 x 2 x 2 B = 2 KiB a step), the first also loading the token's cos/sin row
    (2 x 64 x 2 B). At TP 8 (4 q heads, 1 k head): 256 threads, eight resident, a q step of 256
    pairs and a k step of 64."""
    op = Op(
        OpKind.VECTOR,
        DType.FP16,
        m=432,
        n=5120,
        vop=VectorOp.ROPE,
        per_row=True,
        heads=32,
        kv_heads=8,
        head_dim=128,
        scaling=Scaling.FIXED,
    )
    (phase,) = compile_vector(op, a100.chip).phases
    assert phase.core_weight.tolist() == [432] and phase.entries == 6
    np.testing.assert_array_equal(phase.hbm_bytes, [8, 2048 + 256, 2048, 2048, 2048, 2048])
    np.testing.assert_array_equal(phase.store_bytes, [0] + [2048] * 5)
    tp8 = replace(op, m=864, n=640, heads=4, kv_heads=1)
    (phase,) = compile_vector(tp8, a100.chip).phases
    assert phase.core_weight.tolist() == [864]
    np.testing.assert_array_equal(phase.hbm_bytes, [8, 1024 + 256, 256])
    with pytest.raises(ValueError, match="q and k heads"):
        compile_vector(replace(op, heads=0), a100.chip)


def test_lane_ops_issue_at_the_issue_width_not_the_fp32_lanes(h200):
    """An A100-like core: 64 FP32 lanes but 128 thread-instructions issued per cycle; 12,800
    lane ops take 100 cycles, not 200."""
    from archsim.compiler.tiles import vector_cycles

    core = replace(h200.chip.core, vector=replace(h200.chip.core.vector, lanes=64, issue_width=128))
    assert int(vector_cycles(core, 12800, 0)) == 100


def test_l2_reuse_sums_as_numpy_does_to_the_last_bit():
    # the compiled L2-reuse walk adds bytes in numpy's pairwise order, so a tiling's HBM bytes
    # are the same compiled or not; sizes around the 8-wide unroll and the 128-element blocks
    from archsim.compiler.l2reuse import _pairwise_sum

    rng = np.random.default_rng(7)
    for n in [0, 1, 7, 8, 9, 127, 128, 129, 136, 255, 256, 1000, 4097, 100_003]:
        a = rng.random(n) * 10.0 ** rng.uniform(-3, 9, n)  # magnitudes over 12 decades
        assert _pairwise_sum(a, 0, n) == a.sum(), n
