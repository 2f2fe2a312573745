"""Fused (flash) attention: work items of (sequence, query head group, query block), each
streaming K and V blocks of its KV head through SRAM with an online softmax.

Per KV block, an item computes S = Q K^T (bq x d x bk on the matrix units), the softmax of S
(bq x bk exponentials on the special-function unit and SOFTMAX_LANE_OPS lane instructions per
score, on every row of the matrix instruction's tile, padding included) and O += P V
(bq x bk x d). How the three meet is the kernel's schedule:

  serial      QK^T, softmax and PV of a block one after another (a kernel without softmax
              pipelining, e.g. the cuDNN kernel of PyTorch's SDPA measured in the H200 set)
  overlapped  the matrix, special-function and lane pipes overlap across warpgroups
              (FlashAttention-3 ping-pong, Shah et al. 2024): the slowest pipe, plus the rescale
              of the output accumulator by the new row maximum, which waits for the row
              reduction and cannot overlap

Causal items skip blocks above the diagonal; a partial last KV block moves only its valid rows.
Values may be narrower than keys (MLA's prefill: 192-wide keys, 128-wide values). The cache may
be stored in another format than the maths (fp8 KV with bf16 maths): each K/V block is then
converted by the vector lanes as it arrives, as a matrix kernel converts a weight tile
(compiler/formats.py). Variants of the kernel are one file each in
archsim/compiler/attention_variants/, applied where the op carries their field: a sliding window
(the blocks older than the first query's window are skipped), soft-capped scores, values that
are part of the keys (MLA's decode: the latent is both; `Op.kv_row_elements`).
The first item of a wave to touch a K/V block reads it from HBM, the others hit in L2 (all K/V
stays resident when it fits the L2's reuse capacity). Queries of the `heads / kv_heads` heads
that share a KV head are the query rows of one item in decode (GQA packing); in prefill each
query head is its own item, as flash kernels do. Items are dealt to cores longest first, as a
block scheduler does with causal work.

The event loop plays each K/V block as one step (entry) while a kernel's distinct cores stream
at most PLAYED_BLOCKS blocks in all. A longer kernel (a long prompt's causal prefill: B x H x
n(n+1)/2 blocks for n query blocks, dealt so that no two cores run the same items) plays each
core's blocks k at a time, k the least that brings it under the budget: a step loads, computes
and stores what its k blocks do and pays their k access latencies one after another
(`program.coarse_steps`), so that a core in a steady state runs k blocks in k times a block's
time whatever bounds it. This is the event loop's resolution, not a change of what the kernel
does: against every block played, the kernel's time moves by 0.02-0.11% on the H200 and A100
(Llama-3-8B's prefill at batch 8 and 8,192 or 16,384 tokens, batch 64 and 2,048) and up to 0.8%
on the latency-bound MI300X (tests/test_speed_prefill.py bounds it).

A decode kernel that can split the KV length (`split_kv`: flash-decoding) chooses the split as
FlashAttention-2's `num_splits_heuristic` does (flash_api.cpp): none when the items fill 80% of
the cores; otherwise the smallest split whose wave efficiency is within 85% of the best split's,
up to 128 and the KV blocks; each split writes an fp32 partial output to L2 and a second kernel
combines them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from archsim import stopping
from archsim.compiler.attention_variant import AttentionVariant
from archsim.compiler.attention_variants import active_variants
from archsim.compiler.families import family_rule
from archsim.compiler.gemm_phases import pipeline_bytes, reuse_capacity_bytes
from archsim.compiler.program import PARTIAL_BYTES, build_phase, coarse_rows, columns_phase, deal_cores
from archsim.compiler.streaming import Stream, streaming_phase
from archsim.compiler.tiles import matmul_cycles
from archsim.graph.ops import Op, attended_pairs
from archsim.hardware import Chip
from archsim.hardware.power import Activity
from archsim.hashing import copy_with
from archsim.memo import memo
from archsim.program import ENTRY, ENTRY_COLUMNS, Family, Phase, Program, entries, entry_rows
from archsim.units import ceil_div

BLOCK_SIZES = (256, 128, 64, 32, 16)  # query / key block edges a flash kernel offers
SOFTMAX_LANE_OPS = 4  # per score: max, scale-and-subtract (one FMA), sum, convert to bf16 (exp on the special unit)
SOFTMAX_SPECIAL_OPS = 1  # per score: the exp
MAX_SPLITS = 128  # FlashAttention-2's largest KV split
KV_STAGES = (
    2  # K/V buffers a flash kernel cycles through: one block loads while one computes (FlashAttention-3's kStages)
)
SPLIT_FILL = 0.8  # no split once the items fill this share of the cores
SPLIT_EFFICIENCY = 0.85  # the smallest split within this share of the best wave efficiency
# warps of a decode kernel's block, one block per (sequence, KV head, split) and, as played, one
# resident on its core at a time: FlashAttention-2's split-KV kernel (flash_fwd_launch_template.h,
# run_mha_fwd_splitkv_dispatch: Flash_fwd_kernel_traits<.., kNWarps 4, ..>); its requests in
# flight are these warps' loads (hardware/memory.py core_requests), not its SM's
DECODE_WARPS = 4
PLAYED_BLOCKS = 1 << 17  # K/V blocks a kernel's distinct cores play a step each; beyond it, k a step


@memo(maxsize=4096)
def kv_splits(items: int, cores: int, kv_blocks: int) -> int:
    """How many ways a decode kernel splits each item's KV range (FlashAttention-2's
    num_splits_heuristic): wave efficiency n / ceil(n) of n = items x splits / cores."""
    if items >= SPLIT_FILL * cores:
        return 1
    most = min(MAX_SPLITS, cores, kv_blocks)

    def eligible(s: int) -> bool:  # a split that changes the blocks per split
        return s == 1 or ceil_div(kv_blocks, s) != ceil_div(kv_blocks, s - 1)

    def efficiency(s: int) -> float:
        waves = items * s / cores
        return waves / math.ceil(waves)

    best = max(efficiency(s) for s in range(1, most + 1) if eligible(s))
    return next(s for s in range(1, most + 1) if eligible(s) and efficiency(s) >= SPLIT_EFFICIENCY * best)


def score_ops(op: Op, variants: tuple[AttentionVariant, ...]) -> tuple[int, int]:
    """(lane instructions, special-function operations) per score: the softmax's and the
    variants'."""
    lane, special = SOFTMAX_LANE_OPS, SOFTMAX_SPECIAL_OPS
    for v in variants:
        more_lane, more_special = v.score_ops(op)
        lane, special = lane + more_lane, special + more_special
    return lane, special


