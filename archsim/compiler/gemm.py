"""Tiling and mapping of GEMMs: output tiles that fit double-buffered in SRAM, dealt to cores in
waves, split along K when there are too few tiles to fill the cores, with L2 reuse per wave.

A mapping is a `Tiling`: the tile (tm x tn output, tk per K step) and how items are formed
(`GemmMapping`): one per output tile, `split` per tile along K with a reduction kernel after,
or stream-K. The tile shape is chosen as an autotuning kernel library would: every legal tiling
is costed with a quick analytic estimate (compute per wave, the per-core Little's-law bandwidth,
L2 bandwidth), the best are costed for HBM traffic with the L2 model the compiled phases use
(archsim/compiler/l2reuse.py), and the shortlist is compiled into Programs for the engine to play.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from archsim.compiler.formats import convert_lane_ops
from archsim.compiler.l2reuse import Raster, cluster_order, operand_hbm_bytes, rasters, wave_hbm_fractions
from archsim.compiler.program import PARTIAL_BYTES, build_phase
from archsim.compiler.streaming import Stream, streaming_phase
from archsim.compiler.tiles import compute_dtype, matmul_cycles, step_cycles
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.chip import MIN_K_STEP, MIN_TILE_EDGE
from archsim.hardware.memory import hbm_latency_s, l2_bandwidth, l2_latency_s
from archsim.hardware.power import Activity
from archsim.memo import memo, on_clear
from archsim.program import ENTRY, Family, Phase, Program, entries, entry_rows
from archsim.units import ceil_div

# tile edges and K steps a kernel library offers (powers of two from the smallest the hardware takes)
TILE_SIZES = tuple(MIN_TILE_EDGE << i for i in range(7))  # 8 .. 512
K_STEPS = tuple(MIN_K_STEP << i for i in range(5))  # 32 .. 512
SPLITS = (2, 3, 4, 6, 8, 12, 16)  # K slices per tile a split-K kernel offers
SHORTLIST = 4  # tilings played per GEMM (the autotuner's shortlist)
# a GEMM of fewer FLOPs per compulsory byte (decode's and short prefills' GEMMs: about M) plays
# twice as many: the estimate leaves HBM out, and such a GEMM's tilings mostly tie on it (L2 or
# per-core feed), so its order is the ties' order; they are cheap to play (few K steps per core)
LOW_INTENSITY = 256.0
LOW_INTENSITY_SHORTLIST = 8


class GemmMapping(str, Enum):
    """How a GEMM's work items are formed from its output tiles."""

    DATA_PARALLEL = "data-parallel"  # one item per output tile
    SPLIT_K = "split-k"  # `split` items per tile along K, then a reduction kernel
    STREAM_K = "stream-k"  # full waves data-parallel, the rest's K iterations spread evenly


@dataclass(frozen=True)
class Tiling:
    """A GEMM mapping: tm x tn output tiles computed tk of K per step, as `mapping` forms items,
    launched in `raster` order (l2reuse.py)."""

    tm: int
    tn: int
    tk: int
    mapping: GemmMapping = GemmMapping.DATA_PARALLEL
    split: int = 1  # K slices per tile (SPLIT_K)
    raster: Raster = Raster.ROW
    group: int = 1  # row blocks per group of a GROUPED raster

    @property
    def label(self) -> str:
        shape = f"{self.tm}x{self.tn}x{self.tk}"
        order = f"{self.raster.value}{self.group if self.raster is Raster.GROUPED else ''}"
        if self.mapping is GemmMapping.STREAM_K:
            return f"stream-K {shape} {order}"
        return f"gemm {shape} split{self.split} {order}"


def pipeline_bytes(stages: int, stage_bytes: float) -> float:
    """Bytes a pipelined kernel keeps in flight: a load for every buffer but the one computing."""
    return max(1, stages - 1) * stage_bytes


@dataclass(frozen=True)
class WaveLayout:
    """What of a chip decides a GEMM's work items, the waves they run in and which of their
    operand loads hit L2: the cores, the cores one transfer feeds (`noc.multicast`), and the
    L2's capacity and partitions. Not the arrays, SRAM, clock or HBM: chips that differ only in
    those (the points of a sweep) share what is worked out from it."""

    cores: int
    multicast: int
    l2_capacity_bytes: int
    l2_partitions: int

    @property
    def reuse_capacity_bytes(self) -> float:
        """L2 bytes that can hold operand panels every core reads: one partition's worth."""
        return self.l2_capacity_bytes / self.l2_partitions


