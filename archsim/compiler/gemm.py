"""Tiling and mapping of GEMMs: output tiles that fit double-buffered in SRAM, dealt to cores in
waves, split along K when there are too few tiles to fill the cores, with L2 reuse per wave.

A mapping is a `Tiling`: the tile (tm x tn output, tk per K step) and how items are formed
(`GemmMapping`): one per output tile, `split` per tile along K with a reduction kernel after,
or stream-K, each a file of archsim/compiler/mappings/ that this module calls through its
registry. The tile shape is chosen as an autotuning kernel library would: every legal tiling of
every mapping is costed with a quick analytic estimate (compute per wave, the per-core
Little's-law bandwidth, L2 bandwidth; and, for a compiler that tunes for one chip, the time
main memory takes to feed it), the best, and the tiling that loads the fewest bytes, are
costed for HBM traffic with the L2 model the compiled phases use (archsim/compiler/l2reuse.py),
and the shortlist is compiled into Programs for the engine to play.
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import replace

import numpy as np

from archsim.compiler.chip_family import TileGrid, tile_grid
from archsim.compiler.families import family_rule
from archsim.compiler.formats import convert_lane_ops
from archsim.compiler.gemm_mapping import LOW_INTENSITY, Estimate
from archsim.compiler.gemm_phases import (
    GemmMapping,
    Tiling,
    WaveLayout,
    grid_shares,
    library_stages,
    mirrored,
    operand_shares,
    partials_fit,
    stage_bytes,
    tiling_layout,
    wave_layout,
    work_items,
)
from archsim.compiler.l2reuse import Raster, operand_hbm_bytes, rasters
from archsim.compiler.mappings import MAPPINGS, mapping_rule
from archsim.compiler.program import PARTIAL_BYTES
from archsim.compiler.tiles import compute_dtype, matmul_cycles
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.chip import MIN_K_STEP, MIN_TILE_EDGE
from archsim.hardware.memory import hbm_bandwidth, hbm_latency_s
from archsim.hardware.power import Activity
from archsim.memo import memo
from archsim.program import Family, Program
from archsim.units import ceil_div

# tile edges and K steps a kernel library offers (powers of two from the smallest the hardware takes)
TILE_SIZES = tuple(MIN_TILE_EDGE << i for i in range(7))  # 8 .. 512
K_STEPS = tuple(MIN_K_STEP << i for i in range(5))  # 32 .. 512
SHORTLIST = 4  # tilings played per GEMM (the autotuner's shortlist)
# a GEMM of fewer FLOPs per compulsory byte than LOW_INTENSITY (gemm_mapping.py) plays twice as
# many: its tilings mostly tie in the estimate, so its order is the ties' order; they are cheap to
# play (few K steps per core)
LOW_INTENSITY_SHORTLIST = 8
# a candidate tiling as `_scored` ranks it: (estimate, the rest of it, compute seconds, its
# Tiling's fields tm, tn, tk, mapping, split), a Tiling built only where the shortlist takes it
Scored = tuple[float, float, float, tuple[int, int, int, GemmMapping, int]]


def shortlist_size(op: Op) -> int:
    """Tilings the autotuner plays for the GEMM (`shortlist`): more below LOW_INTENSITY FLOPs
    per compulsory byte."""
    return LOW_INTENSITY_SHORTLIST if op.flops() < LOW_INTENSITY * op.min_bytes() else SHORTLIST


def candidate_tilings(op: Op, chip: Chip, count: int | None = None) -> list[Tiling]:
    """The `count` (`shortlist_size`) most promising tilings of the GEMM on the chip, best first
    (`shortlist`, worked out once per op and chip; archsim.choose keeps them in the op cache)."""
    return list(shortlist(op, chip, shortlist_size(op) if count is None else count))


@memo(maxsize=4096)
def shortlist(op: Op, chip: Chip, count: int = SHORTLIST) -> tuple[Tiling, ...]:
    """The `count` most promising tilings of the GEMM on the chip, best first, and after them
    the leanest (`_scored`) where it is not among them, and where the estimate counts the feed,
    the best by the rest of it likewise.

    Each legal tiling is costed analytically (compute per wave, the per-core Little's-law
    bandwidth, L2 bandwidth); the best 3 x `count` (`shortlist_head`) are then ranked with ties
    going to less HBM traffic, counted with the L2 model the compiled phases use, and then to
    less compute (`_tie_order`). A K step of
    the whole K is ranked apart from the pipelined K steps of its tile shape (its one step has no
    next step to load behind it), so that more SRAM, which makes it legal, keeps them. Where a
    tile and its transpose cost alike (`mirrored`: a square GEMM of one operand type, and the same
    step cycles and bytes, `_one_of_each_transpose`) a kernel library's list ranks the one of tm
    <= tn only, so that it spends no place on a twin (a compiler that searches,
    `FamilyRule.search_moves`, reaches a transpose's neighbours from its starts and stands on both
    at once: choose/pick.py `_Played`). Where the
    head holds fewer than `count` tile shapes (its best are one shape's K steps), the next best
    shapes fill it (`_scored`'s reserve), so the shortlist's length does not change with the chip.
    The engine plays the shortlist and keeps the fastest, as an autotuning kernel
    library does. A library's ranking leaves HBM bandwidth out, so a faster memory never changes
    which tilings are tried; a compiler that tunes for one chip counts it (`_scored`: `feed_s`),
    so that a GEMM its memory holds keeps the tilings that load least, and it plays the best by
    the rest of its estimate too, which a faster memory would rank first. The leanest tiling
    (the fewest bytes loaded), which a GEMM held by its memory traffic runs best as, is tried
    whatever the ranking, so a chip with more of a resource that speeds up other tilings'
    estimates still plays it.
    """
    lay = wave_layout(chip)
    # ranked by estimate, ties to less HBM traffic under the best raster, then to less compute
    # (where the estimate counts the feed, first to the rest of it: `_tie_order`);
    # one K step per tile shape and mapping (and one of the whole
    # K), so the shortlist spans different mappings. The rasters of a tiling are costed only when its estimate comes up: once `count` tile shapes
    # are in, later estimates cannot enter
    out: dict[tuple, Tiling] = {}
    head, leanest, reserve, unfed = _scored(op, chip, count)
    start = 0
    while start < len(head) and len(out) < count:
        end = start
        while end < len(head) and head[end][0] == head[start][0]:
            end += 1
        # a tiling whose shape is already in cannot enter, nor change the order of the rest of
        # its ties (the sort is stable): its rasters are not walked
        fresh = [(rest, compute, Tiling(*f)) for _est, rest, compute, f in head[start:end] if _key(op, *f) not in out]
        tied = sorted(((rest, *_best_raster(op, lay, t), compute) for rest, compute, t in fresh), key=_tie_order)
        for _rest, t, _hbm, _compute in tied:
            out.setdefault(_shape_key(op, t), t)
        start = end
    for _est, _rest, _compute, f in reserve:  # fewer than `count` shapes in the head: the next best shapes
        if len(out) >= count:
            break
        if _key(op, *f) not in out:
            out[_key(op, *f)] = _best_raster(op, lay, Tiling(*f))[0]
    kept = tuple(out.values())[:count]
    for extra in (leanest, unfed):
        if extra is not None and all(_shape_key(op, t) != _shape_key(op, extra) for t in kept):
            kept += (_best_raster(op, lay, extra)[0],)
    return kept


def _tie_order(x: tuple[float, Tiling, float, float]) -> tuple[float, float, float]:
    """The order of tilings of one estimate, each (the rest of its estimate, tiling, HBM bytes
    under its best raster, compute seconds): the rest first (equal where the estimate leaves the
    feed out), then less HBM traffic, then less compute. Tilings the feed holds alike (a GEMV's
    whole weights, read once under every tile) are ranked by what else the estimate sees before
    the few bytes the L2 walk tells them apart by."""
    return (x[0], x[2], x[3])


def _shape_key(op: Op, t: Tiling) -> tuple:
    """What the shortlist keeps one tiling of: its tile, mapping and slices, and whether its K
    step is the whole K."""
    return _key(op, t.tm, t.tn, t.tk, t.mapping, t.split)


def _key(op: Op, tm: int, tn: int, tk: int, mapping: GemmMapping, split: int) -> tuple:
    """`_shape_key` of the tiling of these fields."""
    return (tm, tn, mapping, split, tk >= op.k)


def shortlist_head(op: Op, chip: Chip, count: int = SHORTLIST) -> tuple[Tiling, ...]:
    """The tilings `shortlist` picks its `count` from, and the leanest (it returns some of these,
    each with its best raster), found by the analytic estimate alone: arithmetic over the tile
    grid, no L2 walk, so the size check before a run can bound what the compiler will build for
    nothing."""
    head, leanest, reserve, unfed = _scored(op, chip, count)
    extra = tuple(t for t in (leanest, unfed) if t is not None)
    return tuple(Tiling(*f) for _est, _rest, _compute, f in (*head, *reserve)) + extra


@memo(maxsize=4096)
def _scored(op: Op, chip: Chip, count: int) -> tuple[list[Scored], Tiling | None, list[Scored], Tiling | None]:
    """The best 3 x `count` tilings of every mapping by the analytic estimate, as (estimate,
    the rest of it, compute seconds, the tiling's fields: `Scored`), best first; where the
    family's compiler counts main memory's feed (`FamilyRule.estimates_feed`), the estimate is
    the slower of the rest (the mapping's `estimate`) and the feed (`feed_s`, and
    `spilled_partials_s`), and tilings the feed holds alike go by the rest; the leanest tiling:
    of the tile shapes whose cores load the fewest bytes in all (`loaded_bytes`: what the GEMM
    reads from HBM where no load hits L2, and an upper bound on it where some do), the best by
    estimate of any mapping; and a reserve: each mapping's best `count` tile shapes
    (`_shape_key`: one K step each) not in the head, best first, 3 x `count` at most."""
    m, k, n = op.m, op.k, op.n
    a, b = op.dtype.bytes, op.b_dtype.bytes
    core = chip.core
    tm, tn, tk = tile_menu(op, chip)
    stage = stage_bytes(tm, tn, tk, a, b)
    lay = wave_layout(chip)
    share_a, share_b = grid_shares(op, lay, tm, tn)
    moved_stage = tm * tk * a * share_a + tk * tn * b * share_b  # bytes a core loads per step
    em, en = np.minimum(tm, m), np.minimum(tn, n)
    family = family_rule(chip)
    install = family.weight_install_bytes_per_cycle(chip)
    chained = family.chains_folds(chip)
    cycles_per_step = matmul_cycles(
        core, em, np.minimum(tk, k), en, op.dtype, op.b_dtype, install, chained, transposable=True
    )
    if mirrored(op) and not family.search_moves():  # a library's list, timed as it is: one of each twin
        keep = _one_of_each_transpose(tm, tn, tk, cycles_per_step, moved_stage)
        tm, tn, tk, stage, moved_stage, em, en, cycles_per_step = (
            x[keep] for x in (tm, tn, tk, stage, moved_stage, em, en, cycles_per_step)
        )
    tiles = op.groups * ceil_div(m, tm) * ceil_div(n, tn)
    ksteps = ceil_div(k, tk)
    stages = np.maximum(1, library_stages(core, core.sram.capacity_bytes // stage))
    lat = hbm_latency_s(chip)
    rate = np.minimum(core.max_inflight_bytes, (stages - 1).clip(1) * stage) / lat
    e = Estimate(op, chip, tiles, ksteps, cycles_per_step, moved_stage, rate, lat, stages, em, en)
    fed_s = feed_s(op, chip, tm, tn, cycles_per_step) if family.estimates_feed() else None
    loaded = loaded_bytes(tiles, ksteps, moved_stage)
    leanest = loaded <= loaded.min() * (1 + LEANEST_REL)
    shape = (tm * (int(tn.max()) + 1) + tn) * 2 + (tk >= k)  # one number per `_shape_key` of a mapping
    # each candidate as (estimate, the rest of it, compute seconds, its Tiling's fields): every
    # mapping and split estimated, then ranked as rows of one array each, and the candidates
    # each row picks read off them at once (a Tiling is built only where `shortlist` takes one)
    runs = [(rule.mapping, split, *rule.estimate(e, split)) for rule in MAPPINGS.values() for split in rule.splits(e)]
    scored: list[Scored] = []
    lean: list[Scored] = []
    quick: list[Scored] = []
    spare: list[Scored] = []
    if runs:
        rest, compute_s = np.stack([r[2] for r in runs]), np.stack([r[3] for r in runs])
        est = rest
        if fed_s is not None:
            spilled = np.array([[spilled_partials_s(op, chip, lay, split)] for _m, split, *_ in runs])
            est = np.maximum(rest, fed_s + spilled)
        order = np.lexsort((compute_s, rest, est))  # each row's candidates, best first
        finite = np.isfinite(est)
        rows = np.arange(len(runs))[:, None]
        lean_ranked = (leanest & finite)[rows, order]  # where each row's lean candidates rank
        has_lean, first_lean = lean_ranked.any(axis=1).tolist(), lean_ranked.argmax(axis=1).tolist()
        shapes = shape[order].tolist()
        best_rest = (np.lexsort((compute_s, rest))[:, :1] if fed_s is not None else order[:, :0]).tolist()
        # (the list, row, candidates) in the order of the rows, each row's candidates in its order
        picks: list[tuple[list[Scored], int, list[int]]] = []
        for i, row in enumerate(order.tolist()):
            picks += (
                (scored, i, row[:count]),
                (spare, i, [row[j] for j in _first_of_each(shapes[i], count)]),  # each shape's best K step
                (lean, i, [row[first_lean[i]]] if has_lean[i] else []),
                (quick, i, best_rest[i]),
            )
        at = np.array([j for *_, picked in picks for j in picked], dtype=np.intp)
        of = np.repeat([i for _into, i, _p in picks], [len(p) for *_, p in picks])
        fields = zip(tm[at].tolist(), tn[at].tolist(), tk[at].tolist(), strict=True)
        values = zip(est[of, at].tolist(), rest[of, at].tolist(), compute_s[of, at].tolist(), strict=True)
        for into, i, picked in picks:
            mapping, split = runs[i][0], runs[i][1]
            for (x, r, c), f in itertools.islice(zip(values, fields), len(picked)):
                if math.isfinite(x):  # an estimate of inf: a tiling the mapping cannot run
                    into.append((x, r, c, (*f, mapping, split)))
    by_estimate, by_rest = operator.itemgetter(0, 1, 2), operator.itemgetter(1, 2)
    scored.sort(key=by_estimate)
    lean.sort(key=by_estimate)
    quick.sort(key=by_rest)
    head = scored[: 3 * count]
    spare.sort(key=by_estimate)
    in_head = set(head)
    reserve = [x for x in spare if x not in in_head][: 3 * count]  # equal where their fields are
    unfed = Tiling(*quick[0][3]) if quick else None
    return head, (Tiling(*lean[0][3]) if lean else None), reserve, unfed


def _one_of_each_transpose(tm: np.ndarray, tn: np.ndarray, tk: np.ndarray, cycles: np.ndarray, moved: np.ndarray):
    """Which tiles of a `mirrored` GEMM's menu a library's list ranks: all but a tile of tm > tn
    whose transpose is on the menu with the same step cycles and bytes a step, so that the two,
    which the estimate cannot tell apart, take one place. Where the matrix units' step is not
    symmetric (a weight-stationary array streams the tile's rows past its columns: 8192 x 128
    and 128 x 8192 steps differ) both are ranked. E.g. tiles (128, 256, 32), (256, 128, 32) and
    (256, 64, 32) of equal cycles and bytes: the second goes, the third (no 64 x 256) stays."""
    at = {t: i for i, t in enumerate(zip(tm.tolist(), tn.tolist(), tk.tolist()))}
    keep = np.ones(len(tm), dtype=bool)
    for (m, n, k), i in at.items():
        j = at.get((n, m, k)) if m > n else None
        keep[i] = j is None or cycles[i] != cycles[j] or moved[i] != moved[j]
    return keep


def _first_of_each(keys: list[int], count: int) -> list[int]:
    """The positions in `keys` where the first `count` distinct keys first occur, in order (what
    `np.sort(np.unique(keys, return_index=True)[1])[:count]` gives, found without sorting them
    all: the walk stops at the `count`th new key). E.g. [5, 5, 7, 5, 9, 7, 3], 2: [0, 2]."""
    seen: set[int] = set()
    out: list[int] = []
    for i, key in enumerate(keys if count > 0 else ()):
        if key not in seen:
            seen.add(key)
            out.append(i)
            if len(out) == count:
                break
    return out


def wave_operand_bytes(op: Op, lay: WaveLayout, tm: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """Bytes of A and B a GEMM reads from main memory under each tile shape, by arithmetic over
    the tile grid, as the L2 model (l2reuse.py) sees its waves but without walking them
    (`_walked_hbm_bytes`). A wave of W = min(cores, tiles of a group) tiles is a block of r x c
    of them (r x c >= W, r <= W; r row panels of A and c column panels of B, each K long, read once by
    the wave: its tiles run together), and the waves sweep the grid along a block row of r
    row panels (or, the same with A and B swapped, down a block column). The L2, of reuse
    capacity C, keeps a wave's panels for the next where they fit (the sweep reads A once) and
    B whole where it fits beside them (else each block row reads all of B):

        A_w = min(r tm, M) K a    B_w = min(c tn, N) K b    waves = ceil(tiles of a group / W)
        A reads = MKa where A_w + B_w <= C, else waves x A_w
        B reads = KNb where KNb + A_w <= C, else ceil(row blocks / r) x KNb

    the least of every r, both ways (MKa + KNb where both fit in C), times the groups. E.g.
    4096 x 1024 x 4096 bf16 (A and B 8 MiB each) on 8 cores with 256 KiB of L2: 512 x 512 tiles
    (an 8 x 8 grid) as 2 x 4 blocks, 8 waves of 2 MiB of A, 4 block rows reading B:
    16 + 32 = 48 MiB (50,331,648 B); 128 x 4096 tiles (32 x 1) as 8 x 1: 4 waves of 2 MiB of A,
    4 block rows: 8 + 32 = 40 MiB (41,943,040 B). With 12 MiB of L2, 512 x 512 reads A once
    (6 MiB a wave) and B once (8 + 2 MiB): 16 MiB."""
    rows, cols = ceil_div(op.m, tm), ceil_div(op.n, tn)
    wave = np.minimum(lay.cores, rows * cols)
    waves = ceil_div(rows * cols, wave)
    a_row, b_col = op.k * op.dtype.bytes, op.k * op.b_dtype.bytes
    a_all, b_all, cap = op.m * a_row, op.n * b_col, lay.reuse_capacity_bytes
    least = np.full(len(tm), a_all + b_all if a_all + b_all <= cap else np.inf)
    r = 1
    while r < 2 * int(rows.max()):
        rr = np.minimum(np.maximum(r, ceil_div(wave, cols)), np.minimum(rows, wave))
        cc = np.minimum(ceil_div(wave, rr), cols)
        a_w, b_w = np.minimum(rr * tm, op.m) * a_row, np.minimum(cc * tn, op.n) * b_col
        kept = a_w + b_w <= cap  # a wave's panels stay for the next
        a_reads, b_reads = np.where(kept, a_all, waves * a_w), np.where(kept, b_all, waves * b_w)
        along_rows = a_reads + np.where(b_all + a_w <= cap, b_all, ceil_div(rows, rr) * b_all)
        along_cols = b_reads + np.where(a_all + b_w <= cap, a_all, ceil_div(cols, cc) * a_all)
        least = np.minimum(least, np.minimum(along_rows, along_cols))
        r *= 2
    return op.groups * least


def feed_s(op: Op, chip: Chip, tm: np.ndarray, tn: np.ndarray, cycles_per_step: np.ndarray) -> np.ndarray:
    """The least time main memory takes to feed a GEMM under each tile shape: one access latency
    L, then its operands (`wave_operand_bytes`) and its output at the bandwidth a stream of the
    GEMM's write share reaches (`hbm_bandwidth`, the output over the compulsory bytes), and the
    last K step's compute (`cycles_per_step` at the clock), which waits for its operands:

        feed = L + (operands + M x N x c) / bandwidth + cycles of a step / clock

    A compiler that tunes for one chip costs a tiling by the slower of its compute and its
    memory traffic (the roofline of the Pallas TPU matmul guide, which sizes blocks by the bytes
    they re-read from HBM; XLA's analytical TPU cost model, Kaufman et al., MLSys 2021): an
    estimate that leaves it out ranks a tiling whose compute is fast ahead of one that loads
    less, on a chip its memory holds; and among tilings that load alike (a GEMV's weights, read
    once under any tile) the one whose last step computes longest ends last. E.g. 100 MB at
    1 TB/s after 500 ns, then a 1,000-cycle step at 1 GHz: 0.5 + 100 + 1 = 101.5 us."""
    out = op.groups * op.m * op.n * op.c_dtype.bytes
    bandwidth = hbm_bandwidth(chip, out / op.min_bytes())
    moved = wave_operand_bytes(op, wave_layout(chip), tm, tn) + out
    return hbm_latency_s(chip) + moved / bandwidth + cycles_per_step / chip.clock_hz


def spilled_partials_s(op: Op, chip: Chip, lay: WaveLayout, split: int) -> float:
    """Seconds main memory takes to write and read back the fp32 partials of a GEMM split `split`
    ways along K where they do not fit in L2 (as `_walked_hbm_bytes` counts them), at the
    bandwidth of a stream half writes: 0 unsplit. E.g. 2 slices of a 4096 x 4096 output at
    1 TB/s: 2 x 2 x 4096 x 4096 x 4 B = 268 us."""
    if split == 1 or partials_fit(op, lay.l2_capacity_bytes, split):
        return 0.0
    return 2 * split * op.groups * op.m * op.n * PARTIAL_BYTES / hbm_bandwidth(chip, 0.5)


LEANEST_REL = 1e-9  # loaded bytes within this of the least tie for the leanest (float rounding)


def loaded_bytes(tiles: np.ndarray, ksteps: np.ndarray, moved_stage: np.ndarray) -> np.ndarray:
    """Bytes the cores load in all under each tile shape: every tile's K steps, each its share of
    an A block and a B block (`moved_stage`):

        loaded = tiles x K steps x moved_stage

    E.g. a 4096 x 1024 x 4096 bf16 GEMM in 2048 x 4096 x 512 tiles: 2 tiles x 2 steps x
    (2048 x 512 + 512 x 4096) x 2 B = 25,165,824 B (A once, B twice); in 2048 x 2048 x 512
    tiles, 4 x 2 x 4 MiB = 33,554,432 B (A and B twice each)."""
    return tiles * ksteps * moved_stage


@memo(maxsize=4096)
def tile_menu(op: Op, chip: Chip) -> TileGrid:
    """The (tm, tn, tk) the chip's compiler may choose for the GEMM: its family's
    (archsim/compiler/families/), else the kernel library's (`library_tiles`). Its arrays are
    shared, and read-only."""
    return family_rule(chip).gemm_tiles(op, chip) or library_tiles(op, chip)


def library_tiles(op: Op, chip: Chip) -> TileGrid:
    """A GPU kernel library's tiles of the GEMM: power-of-two edges from TILE_SIZES and K steps
    from K_STEPS, and the whole dimension (one tile), where two stages fit the core's SRAM and
    the output tile its accumulators (the smallest stage where none does)."""
    core = chip.core
    tm, tn, tk, stage, partials = _library_grid(op.m, op.k, op.n, op.dtype.bytes, op.b_dtype.bytes)
    ok = (2 * stage <= core.sram.capacity_bytes) & (partials <= core.accumulator_bytes)
    if not ok.any():
        ok = stage == stage.min()
    return tm[ok], tn[ok], tk[ok]


@memo(maxsize=1024)
def _library_grid(m: int, k: int, n: int, a: float, b: float) -> tuple[np.ndarray, ...]:
    """Every tile of `library_tiles` before the core's SRAM and accumulators rule some out, with
    the bytes of its stage and of its fp32 partials: the same for every chip, so worked out once
    per GEMM shape and operand widths (`a`, `b` bytes) for the chips of a sweep. Its arrays are
    shared, and read-only."""
    tms = sorted({t for t in TILE_SIZES if t < 2 * m} | {m})
    tns = sorted({t for t in TILE_SIZES if t < 2 * n} | {n})
    tks = sorted({t for t in K_STEPS if t < 2 * k} | {k})
    tm, tn, tk = tile_grid(tms, tns, tks)
    grid = (tm, tn, tk, stage_bytes(tm, tn, tk, a, b), tm * tn * PARTIAL_BYTES)
    for x in grid:
        x.flags.writeable = False  # shared by every caller
    return grid


def best_raster(op: Op, chip: Chip, t: Tiling) -> tuple[Tiling, float]:
    """The tiling with the raster that reads the least from HBM (the first of equals, row-major
    first), and those bytes: a raster changes only which loads hit L2. Where tiles launch in
    clusters, the raster orders the clusters."""
    return _best_raster(op, tiling_layout(chip, t), t)


@memo(maxsize=16384)
def _best_raster(op: Op, lay: WaveLayout, t: Tiling) -> tuple[Tiling, float]:
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    c = lay.multicast
    grid = ceil_div(op.m, t.tm) // (c if sb < 1 else 1), ceil_div(op.n, t.tn) // (c if sa < 1 else 1)
    options = rasters(*grid)
    hbm, i = min((_walked_hbm_bytes(op, lay, _walked_tiling(t, r, g)), i) for i, (r, g) in enumerate(options))
    return replace(t, raster=options[i][0], group=options[i][1]), hbm


def compile_gemm(op: Op, chip: Chip, tiling: Tiling) -> Program:
    """Compile a GEMM (or `groups` equal GEMMs) with `tiling` into its phases: the GEMM and, if
    split along K, the reduction kernel."""
    phases = mapping_rule(tiling.mapping).phases(op, chip, tiling)
    reduce_ops = op.groups * op.m * op.n * tiling.split if tiling.split > 1 else 0.0
    mac = compute_dtype(op.dtype, op.b_dtype)
    activity = Activity(macs=op.flops() / 2, mac_dtype=mac, lane_ops=reduce_ops + conversion_ops(op, chip, tiling))
    return Program(tuple(phases), op.flops(), op.min_bytes(), True, activity, Family.GEMM)


def conversion_ops(op: Op, chip: Chip, t: Tiling) -> float:
    """Lane instructions converting operands over the whole GEMM (formats.py): every tile
    converts the B block of its column and the A block of its row, each for itself."""
    ca, cb = convert_lane_ops(chip.core.array, op.dtype, op.b_dtype)
    if not (ca or cb):
        return 0.0
    rows, cols = ceil_div(op.m, t.tm), ceil_div(op.n, t.tn)
    return float(op.groups * op.k * (rows * op.n * cb + cols * op.m * ca))


def _schedule(op: Op, lay: WaveLayout, t: Tiling) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """The tiling's work items in launch order, the wave each runs in, and how many of them
    (the first) run data-parallel, as its mapping deals them (`GemmMappingRule.waves`)."""
    items = work_items(op, lay, t)
    wave, dp = mapping_rule(t.mapping).waves(len(items["kl"]), lay.cores)
    return items, wave, dp


def tiling_hbm_bytes(op: Op, chip: Chip, t: Tiling) -> float:
    """HBM bytes of the GEMM under `t`: operands after L2 reuse (l2reuse.py), the output, and
    the fp32 partials of a split-K GEMM written and read back where they do not fit in L2."""
    return _tiling_hbm_bytes(op, tiling_layout(chip, t), t)


def _tiling_hbm_bytes(op: Op, lay: WaveLayout, t: Tiling) -> float:
    """`tiling_hbm_bytes`, worked out once per op, layout and tiling (the tilings of a sweep's
    chips recur, their rasters each costed by a walk over the waves). A tiling of one K slice
    reads the same under every K step (its items span the whole K, whatever the step), so its
    K steps share one walk."""
    return _walked_hbm_bytes(op, lay, _walked_tiling(t, t.raster, t.group))


def _walked_tiling(t: Tiling, raster: Raster, group: int) -> Tiling:
    """The tiling `_walked_hbm_bytes` walks for `t` under `raster` (`group` row blocks a group):
    of one K slice, under a K step of 1, which all its K steps share."""
    return Tiling(t.tm, t.tn, 1 if t.split == 1 else t.tk, t.mapping, t.split, raster, group, t.grid)


@memo(maxsize=16384)
def _walked_hbm_bytes(op: Op, lay: WaveLayout, t: Tiling) -> float:
    """`_tiling_hbm_bytes` of a tiling (of one K slice: under a K step of 1)."""
    items, wave, _dp = _schedule(op, lay, t)
    a, b = op.dtype.bytes, op.b_dtype.bytes
    total = operand_hbm_bytes(items, wave, a, b, lay.reuse_capacity_bytes, operand_shares(op, lay, t.tm, t.tn))
    total += op.groups * op.m * op.n * op.c_dtype.bytes
    if t.split > 1 and not partials_fit(op, lay.l2_capacity_bytes, t.split):
        total += 2 * t.split * op.groups * op.m * op.n * PARTIAL_BYTES
    return total