def block_cycles(op: Op, chip: Chip, qrows: int, bk: int) -> float:
    """Cycles of one KV block of an item with `qrows` query rows: its QK^T and PV on the matrix
    units (with the conversion of a K/V block cached in another format) and its softmax on the
    padded rows, as the kernel's schedule combines them."""
    core, d, dv = chip.core, op.head_dim, op.value_dim
    variants = active_variants(op)
    v_format = op.kv_format
    for v in variants:
        v_format = v.value_format(op, v_format)
    install = family_rule(chip).weight_install_bytes_per_cycle(chip)
    qk = matmul_cycles(core, qrows, d, bk, op.dtype, op.kv_format, install)
    matrix = float(qk + matmul_cycles(core, qrows, bk, dv, op.dtype, v_format, install))
    rows = max(qrows, core.mma_rows)  # the softmax runs on the whole accumulator tile
    scores = rows * bk
    lane_per_score, special_per_score = score_ops(op, variants)
    special = math.ceil(scores * special_per_score / core.vector.special_per_cycle)
    lane_ops = scores * lane_per_score
    lanes = math.ceil(lane_ops / core.vector.issue_per_cycle)
    if not op.softmax_overlap:
        return matrix + special + lanes
    rescale = math.ceil(rows * dv / core.vector.issue_per_cycle)
    return max(matrix, special, lanes) + rescale