@memo(maxsize=256)
def wave_layout(chip: Chip) -> WaveLayout:
    """The chip's wave layout."""
    return WaveLayout(chip.cores, chip.noc.multicast, chip.l2.capacity_bytes, chip.l2.partitions)


def operand_shares(op: Op, lay: WaveLayout, tm: int, tn: int) -> tuple[float, float]:
    """Shares of its A and B blocks each core moves itself: with a cluster of c cores that one
    transfer feeds (Hopper's TMA multicast, `noc.multicast`), the cluster's cores that compute
    tiles of one column share the B block (of one row, the A block): the larger of the two
    that the grid lets c tiles share is moved once per cluster."""
    c = lay.multicast
    if c <= 1 or lay.cores < c:
        return 1.0, 1.0
    a_block, b_block = tm * op.dtype.bytes, tn * op.b_dtype.bytes
    # every tile needs a partner in its cluster: the shared dimension's blocks pair up exactly
    rows, cols = ceil_div(op.m, tm), ceil_div(op.n, tn)
    share_b = rows % c == 0 and b_block >= a_block
    share_a = cols % c == 0 and not share_b
    return (1.0 / c if share_a else 1.0), (1.0 / c if share_b else 1.0)


def grid_shares(op: Op, lay: WaveLayout, tm: np.ndarray, tn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`operand_shares` of many tile shapes at once (arrays of tm and tn)."""
    c = lay.multicast
    if c <= 1 or lay.cores < c:
        return np.ones(len(tm)), np.ones(len(tm))
    a_block, b_block = tm * op.dtype.bytes, tn * op.b_dtype.bytes
    share_b = (ceil_div(op.m, tm) % c == 0) & (b_block >= a_block)
    share_a = (ceil_div(op.n, tn) % c == 0) & ~share_b
    return np.where(share_a, 1.0 / c, 1.0), np.where(share_b, 1.0 / c, 1.0)


def _stage_bytes(tm, tn, tk, a: float, b: float):
    """SRAM of one pipeline stage: a tm x tk block of A and a tk x tn block of B."""
    return tm * tk * a + tk * tn * b


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
    """The `count` most promising tilings of the GEMM on the chip, best first.

    Each legal tiling is costed analytically (compute per wave, the per-core Little's-law
    bandwidth, L2 bandwidth); the best 3 x `count` are then ranked with ties going to less HBM
    traffic, counted with the L2 model the compiled phases use, and then to less compute. The
    engine plays the shortlist and keeps the fastest, as an autotuning kernel library does. The
    ranking leaves HBM bandwidth out, so a faster memory never changes which tilings are tried
    (and so never makes the best of them slower).
    """
    m, k, n = op.m, op.k, op.n
    a, b = op.dtype.bytes, op.b_dtype.bytes
    core = chip.core
    # power-of-two edges, and the whole dimension (one tile) where the SRAM can hold it
    tms = sorted({t for t in TILE_SIZES if t < 2 * m} | {m})
    tns = sorted({t for t in TILE_SIZES if t < 2 * n} | {n})
    tks = sorted({t for t in K_STEPS if t < 2 * k} | {k})
    grid = np.array(list(itertools.product(tms, tns, tks)), dtype=np.int64)
    tm, tn, tk = grid[:, 0], grid[:, 1], grid[:, 2]
    stage = _stage_bytes(tm, tn, tk, a, b)
    ok = (2 * stage <= core.sram.capacity_bytes) & (tm * tn * PARTIAL_BYTES <= core.accumulator_bytes)
    if not ok.any():
        ok = stage == stage.min()
    tm, tn, tk, stage = tm[ok], tn[ok], tk[ok], stage[ok]
    lay = wave_layout(chip)
    share_a, share_b = grid_shares(op, lay, tm, tn)
    moved_stage = tm * tk * a * share_a + tk * tn * b * share_b  # bytes a core loads per step
    em, en = np.minimum(tm, m), np.minimum(tn, n)
    cycles_per_step = matmul_cycles(core, em, np.minimum(tk, k), en, op.dtype, op.b_dtype)
    tiles = op.groups * ceil_div(m, tm) * ceil_div(n, tn)
    ksteps = ceil_div(k, tk)
    stages = np.maximum(1, core.sram.capacity_bytes // stage)
    lat = hbm_latency_s(chip)
    rate = np.minimum(core.max_inflight_bytes, (stages - 1).clip(1) * stage) / lat
    mappings = [(GemmMapping.STREAM_K, 1), (GemmMapping.DATA_PARALLEL, 1)]
    if (tiles < chip.cores).any():
        mappings += [(GemmMapping.SPLIT_K, split) for split in SPLITS]
    scored = []
    for mapping, split in mappings:
        if mapping is GemmMapping.STREAM_K:  # iterations spread evenly over the cores
            per_item, items = ksteps, tiles
            waves = (tiles * ksteps / chip.cores) / ksteps
        else:
            per_item = ceil_div(ksteps, split)
            items = tiles * split
            waves = ceil_div(items, chip.cores)
        compute_s = waves * per_item * cycles_per_step / chip.clock_hz
        item_bytes = per_item * moved_stage
        # a step's load: its bytes at the core's rate, but no faster than one access latency
        # shared by the loads the pipeline keeps in flight
        step_s = np.maximum(moved_stage / rate, lat / np.maximum(1, stages - 1))
        core_s = waves * (per_item * step_s + lat)
        if mapping is GemmMapping.STREAM_K:  # the core finishing a split tile reads the others' partials from L2
            shared = tiles % chip.cores
            sharers = np.ceil(chip.cores / np.maximum(1, shared)) * (shared > 0)
            partials = np.maximum(0, sharers - 1) * em * en * PARTIAL_BYTES
            core_s = core_s + partials * l2_latency_s(chip) / core.max_inflight_bytes
        l2_s = items * item_bytes / l2_bandwidth(chip)
        est = np.maximum(compute_s, np.maximum(core_s, l2_s))
        if mapping is GemmMapping.SPLIT_K:  # the reduction kernel writes and reads every partial once more
            partial_bytes = 2 * split * op.groups * m * n * PARTIAL_BYTES
            est = est + chip.overheads.kernel_s + partial_bytes / (chip.cores * rate)
            est = np.where(split <= ksteps, est, np.inf)
        if mapping is GemmMapping.STREAM_K:
            est = np.where(tiles % chip.cores != 0, est, np.inf)  # no partial wave: plain tiling
        for i in np.lexsort((compute_s, est))[:count]:
            if np.isfinite(est[i]):
                tiling = Tiling(int(tm[i]), int(tn[i]), int(tk[i]), mapping, split)
                scored.append((float(est[i]), float(compute_s[i]), tiling))
    scored.sort(key=lambda x: (x[0], x[1]))
    # ranked by estimate, ties to less HBM traffic under the best raster, then to less compute;
    # one K step per tile shape and mapping, so the shortlist spans different mappings. The
    # rasters of a tiling are costed only when its estimate comes up: once `count` tile shapes
    # are in, later estimates cannot enter
    out: dict[tuple, Tiling] = {}
    head = scored[: 3 * count]
    start = 0
    while start < len(head) and len(out) < count:
        end = start
        while end < len(head) and head[end][0] == head[start][0]:
            end += 1
        tied = sorted(((*_best_raster(op, lay, t), compute) for _est, compute, t in head[start:end]),
                      key=lambda x: (x[1], x[2]))  # fmt: skip
        for t, _hbm, _compute in tied:
            out.setdefault((t.tm, t.tn, t.mapping, t.split), t)
        start = end
    return tuple(out.values())[:count]


def best_raster(op: Op, chip: Chip, t: Tiling) -> tuple[Tiling, float]:
    """The tiling with the raster that reads the least from HBM (the first of equals, row-major
    first), and those bytes: a raster changes only which loads hit L2. Where tiles launch in
    clusters, the raster orders the clusters."""
    return _best_raster(op, wave_layout(chip), t)


@memo(maxsize=16384)
def _best_raster(op: Op, lay: WaveLayout, t: Tiling) -> tuple[Tiling, float]:
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    c = lay.multicast
    grid = ceil_div(op.m, t.tm) // (c if sb < 1 else 1), ceil_div(op.n, t.tn) // (c if sa < 1 else 1)
    options = [replace(t, raster=r, group=g) for r, g in rasters(*grid)]
    scored = [(_tiling_hbm_bytes(op, lay, o), i) for i, o in enumerate(options)]
    hbm, i = min(scored)
    return options[i], hbm


def compile_gemm(op: Op, chip: Chip, tiling: Tiling) -> Program:
    """Compile a GEMM (or `groups` equal GEMMs) with `tiling` into its phases: the GEMM and, if
    split along K, the reduction kernel."""
    if tiling.mapping is GemmMapping.STREAM_K:
        phases = _stream_k_phases(op, chip, tiling)
    else:
        phases = [_gemm_phase(op, chip, tiling)]
        if tiling.split > 1:
            phases.append(_reduce_phase(op, chip, tiling.split))
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


def _items(op: Op, lay: WaveLayout, t: Tiling) -> dict[str, np.ndarray]:
    """Work items in launch order, as arrays: group, row block, column block and K slice
    (g, i, j, s) with the item's rows, columns and K length (em, en, kl). Groups one after
    another, each group's tiles in the raster's order (by clusters where they multicast), a
    tile's K slices together."""
    m, k, n, tm, tn = op.m, op.k, op.n, t.tm, t.tn
    per = ceil_div(ceil_div(k, t.tk), t.split) * t.tk
    sa, sb = operand_shares(op, lay, tm, tn)
    cm, cn = (lay.multicast if sb < 1 else 1), (lay.multicast if sa < 1 else 1)
    rows, cols = cluster_order(ceil_div(m, tm), ceil_div(n, tn), t.raster, t.group, cm, cn)
    tiles = len(rows)
    if op.groups == 1 and t.split == 1 and k > 0:  # one item per tile, over all of K
        g, s = np.zeros(tiles, dtype=np.int64), np.zeros(tiles, dtype=np.int64)
        i, j, kl = rows, cols, np.full(tiles, k, dtype=np.int64)
    else:
        g = np.repeat(np.arange(op.groups), tiles * t.split)
        i = np.tile(np.repeat(rows, t.split), op.groups)
        j = np.tile(np.repeat(cols, t.split), op.groups)
        s = np.tile(np.arange(t.split), op.groups * tiles)
        kl = np.minimum(k, (s + 1) * per) - s * per
        keep = kl > 0
        g, i, j, s, kl = g[keep], i[keep], j[keep], s[keep], kl[keep]
    return {
        "g": g,
        "i": i,
        "j": j,
        "s": s,
        "em": np.minimum(tm, m - i * tm),
        "en": np.minimum(tn, n - j * tn),
        "kl": kl,
    }


def reuse_capacity_bytes(chip: Chip) -> float:
    """L2 bytes that can hold operand panels every core reads: one partition's worth."""
    return wave_layout(chip).reuse_capacity_bytes


def _schedule(op: Op, lay: WaveLayout, t: Tiling) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """The tiling's work items in launch order, the wave each runs in, and how many of them
    (the first) run data-parallel. Stream-K runs all but the last full wave of tiles
    data-parallel, in waves of one tile per core, and its tail's tiles in flight together."""
    items = _items(op, lay, t)
    count = len(items["kl"])
    wave = np.arange(count) // lay.cores
    if t.mapping is GemmMapping.STREAM_K:
        dp = max(0, count // lay.cores - 1) * lay.cores
        wave[dp:] = dp // lay.cores
    else:
        dp = count
    return items, wave, dp


def tiling_hbm_bytes(op: Op, chip: Chip, t: Tiling) -> float:
    """HBM bytes of the GEMM under `t`: operands after L2 reuse (l2reuse.py), the output, and
    the fp32 partials of a split-K GEMM written and read back where they do not fit in L2."""
    return _tiling_hbm_bytes(op, wave_layout(chip), t)


@memo(maxsize=16384)
def _tiling_hbm_bytes(op: Op, lay: WaveLayout, t: Tiling) -> float:
    """`tiling_hbm_bytes`, worked out once per op, layout and tiling (the tilings of a sweep's
    chips recur, their rasters each costed by a walk over the waves)."""
    items, wave, _dp = _schedule(op, lay, t)
    a, b = op.dtype.bytes, op.b_dtype.bytes
    total = operand_hbm_bytes(items, wave, a, b, lay.reuse_capacity_bytes, operand_shares(op, lay, t.tm, t.tn))
    total += op.groups * op.m * op.n * op.c_dtype.bytes
    if t.split > 1 and not _partials_fit(op, lay.l2_capacity_bytes, t.split):
        total += 2 * t.split * op.groups * op.m * op.n * PARTIAL_BYTES
    return total


def _k_steps(kl: int, tk: int) -> np.ndarray:
    """K lengths of the steps over a K extent `kl`: tk each, the last what remains."""
    ks = np.full(ceil_div(kl, tk), tk, dtype=np.int64)
    ks[-1] = kl - tk * (len(ks) - 1)
    return ks


@dataclass(frozen=True, eq=False)
class PhasePlan:
    """A GEMM kernel's phase as far as the wave layout decides it: every column, but in place of
    an entry's compute cycles the index of its tile step shape in `shapes` (rows, K, columns);
    and the cores' sequences before they were joined (`runs`, with their weights), to tell
    whether two of them become one on a chip whose arrays take equally long over their shapes.
    Shared by every chip of the layout: its arrays are never written."""

    phase: Phase
    shapes: tuple[tuple[int, int, int], ...]
    runs: tuple[np.ndarray, ...] = ()
    weights: tuple[int, ...] = ()
    dp_items: int = 0  # stream-K: the items before its tail, run data-parallel by a phase of their own


def _phase_on(plan: PhasePlan, op: Op, chip: Chip, t: Tiling) -> Phase:
    """The planned phase on `chip`: each entry's cycles those of its step shape on the chip's
    arrays, and as many SRAM buffers as the chip's SRAM holds stages of the tiling."""
    core = chip.core
    table = np.array([step_cycles(core, em, k, en, op.dtype, op.b_dtype) for em, k, en in plan.shapes], np.int64)
    stage = _stage_bytes(t.tm, t.tn, t.tk, op.dtype.bytes, op.b_dtype.bytes)
    stages = core.sram.capacity_bytes // stage
    phase = plan.phase
    if plan.runs and len(set(table.tolist())) < len(table):  # sequences may now be alike: join them
        runs = [run.copy() for run in plan.runs]
        for run in runs:
            run["cycles"] = table[run["cycles"].astype(np.int64)]
        if len({run.tobytes() for run in runs}) < len(runs):
            groups: dict[bytes, list] = {}
            for run, weight in zip(runs, plan.weights, strict=True):
                groups.setdefault(run.tobytes(), [run, 0])[1] += weight
            joined, weights = [g[0] for g in groups.values()], [g[1] for g in groups.values()]
            return build_phase(joined, stages, phase.label, phase.new_kernel, weights, pipeline_bytes(stages, stage))
    return replace(
        phase,
        compute_cycles=table[phase.compute_cycles],
        stages=max(1, int(stages)),
        inflight_bytes=pipeline_bytes(stages, stage),
    )


PLAN_BUDGET_BYTES = 128 << 20  # arrays of the plans kept, the most recently used (a sweep's few hundred fit)
_plans: OrderedDict[tuple, tuple[PhasePlan, int]] = OrderedDict()
_plan_bytes = [0]
_plans_lock = threading.Lock()  # threads timing ops at once keep the books straight


def _kept_plan(key: tuple, plan_of) -> PhasePlan:
    """The plan of `key` (`plan_of(*key)` the first time), kept while the plans used since take
    at most PLAN_BUDGET_BYTES: a long prompt's phases are large, and a run asks for each once."""
    with _plans_lock:
        hit = _plans.get(key)
        if hit is not None:
            _plans.move_to_end(key)
            return hit[0]
    plan = plan_of(*key)
    size = sum(a.nbytes for a in (*vars(plan.phase).values(), *plan.runs) if isinstance(a, np.ndarray))
    with _plans_lock:
        if key not in _plans:
            _plans[key] = (plan, size)
            _plan_bytes[0] += size
        while _plan_bytes[0] > PLAN_BUDGET_BYTES and len(_plans) > 1:
            _plan_bytes[0] -= _plans.popitem(last=False)[1][1]
    return plan


@on_clear  # benchmarks time compiles from scratch
def _forget_plans() -> None:
    with _plans_lock:
        _plans.clear()
        _plan_bytes[0] = 0


def _gemm_phase(op: Op, chip: Chip, t: Tiling, limit_items: int | None = None) -> Phase:
    """The GEMM kernel's phase: its first `limit_items` items (all by default)."""
    return _phase_on(_kept_plan((op, wave_layout(chip), t, limit_items), _gemm_plan), op, chip, t)


def _gemm_plan(op: Op, lay: WaveLayout, t: Tiling, limit_items: int | None) -> PhasePlan:
    """The GEMM kernel's phase as the wave layout decides it (see `PhasePlan`)."""
    a, b = op.dtype.bytes, op.b_dtype.bytes
    items, wave, _dp = _schedule(op, lay, t)
    items = {key: v[:limit_items] for key, v in items.items()}
    wave = wave[:limit_items]
    cores = lay.cores
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    wave_frac = wave_hbm_fractions(items, wave, a, b, lay.reuse_capacity_bytes, (sa, sb))
    fracs, frac_id = np.unique(wave_frac, return_inverse=True)
    frac_id = frac_id[wave]
    out_bytes = PARTIAL_BYTES if t.split > 1 else op.c_dtype.bytes
    partials_in_l2 = t.split > 1 and _partials_fit(op, lay.l2_capacity_bytes, t.split)
    # items of the same shape and miss fraction have the same entries: build each kind once
    em_, en_, kl_ = items["em"], items["en"], items["kl"]
    code = ((em_ * (int(en_.max()) + 1) + en_) * (int(kl_.max()) + 1) + kl_) * len(fracs) + frac_id
    _codes, first, kind_of = np.unique(code, return_index=True, return_inverse=True)
    shapes: dict[tuple[int, int, int], int] = {}  # each step shape's index, in order of first use
    blocks = []
    for idx in first:
        em, en, kl, f = int(em_[idx]), int(en_[idx]), int(kl_[idx]), float(fracs[frac_id[idx]])
        ks = _k_steps(kl, t.tk)
        moved = ks * (em * a * sa + en * b * sb)
        seq = entries(len(ks), hbm_bytes=moved * f, l2_bytes=moved * (1.0 - f))
        seq["cycles"] = shapes.setdefault((em, t.tk, en), len(shapes))
        seq["cycles"][-1] = shapes.setdefault((em, int(ks[-1]), en), len(shapes))
        seq["store_l2_bytes" if partials_in_l2 else "store_bytes"][-1] = em * en * out_bytes
        blocks.append(seq)
    # core c runs items c, c + cores, ...: cores with the same kinds in the same order are one sequence
    groups: dict[bytes, list] = {}
    for c in range(min(cores, len(kind_of))):
        sig = np.ascontiguousarray(kind_of[c::cores])
        entry = groups.setdefault(sig.tobytes(), [sig, 0])
        entry[1] += 1
    # joined as rows of floats: a record array's concatenation promotes its fields for each part
    rows = [entry_rows(block) for block in blocks]
    sequences = [np.concatenate([rows[k] for k in sig]).view(ENTRY).ravel() for sig, _w in groups.values()]
    weights = [w for _sig, w in groups.values()]
    return PhasePlan(build_phase(sequences, 1, t.label, weights=weights), tuple(shapes))


def _partials_fit(op: Op, l2_capacity_bytes: int, split: int) -> bool:
    """Whether the fp32 partial sums of a split-K GEMM stay in L2 until they are reduced."""
    return split * op.groups * op.m * op.n * PARTIAL_BYTES <= l2_capacity_bytes // 2


def _reduce_phase(op: Op, chip: Chip, split: int) -> Phase:
    """Sum the fp32 partials of a split-K GEMM and write the output (its own kernel); the
    partials are read from L2 when they fit there."""
    stream = Stream(
        elements=op.groups * op.m * op.n,
        read_bytes_per_element=split * PARTIAL_BYTES,
        write_bytes_per_element=op.c_dtype.bytes,
        lane_ops_per_element=split,
        special_ops_per_element=0,
        label=f"split-K reduce x{split}",
        reads_hit_l2=_partials_fit(op, chip.l2.capacity_bytes, split),
    )
    return streaming_phase(chip, stream)


def _stream_k_phases(op: Op, chip: Chip, t: Tiling) -> list[Phase]:
    """Stream-K (Osama et al., PPoPP 2023), hybrid form: all but the last full wave of output
    tiles run data-parallel; the remaining tiles' K iterations are divided evenly between the
    cores, so no core idles in a partial last wave. A core that ends inside a tile writes its
    fp32 partial to L2; the core that finishes the tile reads the others' partials back."""
    plan = _kept_plan((op, wave_layout(chip), t), _stream_k_plan)
    phases = [_gemm_phase(op, chip, t, limit_items=plan.dp_items)] if plan.dp_items else []
    return [*phases, _phase_on(plan, op, chip, t)]


def _stream_k_plan(op: Op, lay: WaveLayout, t: Tiling) -> PhasePlan:
    """The stream-K tail's phase as the wave layout decides it (see `PhasePlan`)."""
    a, b = op.dtype.bytes, op.b_dtype.bytes
    cores = lay.cores
    items, wave, dp_tiles = _schedule(op, lay, t)
    ksteps = ceil_div(op.k, t.tk)
    sk_iters = (len(items["kl"]) - dp_tiles) * ksteps
    per = ceil_div(sk_iters, cores)
    tail = {key: v[dp_tiles:] for key, v in items.items()}
    # the tail's tiles are in flight together: the first touch of each operand block misses
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    frac = float(wave_hbm_fractions(tail, wave[dp_tiles:] - wave[dp_tiles], a, b, 0.0, (sa, sb))[0])
    # every K iteration of the tail at once: core c takes iterations [c x per, (c + 1) x per);
    # a core's run of iterations inside one tile is a segment, whose last entry stores
    it = np.arange(sk_iters, dtype=np.int64)
    core, (tile, s) = it // per, np.divmod(it, ksteps)
    em, en = tail["em"][tile], tail["en"][tile]
    ends_tile = s == ksteps - 1
    ks = np.where(ends_tile, op.k - t.tk * (ksteps - 1), t.tk)
    moved = ks * (em * a * sa + en * b * sb)
    flat = entries(sk_iters, hbm_bytes=moved * frac, l2_bytes=moved * (1.0 - frac))
    # a step's cycles depend on its shape (rows, K, columns): a few distinct ones
    code = (em * (t.tk + 1) + ks) * (int(en.max(initial=0)) + 1) + en
    _codes, first, shape_of = np.unique(code, return_index=True, return_inverse=True)
    flat["cycles"] = shape_of
    # a core that finishes a tile folds in the partials of the cores before it in the tile (each
    # holds a contiguous run of `per` iterations) and writes C; one ending inside a tile writes its partial
    first_it = tile * ksteps
    s0 = np.maximum(core * per, first_it) - first_it  # where this core's segment of the tile starts
    others = np.where(s0 > 0, (first_it + s0 - 1) // per - first_it // per + 1, 0)
    flat["l2_bytes"][ends_tile] += (others * em * en * PARTIAL_BYTES)[ends_tile]
    flat["store_bytes"][ends_tile] = (em * en * op.c_dtype.bytes)[ends_tile]
    cut = ~ends_tile & (it == np.minimum(sk_iters, (core + 1) * per) - 1)
    flat["store_l2_bytes"][cut] = (em * en * PARTIAL_BYTES)[cut]
    # cores whose runs of iterations are alike (the same step shapes) are one weighted sequence
    groups: dict[bytes, list] = {}
    for c in range(min(cores, ceil_div(sk_iters, per))):
        run = flat[c * per : min(sk_iters, (c + 1) * per)]
        groups.setdefault(run.tobytes(), [run, 0])[1] += 1
    runs, weights = [g[0] for g in groups.values()], [g[1] for g in groups.values()]
    phase = build_phase(runs, 1, t.label, new_kernel=dp_tiles == 0, weights=weights)
    shapes = tuple((int(em[i]), int(ks[i]), int(en[i])) for i in first)
    return PhasePlan(phase, shapes, tuple(run.copy() for run in runs), tuple(weights), dp_tiles)
