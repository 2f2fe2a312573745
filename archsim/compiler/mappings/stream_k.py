"""Stream-K GEMM mapping (Osama et al., PPoPP 2023), hybrid form: all but the last full wave of
output tiles run data-parallel; the remaining tiles' K iterations are divided evenly between the
cores, so no core idles in a partial last wave. A core that ends inside a tile writes its fp32
partial to L2; the core that finishes the tile reads the others' partials back."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import numpy as np

from archsim.compiler.families import family_rule
from archsim.compiler.gemm_mapping import Estimate, GemmMappingRule
from archsim.compiler.gemm_phases import (
    GemmMapping,
    Phase,
    PhasePlan,
    Tiling,
    WaveLayout,
    alike_slices,
    kept_plan,
    operand_shares,
    phase_on,
    plain_waves,
    tiling_layout,
    work_items,
)
from archsim.compiler.l2reuse import tiled, wave_hbm_fractions
from archsim.compiler.program import PARTIAL_BYTES, columns_phase
from archsim.graph.ops import Op
from archsim.hardware import Chip
from archsim.hardware.memory import l2_latency_s
from archsim.program import ENTRY, ENTRY_COLUMNS, entries, entry_rows
from archsim.units import ceil_div


class StreamK(GemmMappingRule):
    mapping = GemmMapping.STREAM_K
    order = 10

    def splits(self, e: Estimate) -> tuple[int, ...]:
        return (1,)

    def estimate(self, e: Estimate, split: int) -> tuple[np.ndarray, np.ndarray]:
        """Tiles x K steps spread evenly over the cores (fractional waves of whole tiles), a
        core running at least one whole step (fewer steps than cores leave cores idle); the
        core finishing a shared tile reads the other sharers' partials from L2, a latency per
        in-flight window; inf where the tiles fill whole waves, or have one K step each, which
        no core can share (plain tiling is that: 32 tiles of one step on 840 cores are one
        wave of 32 busy cores, not 32 / 840 of one).

        E.g. 16 tiles of 4 K steps on 1,680 cores: 64 steps, one a core, 1 / 4 of a wave (not
        64 / 1,680 / 4)."""
        chip, core = e.chip, e.chip.core
        waves = np.maximum(e.tiles * e.ksteps / chip.cores, 1.0) / e.ksteps
        shared = e.tiles % chip.cores
        sharers = np.ceil(chip.cores / np.maximum(1, shared)) * (shared > 0)
        partials = np.maximum(0, sharers - 1) * e.em * e.en * PARTIAL_BYTES
        extra_s = partials * l2_latency_s(chip) / core.max_inflight_bytes
        est, compute_s = e.times(e.ksteps, e.tiles, waves, extra_s)
        return np.where((e.tiles % chip.cores != 0) & (e.ksteps > 1), est, np.inf), compute_s

    def waves(self, count: int, cores: int) -> tuple[np.ndarray, int]:
        """All but the last full wave of tiles in waves of one per core; the tail in flight together."""
        wave = plain_waves(count, cores)
        dp = max(0, count // cores - 1) * cores
        wave[dp:] = dp // cores
        return wave, dp

    def label(self, t: Tiling) -> str:
        return f"stream-K {t.shape_label} {t.order_label}"

    def phases(self, op: Op, chip: Chip, t: Tiling) -> list[Phase]:
        """The data-parallel tiles as a plain kernel (if any), then the tail's."""
        plan = kept_plan((op, tiling_layout(chip, t), t), self._tail_plan)
        head = [self.plain_phase(op, chip, t, limit_items=plan.dp_items)] if plan.dp_items else []
        rule = family_rule(chip)
        return [*head, phase_on(plan, op, chip, t, rule.weight_install_bytes_per_cycle(chip), rule.chains_folds(chip))]

    def _tail_plan(self, op: Op, lay: WaveLayout, t: Tiling) -> PhasePlan:
        """The stream-K tail's phase as the wave layout decides it (see `PhasePlan`)."""
        a, b = op.dtype.bytes, op.b_dtype.bytes
        cores = lay.cores
        items = work_items(op, lay, t)
        wave, dp_tiles = self.waves(len(items["kl"]), cores)
        ksteps = ceil_div(op.k, t.tk)
        tiles = len(items["kl"]) - dp_tiles
        sk_iters = tiles * ksteps
        per = ceil_div(sk_iters, cores)
        tail = {key: v[dp_tiles:] for key, v in items.items()}
        # the tail's tiles are in flight together: the first touch of each operand block misses
        sa, sb = operand_shares(op, lay, t.tm, t.tn)
        frac = float(wave_hbm_fractions(tail, wave[dp_tiles:] - wave[dp_tiles], a, b, 0.0, (sa, sb))[0])
        # every K iteration of the tail at once: core c takes iterations [c x per, (c + 1) x per);
        # a core's run of iterations inside one tile is a segment, whose last entry stores.
        # Iteration tile x ksteps + s, laid out a tile a row and a K step a column: a tile's
        # steps before its last are alike (K step t.tk), so each column's values are worked out
        # a tile at a time, the same numbers as an iteration at a time
        em, en = tail["em"], tail["en"]
        last_k = op.k - t.tk * (ksteps - 1)
        per_k = em * a * sa + en * b * sb  # bytes a step moves per unit of K
        flat = entries(sk_iters)
        grid = flat.reshape(tiles, ksteps)
        ends = np.arange(1, tiles + 1, dtype=np.int64) * ksteps - 1  # each tile's last iteration
        # a core that finishes a tile folds in the partials of the cores before it in the tile (each
        # holds a contiguous run of `per` iterations) and writes C
        first_it = ends - (ksteps - 1)
        s0 = np.maximum(ends // per * per, first_it) - first_it  # where the finishing core's segment starts
        others = np.where(s0 > 0, (first_it + s0 - 1) // per - first_it // per + 1, 0)
        # (the steps before each tile's last taken a row a step, so that a tile's value spreads along it)
        for column, ks in ((grid[:, :-1].T, t.tk), (grid[:, -1], last_k)):
            moved = ks * per_k
            column["hbm_bytes"] = moved * frac
            column["l2_bytes"] = moved * (1.0 - frac)
        grid["l2_bytes"][:, -1] += others * em * en * PARTIAL_BYTES
        grid["store_bytes"][:, -1] = em * en * op.c_dtype.bytes
        # a core ending inside a tile writes its partial
        core_ends = np.minimum(sk_iters, np.arange(1, ceil_div(sk_iters, per) + 1, dtype=np.int64) * per) - 1
        cut = core_ends[core_ends % ksteps != ksteps - 1]
        flat["store_l2_bytes"][cut] = (em * en * PARTIAL_BYTES)[cut // ksteps]
        # a step's cycles depend on its shape (rows, K, columns): a few distinct ones, numbered in
        # the order of (rows, K, columns)
        steps = ((t.tk,) if ksteps > 1 else ()) + (last_k,)
        em_of, en_of = tiled(em, len(steps)), tiled(en, len(steps))
        ks_of = np.repeat(np.array(steps, dtype=np.int64), tiles)
        code = (em_of * (t.tk + 1) + ks_of) * (int(en.max(initial=0)) + 1) + en_of
        _codes, first, shape_of = np.unique(code, return_index=True, return_inverse=True)
        grid["cycles"][:, -1] = shape_of[-tiles:]
        if ksteps > 1:
            grid["cycles"][:, :-1] = shape_of[:tiles, None]
        # cores whose runs of iterations are alike are one weighted sequence, told apart by a key
        # an iteration (`alike_runs`): its step shape, and whether it ends its tile (with the
        # partials it folds in) or its core's segment
        omax = int(others.max(initial=0)) + 1
        key = np.empty(sk_iters, dtype=np.int64)
        keys = key.reshape(tiles, ksteps)
        keys[:, -1] = (shape_of[-tiles:] * 4 + 2) * omax + others
        if ksteps > 1:
            keys[:, :-1] = (shape_of[:tiles] * 4 * omax)[:, None]
        key[cut] += omax
        bounds, weights = alike_runs(flat, key, per)
        # the distinct runs one after another, as rows of floats (a record array's gather is slower)
        rows = np.take(entry_rows(flat), np.concatenate([np.arange(lo, hi) for lo, hi in bounds]), axis=0)
        counts = [hi - lo for lo, hi in bounds]
        columns = dict(zip(ENTRY_COLUMNS, np.ascontiguousarray(rows.T), strict=True))
        phase = columns_phase(columns, counts, weights, 1, self.label(t), new_kernel=dp_tiles == 0)
        if lay.dies:  # chiplets: the share of the tail's L2 bytes its cores' own die L2s serve
            it = np.arange(sk_iters, dtype=np.int64)
            core, (tile, s) = it // per, np.divmod(it, ksteps)
            ks_it, em_it, en_it = np.where(s == ksteps - 1, last_k, t.tk), em[tile], en[tile]
            blocks = (tail["g"][tile], tail["i"][tile], tail["j"][tile], s)
            moved_ab = (ks_it * em_it * a * sa, ks_it * en_it * b * sb)
            window = die_window_steps(lay, float(np.mean(ks_it * per_k[tile])))
            partials = float(np.sum(others * em * en * PARTIAL_BYTES))
            local = tail_local_l2_share(core % lay.dies, it - core * per, blocks, moved_ab, window, frac, partials)
            phase = replace(phase, local_l2_share=local)
        shapes = tuple(zip(em_of[first].tolist(), ks_of[first].tolist(), en_of[first].tolist()))
        kept, at = rows.view(ENTRY).ravel(), np.cumsum([0, *counts]).tolist()
        runs = tuple(kept[lo:hi] for lo, hi in pairwise(at))
        return PhasePlan(phase, shapes, runs, tuple(weights), dp_tiles)


def tail_local_l2_share(
    die: np.ndarray,
    offset: np.ndarray,
    blocks: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    moved: tuple[np.ndarray, np.ndarray],
    window_steps: float,
    hbm_share: float,
    partial_bytes: float,
) -> float:
    """Share of a stream-K tail's L2 bytes that its cores' own die L2s serve, on a chiplet chip
    (the dies' L2 reuse of compiler/die_reuse.py, a K iteration at a time). Each K iteration of
    the tail runs on die `die` (its core's: the dispatcher's round robin, as a data-parallel
    item's), `offset` steps into its core's run (the cores run their runs side by side), and
    reads the A block (group, row block, K step) and the B block (group, column block, K step)
    of `blocks`, `moved` bytes each. A read hits its die's L2 where an iteration of the same die
    read the block at most `window_steps` steps before (what the die's L2 holds of the steps its
    cores load: `window_steps`), else it misses and crosses the fabric. With M the bytes missed,
    T all operand bytes, h the share from HBM (a byte from HBM crossed the fabric too) and P the
    partials the finishing cores read back (written by a core of another die: round robin deals
    a tile's consecutive cores to different dies):

        fabric = max(M / T, h)        local = T (1 - fabric) / (T (1 - h) + P)

    E.g. 4 iterations on 2 dies, (die, offset, A block, B block) = (0, 0, a0, b0), (1, 0, a0,
    b1), (0, 1, a0, b1), (1, 5, a1, b1), 100 B a block, a window of 2 steps, h = 0.25, P = 100
    B: die 0 reads a0 again 1 step on (a hit), die 1 b1 again 5 steps on (a miss); M = 700 of T
    = 800, fabric 0.875, local 800 x 0.125 / (800 x 0.75 + 100) = 1 / 7."""
    g, i, j, s = blocks
    a_bytes, b_bytes = moved
    total = float(a_bytes.sum() + b_bytes.sum())
    hits = total * (1.0 - hbm_share) + partial_bytes
    if total <= 0 or hits <= 0:
        return 0.0
    steps, rows, cols = int(s.max()) + 1, int(i.max()) + 1, int(j.max()) + 1
    group_die = g * (int(die.max()) + 1) + die
    missed = 0.0
    for key, nbytes in (((group_die * rows + i) * steps + s, a_bytes), ((group_die * cols + j) * steps + s, b_bytes)):
        order = np.argsort(key * (int(offset.max()) + 1) + offset)  # by block, then by offset
        k, x = key[order], offset[order]
        hit = np.zeros(len(order), dtype=bool)
        hit[1:] = (k[1:] == k[:-1]) & (x[1:] - x[:-1] <= window_steps)
        missed += float(nbytes[order][~hit].sum())
    fabric = min(1.0, max(missed / total, hbm_share))
    return total * (1.0 - fabric) / hits


def die_window_steps(lay: WaveLayout, step_bytes: float) -> float:
    """Steps a block stays in a die's L2 while the die's cores (cores / dies of the chip's) load
    `step_bytes` each a step: its capacity over what they load a step, as an LRU cache keeps
    what was read within its capacity's worth of later reads. E.g. 76 cores of 16 KiB steps on
    a 4 MB die L2: 4,000,000 / 1,245,184 = 3.2 steps."""
    return lay.die_l2_capacity_bytes / max(1.0, lay.cores / lay.dies * step_bytes)


def alike_runs(flat: np.ndarray, key: np.ndarray, per: int) -> tuple[list[tuple[int, int]], list[int]]:
    """Where in `flat` (one run of `per` entries a core, the last core's maybe shorter) each
    distinct run lies, (first, end), in order of first appearance, and how many cores run it:
    `join_alike` of the runs. Compared first by `key`, an int64 an entry that is equal where
    the entries are (a sixth of their bytes), then the runs of distinct keys compared by their
    entries' bytes, so that runs alike are joined however their keys differ."""
    firsts, counts = alike_slices(key.tobytes(), per * key.itemsize)
    joined: dict[bytes, list] = {}
    for first, count in zip(firsts, counts, strict=True):
        lo, hi = first * per, min(len(flat), (first + 1) * per)
        joined.setdefault(flat[lo:hi].tobytes(), [(lo, hi), 0])[1] += count
    return [g[0] for g in joined.values()], [g[1] for g in joined.values()]


RULE = StreamK()