def _blocks(op: Op, chip: Chip) -> tuple[int, int, int]:
    """(query rows per item, bq, bk): the largest, squarest blocks whose Q and O blocks and
    double-buffered K and V blocks fit in SRAM. Decode packs the GQA group as the query rows."""
    d, dv, a = op.head_dim, op.value_dim, op.dtype.bytes
    kv_row = op.kv_row_elements * op.kv_format.bytes
    decode = op.q_len == 1
    rows = op.heads // op.kv_heads if decode else op.q_len
    fitting = [
        (bq, bk)
        for bq in BLOCK_SIZES
        for bk in BLOCK_SIZES
        if min(bq, rows) * (d + dv) * a + 2 * bk * kv_row <= chip.core.sram.capacity_bytes
    ]
    if decode:
        fitting = [(bq, bk) for bq, bk in fitting if bq == min(BLOCK_SIZES)]
    if not fitting:
        return rows, min(BLOCK_SIZES), min(BLOCK_SIZES)
    bq, bk = max(fitting, key=lambda p: (p[0] * p[1], -abs(p[0] - p[1]), p[1]))
    return rows, bq, bk


def first_key(op: Op, first_q: int, variants: tuple[AttentionVariant, ...]) -> int:
    """The oldest key a causal query block whose first query is at position `first_q` reads:
    the first, or the latest any variant allows (a window's)."""
    return max([0, *(v.first_key(op, first_q) for v in variants)])


@memo(maxsize=4096)
def item_shape(shape: Op, chip: Chip) -> tuple[int, int, int, float]:
    """(query rows per item, bq, bk, cycles of one KV block) of an attention op: `shape` is the
    op with its KV length 0, as none of them depends on it (a decode at every length asks). A
    decode is the chip family's item where its family has one (archsim/compiler/families/)."""
    if shape.q_len == 1:
        item = family_rule(chip).decode_item(shape, chip, score_ops(shape, active_variants(shape)))
        if item is not None:
            return item
    rows, bq, bk = _blocks(shape, chip)
    qrows = rows if shape.q_len == 1 else min(bq, shape.q_len)
    return qrows, bq, bk, block_cycles(shape, chip, qrows, bk)


@memo(maxsize=4096)
def combine_phase(chip: Chip, rows: int, splits: int, value_dim: int, head_dim: int, dtype_bytes: float) -> Phase:
    """The kernel that combines a decode's `splits` fp32 partial outputs (and their log-sum-exps)
    of `rows` query rows into the output."""
    reads, lane_ops = splits * PARTIAL_BYTES, 3 * splits
    partials = Stream(
        rows * value_dim, reads, dtype_bytes, lane_ops, 1, "split-KV combine", row_elements=head_dim, l2_read_share=1.0
    )
    return streaming_phase(chip, partials)


# a core's items in order, as arrays: KV blocks each streams, whether it is the first to touch
# them (fetches them from HBM) and whether it reaches the KV cache's end
Signature = tuple[np.ndarray, np.ndarray, np.ndarray]


