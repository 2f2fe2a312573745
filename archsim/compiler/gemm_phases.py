"""What every GEMM mapping builds on: the tiling record, the wave layout of a chip, the work
items of a tiling in launch order, and the phases a GEMM kernel compiles to (a plain kernel of
tiles dealt to cores in waves, planned once per wave layout; the split-K reduction kernel).

The mappings themselves, each how it forms work items and how the autotuner estimates it, are
one file each in archsim/compiler/mappings/; archsim/compiler/gemm.py shortlists and compiles
through them. Units: bytes, cycles, seconds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from archsim.compiler.die_reuse import die_fabric_fractions, local_l2_share
from archsim.compiler.l2reuse import Raster, cluster_order, tiled, wave_hbm_fractions
from archsim.compiler.output_stream import output_block_cols, streamed_item, streamed_stages
from archsim.compiler.program import PARTIAL_BYTES, build_phase
from archsim.compiler.streaming import Stream, streaming_phase
from archsim.compiler.tiles import step_cycles
from archsim.graph.ops import Op
from archsim.hardware import Chip, Core
from archsim.hardware.systolic import fill_drain_cycles
from archsim.memo import memo, on_clear
from archsim.program import ENTRY, Phase, entries, entry_rows
from archsim.units import ceil_div


class GemmMapping(str, Enum):
    """How a GEMM's work items are formed from its output tiles (each one's rule: a file of
    archsim/compiler/mappings/)."""

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
    grid: int = 0  # cores its items are dealt over (a compiler's placement on fewer); 0: every core

    @property
    def shape_label(self) -> str:
        """The tile as a kernel's label names it: "128x128x64"."""
        return f"{self.tm}x{self.tn}x{self.tk}"

    @property
    def order_label(self) -> str:
        """The raster as a kernel's label names it: "row", "grouped8"; and the cores where
        its items are dealt over fewer than the chip's: "row on 8 cores"."""
        grid = f" on {self.grid} cores" if self.grid else ""
        return f"{self.raster.value}{self.group if self.raster is Raster.GROUPED else ''}{grid}"


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
    dies: int = 0  # compute dies with an L2 each before the L2 (archsim/hardware/chiplet.py); 0: none
    die_l2_capacity_bytes: int = 0

    @property
    def reuse_capacity_bytes(self) -> float:
        """L2 bytes that can hold operand panels every core reads: one partition's worth."""
        return self.l2_capacity_bytes / self.l2_partitions


@memo(maxsize=256)
def wave_layout(chip: Chip) -> WaveLayout:
    """The chip's wave layout."""
    d = chip.dies
    if d is None:
        return WaveLayout(chip.cores, chip.noc.multicast, chip.l2.capacity_bytes, chip.l2.partitions)
    return WaveLayout(
        chip.cores, chip.noc.multicast, chip.l2.capacity_bytes, chip.l2.partitions, d.count, d.l2_capacity_bytes
    )


def tiling_layout(chip: Chip, t: Tiling) -> WaveLayout:
    """The wave layout `t`'s items are dealt on: the chip's, over `t.grid` of its cores where it
    names fewer."""
    lay = wave_layout(chip)
    return replace(lay, cores=t.grid) if t.grid else lay


def mirrored(op: Op) -> bool:
    """Whether the GEMM is square in its output and of one operand type, so that a tiling and its
    transpose (tm and tn swapped) play alike: the same bytes a step, the same grid turned over."""
    return op.m == op.n and op.dtype is op.b_dtype


def operand_shares(op: Op, lay: WaveLayout, tm: int, tn: int) -> tuple[float, float]:
    """Shares of its A and B blocks each core moves itself: with a cluster of c cores that one
    transfer feeds (Hopper's TMA multicast, `noc.multicast`), the cluster's cores that compute
    tiles of one column share the B block (of one row, the A block): the larger of the two
    that the grid lets c tiles share is moved once per cluster (`grid_shares` of one shape)."""
    c = lay.multicast
    if c <= 1 or lay.cores < c:
        return 1.0, 1.0
    # `grid_shares`'s arithmetic on one shape, without its arrays (called per tiling and raster)
    share_b = ceil_div(op.m, tm) % c == 0 and tn * op.b_dtype.bytes >= tm * op.dtype.bytes
    share_a = ceil_div(op.n, tn) % c == 0 and not share_b
    return (1.0 / c if share_a else 1.0), (1.0 / c if share_b else 1.0)


