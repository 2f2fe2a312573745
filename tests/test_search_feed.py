"""The estimate a compiler that tunes for one chip ranks a GEMM's tilings by, with the time main
memory takes to feed each (compiler/gemm.py `feed_s`), and the searches after the shortlist's
(choose/pick.py `SEARCH_RESTARTS`)."""

import math
from dataclasses import replace

import numpy as np
import pytest
from family_chips import chip, more_of, scaled

from archsim.choose import simulate_op
from archsim.choose.pick import _move_key, _Played, choose, deal_floor_s
from archsim.choose.tilings import neighbours
from archsim.compiler.families import family_rule
from archsim.compiler.gemm import best_raster, compile_gemm, feed_s, shortlist, spilled_partials_s, wave_operand_bytes
from archsim.compiler.gemm_phases import GemmMapping, Tiling, wave_layout
from archsim.dtypes import DType
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware.memory import hbm_bandwidth, hbm_latency_s

GEMM = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
# Trainium2 with one array a core at twice its clock, its GEMM held by HBM (a quarter of its
# bandwidth, a quarter of its L2): the example of tests/test_family_properties.py's invariants
HELD_TRAINIUM = {
    "clock": 1.2,
    "matrix_units": 0.5,
    "inflight": 0.5,
    "l2_capacity": 0.25,
    "hbm_data_rate": 0.5,
    "hbm_stacks": 0.5,
    "power_limit": 0.75,
}


def test_a_wave_reads_the_operands_of_its_block_of_tiles_and_l2_keeps_what_fits():
    """4096 x 1024 x 4096 bf16 (A and B 8 MiB each; a row of A or column of B 2,048 B) on 8
    cores with 256 KiB of L2 (Trainium2's quarter): 512 x 512 tiles (an 8 x 8 grid) as 2 x 4
    blocks (a wave's 2 MiB of A and 4 MiB of B do not fit: 8 waves read 2 MiB of A, and 4 block
    rows all of B): 16 + 32 = 48 MiB; 128 x 4096 tiles (32 x 1) as 8 x 1: 4 waves of 2 MiB of A
    and 4 block rows of B: 8 + 32 = 40 MiB; 4096 x 4096, one tile: 16 MiB. With 12 MiB of L2,
    512 x 512's 6 MiB a wave stay (A once) and B fits beside a wave's 2 MiB of A (once): 16 MiB.
    The L2 walk of the compiled phases (`tiling_hbm_bytes`, under the best raster) reads as
    much, the output's 32 MiB beside."""
    c = chip("trainium2", scaled("trainium2", {"l2_capacity": 0.25}))
    lay = wave_layout(c)
    assert (lay.cores, lay.reuse_capacity_bytes) == (8, 262_144)
    tm, tn = np.array([512, 128, 4096]), np.array([512, 4096, 4096])
    mib = [48 << 20, 40 << 20, 16 << 20]
    assert wave_operand_bytes(GEMM, lay, tm, tn).tolist() == mib
    for a, b, want in zip(tm.tolist(), tn.tolist(), mib, strict=True):
        assert best_raster(GEMM, c, Tiling(a, b, 128))[1] == want + (32 << 20)
    big = replace(lay, l2_capacity_bytes=12 << 20, l2_partitions=1)
    assert wave_operand_bytes(GEMM, big, tm[:1], tn[:1]).tolist() == [16 << 20]


def test_the_feed_is_the_bytes_over_the_bandwidth_after_a_latency_and_before_a_step():
    """Trainium2 (8 cores, its nominal 1 MiB of L2), 128 x 4096 tiles: 40 MiB of operands (as
    above: a wave's 2 MiB of A and 8 MiB of B do not fit) and the 4096 x 4096 x 2 = 33,554,432 B
    output, 75,497,472 B at the bandwidth of a stream two thirds written (the output over the
    50,331,648 compulsory bytes), after one access latency, and a last step of 1,000 cycles at
    its clock."""
    c = chip("trainium2", ())
    got = feed_s(GEMM, c, np.array([128]), np.array([4096]), np.array([1000.0]))
    bandwidth = hbm_bandwidth(c, 33_554_432 / 50_331_648)
    assert math.isclose(got[0], hbm_latency_s(c) + 75_497_472 / bandwidth + 1000 / c.clock_hz, rel_tol=1e-12)