@memo(maxsize=4096)
def core_groups(
    batch: int,
    heads_items: int,
    items: tuple[tuple[int, int], ...],
    reach: tuple[bool, ...],
    group: int,
    decode: bool,
    fits: bool,
    cores: int,
) -> tuple[tuple[Signature, int], ...]:
    """How the items of (sequence, head, query block or KV split) land on the cores, as distinct
    core sequences with the number of cores that run each: `items` are (query block or split,
    KV blocks streamed), `reach[i]` whether item i streams the KV cache's last block. A head's
    query blocks are launched together, longest first, so they share its K/V in L2; items are
    dealt to the core that frees up first. Each K/V block is fetched from HBM by the first item
    to touch it (in its wave, unless all K/V fits the L2); with GQA the query heads of a group
    share their KV head's blocks through L2. Memoised: consecutive decode KV lengths in one KV
    block deal the same items, and only their last block's bytes differ."""
    order = sorted(items, key=lambda x: -x[1])
    per_head = len(order)
    if batch * heads_items * per_head == 0:
        return ()
    idx = np.arange(batch * heads_items * per_head)  # items (b, h, query block or split) in launch order
    b, h, j = idx // (heads_items * per_head), idx // per_head % heads_items, idx % per_head
    qb = np.array([q for q, _n in order], dtype=np.int64)[j]
    n_kv = np.array([n for _q, n in order], dtype=np.int64)[j]
    core_of = deal_cores(n_kv.astype(np.float64), cores, stopping.FLAG)
    stopping.check()  # dealt in part where a signal stopped it (archsim/stopping.py)
    # the items that fetch their K/V from HBM: the first of each (b, KV head, split, wave)
    kvh = h if decode else h // group
    wave = idx // cores if not fits else np.zeros_like(idx)
    kv_heads = heads_items if decode else ceil_div(heads_items, group)
    key = ((b * kv_heads + kvh) * (len(reach) if decode else 1) + (qb if decode else 0)) * (wave[-1] + 1) + wave
    first_touch = np.zeros(len(idx), np.bool_)
    first_touch[np.unique(key, return_index=True)[1]] = True
    reaches = np.array(reach, dtype=np.bool_)[qb]
    kind = (n_kv * 2 + first_touch) * 2 + reaches
    # cores that run items of the same kinds in the same order are one weighted sequence
    by_core = np.argsort(core_of, kind="stable")
    bounds = np.searchsorted(core_of[by_core], np.arange(cores + 1))
    groups: dict[bytes, list] = {}
    for c in range(cores):
        mine = by_core[bounds[c] : bounds[c + 1]]
        if len(mine):
            groups.setdefault(kind[mine].tobytes(), [mine, 0])[1] += 1
    return tuple(((n_kv[mine], first_touch[mine], reaches[mine]), w) for mine, w in groups.values())


Store = tuple[str, float]  # an item's stores at its last block: the column (ENTRY_COLUMNS) and bytes


def item_columns(
    sigs: list[Signature], kv_block_bytes: float, last_block_bytes: float, q_bytes: float, cycles: int, store: Store
) -> dict[str, np.ndarray]:
    """The entries of the items of `sigs` in order, by column (ENTRY_COLUMNS): a K/V block each
    (`cycles`, its bytes from HBM for an item that fetches them, else from L2), the Q block
    loaded with an item's first, the output stored after its last (`store`) and, for an item
    that reaches the end of the KV cache, only the valid rows of its last block
    (`last_block_bytes`)."""
    if not sigs:
        return {name: np.zeros(0) for name in ENTRY_COLUMNS}
    n_kv, miss, last = (np.concatenate([sig[i] for sig in sigs]) for i in range(3))
    ends = np.cumsum(n_kv)
    count = int(ends[-1])
    from_hbm = np.repeat(miss, n_kv)
    columns = {
        "hbm_bytes": np.where(from_hbm, kv_block_bytes, 0.0),
        "l2_bytes": np.where(from_hbm, 0.0, kv_block_bytes),
        "cycles": np.full(count, float(cycles)),
        "store_bytes": np.zeros(count),
        "store_l2_bytes": np.zeros(count),
        "trips": np.ones(count),
    }
    columns["hbm_bytes"][ends[last & miss] - 1] = last_block_bytes
    columns["l2_bytes"][ends[last & ~miss] - 1] = last_block_bytes
    columns["hbm_bytes"][ends - n_kv] += q_bytes
    columns[store[0]][ends - 1] = store[1]
    return columns


def item_rows(
    kv_block_bytes: float, last_block_bytes: float, q_bytes: float, cycles: int, store: Store
) -> Callable[[Signature], np.ndarray]:
    """The rows of floats (`entry_rows`) of a core's items (a Signature), as `item_columns` gives
    them; each kind of item's rows made once."""
    made: dict[tuple[int, bool, bool], np.ndarray] = {}

    def item(n_kv: int, miss: bool, last: bool) -> np.ndarray:
        if (n_kv, miss, last) not in made:
            seq = entries(n_kv, cycles=cycles)
            seq["hbm_bytes" if miss else "l2_bytes"] = kv_block_bytes
            if last:
                seq["hbm_bytes" if miss else "l2_bytes"][-1] = last_block_bytes
            seq["hbm_bytes"][0] += q_bytes
            seq[store[0]][-1] = store[1]
            made[n_kv, miss, last] = entry_rows(seq)
        return made[n_kv, miss, last]

    def core_rows(sig: Signature) -> np.ndarray:
        return np.concatenate([item(*kind) for kind in zip(*(x.tolist() for x in sig), strict=True)])

    return core_rows