def grid_shares(op: Op, lay: WaveLayout, tm: np.ndarray, tn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`operand_shares` of many tile shapes at once (arrays of tm and tn)."""
    c = lay.multicast
    if c <= 1 or lay.cores < c:
        return np.ones(len(tm)), np.ones(len(tm))
    a_block, b_block = tm * op.dtype.bytes, tn * op.b_dtype.bytes
    # every tile needs a partner in its cluster: the shared dimension's blocks pair up exactly
    share_b = (ceil_div(op.m, tm) % c == 0) & (b_block >= a_block)
    share_a = (ceil_div(op.n, tn) % c == 0) & ~share_b
    return np.where(share_a, 1.0 / c, 1.0), np.where(share_b, 1.0 / c, 1.0)


def stage_bytes(tm, tn, tk, a: float, b: float):
    """SRAM of one pipeline stage: a tm x tk block of A and a tk x tn block of B."""
    return tm * tk * a + tk * tn * b


def library_stages(core: Core, fit):
    """SRAM buffers a GEMM kernel cycles through (an array or one number), of the `fit` its SRAM
    holds: every one (CUTLASS's collective builder takes every stage the shared memory left over
    holds, `StageCountAutoCarveout`), at most the chip's library's `sram.gemm_stages` where the
    chip file states one (hipBLASLt's Tensile kernels double-buffer the LDS and prefetch the
    global reads one iteration ahead: 2). E.g. 24 KiB stages in 128 KiB: 5 fit, 5 or 2."""
    cap = core.sram.gemm_stages
    return np.minimum(fit, cap) if cap else fit


def work_items(op: Op, lay: WaveLayout, t: Tiling) -> dict[str, np.ndarray]:
    """Work items in launch order, as arrays: group, row block, column block and K slice
    (g, i, j, s) with the item's rows, columns and K length (em, en, kl). Groups one after
    another, each group's tiles in the raster's order (by clusters where they multicast), a
    tile's K slices together."""
    m, k, n, tm, tn = op.m, op.k, op.n, t.tm, t.tn
    per = ceil_div(ceil_div(k, t.tk), t.split) * t.tk
    sa, sb = operand_shares(op, lay, tm, tn)
    cm, cn = (lay.multicast if sb < 1 else 1), (lay.multicast if sa < 1 else 1)
    tiles_m, tiles_n = ceil_div(m, tm), ceil_div(n, tn)
    rows, cols = cluster_order(tiles_m, tiles_n, t.raster, t.group, cm, cn)
    tiles = len(rows)
    if op.groups == 1 and t.split == 1 and k > 0:  # one item per tile, over all of K
        g, s = np.zeros(tiles, dtype=np.int64), np.zeros(tiles, dtype=np.int64)
        i, j, kl = rows, cols, np.full(tiles, k, dtype=np.int64)
    else:
        g = np.repeat(np.arange(op.groups), tiles * t.split)
        i = tiled(np.repeat(rows, t.split), op.groups)
        j = tiled(np.repeat(cols, t.split), op.groups)
        s = tiled(np.arange(t.split), op.groups * tiles)
        kl = np.minimum(k, (s + 1) * per) - s * per
        keep = kl > 0
        g, i, j, s, kl = g[keep], i[keep], j[keep], s[keep], kl[keep]
    return {
        "g": g,
        "i": i,
        "j": j,
        "s": s,
        "em": np.minimum(tm, m - np.arange(tiles_m) * tm)[i],  # each row block's rows, looked up per item
        "en": np.minimum(tn, n - np.arange(tiles_n) * tn)[j],
        "kl": kl,
    }


def plain_waves(count: int, cores: int) -> np.ndarray:
    """The wave each of `count` items runs in, dealt one per core: item i in wave i // cores."""
    return np.arange(count) // cores


def reuse_capacity_bytes(chip: Chip) -> float:
    """L2 bytes that can hold operand panels every core reads: one partition's worth."""
    return wave_layout(chip).reuse_capacity_bytes


def k_steps(kl: int, tk: int) -> np.ndarray:
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
    block_cols: int = 0  # its tiles' outputs stream out in blocks of this many columns (`streamed_item`); 0: not


def phase_on(plan: PhasePlan, op: Op, chip: Chip, t: Tiling, install: float = 0.0, chained: bool = False) -> Phase:
    """The planned phase on `chip`: each entry's cycles those of its step shape on the chip's
    arrays (their weights installed at `install` bytes a cycle, the chip family's; 0: a row a
    cycle), and as many SRAM buffers as the chip's SRAM holds stages of the tiling. `chained`
    (the family's `chains_folds`): the steps' folds follow one another on the arrays, and each
    core's sequence pays the arrays' skew once, on its last entry (`with_skew_once`)."""
    core = chip.core
    table = np.array(
        [step_cycles(core, em, k, en, op.dtype, op.b_dtype, install, chained) for em, k, en in plan.shapes], np.int64
    )
    if chained:
        return with_skew_once(_phase_on(plan, op, t, core, table), core)
    return _phase_on(plan, op, t, core, table)


def with_skew_once(phase: Phase, core: Core) -> Phase:
    """The phase with the arrays' fill and drain (`systolic.fill_drain_cycles`) added to the last
    entry of each core's sequence: once per kernel, where its folds chain."""
    cycles = phase.compute_cycles.copy()
    ends = phase.core_start[1:][np.diff(phase.core_start) > 0] - 1
    cycles[ends] += fill_drain_cycles(core.array.rows, core.array.cols)
    return replace(phase, compute_cycles=cycles)


def _phase_on(plan: PhasePlan, op: Op, t: Tiling, core: Core, table: np.ndarray) -> Phase:
    """`phase_on` with each step shape's cycles in `table`."""
    stage = stage_bytes(t.tm, t.tn, t.tk, op.dtype.bytes, op.b_dtype.bytes)
    stages = library_stages(core, core.sram.capacity_bytes // stage)
    if plan.block_cols:  # the A panels apart, buffers of one block's B step (`streamed_stages`)
        stage = stage_bytes(t.tm, plan.block_cols, t.tk, op.dtype.bytes, op.b_dtype.bytes)
        stages = library_stages(core, streamed_stages(op, t, plan.block_cols, core.sram.capacity_bytes))
    phase = plan.phase
    if plan.runs and len(set(table.tolist())) < len(table):  # sequences may now be alike: join them
        runs = [run.copy() for run in plan.runs]
        for run in runs:
            run["cycles"] = table[run["cycles"].astype(np.int64)]
        joined, weights = join_alike(runs, plan.weights)
        if len(joined) < len(runs):
            joined_phase = build_phase(
                joined, stages, phase.label, phase.new_kernel, weights, pipeline_bytes(stages, stage)
            )
            return replace(joined_phase, local_l2_share=phase.local_l2_share)
    return replace(
        phase,
        compute_cycles=table[phase.compute_cycles],
        stages=max(1, int(stages)),
        inflight_bytes=pipeline_bytes(stages, stage),
    )


def join_alike(runs: list[np.ndarray], weights) -> tuple[list[np.ndarray], list[int]]:
    """Runs of equal bytes as one, in order of first appearance, with their `weights` summed
    (the cores that run each)."""
    groups: dict[bytes, list] = {}
    for run, weight in zip(runs, weights, strict=True):
        groups.setdefault(run.tobytes(), [run, 0])[1] += weight
    return [g[0] for g in groups.values()], [g[1] for g in groups.values()]


def alike_slices(data: bytes, size: int) -> tuple[list[int], list[int]]:
    """`join_alike` of the consecutive `size`-byte slices of `data` (the last maybe shorter),
    compared in the one copy: the index of each distinct slice's first, in order of first
    appearance, and how many slices are alike it."""
    kinds: dict[bytes, list[int]] = {}
    for at in range(0, len(data), size):
        kinds.setdefault(data[at : at + size], [at // size, 0])[1] += 1
    return [first for first, _n in kinds.values()], [n for _first, n in kinds.values()]


PLAN_BUDGET_BYTES = 128 << 20  # arrays of the plans kept, the most recently used (a sweep's few hundred fit)
_plans: OrderedDict[tuple, tuple[PhasePlan, int]] = OrderedDict()
_plan_bytes = [0]
_plan_budget = [PLAN_BUDGET_BYTES]  # `plans_kept_within` lowers it for a while
_plans_lock = threading.Lock()  # threads timing ops at once keep the books straight


def kept_plan(key: tuple, plan_of) -> PhasePlan:
    """The plan of `key` (`plan_of(*key)` the first time), kept while the plans used since take
    at most PLAN_BUDGET_BYTES (or `plans_kept_within`'s budget): a long prompt's phases are
    large, and a run asks for each once."""
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
        _trim_plans()
    return plan


def _trim_plans() -> None:
    """Drop the least recently used plans until the rest fit the budget (one is always kept)."""
    while _plan_bytes[0] > _plan_budget[0] and len(_plans) > 1:
        _plan_bytes[0] -= _plans.popitem(last=False)[1][1]


@contextmanager
def plans_kept_within(budget_bytes: int) -> Iterator[None]:
    """Keep the plans within `budget_bytes` inside the block, the budget before restored after:
    for a caller that plans each GEMM once on one chip (serving: every op of a step shape is
    chosen once and its cost kept, so no plan is asked for again; 2,000 generated requests made
    1,619 plans and found none twice), whose plans would otherwise hold up to PLAN_BUDGET_BYTES
    of memory to no use. The same plans, so the same results."""
    with _plans_lock:
        was = _plan_budget[0]
        _plan_budget[0] = budget_bytes
        _trim_plans()
    try:
        yield
    finally:
        with _plans_lock:
            _plan_budget[0] = was


@on_clear  # benchmarks time compiles from scratch
def forget_plans() -> None:
    with _plans_lock:
        _plans.clear()
        _plan_bytes[0] = 0


def gemm_phase(
    op: Op,
    chip: Chip,
    t: Tiling,
    label: str,
    limit_items: int | None = None,
    install: float = 0.0,
    chained: bool = False,
) -> Phase:
    """The GEMM kernel's phase, named `label`: its first `limit_items` items (all by default),
    dealt to the cores in plain waves of one item per core (`install`, `chained`: as `phase_on`'s;
    a `chained` schedule streams each tile's outputs out a block at a time, `output_block_cols`)."""
    cols = output_block_cols(op, chip, t, install, t.grid) if chained else 0
    plan = kept_plan((op, tiling_layout(chip, t), t, label, limit_items, cols), _gemm_plan)
    return phase_on(plan, op, chip, t, install, chained)


def _gemm_plan(op: Op, lay: WaveLayout, t: Tiling, label: str, limit_items: int | None, cols: int = 0) -> PhasePlan:
    """The GEMM kernel's phase as the wave layout decides it (see `PhasePlan`); `cols` > 0: each
    tile's outputs streamed out in blocks of that many columns (`streamed_item`)."""
    a, b = op.dtype.bytes, op.b_dtype.bytes
    items = work_items(op, lay, t)
    wave = plain_waves(len(items["kl"]), lay.cores)
    items = {key: v[:limit_items] for key, v in items.items()}
    wave = wave[:limit_items]
    cores = lay.cores
    sa, sb = operand_shares(op, lay, t.tm, t.tn)
    wave_frac = wave_hbm_fractions(items, wave, a, b, lay.reuse_capacity_bytes, (sa, sb))
    fracs, frac_id = np.unique(wave_frac, return_inverse=True)
    frac_id = frac_id[wave]
    out_bytes = PARTIAL_BYTES if t.split > 1 else op.c_dtype.bytes
    partials_in_l2 = t.split > 1 and partials_fit(op, lay.l2_capacity_bytes, t.split)
    # items of the same shape and miss fraction have the same entries: build each kind once
    em_, en_, kl_ = items["em"], items["en"], items["kl"]
    code = ((em_ * (int(en_.max()) + 1) + en_) * (int(kl_.max()) + 1) + kl_) * len(fracs) + frac_id
    _codes, first, kind_of = np.unique(code, return_index=True, return_inverse=True)
    shapes: dict[tuple[int, int, int], int] = {}  # each step shape's index, in order of first use
    blocks = []
    for idx in first:
        em, en, kl, f = int(em_[idx]), int(en_[idx]), int(kl_[idx]), float(fracs[frac_id[idx]])
        if en > cols > 0:
            out = "store_l2_bytes" if partials_in_l2 else "store_bytes"
            moved_ab = (a * sa, b * sb)
            blocks.append(streamed_item(em, en, k_steps(kl, t.tk), cols, moved_ab, f, (out, out_bytes), shapes))
            continue
        ks = k_steps(kl, t.tk)
        moved = ks * (em * a * sa + en * b * sb)
        seq = entries(len(ks), hbm_bytes=moved * f, l2_bytes=moved * (1.0 - f))
        seq["cycles"] = shapes.setdefault((em, t.tk, en), len(shapes))
        seq["cycles"][-1] = shapes.setdefault((em, int(ks[-1]), en), len(shapes))
        seq["store_l2_bytes" if partials_in_l2 else "store_bytes"][-1] = em * en * out_bytes
        blocks.append(seq)
    # core c runs items c, c + cores, ...: cores with the same kinds in the same order are one sequence
    sigs, weights = core_kinds(kind_of, cores)
    # joined as rows of floats: a record array's concatenation promotes its fields for each part
    rows = [entry_rows(block) for block in blocks]
    sequences = [np.concatenate([rows[k] for k in sig]).view(ENTRY).ravel() for sig in sigs]
    phase = build_phase(sequences, 1, label, weights=weights)
    if lay.dies:  # chiplets: the share of its L2 bytes that hit the cores' own die L2 (die_reuse.py)
        shares = (sa, sb)
        off_die = die_fabric_fractions(items, wave, a, b, lay.dies, lay.die_l2_capacity_bytes, shares, wave_frac)
        phase = replace(phase, local_l2_share=local_l2_share(items, wave, a, b, shares, wave_frac, off_die))
    return PhasePlan(phase, tuple(shapes), block_cols=cols)


def core_kinds(kind_of: np.ndarray, cores: int) -> tuple[list[np.ndarray], list[int]]:
    """The kinds of items each core runs in order (core c items c, c + cores, ...), each such
    sequence once, in order of first appearance, with the cores that run it: `join_alike` of the
    cores' sequences, read as the columns of the items laid out a wave a row (a core's missing
    last item is -1, no kind's number, so sequences of different lengths differ)."""
    used = min(cores, len(kind_of))
    waves = ceil_div(len(kind_of), cores)
    laid = np.full(waves * cores, -1, dtype=np.int64)
    laid[: len(kind_of)] = kind_of
    firsts, counts = alike_slices(np.ascontiguousarray(laid.reshape(waves, cores).T[:used]).tobytes(), waves * 8)
    return [np.ascontiguousarray(kind_of[c::cores]) for c in firsts], counts


def partials_fit(op: Op, l2_capacity_bytes: int, split: int) -> bool:
    """Whether the fp32 partial sums of a split-K GEMM stay in L2 until they are reduced."""
    return split * op.groups * op.m * op.n * PARTIAL_BYTES <= l2_capacity_bytes // 2


def reduce_phase(op: Op, chip: Chip, split: int) -> Phase:
    """Sum the fp32 partials of a split-K GEMM and write the output (its own kernel); the
    partials are read from L2 when they fit there."""
    stream = Stream(
        elements=op.groups * op.m * op.n,
        read_bytes_per_element=split * PARTIAL_BYTES,
        write_bytes_per_element=op.c_dtype.bytes,
        lane_ops_per_element=split,
        special_ops_per_element=0,
        label=f"split-K reduce x{split}",
        l2_read_share=1.0 if partials_fit(op, chip.l2.capacity_bytes, split) else 0.0,
    )
    return streaming_phase(chip, stream)
