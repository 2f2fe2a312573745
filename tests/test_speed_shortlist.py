"""The GEMM tiling shortlist's ranking (archsim/compiler/gemm.py `_scored`) reads every mapping and
split's candidates off one array each: what it ranks, and in which order, is what ranking them
one mapping and split at a time gives (`_scored_one_at_a_time` below, the ranking as it was
written before), on every family's chips."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.commands.run import load_run_inputs
from archsim.compiler import gemm
from archsim.compiler.families import family_rule
from archsim.compiler.gemm import _first_of_each, library_tiles
from archsim.compiler.gemm_mapping import Estimate
from archsim.compiler.gemm_phases import grid_shares, library_stages, stage_bytes, wave_layout
from archsim.compiler.mappings import MAPPINGS
from archsim.compiler.tiles import matmul_cycles
from archsim.dtypes import DType
from archsim.graph.ops import Op, OpKind, Scaling
from archsim.hardware.memory import hbm_latency_s
from archsim.units import ceil_div


def test_one_of_each_transpose_by_hand():
    """Tiles (128, 256, 32), (256, 128, 32) and (256, 64, 32), the first two of equal step cycles
    and bytes: the second goes; the third stays (no 64 x 256 on the menu). With the second's
    cycles 1 higher (an array whose step is not symmetric), both stay."""
    tm, tn, tk = np.array([128, 256, 256]), np.array([256, 128, 64]), np.array([32, 32, 32])
    moved = np.array([24_576.0, 24_576.0, 20_480.0])
    assert gemm._one_of_each_transpose(tm, tn, tk, np.array([512, 512, 256]), moved).tolist() == [True, False, True]
    assert gemm._one_of_each_transpose(tm, tn, tk, np.array([512, 513, 256]), moved).tolist() == [True, True, True]


def test_first_of_each_finds_where_each_new_key_first_occurs():
    """[5, 5, 7, 5, 9, 7, 3]: 5 first at 0, 7 at 2, 9 at 4, 3 at 6; the first two are [0, 2]."""
    keys = [5, 5, 7, 5, 9, 7, 3]
    assert _first_of_each(keys, 2) == [0, 2]
    assert _first_of_each(keys, 9) == [0, 2, 4, 6]
    assert _first_of_each(keys, 0) == [] and _first_of_each([], 3) == []


@given(st.lists(st.integers(0, 6), max_size=40), st.integers(0, 9))
def test_first_of_each_is_what_sorting_the_unique_keys_gives(keys, count):
    first = np.unique(np.array(keys, dtype=np.int64), return_index=True)[1]
    assert _first_of_each(keys, count) == np.sort(first)[:count].tolist()


def _scored_one_at_a_time(op: Op, chip, count: int):
    """`_scored` as written before: each mapping and split ranked apart, its picks read off its
    arrays one list at a time, and every candidate kept as a Tiling's fields."""
    m, k, n = op.m, op.k, op.n
    a, b = op.dtype.bytes, op.b_dtype.bytes
    core = chip.core
    tm, tn, tk = gemm.tile_menu(op, chip)
    stage = stage_bytes(tm, tn, tk, a, b)
    lay = wave_layout(chip)
    share_a, share_b = grid_shares(op, lay, tm, tn)
    moved_stage = tm * tk * a * share_a + tk * tn * b * share_b
    em, en = np.minimum(tm, m), np.minimum(tn, n)
    family = family_rule(chip)
    install, chained = family.weight_install_bytes_per_cycle(chip), family.chains_folds(chip)
    cycles = matmul_cycles(core, em, np.minimum(tk, k), en, op.dtype, op.b_dtype, install, chained, transposable=True)
    if op.m == op.n and op.dtype is op.b_dtype and not family.search_moves():
        keep = gemm._one_of_each_transpose(tm, tn, tk, cycles, moved_stage)
        tm, tn, tk, stage, moved_stage, em, en, cycles = (
            x[keep] for x in (tm, tn, tk, stage, moved_stage, em, en, cycles)
        )
    tiles = op.groups * ceil_div(m, tm) * ceil_div(n, tn)
    ksteps = ceil_div(k, tk)
    stages = np.maximum(1, library_stages(core, core.sram.capacity_bytes // stage))
    lat = hbm_latency_s(chip)
    rate = np.minimum(core.max_inflight_bytes, (stages - 1).clip(1) * stage) / lat
    e = Estimate(op, chip, tiles, ksteps, cycles, moved_stage, rate, lat, stages, em, en)
    fed_s = gemm.feed_s(op, chip, tm, tn, cycles) if family.estimates_feed() else None
    loaded = gemm.loaded_bytes(tiles, ksteps, moved_stage)
    leanest = loaded <= loaded.min() * (1 + gemm.LEANEST_REL)
    shape = (tm * (int(tn.max()) + 1) + tn) * 2 + (tk >= k)
    scored, lean, quick, spare = [], [], [], []
    for rule in MAPPINGS.values():
        for split in rule.splits(e):
            est, compute_s = rule.estimate(e, split)
            rest = est
            if fed_s is not None:
                est = np.maximum(rest, fed_s + gemm.spilled_partials_s(op, chip, lay, split))
            order = np.lexsort((compute_s, rest, est))
            finite = np.isfinite(est)
            _shapes, first = np.unique(shape[order], return_index=True)
            best_lean = order[leanest[order] & finite[order]][:1]
            best_rest = np.lexsort((compute_s, rest))[:1] if fed_s is not None else order[:0]
            picks = (
                (scored, order[:count]),
                (spare, order[np.sort(first)][:count]),
                (lean, best_lean),
                (quick, best_rest),
            )
            for into, picked in picks:
                picked = picked[finite[picked]]
                fields = zip(tm[picked].tolist(), tn[picked].tolist(), tk[picked].tolist(), strict=True)
                times = zip(est[picked].tolist(), rest[picked].tolist(), compute_s[picked].tolist(), strict=True)
                into += [(*x, (*f, rule.mapping, split)) for x, f in zip(times, fields, strict=True)]
    scored.sort(key=lambda x: x[:3])
    lean.sort(key=lambda x: x[:3])
    quick.sort(key=lambda x: x[1:3])
    head = scored[: 3 * count]
    spare.sort(key=lambda x: x[:3])
    reserve = [x for x in spare if x not in head][: 3 * count]
    unfed = gemm.Tiling(*quick[0][3]) if quick else None
    return head, (gemm.Tiling(*lean[0][3]) if lean else None), reserve, unfed


GEMMS = [
    Op(OpKind.GEMM, DType.BF16, m=1, k=4096, n=14336, scaling=Scaling.FIXED),  # a decode GEMV
    Op(OpKind.GEMM, DType.BF16, m=4096, k=4096, n=1024, scaling=Scaling.FIXED),
    Op(OpKind.GEMM, DType.BF16, m=100, k=300, n=700, scaling=Scaling.FIXED),  # no edge a power of two
    Op(OpKind.GEMM, DType.BF16, m=512, k=7168, n=2048, groups=8, scaling=Scaling.FIXED),  # MoE experts
    Op(OpKind.GEMM, DType.BF16, m=2048, k=1024, n=2048, scaling=Scaling.FIXED),  # square: one of each transpose
]


@pytest.mark.parametrize("preset", ["h200", "a100", "mi300x", "tpu_v6e", "dataflow_2stack", "lpu", "scalesim_ws_32x32"])
def test_the_ranking_is_what_ranking_each_mapping_and_split_apart_gives(preset):
    """Head, leanest, reserve and the best without the feed, to the bit (repr shows each float's
    every digit and an int apart from a float), on chips whose compilers do and do not count the
    feed (tpu_v6e, dataflow_2stack: `estimates_feed`)."""
    chip = load_run_inputs(preset, "llama3_8b", batch=1, prompt=32, generate=2)[0].chip
    for op, count in itertools.product(GEMMS, (gemm.SHORTLIST, gemm.LOW_INTENSITY_SHORTLIST)):
        assert repr(gemm._scored.__wrapped__(op, chip, count)) == repr(_scored_one_at_a_time(op, chip, count))


def test_the_library_menu_is_worked_out_per_shape_and_ruled_by_each_chip():
    """The tile grid is worked out once per GEMM shape; each chip's SRAM still rules out its own
    tiles: with half the H200's SRAM fewer are legal, and the H200's own menu is as before."""
    chip = load_run_inputs("h200", "llama3_8b", batch=1, prompt=32, generate=2)[0].chip
    halved = replace(
        chip, core=replace(chip.core, sram=replace(chip.core.sram, capacity_bytes=chip.core.sram.capacity_bytes // 2))
    )
    op = GEMMS[1]
    whole = [x.copy() for x in library_tiles(op, chip)]
    assert 0 < len(library_tiles(op, halved)[0]) < len(whole[0])
    assert all((x == y).all() for x, y in zip(whole, library_tiles(op, chip), strict=True))
