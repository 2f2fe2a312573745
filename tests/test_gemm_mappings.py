"""The registry of GEMM mappings (archsim/compiler/mappings/): one file per mapping, each keyed by
its GemmMapping; the autotuner and the compiler reach every mapping through it."""

from enum import Enum
from pathlib import Path

import numpy as np
import pytest

from archsim.compiler.families import family_rule
from archsim.compiler.gemm import compile_gemm, loaded_bytes, shortlist
from archsim.compiler.gemm_mapping import (
    Estimate,
    GemmMappingRule,
    core_fill_drain_s,
    held_by_its_arrays_or_l2,
    last_step_s,
)
from archsim.compiler.gemm_phases import GemmMapping, Phase, Tiling
from archsim.compiler.mappings import MAPPINGS, mapping_rule
from archsim.dtypes import DType
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.memo import clear_all


def test_every_mapping_has_its_rule_in_the_autotuners_order():
    """Stream-K, data-parallel, split-K: among tilings of equal estimate, the earlier one's first."""
    assert list(MAPPINGS) == [GemmMapping.STREAM_K, GemmMapping.DATA_PARALLEL, GemmMapping.SPLIT_K]
    assert all(rule.mapping is mapping for mapping, rule in MAPPINGS.items())


def test_waves_as_each_mapping_deals_its_items():
    """10 items on 4 cores. Plain waves: items 0-3 in wave 0, 4-7 in 1, 8-9 in 2, all
    data-parallel. Stream-K: all but the last full wave data-parallel (10 // 4 - 1 = 1 wave,
    4 items), the other 6 in flight together in wave 1."""
    wave, dp = mapping_rule(GemmMapping.DATA_PARALLEL).waves(10, 4)
    assert wave.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2] and dp == 10
    wave, dp = mapping_rule(GemmMapping.STREAM_K).waves(10, 4)
    assert wave.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1] and dp == 4


class _Extra(str, Enum):
    HALVED = "halved"


class _Halved(GemmMappingRule):
    """A made-up mapping: data-parallel tiles that the estimate says take half as long."""

    mapping = _Extra.HALVED

    def splits(self, e: Estimate) -> tuple[int, ...]:
        return (1,)

    def estimate(self, e: Estimate, split: int) -> tuple[np.ndarray, np.ndarray]:
        est, compute_s = e.sliced_times(split)
        return est / 2, compute_s

    def phases(self, op: Op, chip, t: Tiling) -> list[Phase]:
        return [self.plain_phase(op, chip, t)]

    def label(self, t: Tiling) -> str:
        return f"halved {t.shape_label}"


def test_a_mapping_registered_in_a_test_is_offered_and_compiled(h200, monkeypatch):
    """Registered, the made-up mapping's tilings are estimated at half the data-parallel ones',
    so they lead the shortlist; compiling one gives its kernel under its own label."""
    monkeypatch.setitem(MAPPINGS, _Extra.HALVED, _Halved())
    op = Op(OpKind.GEMM, m=333, k=4096, n=4096, scaling=Scaling.FIXED)  # a shape no other test asks for
    try:
        best = shortlist(op, h200.chip)[0]
        assert best.mapping is _Extra.HALVED
        (phase,) = compile_gemm(op, h200.chip, best).phases
        assert phase.label == f"halved {best.shape_label}"
    finally:
        shortlist.cache_clear()
        clear_all()


def test_a_mapping_without_a_rule_is_an_error():
    with pytest.raises(KeyError, match="halved"):
        mapping_rule(_Extra.HALVED)