def test_split_partials_are_fed_only_where_they_leave_l2():
    """Two K slices of a 4096 x 4096 output: 2 x 2 x 4096 x 4096 x 4 B = 268,435,456 B written
    and read back at the bandwidth of a stream half written, where the partials do not fit in
    L2 (Trainium2's nominal 1 MiB); none unsplit, or where they fit (a 64 x 64 output's 32 kB)."""
    c = chip("trainium2", ())
    lay = wave_layout(c)
    assert spilled_partials_s(GEMM, c, lay, 1) == 0.0
    assert math.isclose(spilled_partials_s(GEMM, c, lay, 2), 268_435_456 / hbm_bandwidth(c, 0.5))
    small = Op(OpKind.GEMM, DType.BF16, m=64, k=4096, n=64, scaling=Scaling.FIXED)
    assert spilled_partials_s(small, c, lay, 2) == 0.0


@pytest.mark.parametrize(
    ("name", "fed"),
    [("tpu_v6e", True), ("trainium2", True), ("dataflow_2stack", True), ("h200", False), ("wafer", False)],
)
def test_the_compilers_that_search_count_the_feed(name, fed):
    """The families whose compiler tunes for one chip (`search_moves`) rank by the feed too; a
    kernel library's heuristic (the GPU's, the wafer's) does not."""
    assert family_rule(chip(name, ())).estimates_feed() is fed


def test_a_gemm_held_by_hbm_shortlists_the_tiles_that_load_least():
    """Trainium2 held by HBM (0.72 TB/s): 512 x 512 tiles compute fastest by the estimate
    without HBM, but load 50.3 MB of operands (`wave_operand_bytes` above) to 128 x 4096's
    41.9 MB, 116 us to 104 us at peak with the 33.5 MB output; with the feed counted 128 x 4096
    (or its transpose) heads the shortlist, and it plays faster."""
    c = chip("trainium2", scaled("trainium2", HELD_TRAINIUM))
    first = shortlist(GEMM, c)[0]
    assert sorted((first.tm, first.tn)) == [128, 4096]
    from archsim.choose.pick import program_time_s
    from archsim.engine.simulate import play_program

    def played_s(t: Tiling) -> float:
        p = compile_gemm(GEMM, c, t)
        return program_time_s(p, play_program(p, c), c)

    assert played_s(first) < played_s(Tiling(512, 512, first.tk))


def test_a_restart_searches_from_the_fastest_tiling_none_stood_on():
    """Of three played tilings (20, 10 and 10 us) the second is searched from: the third ties it
    but was played later; once both are searched from, the first; then none. On 8 cores only
    the third: the deals played are the full chip's (grid 0) and 8 cores', the fastest's first."""
    a, b, c = Tiling(128, 128, 64), Tiling(256, 128, 64), Tiling(128, 256, 64, grid=8)
    played = _Played({_move_key(t): (s, t) for t, s in ((a, 20e-6), (b, 10e-6), (c, 10e-6))}, set())
    assert played.fastest_unsearched() == b and played.fastest_unsearched(8) == c
    assert played.deals() == [0, 8]
    played.stand_on(b)
    played.stand_on(c)
    assert played.fastest_unsearched() == a and played.fastest_unsearched(8) is None
    played.stand_on(a)
    assert played.fastest_unsearched() is None


def test_a_square_gemm_searches_a_tiling_or_its_transpose():
    """A 4096 x 1024 x 4096 bf16 GEMM's 256 x 128 tiles play as its 128 x 256 (`same_play`):
    standing on one marks both searched; a 4096 x 1024 x 2048 GEMM's are two tilings."""
    t = Tiling(256, 128, 64)
    mirrored = _Played({}, set(), mirrored=True)
    mirrored.stand_on(t)
    assert _move_key(Tiling(128, 256, 64)) in mirrored.searched
    plain = _Played({}, set())
    plain.stand_on(t)
    assert plain.searched == {_move_key(t)}