def compile_attention(op: Op, chip: Chip) -> Program:
    variants = active_variants(op)
    for v in variants:
        op = v.kernel_op(op)
    shape = copy_with(op, kv_len=0)
    kv_row = op.kv_row_elements * op.kv_format.bytes  # bytes one cached token of one KV head
    bk = item_shape(shape, chip)[2]
    kv_blocks = math.ceil(op.kv_len / bk)
    last_block_bytes = float((op.kv_len - (kv_blocks - 1) * bk) * kv_row)  # only its valid rows
    fits = float(op.batch * op.kv_heads * op.kv_len * kv_row) <= reuse_capacity_bytes(chip)
    layout = _decode_layout(shape, chip, kv_blocks, fits) if op.q_len == 1 else None
    if layout is not None:  # a decode: the layout of its block count, with this length's last blocks
        phases = layout.phases(last_block_bytes)
    else:
        phases = _flash_phases(op, chip, kv_blocks, last_block_bytes, fits)[0]
    per_head = attended_pairs(op.q_len, op.kv_len, op.causal)
    for v in variants:
        per_head = v.pairs(op, per_head)
    pairs = op.batch * op.heads * per_head
    lane_per_score, special_per_score = score_ops(op, variants)
    lane_ops = pairs * lane_per_score
    special_ops = pairs * special_per_score
    activity = Activity(macs=op.flops() / 2, mac_dtype=op.dtype, lane_ops=lane_ops, special_ops=special_ops)
    return Program(tuple(phases), op.flops(), op.min_bytes(), True, activity, Family.ATTENTION)


@dataclass(frozen=True, eq=False)
class DecodeLayout:
    """A decode's kernels at every KV length of one block count: the attention phase as it is
    with last blocks of no bytes (`base`), the entries whose HBM or L2 bytes are a last block's
    (`last_hbm`, `last_l2`: those bytes are added to the base's, which holds the Q block there
    where an item is one block long), and the kernel that combines the KV splits, if any."""

    base: Phase
    last_hbm: np.ndarray
    last_l2: np.ndarray
    combine: Phase | None

    def phases(self, last_block_bytes: float) -> list[Phase]:
        """The kernels at a KV length whose last block holds `last_block_bytes`: the same numbers
        as compiling it anew (`_flash_phases`), as x + 0.0 is x and q + b is b + q."""
        base = self.base
        hbm, l2 = base.hbm_bytes.copy(), base.l2_bytes.copy()
        hbm[self.last_hbm] += last_block_bytes
        l2[self.last_l2] += last_block_bytes
        main = replace(base, hbm_bytes=hbm, l2_bytes=l2)
        # what the cores and their weights alone give is the base's (worked out once a layout)
        main.__dict__.update(active_cores=base.active_cores, entry_weights=base.entry_weights)
        return [main] if self.combine is None else [main, self.combine]


@memo(maxsize=4096)
def _decode_layout(shape: Op, chip: Chip, kv_blocks: int, fits: bool) -> DecodeLayout | None:
    """The `DecodeLayout` of a decode (`shape`: the op with its KV length 0) over `kv_blocks`
    blocks, or None where its blocks are played k at a time (a last block's bytes are then summed
    with others'). Worked out by compiling it with last blocks of no bytes and of NaN bytes: the
    entries that are NaN in the second hold a last block."""
    empty, run = _flash_phases(shape, chip, kv_blocks, 0.0, fits)
    if run > 1:
        return None
    marked = _flash_phases(shape, chip, kv_blocks, math.nan, fits)[0][0]
    last_hbm, last_l2 = np.flatnonzero(np.isnan(marked.hbm_bytes)), np.flatnonzero(np.isnan(marked.l2_bytes))
    return DecodeLayout(empty[0], last_hbm, last_l2, empty[1] if len(empty) > 1 else None)