def test_a_whole_k_step_is_ranked_apart_from_the_pipelined_steps_of_its_shape(monkeypatch):
    """Trainium2 on twice its cores with half its SBUF (12 MiB), twice its bytes in flight, half
    its stacks; raised to the full 24 MiB, a 1 x 512 tile's whole K of 8192 fits twice (a stage
    of 8192 x 2 + 8192 x 512 x 2 = 8,404,992 B; 2 x that = 16.8 MB <= 25,165,824) and ranks first
    of its shape (one step per item: the least compute), but its one step has no K step of its
    own to load behind, so the shortlist keeps a pipelined K step of the shape too (tk = 512)
    as it did on 12 MiB; twice the SBUF is no slower (2.2% slower before). The ranking is the
    estimate's without main memory's feed (which Trainium's compiler counts, and which puts the
    shortest steps first for this GEMV, whose tilings all read its weights once)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from family_chips import chip, more_of, scaled

    from archsim.choose import simulate_op

    params = scaled("trainium2", {"cores": 2.0, "sram_capacity": 0.5, "inflight": 2.0, "hbm_stacks": 0.5})
    base, more = chip("trainium2", params), more_of("trainium2", params, "sram_capacity", 2.0)
    assert more is not None and more.core.sram.capacity_bytes == 25_165_824
    op = Op(OpKind.GEMM, m=1, k=8192, n=8192, scaling=Scaling.FIXED)
    clear_all()
    monkeypatch.setattr(type(family_rule(more)), "estimates_feed", lambda self: False)
    ks = {t.tk for t in shortlist(op, more, 8) if (t.tn, t.mapping) == (512, GemmMapping.DATA_PARALLEL)}
    monkeypatch.undo()
    clear_all()
    assert ks == {512, 8192}
    assert simulate_op(op, more).time_s <= simulate_op(op, base).time_s * 1.01


def test_stream_k_runs_whole_k_steps_and_is_not_offered_for_tiles_of_one():
    """On the wafer's 840 clusters (1.1 GHz), steps of 1,000 cycles and free loads: 32 tiles of
    one K step cannot be shared between clusters, so stream-K is not offered (it would be 32 /
    840 of a wave); data-parallel runs them in one wave, 1,000 cycles. 1,000 tiles of 8 steps:
    stream-K spreads 8,000 steps, 9.52 a cluster, 9,524 cycles; data-parallel 2 waves, 16,000.
    16 tiles of 4 steps: 64 steps, one a cluster, 1,000 cycles (not 64 / 840 of a step, 76)."""
    from archsim.config.loader import load_system

    wafer = load_system(str(Path(__file__).resolve().parents[1] / "hw_configs" / "wafer.yaml"))[0].chip
    op = Op(OpKind.GEMM, m=8192, k=2048, n=8192, scaling=Scaling.FIXED)

    def estimate(mapping: GemmMapping, tiles: int, ksteps: int) -> tuple[float, float]:
        one = np.ones(1)
        e = Estimate(op, wafer, tiles * one, ksteps * one, 1000 * one, 0 * one, 1e30 * one, 0.0, 2 * one,
                     256 * one, 8192 * one)  # fmt: skip
        est, compute_s = mapping_rule(mapping).estimate(e, 1)
        return float(est[0]), float(compute_s[0]) * wafer.clock_hz

    assert estimate(GemmMapping.STREAM_K, 32, 1)[0] == np.inf
    assert estimate(GemmMapping.DATA_PARALLEL, 32, 1)[1] == pytest.approx(1000)
    assert estimate(GemmMapping.STREAM_K, 1000, 8)[1] == pytest.approx(8000 * 1000 / 840)
    assert estimate(GemmMapping.DATA_PARALLEL, 1000, 8)[1] == pytest.approx(16_000)
    assert estimate(GemmMapping.STREAM_K, 16, 4)[1] == pytest.approx(1000)


def test_fill_and_drain_by_hand():
    """A 128 x 256 x 64 bf16 step ((128 + 256) x 64 x 2 = 49,152 B) loaded at 100 GB/s after
    500 ns: fill 500 + 491.52 = 991.52 ns; its 128 x 256 x 2 = 65,536 B output drained with
    32 KiB in flight over the same 500 ns (65.5 GB/s): 1,000 ns."""
    fill, drain = core_fill_drain_s(np.array([49_152.0]), np.array([100e9]), 500e-9, np.array([65_536.0]), 32_768.0)
    assert (fill[0], drain[0]) == (pytest.approx(991.52e-9), pytest.approx(1_000e-9))


def test_the_last_step_follows_the_loads_of_a_gemm_they_can_hold():
    """A core's last step of 2,048 cycles at 2 GHz computes 1.024 us after its operands. It ends
    a GEMM of 256 FLOPs per compulsory byte or more: 4096 x 1024 x 4096 bf16, 2 x 4096 x 1024 x
    4096 FLOPs over (4096 x 1024 x 2 + 4096 x 4096) x 2 B = 682.7; not 64 x 4096 x 4096,
    2 x 64 x 4096 x 4096 over (2 x 64 x 4096 + 4096 x 4096) x 2 B = 62.1 (main memory holds it)."""
    assert last_step_s(np.array([2048.0]), 2e9)[0] == pytest.approx(1.024e-6)
    big, small = (Op(OpKind.GEMM, m=m, k=k, n=4096, scaling=Scaling.FIXED) for m, k in ((4096, 1024), (64, 4096)))
    assert big.flops() / big.min_bytes() == pytest.approx(682.67, abs=0.01)
    assert small.flops() / small.min_bytes() == pytest.approx(62.06, abs=0.01)
    assert held_by_its_arrays_or_l2(big) and not held_by_its_arrays_or_l2(small)


def test_the_estimate_ends_the_l2s_stream_with_a_step():
    """On the wafer (1.1 GHz, 840 clusters, an L2 of 21 PB/s), 32 tiles in one wave, 8 K steps
    of 1,100 cycles (1 us) each, loads with no latency at any rate a cluster asks: after the
    L2's last byte (256 steps' bytes at 21 PB/s) the last step computes (1 us).
    - Steps of 1.640625 GB: the L2 takes 20 us, the compute 8: max(8, 20 + 1) = 21 us (20 before
      the last step counted).
    - Steps of 615.234375 MB: the L2 takes 7.5 us: max(8, 7.5 + 1) = 8.5 us (8 before).
    - Steps of 328.125 MB: the L2 takes 4 us: max(8, 4 + 1) = 8 us, the compute's."""
    from archsim.config.loader import load_system

    wafer = load_system(str(Path(__file__).resolve().parents[1] / "hw_configs" / "wafer.yaml"))[0].chip
    op = Op(OpKind.GEMM, m=8192, k=2048, n=8192, scaling=Scaling.FIXED)

    def estimate_us(step_bytes: float) -> float:
        one = np.ones(1)
        e = Estimate(op, wafer, 32 * one, 8 * one, 1100 * one, step_bytes * one, 1e30 * one, 0.0, 2 * one,
                     3072 * one, 8192 * one)  # fmt: skip
        return float(mapping_rule(GemmMapping.DATA_PARALLEL).estimate(e, 1)[0][0]) * 1e6

    assert wafer.l2.bandwidth_bytes_per_s == 21e15 and wafer.clock_hz == 1.1e9
    assert estimate_us(1.640625e9) == pytest.approx(21.0)
    assert estimate_us(615.234375e6) == pytest.approx(8.5)
    assert estimate_us(328.125e6) == pytest.approx(8.0)