def test_a_deal_is_searched_only_where_it_could_beat_the_best():
    """The 2-stack dataflow chip (16 cores, 1.887 PFLOP/s, 1 MiB in flight a core 510 ns from
    1.6384 TB/s) and a 4096 x 1024 x 4096 bf16 GEMM: on 2 cores its 34.4 GFLOP at an eighth of
    the peak, 145.6 us, over its 50.3 MB at the least of the memory's peak and 2 x 1 MiB / 510 ns
    (4.1 TB/s), 30.7 us; on every core 18.2 us of compute under the same 30.7 us of memory."""
    c = chip("dataflow_2stack", ())
    flops, moved = 2 * 4096 * 1024 * 4096, 50_331_648
    for grid, share in ((2, 1 / 8), (0, 1.0)):
        feed = min(c.hbm.peak_bandwidth_bytes_per_s, share * 16 * c.core.max_inflight_bytes / hbm_latency_s(c))
        want = max(flops / (c.peak_flops(DType.BF16) * share), moved / feed)
        assert math.isclose(deal_floor_s(GEMM, c, grid), want, rel_tol=1e-12)
    assert math.isclose(deal_floor_s(GEMM, c, 2), 34_359_738_368 / (1.8874368e15 / 8))
    assert math.isclose(deal_floor_s(GEMM, c, 0), 50_331_648 / 1.6384e12)


def test_more_cores_run_a_gemm_no_slower():
    """The 2-stack dataflow chip (one array a core, half its SRAM and bytes in flight, a quarter
    of its L2, one HBM stack, 80% of its clock) runs the GEMM as 1024 x 1024 x 512 tiles, one wave
    on its 16 cores, their outputs streamed out a block at a time (compiler/output_stream.py); on
    32 cores as 1024 x 512 x 256 tiles, one wave of 32, no slower (84.30 us against 84.33). While
    a wave's outputs drained after its last compute, the 32 cores were slower on every tiling of
    one wave, and ran the 16 cores' 512 x 1024 x 256 tiles dealt over 16 of them, three moves from
    the shortlist, which a restart from the fastest deal found."""
    factors = {
        "clock": 0.8,
        "matrix_units": 0.5,
        "sram_capacity": 0.5,
        "inflight": 0.5,
        "l2_capacity": 0.25,
        "hbm_stacks": 0.5,
        "power_limit": 0.75,
    }
    params = scaled("dataflow_2stack", factors)
    base, more = chip("dataflow_2stack", params), more_of("dataflow_2stack", params, "cores", 2.0)
    assert more is not None and (base.cores, more.cores) == (16, 32)
    assert choose(GEMM, base).program.phases[0].label == "gemm 1024x1024x512 split1 row"
    assert choose(GEMM, more).program.phases[0].label == "gemm 1024x512x256 split1 row"
    assert simulate_op(GEMM, more).time_s <= simulate_op(GEMM, base).time_s


def test_a_search_walks_down_from_where_it_stands_though_it_cannot_beat_the_best_yet():
    """The 2-stack dataflow chip on 8 cores of one array, 2 MiB in flight, half its HBM data rate
    on twice its stacks, 750 W; then twice its 16 MiB of SRAM. On 16 MiB the leanest tiling (the
    fewest bytes loaded) is 1024 x 2048 x 128, from which the search walks to 128 x 4096 x 128
    (a 128-row panel a core with all of B streamed past it): 73.42 us. Twice the SRAM makes
    2048 x 2048 x 128 stream-K the leanest (4 tiles on 8 cores, 100.9 us): its neighbours beat it
    (1024 x 2048 x 128, 75.4 us) but not the 74.79 us the searches before it had found, so a
    search that moved only past the best stopped there and twice the SRAM ran 1.9% slower.
    Walking down from where it stands (choose/pick.py `_search`), the search reaches the same
    128 x 4096 x 128 from it, and a chip that can run every tiling the smaller one runs is no
    slower: 73.42 us on both."""
    factors = {"cores": 0.5, "matrix_units": 0.5, "inflight": 2.0, "hbm_data_rate": 0.5, "hbm_stacks": 2.0}
    params = scaled("dataflow_2stack", {**factors, "power_limit": 1.5})
    base, more = chip("dataflow_2stack", params), more_of("dataflow_2stack", params, "sram_capacity", 2.0)
    assert more is not None and (base.cores, base.core.matrix_units) == (8, 1)
    assert (base.core.sram.capacity_bytes, more.core.sram.capacity_bytes) == (16 << 20, 32 << 20)
    for c in (base, more):
        assert choose(GEMM, c).program.phases[0].label == "gemm 128x4096x128 split1 row"
    assert simulate_op(GEMM, more).time_s <= simulate_op(GEMM, base).time_s
    assert math.isclose(simulate_op(GEMM, base).time_s, 73.4222e-6, rel_tol=1e-5)