def _flash_phases(op: Op, chip: Chip, kv_blocks: int, last_block_bytes: float, fits: bool) -> tuple[list[Phase], int]:
    """The flash attention kernel of `op` (over `kv_blocks` K/V blocks, the last holding
    `last_block_bytes`; all K/V fitting the L2's reuse capacity or not) and, for a decode split
    along the KV length, the kernel that combines the splits; and the K/V blocks each step of the
    first plays (1, or k at a time for a long kernel)."""
    d, dv, a = op.head_dim, op.value_dim, op.dtype.bytes
    kv_row = op.kv_row_elements * op.kv_format.bytes  # bytes one cached token of one KV head
    qrows, bq, bk, step_cycles = item_shape(copy_with(op, kv_len=0), chip)
    decode = op.q_len == 1
    heads_per_item = op.heads // op.kv_heads if decode else 1
    q_blocks = 1 if decode else math.ceil(op.q_len / bq)
    past = op.kv_len - op.q_len
    kv_block_bytes = float(bk * kv_row)
    q_bytes = qrows * heads_per_item * d * a if not decode else qrows * d * a
    out_bytes = q_bytes * dv / d
    splits = 1
    if decode and op.split_kv:
        splits = kv_splits(op.batch * op.kv_heads, chip.cores, kv_blocks)
    per_split = ceil_div(kv_blocks, splits)
    variants = active_variants(op)
    # items: (batch, head or KV head, query block or KV split, KV blocks it streams)
    items = []
    prefill_ends = {}
    for qb in range(q_blocks):
        if op.causal and not decode:
            last_q = min(op.q_len, (qb + 1) * bq) - 1 + past
            first = first_key(op, qb * bq + past, variants) // bk
            last = min(kv_blocks - 1, last_q // bk)
            items.append((qb, last - first + 1))
            prefill_ends[qb] = last == kv_blocks - 1
        else:
            items += [
                (sp, min(per_split, kv_blocks - sp * per_split)) for sp in range(splits) if kv_blocks > sp * per_split
            ]
    splits = len(items) if decode else 1
    heads_items = op.heads // heads_per_item
    if decode:  # a decode split reaches the end of the KV cache if it streams its last block
        reach = tuple(min(per_split * (qb + 1), kv_blocks) == kv_blocks for qb in range(len(items)))
    else:  # a prefill query block if its causal range reaches the last key (every block, unmasked)
        reach = tuple(prefill_ends[qb] if op.causal else n_kv == kv_blocks for qb, n_kv in items)
    groups = core_groups(op.batch, heads_items, tuple(items), reach, op.heads // op.kv_heads, decode, fits, chip.cores)
    sigs = [sig for sig, _w in groups]
    weights = [w for _sig, w in groups]
    per_core = [int(sig[0].sum()) for sig in sigs]  # a core's K/V blocks, one entry each before runs
    run = ceil_div(sum(per_core), PLAYED_BLOCKS)  # blocks a step (1: every block its own)
    fit = max(1, int(chip.core.sram.capacity_bytes - q_bytes - out_bytes) // int(kv_block_bytes))
    family_stages = family_rule(chip).kv_stages(chip, kv_block_bytes) if decode else None
    stages = min(KV_STAGES if family_stages is None else family_stages, fit)
    label = f"flash attention bq{qrows} bk{bk} kv-splits {splits}"
    inflight = pipeline_bytes(stages, kv_block_bytes)
    warps = DECODE_WARPS if decode else 0
    store = ("store_bytes", out_bytes) if splits == 1 else ("store_l2_bytes", out_bytes / a * PARTIAL_BYTES)
    blocks = (kv_block_bytes, last_block_bytes, q_bytes, math.ceil(step_cycles), store)
    if run == 1:  # every block a step: the entries of all cores at once
        phase = columns_phase(item_columns(sigs, *blocks), per_core, weights, stages, label, inflight, warps)
    else:  # each core's blocks summed `run` at a time (`coarse_rows`), a core at a time
        rows = item_rows(*blocks)
        sequences = [coarse_rows(rows(sig), run).view(ENTRY).ravel() for sig in sigs]
        phase = build_phase(sequences, stages, label, weights=weights, inflight_bytes=inflight, warps=warps)
    phases = [phase]
    if splits > 1:
        phases.append(combine_phase(chip, op.batch * op.heads, splits, dv, d, a))
    return phases, run