def test_the_estimate_adds_a_cores_fill_and_drain_once():
    """On the wafer (1.1 GHz, 840 clusters, 48 MiB in flight each), 32 tiles of 3,072 x 8,192 in
    one wave, each K step 1,100 cycles (1 us), its loads 500 ns away, 2 stages. Output tile:
    3,072 x 8,192 x 2 B = 48 MiB, drained in 48 MiB x 500 ns / 48 MiB = 0.5 us.
    - 1 step of 1,100 B at 1.1 GB/s (1 us): the fill is 0.5 + 1 = 1.5 us, before the 1 us
      compute; the loads alone take 1 + 0.5 = 1.5 us. 1.5 + 1 + 0.5 = 3 us (1.5 us without).
    - 8 steps of 2,200 B (2 us each): the loads take 8 x 2 + 0.5 = 16.5 us, more than the fill
      and the compute (0.5 + 2 + 8 = 10.5), and the first load is one of them; the last step
      computes after them (1 us): 16.5 + 1 + 0.5 = 18 us."""
    from archsim.config.loader import load_system

    wafer = load_system(str(Path(__file__).resolve().parents[1] / "hw_configs" / "wafer.yaml"))[0].chip
    op = Op(OpKind.GEMM, m=8192, k=2048, n=8192, scaling=Scaling.FIXED)

    def estimate_us(ksteps: int, step_bytes: float) -> float:
        one = np.ones(1)
        e = Estimate(op, wafer, 32 * one, ksteps * one, 1100 * one, step_bytes * one, 1.1e9 * one, 500e-9, 2 * one,
                     3072 * one, 8192 * one)  # fmt: skip
        return float(mapping_rule(GemmMapping.DATA_PARALLEL).estimate(e, 1)[0][0]) * 1e6

    assert wafer.core.max_inflight_bytes == 3072 * 8192 * 2
    assert estimate_us(1, 1100.0) == pytest.approx(3.0)
    assert estimate_us(8, 2200.0) == pytest.approx(18.0)