@pytest.mark.parametrize(
    ("preset", "factors", "tile", "time_s"),
    [
        ("dataflow_2stack", {"cores": 0.25, "sram_capacity": 2.0, "inflight": 2.0, "power_limit": 0.75},
         "256x4096x128", 73.7589e-6),
        ("lpu", {"cores": 2.0, "matrix_units": 2.0, "sram_capacity": 2.0, "inflight": 0.5, "l2_capacity": 0.25,
                 "power_limit": 1.5}, "320x320x320", 60.19e-6),
    ],
)  # fmt: skip
def test_a_stream_k_tiling_moved_onto_whole_waves_is_searched_on_as_data_parallel(preset, factors, tile, time_s):
    """Twice the SRAM of each chip makes a stream-K tiling of fewer tiles than cores the leanest
    (the 2-stack dataflow chip on 4 cores with 32 -> 64 MiB: 2048 x 4096 stream-K, 2 tiles, 104.9
    us; an LPU of 2 cores of 2 arrays whose stream buffer holds whole columns of weights: 4096 x
    320 and 5120 x 320 stream-K, 60.84 us, and no 320 x 320). Their tile moves onto whole waves
    (2048 x 2048: 4 tiles on 4 cores; 2560 x 320: 2 x 13 tiles, 13 waves of 2) kept stream-K,
    which is not legal without a tail, and were dropped, so the searches stopped short of the
    tiles the chip with less SRAM ran, 1.7% and 1.1% slower. As data-parallel (which stream-K is
    over whole waves: `tilings.neighbours`) they lead on to them: the same tile and time on both."""
    params = scaled(preset, factors)
    base, more = chip(preset, params), more_of(preset, params, "sram_capacity", 2.0)
    assert more is not None and more.core.sram.capacity_bytes == 2 * base.core.sram.capacity_bytes
    for c in (base, more):
        assert choose(GEMM, c).program.phases[0].label == f"gemm {tile} split1 row"
        assert math.isclose(simulate_op(GEMM, c).time_s, time_s, rel_tol=1e-5)


def test_a_moved_stream_k_tiling_on_whole_waves_is_data_parallel():
    """2048 x 4096 x 128 stream-K on the 2-stack dataflow chip's 4 cores (2 tiles of a 4096 x 1024
    x 4096 GEMM): halving its N edge gives 2048 x 2048, 4 tiles, one whole wave, as data-parallel;
    halving its M edge, 1024 x 4096, likewise; doubling its K step (still 2 tiles) stays stream-K."""
    c = chip("dataflow_2stack", scaled("dataflow_2stack", {"cores": 0.25, "sram_capacity": 4.0}))
    t = best_raster(GEMM, c, Tiling(2048, 4096, 128, GemmMapping.STREAM_K))[0]
    moved = {(n.tm, n.tn, n.tk): n.mapping for n in neighbours(GEMM, c, t)}
    assert moved[(2048, 2048, 128)] is GemmMapping.DATA_PARALLEL
    assert moved[(1024, 4096, 128)] is GemmMapping.DATA_PARALLEL
    assert moved[(2048, 4096, 256)] is GemmMapping.STREAM_K