def test_loaded_bytes_by_hand():
    """4096 x 1024 x 4096 bf16 in 2048 x 4096 x 512 tiles: 2 tiles x 2 K steps x (2048 x 512 +
    512 x 4096) x 2 B = 25,165,824 B; in 2048 x 2048 x 512 tiles: 4 x 2 x 4 MiB = 33,554,432 B."""
    stage = np.array([(2048 * 512 + 512 * 4096) * 2, (2048 * 512 + 512 * 2048) * 2])
    assert loaded_bytes(np.array([2, 4]), np.array([2, 2]), stage).tolist() == [25_165_824, 33_554_432]


def test_the_shortlist_keeps_the_leanest_tiling(monkeypatch):
    """A TPU v6e's 4096 x 1024 x 4096 GEMM: the estimate's best 4 tile shapes are smaller than the
    output, and the whole output as one 4096 x 4096 tile, which loads A and B once each (1 tile x
    2 K steps x (4096 x 512 + 512 x 4096) x 2 B = 16 MiB: the least any tiling loads), is played
    after them. (The ranking without main memory's feed, which the TPU's compiler counts, and by
    which the whole output ranks among the 4.)"""
    from archsim.config.loader import load_system

    v6e = load_system(str(Path(__file__).resolve().parents[1] / "hw_configs" / "tpu_v6e.yaml"))[0].chip
    op = Op(OpKind.GEMM, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    assert (4096, 4096, 512) in [(t.tm, t.tn, t.tk) for t in shortlist(op, v6e, 4)[:4]]
    clear_all()
    monkeypatch.setattr(type(family_rule(v6e)), "estimates_feed", lambda self: False)
    tilings = shortlist(op, v6e, 4)
    monkeypatch.undo()
    clear_all()
    assert len(tilings) == 5 and all((t.tm, t.tn) != (4096, 4096) for t in tilings[:4])
    assert (tilings[4].tm, tilings[4].tn, tilings[4].tk) == (4096, 4096, 512)
    assert loaded_bytes(np.array([1]), np.array([2]), np.array([(4096 * 512 * 2) * 2]))[0] == 16 << 20


def test_a_shortlist_of_fewer_shapes_than_its_length_is_filled_with_the_next_best():
    """SCALE-Sim's one 128 x 128 weight-stationary array with SRAM for anything: a 4096 x 1024 x
    128 GEMM's tilings all take about the array's time, and the estimate's best 4 are one tile,
    the whole 4096 x 128 output, at K steps 128, 256, 512 and 1,024 (the array's 35.824 us each,
    to 10 ps), two shapes (pipelined, whole K). The next best shape, 512 x
    128 (the largest edge of the library's menu under the whole M: fewer folds to fill and drain
    than smaller tiles), fills the other two places (its K step of 128 and the whole K); the
    leanest is the whole output, already in."""
    from archsim.config.loader import load_system

    ws = load_system(str(Path(__file__).resolve().parents[1] / "hw_configs" / "scalesim_ws_128x128.yaml"))[0].chip
    op = Op(OpKind.GEMM, m=4096, k=1024, n=128, scaling=Scaling.FIXED)
    shapes = [(t.tm, t.tn, t.tk) for t in shortlist(op, ws, 4)]
    assert shapes == [(4096, 128, 128), (4096, 128, 1024), (512, 128, 128), (512, 128, 1024)]


def test_stream_k_joins_the_cores_alike_runs_as_join_alike_does():
    """Nine iterations, two a core: runs A (0-1), B (2-3), A (4-5), A (6-7) and the last core's
    single iteration C (8). Kinds in order of first appearance: A at 0-2 run by 3 cores, B at
    2-4 by 1, C at 8-9 by 1. Keys that tell core 2's run apart from core 0's (though their
    entries are alike) leave it joined: the runs of distinct keys are compared by their bytes.
    A run with -0.0 where another has 0.0 differs (bytes, not values)."""
    from archsim.compiler.gemm_phases import join_alike
    from archsim.compiler.mappings.stream_k import alike_runs
    from archsim.program import entries

    flat = entries(9, hbm_bytes=[1, 2, 3, 4, 1, 2, 1, 2, 5])
    key = flat["hbm_bytes"].astype(np.int64)
    assert alike_runs(flat, key, 2) == ([(0, 2), (2, 4), (8, 9)], [3, 1, 1])
    runs, weights = join_alike([flat[c * 2 : c * 2 + 2] for c in range(5)], [1] * 5)
    assert [r.tobytes() for r in runs] == [flat[lo:hi].tobytes() for lo, hi in alike_runs(flat, key, 2)[0]]
    assert weights == [3, 1, 1]
    apart = key.copy()
    apart[4] = 9
    assert alike_runs(flat, apart, 2) == ([(0, 2), (2, 4), (8, 9)], [3, 1, 1])
    signed = entries(4, cycles=[0.0, 1.0, -0.0, 1.0])
    assert alike_runs(signed, np.array([0, 1, 2, 1]), 2) == ([(0, 2), (2, 4)], [1, 1])


def _tail_an_iteration_at_a_time(op, lay, t):
    """A stream-K tail's entries, core c's at [c x per, (c + 1) x per), each iteration worked
    out for itself (what `StreamK._tail_plan` builds a tile at a time): the reference."""
    from archsim.compiler.gemm_phases import operand_shares, work_items
    from archsim.compiler.l2reuse import wave_hbm_fractions
    from archsim.compiler.mappings.stream_k import RULE, die_window_steps, tail_local_l2_share
    from archsim.compiler.program import PARTIAL_BYTES
    from archsim.program import entries
    from archsim.units import ceil_div

    a, b = op.dtype.bytes, op.b_dtype.bytes
    items = work_items(op, lay, t)
    wave, dp = RULE.waves(len(items["kl"]), lay.cores)
    ksteps = ceil_div(op.k, t.tk)
    n = (len(items["kl"]) - dp) * ksteps
    per = ceil_div(n, lay.cores)
    tail = {key: v[dp:] for key, v in items.items()}
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    frac = float(wave_hbm_fractions(tail, wave[dp:] - wave[dp], a, b, 0.0, (sa, sb))[0])
    it = np.arange(n)
    core, (tile, s) = it // per, np.divmod(it, ksteps)
    em, en = tail["em"][tile], tail["en"][tile]
    ends = s == ksteps - 1
    ks = np.where(ends, op.k - t.tk * (ksteps - 1), t.tk)
    moved = ks * (em * a * sa + en * b * sb)
    flat = entries(n, hbm_bytes=moved * frac, l2_bytes=moved * (1.0 - frac))
    code = (em * (t.tk + 1) + ks) * (int(en.max()) + 1) + en
    _codes, first, flat["cycles"] = np.unique(code, return_index=True, return_inverse=True)
    first_it = tile * ksteps
    s0 = np.maximum(core * per, first_it) - first_it
    others = np.where(s0 > 0, (first_it + s0 - 1) // per - first_it // per + 1, 0)
    flat["l2_bytes"][ends] += (others * em * en * PARTIAL_BYTES)[ends]
    flat["store_bytes"][ends] = (em * en * op.c_dtype.bytes)[ends]
    cut = ~ends & (it == np.minimum(n, (core + 1) * per) - 1)
    flat["store_l2_bytes"][cut] = (em * en * PARTIAL_BYTES)[cut]
    shapes = tuple((int(em[i]), int(ks[i]), int(en[i])) for i in first)
    local = 0.0
    if lay.dies:
        blocks = (tail["g"][tile], tail["i"][tile], tail["j"][tile], s)
        window = die_window_steps(lay, float(np.mean(moved)))
        partials = float(np.sum((others * em * en * PARTIAL_BYTES)[ends]))
        moved_ab = (ks * em * a * sa, ks * en * b * sb)
        local = tail_local_l2_share(core % lay.dies, it - core * per, blocks, moved_ab, window, frac, partials)
    return flat, per, shapes, local


@pytest.mark.parametrize("hw", ["h200", "mi300x"])
@pytest.mark.parametrize(
    ("m", "k", "n"), [(200, 4096, 1536), (1537, 14336, 4096), (33, 1000, 2000), (3073, 4096, 6144)]
)
def test_a_stream_k_tail_is_the_one_an_iteration_at_a_time_would_give(hw, m, k, n):
    """The tail's entries are worked out a tile at a time, the cores' alike runs found by a key
    an iteration: the same entries, bit for bit, the same runs with the same weights and the
    same step shapes as an iteration at a time, for tiles of edge rows and K and on a chip of
    dies (the MI300X)."""
    from archsim.compiler.gemm_phases import join_alike, tiling_layout
    from archsim.compiler.mappings.stream_k import RULE
    from archsim.config.loader import load_system

    chip = load_system(hw)[0].chip
    op = Op(OpKind.GEMM, m=m, k=k, n=n, scaling=Scaling.FIXED)
    tilings = [
        Tiling(tm, tn, tk, GemmMapping.STREAM_K)
        for tm, tn, tk in ((128, 128, 64), (256, 128, 64), (64, 256, 128), (128, 64, 96))
        if (-(-m // tm) * -(-n // tn)) % chip.cores and -(-k // tk) > 1
    ]
    assert tilings
    for t in tilings:
        lay = tiling_layout(chip, t)
        plan = RULE._tail_plan(op, lay, t)
        flat, per, shapes, local = _tail_an_iteration_at_a_time(op, lay, t)
        cores = [flat[c * per : (c + 1) * per] for c in range(-(-len(flat) // per))]
        runs, weights = join_alike(cores, [1] * len(cores))
        assert [r.tobytes() for r in plan.runs] == [r.tobytes() for r in runs]
        assert list(plan.weights) == weights and plan.shapes == shapes
        assert plan.phase.local_l2_share == local and bool(lay.dies) == (hw == "mi300x")
        joined = np.concatenate(plan.runs)
        assert np.array_equal(plan.phase.hbm_bytes, joined["hbm_bytes"]) and np.array_equal(
            plan.phase.l2_bytes, joined["l2_bytes"]
        )


def test_cores_running_the_same_kinds_of_items_are_one_sequence():
    """Nine items of kinds 0 1 0 1 | 2 1 2 1 | 0 dealt to 4 cores: core 0 runs kinds [0, 2, 0],
    cores 1 and 3 [1, 1], core 2 [0, 2] (the start of core 0's, but one item shorter: another
    sequence). Three sequences in order of first appearance, run by 1, 2 and 1 cores, as
    `join_alike` finds them."""
    from archsim.compiler.gemm_phases import core_kinds, join_alike

    kind_of = np.array([0, 1, 0, 1, 2, 1, 2, 1, 0])
    sigs, weights = core_kinds(kind_of, 4)
    assert [s.tolist() for s in sigs] == [[0, 2, 0], [1, 1], [0, 2]] and weights == [1, 2, 1]
    runs, counts = join_alike([np.ascontiguousarray(kind_of[c::4]) for c in range(4)], [1] * 4)
    assert [r.tolist() for r in runs] == [s.tolist() for s in sigs] and counts == weights
    few, one_each = core_kinds(np.array([3, 3]), 4)  # fewer items than cores: one a core
    assert [s.tolist() for s in few] == [[3]] and one_each == [2]


def test_a_library_that_double_buffers_keeps_two_stages_whatever_the_sram():
    """128 x 256 x 32 bf16 stages: (128 x 32 + 32 x 256) x 2 B = 24,576 B. In the MI300X's 64 KiB
    LDS 65,536 // 24,576 = 2 fit; in 128 KiB 5, of which hipBLASLt's double-buffered kernels
    (`sram.gemm_stages: 2`) keep 2, and CUTLASS's (no `gemm_stages`) all 5. A compiled phase keeps
    a load in flight for every buffer but the one computing: 24,576 B on 2, 98,304 B on 5."""
    from dataclasses import replace

    from archsim.compiler.gemm_phases import library_stages, stage_bytes
    from archsim.config.loader import load_system

    mi300x = load_system("mi300x")[0].chip
    sram = mi300x.core.sram
    assert sram.gemm_stages == 2 and stage_bytes(128, 256, 32, 2, 2) == 24_576
    twice = replace(mi300x, core=replace(mi300x.core, sram=replace(sram, capacity_bytes=2 * sram.capacity_bytes)))
    carveout = replace(twice, core=replace(twice.core, sram=replace(twice.core.sram, gemm_stages=0)))
    assert library_stages(mi300x.core, 65_536 // 24_576) == 2
    assert library_stages(twice.core, 131_072 // 24_576) == 2
    assert library_stages(carveout.core, 131_072 // 24_576) == 5
    assert library_stages(twice.core, np.array([1, 2, 5])).tolist() == [1, 2, 2]
    op = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    t = Tiling(128, 256, 32, GemmMapping.STREAM_K)
    for chip, stages in ((mi300x, 2), (twice, 2), (carveout, 5)):
        phase = compile_gemm(op, chip, t).phases[0]
        assert (phase.stages, phase.inflight_bytes) == (stages, (stages - 1) * 24_576)


def test_a_square_gemm_shortlists_one_tile_of_each_transpose(h200):
    """4096 x 1024 x 4096 bf16: a 128 x 256 tile and its 256 x 128 transpose move the same bytes
    a step over the grid turned over, and the H200's warpgroup MMA takes either step in the same
    cycles; its shortlist holds tiles of tm <= tn only. A 4096 x 1024 x 2048 GEMM is not square:
    it keeps both. SCALE-Sim's weight-stationary array streams a tile's rows past its columns, so
    its 8192 x 128 steps are not 128 x 8192's: its 8192³ GEMM keeps SCALE-Sim's 35,119,103 cycles."""
    square = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=4096, scaling=Scaling.FIXED)
    picked = shortlist(square, h200.chip)
    assert len(picked) >= 4 and all(t.tm <= t.tn for t in picked)
    wide = Op(OpKind.GEMM, DType.BF16, m=4096, k=1024, n=2048, scaling=Scaling.FIXED)
    assert any(t.tm > t.tn for t in shortlist(wide, h200.chip))
    from archsim.choose import simulate_op
    from archsim.config.loader import load_system
    from archsim.hardware import Dataflow
    from archsim.hardware.systolic import scalesim_cycles

    ws = load_system("scalesim_ws_128x128")[0].chip
    cube = Op(OpKind.GEMM, DType.BF16, m=8192, k=8192, n=8192, scaling=Scaling.FIXED)
    assert simulate_op(cube, ws).cycles == scalesim_cycles(8192, 8192, 8192, 128, 128, Dataflow.WS) == 35_119_103
